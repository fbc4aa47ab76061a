"""Pass infrastructure, pipelines and the entry points: the registry behind --passes, the fixed-point
manager and its statistics, verify_each naming the pass that broke a program, converter.optimize,
converter.convert running the default pipeline (and save not), and the command line's --passes,
--pass-stats, --verify and optimize [--explain]."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import cli
import converter
from converter.errors import PassError, UnsupportedError
from converter.ir.builder import new_program
from converter.ir.core import Program
from converter.ir.types import tensor
from converter.passes.base import Pass, PassManager, PassResult
from converter.passes.pipelines import PASSES, PIPELINES, all_rules, resolve
from converter.passes.rewrite import RewritePass


def _redundant() -> Program:
    """relu(x * 1 + 0) twice over, with duplicated constants: canonicalize and cse have work."""
    def body(b, x):
        outs = []
        for i in range(2):
            one = b.const(np.float32(1), name=f"one{i}")
            zero = b.const(np.zeros(3, np.float32), name=f"zero{i}")
            outs.append(b.relu(x=b.add(x=b.mul(x=x, y=one), y=zero, name=f"a{i}"), name=f"r{i}"))
        return [b.sub(x=outs[0], y=outs[1], name="out")]

    return new_program({"x": tensor("fp32", [3])}, body)


def _types(prog: Program) -> list[str]:
    return [op.type for op in prog.walk() if op.type != "const"]


def test_pipelines_and_pass_names_resolve() -> None:
    assert [p.name for p in resolve("default")] == ["remove_scaffolding", "fold_constants", "canonicalize", "fuse_conv",
                                                   "cse", "dead_code", "fuse_activations", "fuse_normalizations"]
    assert resolve("none") == [] and set(PIPELINES) == {"default", "none", "webnn", "neuralnetwork"}
    assert [p.name for p in resolve(" cse , dead_code ")] == ["cse", "dead_code"]
    single = resolve("add_zero")
    assert isinstance(single[0], RewritePass) and [r.name for r in single[0].rules] == ["add_zero"]
    assert {"add_zero", "mul_one", "cast_same_dtype", "reshape_same_shape", "reshape_chain"} <= set(all_rules())
    with pytest.raises(UnsupportedError, match="unknown pass 'fold' .*passes: canonicalize, cse, dead_code, .*remove_scaffolding"):
        resolve("cse,fold")
    assert all(PASSES[n]().name == n for n in PASSES)


def test_the_manager_runs_to_a_fixed_point_and_records_each_pass() -> None:
    prog = _redundant()
    stats = PassManager(resolve("default"), fixed_point=True, max_iterations=4).run(prog)
    assert _types(prog) == ["relu", "sub"]  # x*1+0 gone, the two relus one
    assert stats.iterations == 2  # the second round changes nothing
    first = next(p for p in stats.passes if p.name == "canonicalize")
    assert (first.name, first.iteration, first.modified) == ("canonicalize", 1, True)
    assert (first.ops_before, first.ops_after) == (7, 3)
    assert first.stats["rewrites"] == {"mul_one": 2, "add_zero": 2}
    assert [p.modified for p in stats.passes if p.iteration == 2] == [False] * len(resolve("default"))
    assert stats.passes[-1].ops_after == 2 and stats.rewrites() == {"mul_one": 2, "add_zero": 2}
    table = stats.format()
    assert "canonicalize" in table and "mul_one 2" in table and "merged: relu 1" in table
    assert stats.summary().startswith("ops 7 -> 2")


class _Breaker(Pass):
    """Removes the first relu without rewiring its uses: the program no longer verifies."""

    name = "breaker"

    def run(self, program: Program) -> PassResult:
        block = program.main.block
        relu = next(op for op in block.ops if op.type == "relu")
        block.ops = [op for op in block.ops if op is not relu]
        return PassResult(True)


def test_verify_each_names_the_pass_that_broke_the_program() -> None:
    with pytest.raises(PassError, match="invalid after pass breaker: .*'r0'"):
        PassManager([resolve("cse")[0], _Breaker()], verify_each=True).run(_redundant())
    PassManager([_Breaker()]).run(_redundant())  # without verify_each, no verifier runs


def test_verify_each_checks_the_program_before_the_first_pass() -> None:
    prog = _redundant()
    _Breaker().run(prog)
    with pytest.raises(PassError, match="invalid before the first pass"):
        converter.optimize(prog, verify=True)


def test_optimize_is_in_place_and_returns_the_statistics() -> None:
    prog = _redundant()
    x = np.array([-1.0, 0.5, 2.0], np.float32)
    want = converter.run(prog, {"x": x})
    stats = converter.optimize(prog, "default", verify=True)
    assert stats.modified and _types(prog) == ["relu", "sub"]
    np.testing.assert_array_equal(converter.run(prog, {"x": x})["out"], want["out"])
    assert not converter.optimize(prog, "none").passes


def test_convert_optimizes_save_does_not(tmp_path: Path) -> None:
    prog = _redundant()
    converter.save(prog, tmp_path / "saved.mlpackage")
    assert _types(converter.load(tmp_path / "saved.mlpackage")) == _types(prog)  # as it was
    out = converter.convert(prog, out=tmp_path / "converted.mlpackage")
    assert _types(prog) == ["mul", "add", "relu", "mul", "add", "relu", "sub"]  # the given program is kept
    assert _types(out) == ["relu", "sub"] == _types(converter.load(tmp_path / "converted.mlpackage"))
    kept = converter.convert(tmp_path / "saved.mlpackage", out=tmp_path / "kept.mlpackage", passes="none")
    assert _types(kept) == _types(prog)


def test_explain_lists_each_rule_rooted_at_the_op() -> None:
    lines = [str(e) for e in converter.explain(_redundant(), "a0")]
    fired = [line for line in lines if line.endswith(": fires")]
    assert fired == ["add_zero: fires"]  # every other rule rooted at add says why not
    assert any(line.startswith("fold_constant_op: no match") for line in lines)
    assert any(line.startswith("linear_activation_add: no match") for line in lines)
    assert any(line.startswith("fuse_conv_add_bias: no match") for line in lines)
    lines = [str(e) for e in converter.explain(_redundant(), "out", "canonicalize")]
    assert lines and not any(line.endswith(": fires") for line in lines)  # sub: nothing to do
    assert any(line.startswith("sub_zero: no match") for line in lines)


# -- the command line --------------------------------------------------------------------------


@pytest.fixture()
def model(tmp_path: Path) -> Path:
    return converter.save(_redundant(), tmp_path / "redundant.mlpackage")


def _invoke(*args: object):
    return CliRunner().invoke(cli.main, [str(a) for a in args])


def test_cli_convert_runs_the_default_pipeline_unless_told(model: Path, tmp_path: Path) -> None:
    r = _invoke("convert", model, "-o", tmp_path / "a.mlpackage", "--pass-stats", "--verify", "--check")
    assert r.exit_code == 0, r.output
    assert "canonicalize" in r.output and "mul_one 2" in r.output
    assert r.stdout.splitlines()[-1].startswith("PASS: ")  # --check: the verify table and verdict
    assert _types(converter.load(tmp_path / "a.mlpackage")) == ["relu", "sub"]
    r = _invoke("convert", model, "-o", tmp_path / "b.mlpackage", "--passes", "none")
    assert r.exit_code == 0, r.output
    assert len(_types(converter.load(tmp_path / "b.mlpackage"))) == 7
    r = _invoke("convert", model, "-o", tmp_path / "c.mlpackage", "--passes", "mul_one,dead_code")
    assert r.exit_code == 0, r.output
    assert _types(converter.load(tmp_path / "c.mlpackage")) == ["add", "relu", "add", "relu", "sub"]


def test_cli_refuses_an_unknown_pass_before_reading(model: Path, tmp_path: Path) -> None:
    r = _invoke("convert", model, "-o", tmp_path / "a.mlpackage", "--passes", "nope")
    assert r.exit_code == 2 and "unknown pass 'nope'" in r.output
    assert not (tmp_path / "a.mlpackage").exists()


def test_cli_optimize_writes_with_o_and_explains(model: Path, tmp_path: Path) -> None:
    r = _invoke("optimize", model)
    assert r.exit_code == 0, r.output
    assert r.output.startswith("ops 7 -> 2") and not list(tmp_path.glob("*.mlmodel"))
    r = _invoke("optimize", model, "-o", tmp_path / "opt.mlpackage")
    assert r.exit_code == 0 and _types(converter.load(tmp_path / "opt.mlpackage")) == ["relu", "sub"]
    r = _invoke("optimize", model, "--explain", "a0", "--passes", "canonicalize")
    assert r.exit_code == 0, r.output
    assert "add 'a0' (before the passes; it is not in the optimized program):\n  add_zero: fires" in r.output
    r = _invoke("optimize", model, "--explain", "out", "--passes", "canonicalize")
    assert "sub 'out' (after the passes):\n  sub_zero: no match: input 'y' of sub 'out'" in r.output
    r = _invoke("optimize", model, "--explain", "nothing_called_this")
    assert r.exit_code == 2 and "no op named 'nothing_called_this'" in r.output


def test_cli_pass_stats_has_ops_before_and_after_rewrites_by_rule_and_time(model: Path, tmp_path: Path) -> None:
    r = _invoke("optimize", model, "--pass-stats")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].split() == ["pass", "round", "ops", "const", "ops", "ms", "details"]
    canon = next(line for line in lines if line.startswith("canonicalize"))
    fields = canon.split()
    assert fields[1:3] == ["1", "7->3"] and float(fields[4]) >= 0  # round, ops before -> after, time in ms
    assert "rewrites: add_zero 2, mul_one 2" in canon
    assert any(line.startswith("cse") and "merged: relu 1" in line for line in lines)
    assert lines[-1].startswith("ops 7 -> 2")


def test_cli_verify_runs_the_verifier_after_every_pass_and_names_the_one_that_broke_it(
        model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PASSES, "breaker", _Breaker)
    out = tmp_path / "a.mlpackage"
    r = _invoke("convert", model, "-o", out, "--passes", "cse,breaker", "--verify")
    assert r.exit_code == 2
    assert r.output.count("\n") == 1 and r.output.startswith("error: ")
    assert "invalid after pass breaker" in r.output and not out.exists()


@pytest.mark.parametrize("command", ["convert", "optimize", "convert-folder"])
def test_an_unknown_pass_is_one_line_and_exit_code_2_everywhere(model: Path, tmp_path: Path, command: str) -> None:
    src = tmp_path if command == "convert-folder" else model
    verb = "convert" if command.startswith("convert") else "optimize"
    out = tmp_path / ("out" if command == "convert-folder" else "a.mlpackage")
    r = _invoke(verb, src, "-o", out, "--passes", "canonicalize,no_such_pass")
    assert r.exit_code == 2, r.output
    assert r.output.count("\n") == 1 and r.output.startswith("error: unknown pass 'no_such_pass' (pipelines: default")
    assert not out.exists()


def test_the_python_api_takes_the_pipeline_by_keyword_and_refuses_unknown_names() -> None:
    prog = _redundant()
    stats = converter.optimize(prog, pipeline="default")
    assert _types(prog) == ["relu", "sub"] and stats.summary().startswith("ops 7 -> 2")
    with pytest.raises(converter.errors.ConverterError, match="unknown pass 'fold_everything'"):
        converter.optimize(_redundant(), pipeline="cse,fold_everything")
    with pytest.raises(UnsupportedError, match="no passes named"):
        converter.optimize(_redundant(), pipeline=" , ")
