"""The bounds a run and a reader keep against hostile numbers, checked directly: the interpreter's
loop bound (library and CLI, all loops of a run together), its per-tensor byte bound, Ctrl-C,
slice bounds beyond int32 (clamped, with numpy's slicing as the oracle), and the Manifest's item
count. The files behind them are in the corpus (test_corpus.py); these pin the exact semantics."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import cli
import converter
from converter.check import random_feeds
from converter.errors import EvaluationError, FormatError, UnsupportedError
from converter.ir.builder import new_program
from converter.ir.types import tensor
from tests.hostile.corpus import CASES, layer, nn_model, package, tiny_model, write_model

REPO = Path(__file__).resolve().parents[2]
INT64_MAX = 2**63 - 1


def _counting_loops(outer: int, inner: int):
    """y = relu applied outer * inner times, by a while_loop of ``inner`` iterations inside one of
    ``outer``: outer + outer * inner loop iterations in all."""

    def count_to(b, n, x, body):
        def step(bb, i, v):
            return [bb.add(x=i, y=np.int32(1)), body(bb, v)]

        return b.while_loop([b.const(np.int32(0)), x], lambda cb, i, v: cb.less(x=i, y=np.int32(n)), step)[1]

    def outer_body(b, x):
        return count_to(b, inner, x, lambda bb, v: bb.relu(x=v))

    return new_program({"x": tensor("fp32", [3])}, lambda b, x: [b.identity(x=count_to(b, outer, x, outer_body),
                                                                             name="y")])


# -- the interpreter's loop bound --------------------------------------------------------------------


def test_loop_bound_counts_every_iteration_of_every_loop():
    prog = _counting_loops(10, 10)  # 10 outer + 100 inner iterations
    x = np.array([-1, 0, 2], np.float32)
    np.testing.assert_array_equal(converter.run(prog, {"x": x}, max_loop_iterations=110)["y"], np.maximum(x, 0))
    with pytest.raises(EvaluationError, match="within 109 iterations"):
        converter.run(prog, {"x": x}, max_loop_iterations=109)


def test_endless_loop_stops_at_the_bound_with_a_clear_error(tmp_path):
    prog = converter.load(CASES["mil_while_true"].make(tmp_path))
    start = time.monotonic()
    with pytest.raises(EvaluationError, match=r"op 'while_loop' \(while_loop\): loops did not finish within 50 "
                                              r"iterations.*max_loop_iterations"):
        converter.run(prog, {"x": np.zeros(3, np.float32)}, max_loop_iterations=50)
    assert time.monotonic() - start < 1


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_loop_bound_must_be_a_positive_integer(bad):
    with pytest.raises(EvaluationError, match="max_loop_iterations must be a positive integer"):
        converter.run(_counting_loops(1, 1), {"x": np.zeros(3, np.float32)}, max_loop_iterations=bad)


def _endless(tmp_path: Path) -> tuple[Path, Path]:
    model = CASES["mil_while_true"].make(tmp_path)
    feeds = tmp_path / "x.npz"
    np.savez(feeds, x=np.zeros(3, np.float32))
    return model, feeds


def test_cli_takes_the_loop_bound(tmp_path):
    model, feeds = _endless(tmp_path)
    for args in (["run", model, "--inputs", feeds], ["convert", model, "-o", tmp_path / "o.mlpackage", "--check"]):
        result = CliRunner().invoke(cli.main, [str(a) for a in args] + ["--max-loop-iterations", "40"])
        assert result.exit_code == 2, result.output
        lines = [ln for ln in result.stderr.splitlines() if not ln.startswith("note: ")]
        assert len(lines) == 1 and lines[0].startswith("error: ") and "within 40 iterations" in lines[0], lines


def test_ctrl_c_stops_a_cli_run_promptly(tmp_path):
    """SIGINT during a long interpreter run ends the process at once, without a traceback (the
    message and exit status are the CLI's; nothing in the interpreter or the readers catches it)."""
    model, feeds = _endless(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "cli", "run", str(model), "--inputs", str(feeds),
                             "--max-loop-iterations", "1000000000"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while _cpu_seconds(proc.pid) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)  # until it has run well past start-up, inside the loop
        assert proc.poll() is None, f"ended before the interrupt: {proc.communicate()}"
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=10)
        assert time.monotonic() - sent < 3, "took too long to stop"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0 and "Traceback" not in err and len(err.strip().splitlines()) <= 2, err


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def test_keyboard_interrupt_in_a_kernel_is_not_caught(monkeypatch):
    from converter.ir.opdef import get_opdef

    def interrupted(self, a):
        raise KeyboardInterrupt

    monkeypatch.setattr(type(get_opdef("relu", "iOS15")), "evaluate", interrupted)
    prog = new_program({"x": tensor("fp32", [3])}, lambda b, x: [b.relu(x=x, name="y")])
    with pytest.raises(KeyboardInterrupt):
        converter.run(prog, {"x": np.zeros(3, np.float32)})


# -- bytes per tensor ------------------------------------------------------------------------------


def test_tensor_byte_bound_refuses_an_op_before_it_runs():
    prog = new_program({"x": tensor("fp32", [8])}, lambda b, x: [b.tile(x=x, reps=[1000], name="y")])
    x = np.arange(8, dtype=np.float32)
    assert converter.run(prog, {"x": x})["y"].shape == (8000,)
    with pytest.raises(EvaluationError, match=r"op 'y' \(tile\).*31.2 KiB, more than .*1000 bytes"):
        converter.run(prog, {"x": x}, max_tensor_bytes=1000)


def test_random_check_inputs_are_bounded():
    prog = new_program({"x": tensor("fp32", [1024, 1024])}, lambda b, x: [b.relu(x=x, name="y")])
    assert random_feeds(prog.main)["x"].shape == (1024, 1024)
    with pytest.raises(UnsupportedError, match=r"input 'x' .*4.0 MiB, more than the limit of 1.0 MiB"):
        random_feeds(prog.main, max_tensor_bytes=1 << 20)


# -- slice bounds beyond int32 ---------------------------------------------------------------------


@pytest.mark.parametrize("begin, end, stride", [
    (0, INT64_MAX, 1),  # ONNX's "to the end": wrapped to -1 (dropping the last element) before
    (-(2**32) + 2, 3, 1),  # wrapped to 2 before
    (1, 2**40, 2**62),
    (2**33 + 1, 5, 1),  # wrapped to 1 before: past the end, an empty slice
])
def test_slice_bounds_beyond_int32_keep_their_meaning(tmp_path, begin, end, stride):
    x = np.arange(5, dtype=np.float32)
    want = x[begin:end:stride]  # the oracle: numpy's slicing of the same Python integers
    lay = layer("s", "sliceStatic", ["x"], ["y"], beginIds=[begin], endIds=[end], strides=[stride],
                beginMasks=[False], endMasks=[False])
    path = write_model(tmp_path / "m.mlmodel", nn_model([lay], {"x": [5]}, {"y": None}))
    got = converter.run(converter.load(path), {"x": x})["y"]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


# -- Manifest.json ---------------------------------------------------------------------------------


def test_manifest_with_more_items_than_a_package_can_list(tmp_path):
    entries = {f"I{i}": {"path": "com.apple.CoreML/model.mlmodel"} for i in range(10_001)}
    body = json.dumps({"fileFormatVersion": "1.0.0", "itemInfoEntries": entries, "rootModelIdentifier": "I0"})
    assert len(body) < 1 << 20  # within the size bound: the count is what is refused
    pkg = package(tmp_path, tiny_model().SerializeToString(), manifest=body.encode())
    with pytest.raises(FormatError, match="10001 items, more than the 10000"):
        converter.load(pkg)
