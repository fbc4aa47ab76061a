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
    assert time.monotonic() - start < 2


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
        lines = [ln for ln in result.stderr.splitlines() if not ln.startswith(("note: ", "running "))]  # --check
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


def test_cli_takes_the_tensor_bound(tmp_path):
    prog = new_program({"x": tensor("fp32", [8])}, lambda b, x: [b.tile(x=x, reps=[1 << 17], name="y")])  # 4 MiB
    model = converter.save(prog, tmp_path / "m.mlpackage")
    feeds = tmp_path / "x.npz"
    np.savez(feeds, x=np.zeros(8, np.float32))
    result = CliRunner().invoke(cli.main, ["run", str(model), "--inputs", str(feeds), "--max-tensor-mib", "3"])
    assert result.exit_code == 2 and result.stderr.startswith("error: ") and "4.0 MiB" in result.stderr, result.output
    result = CliRunner().invoke(cli.main, ["run", str(model), "--inputs", str(feeds), "--max-tensor-mib", "4",
                                           "-o", str(tmp_path / "y.npz")])
    assert result.exit_code == 0, result.output


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


# -- windows larger than the data ------------------------------------------------------------------


def test_lrn_window_wider_than_the_channels():
    """A window covering every channel for every channel (size >= 2 C): the spec's formula
    y = x / (k + alpha / size * sum over all channels of x^2) ^ beta, for a size that looped a
    million times before."""
    size, alpha, beta, k = 10**6, 1e-2, 0.75, 2.0
    x = np.random.default_rng(0).standard_normal((1, 3, 2, 2)).astype(np.float32)
    prog = new_program({"x": tensor("fp32", [1, 3, 2, 2])}, lambda b, v: [b.local_response_norm(
        x=v, size=np.int32(size), alpha=np.float32(alpha), beta=np.float32(beta), k=np.float32(k), name="y")])
    start = time.monotonic()
    got = converter.run(prog, {"x": x})["y"]
    assert time.monotonic() - start < 2
    want = x / (k + alpha / size * (x.astype(np.float64) ** 2).sum(axis=1, keepdims=True)) ** beta
    np.testing.assert_allclose(got, want, rtol=1e-6)


# -- pooling windows larger than the output ----------------------------------------------------------

# A window with more taps than there are output positions is reduced once per output position (a
# crafted 1000 x 1000 kernel over a padded 4 x 4 input looped a million times, 13 s; 10^4 x 10^4
# would have taken hours). x shape, MIL params; every case here takes that path. Oracle: onnxruntime.
_BIG_WINDOWS = [
    ((1, 2, 5, 6), {"kernel_sizes": [5, 6], "pad_type": "valid"}),  # global
    ((1, 2, 4, 5), {"kernel_sizes": [6, 5], "strides": [4, 5], "pad_type": "custom", "pad": [2, 2, 1, 1]}),
    ((1, 2, 7, 7), {"kernel_sizes": [5, 5], "strides": [3, 3], "pad_type": "custom", "pad": [2, 2, 2, 2],
                    "ceil_mode": True}),
    ((2, 1, 6), {"kernel_sizes": [5], "strides": [4], "pad_type": "custom", "pad": [2, 1]}),
    ((1, 2, 3, 4, 5), {"kernel_sizes": [3, 4, 5], "strides": [3, 4, 5], "pad_type": "same"}),
]


def _big_window_cases():
    for i, (shape, params) in enumerate(_BIG_WINDOWS):
        for op in ("max_pool", "avg_pool", "l2_pool"):
            if op == "l2_pool" and len(shape) > 4:
                continue  # l2_pool is 1-d and 2-d only
            for exclude in ((False, True) if op == "avg_pool" else (None,)):
                yield pytest.param(op, shape, params, exclude, id=f"{op}-case{i}-exclude={exclude}")


@pytest.mark.parametrize("op, shape, params, exclude", list(_big_window_cases()))
def test_pooling_windows_larger_than_the_output_vs_onnxruntime(op, shape, params, exclude):
    from tests.ops.harness import assert_close, run_op
    from tests.ops.test_oracle_pool import _ONNX_OP, _onnx_attrs
    from tests.oracles.onnx_oracle import run_onnx_node

    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    full = dict(params, exclude_padding_from_average=exclude) if exclude is not None else params
    got = run_op(op, {"x": x}, full)[0]
    want = run_onnx_node(_ONNX_OP[op], {"x": x}, _onnx_attrs(op, params, exclude, x.ndim - 2))[0]
    assert_close(got, want, rtol=1e-5, atol=1e-6, what=op)


def test_huge_pooling_window_is_fast(tmp_path):
    prog = new_program({"x": tensor("fp32", [1, 1, 4, 4])}, lambda b, x: [b.max_pool(
        x=x, kernel_sizes=[20000, 20000], strides=[20000, 20000], pad_type="custom", pad=[10000, 9996, 10000, 9996],
        name="y")])
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    start = time.monotonic()
    y = converter.run(prog, {"x": x})["y"]
    assert time.monotonic() - start < 2 and y.shape == (1, 1, 1, 1) and y.item() == 15.0
