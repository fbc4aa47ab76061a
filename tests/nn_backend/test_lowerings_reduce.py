"""reduce_* lowered to the N-D reduce layers: the written model is read back by the NeuralNetwork
frontend and run; the oracle is torch (sum, mean, amax, amin, prod, norm, logsumexp) or the
formula written here (log_sum = log(sum(x)), sum_square = sum(x**2)). Axes are negative and
positive, non-adjacent, on a non-square shape, with keep_dims both ways, so a dropped or
reordered axis, or keepDims ignored, changes the shape or the values."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from converter.formats.model_file import read_model_file

from .helpers import assert_close, layer_kinds, program, run_nn

RNG = np.random.default_rng(5)
X = (0.5 + RNG.random((2, 3, 4, 5))).astype(np.float32)  # positive: log_sum is defined


def _sum(x: torch.Tensor, dims: list[int], keep: bool) -> torch.Tensor:
    return torch.sum(x, dim=dims, keepdim=keep)


def _prod(x: torch.Tensor, dims: list[int], keep: bool) -> torch.Tensor:
    for d in sorted((d % x.ndim for d in dims), reverse=True):
        x = torch.prod(x, dim=d, keepdim=keep)
    return x


ORACLES: dict[str, tuple[str, Callable[[torch.Tensor, list[int], bool], torch.Tensor]]] = {
    "reduce_sum": ("reduceSum", _sum),
    "reduce_mean": ("reduceMean", lambda x, d, k: torch.mean(x, dim=d, keepdim=k)),
    "reduce_max": ("reduceMax", lambda x, d, k: torch.amax(x, dim=d, keepdim=k)),
    "reduce_min": ("reduceMin", lambda x, d, k: torch.amin(x, dim=d, keepdim=k)),
    "reduce_prod": ("reduceProd", lambda x, d, k: _prod(x, d, k)),
    "reduce_l1_norm": ("reduceL1", lambda x, d, k: torch.linalg.vector_norm(x, 1, dim=d, keepdim=k)),
    "reduce_l2_norm": ("reduceL2", lambda x, d, k: torch.linalg.vector_norm(x, 2, dim=d, keepdim=k)),
    "reduce_sum_square": ("reduceSumSquare", lambda x, d, k: _sum(x * x, d, k)),
    "reduce_log_sum": ("reduceLogSum", lambda x, d, k: torch.log(_sum(x, d, k))),
    "reduce_log_sum_exp": ("reduceLogSumExp", lambda x, d, k: torch.logsumexp(x, dim=d, keepdim=k)),
}


@pytest.mark.parametrize("op_type", sorted(ORACLES))
@pytest.mark.parametrize("axes, keep", [([-1, 1], False), ([-1, 1], True), ([0, -2], False), ([2], True)])
def test_reduction_is_its_layer(tmp_path: Path, op_type: str, axes: list[int], keep: bool) -> None:
    kind, oracle = ORACLES[op_type]
    prog = program({"x": X}, lambda b, x: [getattr(b, op_type)(x=x, axes=axes, keep_dims=keep, name="out")])
    got = run_nn(prog, {"x": X}, tmp_path / "m.mlmodel")["out"]
    dims = [a % X.ndim for a in axes]
    want = oracle(torch.from_numpy(X), dims, keep).numpy()
    assert got.shape == want.shape
    assert_close(got, want, 1e-5)
    assert layer_kinds(tmp_path / "m.mlmodel") == {kind: 1}
    params = getattr(read_model_file(tmp_path / "m.mlmodel").model.neuralNetwork.layers[0], kind)
    assert list(params.axes) == axes and params.keepDims == keep and not params.reduceAll


@pytest.mark.parametrize("op_type", ["reduce_sum", "reduce_max", "reduce_log_sum_exp"])
@pytest.mark.parametrize("keep", [False, True])
def test_reduction_over_every_axis_is_reduce_all(tmp_path: Path, op_type: str, keep: bool) -> None:
    kind, oracle = ORACLES[op_type]
    prog = program({"x": X}, lambda b, x: [getattr(b, op_type)(x=x, keep_dims=keep, name="out")])
    got = run_nn(prog, {"x": X}, tmp_path / "m.mlmodel")["out"]
    want = oracle(torch.from_numpy(X), list(range(X.ndim)), keep).numpy()
    assert got.shape == (want.shape or (1,))  # a scalar is [1] in a NeuralNetwork
    assert_close(got, want, 1e-5)
    params = getattr(read_model_file(tmp_path / "m.mlmodel").model.neuralNetwork.layers[0], kind)
    assert params.reduceAll and not params.axes and params.keepDims == keep


@pytest.mark.parametrize("op_type, want", [
    ("reduce_sum", lambda x: x), ("reduce_max", lambda x: x), ("reduce_log_sum_exp", lambda x: x),
    ("reduce_l1_norm", np.abs), ("reduce_l2_norm", np.abs), ("reduce_sum_square", np.square),
    ("reduce_log_sum", np.log),
])
def test_reduction_over_no_axes_is_its_elementwise_part(tmp_path: Path, op_type: str, want: Callable) -> None:
    x = np.array([[0.5, -1.5, 2.0], [3.0, -0.25, 1.0]], np.float32)
    prog = program({"x": x}, lambda b, x: [getattr(b, op_type)(x=x, axes=np.zeros(0, np.int32), name="out")])
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")["out"]
    with np.errstate(invalid="ignore"):
        assert_close(np.nan_to_num(got, nan=-7), np.nan_to_num(want(x), nan=-7))


def test_int_mean_is_truncated_toward_zero(tmp_path: Path) -> None:
    """The IR's int32 reduce_mean truncates toward zero (-4/3 -> -1, 7/3 -> 2, -7/2 -> -3)."""
    x = np.array([[-3, 4, -5], [7, -2, 2], [-3, -4, 0]], np.int32)
    prog = program({"x": x}, lambda b, x: [b.reduce_mean(x=x, axes=[-1], name="out"),
                                           b.reduce_mean(x=x, axes=[0], name="cols")])
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")
    np.testing.assert_array_equal(got["out"], np.trunc(x.sum(-1) / 3).astype(np.int32))
    np.testing.assert_array_equal(got["cols"], np.trunc(x.sum(0) / 3).astype(np.int32))
    assert layer_kinds(tmp_path / "m.mlmodel")["reduceMean"] == 2


def test_int_sum_is_exact_without_truncation_layers(tmp_path: Path) -> None:
    x = np.array([[-3, 4, -5], [7, -2, 2]], np.int32)
    prog = program({"x": x}, lambda b, x: [b.reduce_sum(x=x, axes=[1], keep_dims=True, name="out")])
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")["out"]
    np.testing.assert_array_equal(got, x.sum(1, keepdims=True))
    assert layer_kinds(tmp_path / "m.mlmodel") == {"reduceSum": 1}
