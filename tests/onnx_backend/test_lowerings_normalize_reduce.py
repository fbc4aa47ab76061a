"""Normalizations, reductions, arg-reductions, cumsum, topk and argsort through the ONNX backend
under onnxruntime, against numpy / torch formulas written here (parameters pinned with distinct
values), and against our interpreter."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from .helpers import assert_close, only, op_types, program, run_both

rng = np.random.default_rng(5)


def _r(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _check(prog, feeds, want, bound=1e-5, opset=21) -> None:  # noqa: ANN001
    got, interp = run_both(prog, feeds, opset)
    assert_close(only(got), want, bound)
    assert_close(only(got), only(interp), bound)


@pytest.mark.parametrize("rank", [3, 4, 5])
def test_batch_norm(rank: int) -> None:
    x = _r(*(2, 3, 4, 5, 2)[:rank])
    mean, var = np.array([0.5, -1.0, 2.0], np.float32), np.array([0.25, 4.0, 1.5], np.float32)
    gamma, beta = np.array([1.5, -0.5, 2.0], np.float32), np.array([0.1, 0.2, -0.3], np.float32)
    prog = program({"x": x}, lambda b, x: b.batch_norm(x=x, mean=mean, variance=var, gamma=gamma, beta=beta,
                                                       epsilon=0.01))
    sh = (1, 3) + (1,) * (rank - 2)
    want = (x - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + 0.01) * gamma.reshape(sh) + beta.reshape(sh)
    _check(prog, {"x": x}, want)
    prog = program({"x": x}, lambda b, x: b.batch_norm(x=x, mean=mean, variance=var, epsilon=0.01))
    _check(prog, {"x": x}, (x - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + 0.01))


def test_instance_norm() -> None:
    x = _r(2, 3, 4, 5)
    gamma, beta = np.array([1.5, -0.5, 2.0], np.float32), np.array([0.1, 0.2, -0.3], np.float32)
    prog = program({"x": x}, lambda b, x: b.instance_norm(x=x, gamma=gamma, beta=beta, epsilon=0.02))
    want = torch.nn.functional.instance_norm(torch.from_numpy(x), weight=torch.from_numpy(gamma),
                                             bias=torch.from_numpy(beta), eps=0.02).numpy()
    _check(prog, {"x": x}, want)


def _layer_norm(x: np.ndarray, axes: list[int], eps: float, gamma=None, beta=None) -> np.ndarray:  # noqa: ANN001
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=tuple(axes), keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=tuple(axes), keepdims=True)
    y = (x64 - mean) / np.sqrt(var + eps)
    shape = [d if i in axes else 1 for i, d in enumerate(x.shape)]
    if gamma is not None:
        y = y * gamma.reshape(shape)
    if beta is not None:
        y = y + beta.reshape(shape)
    return y


@pytest.mark.parametrize(("axes", "kind"), [([-1], "LayerNormalization"), ([2, 3], "LayerNormalization"),
                                            ([1, 3], "ReduceMean"), ([0, 2], "ReduceMean")])
@pytest.mark.parametrize("opset", [17, 21])
def test_layer_norm(axes: list[int], kind: str, opset: int) -> None:
    x = _r(2, 3, 4, 5)
    norm = sorted(a % 4 for a in axes)
    gamma = rng.uniform(0.5, 2.0, [x.shape[a] for a in norm]).astype(np.float32)
    beta = _r(*[x.shape[a] for a in norm])
    prog = program({"x": x}, lambda b, x: b.layer_norm(x=x, axes=axes, gamma=gamma, beta=beta, epsilon=0.003))
    _check(prog, {"x": x}, _layer_norm(x, norm, 0.003, gamma, beta), opset=opset)
    assert kind in op_types(prog, opset)
    prog = program({"x": x}, lambda b, x: b.layer_norm(x=x, axes=axes, epsilon=0.003))
    _check(prog, {"x": x}, _layer_norm(x, norm, 0.003), opset=opset)


def test_l2_norm() -> None:
    x = _r(2, 3, 4, 5)
    prog = program({"x": x}, lambda b, x: b.l2_norm(x=x, epsilon=0.5))
    ss = (x.astype(np.float64) ** 2).sum(axis=(1, 2, 3), keepdims=True)
    _check(prog, {"x": x}, x / np.sqrt(ss + 0.5))


@pytest.mark.parametrize(("rank", "size"), [(4, 3), (4, 4), (3, 2), (5, 5)])
def test_local_response_norm(rank: int, size: int) -> None:
    x = _r(*(2, 6, 3, 4, 2)[:rank]) * 2
    prog = program({"x": x}, lambda b, x: b.local_response_norm(x=x, size=size, alpha=0.3, beta=0.6, k=1.5))
    # MIL: channel axis -3, window [c - size // 2, c + (size - 1) // 2] clipped to the channels
    xc = np.moveaxis(x.astype(np.float64), -3, 0)
    c = xc.shape[0]
    window = np.stack([(xc[max(0, i - size // 2):min(c, i + (size - 1) // 2 + 1)] ** 2).sum(axis=0)
                       for i in range(c)])
    want = xc / (1.5 + 0.3 / size * window) ** 0.6
    _check(prog, {"x": x}, np.moveaxis(want, 0, -3))


X = np.array([[[1.5, -2.0, 3.0], [0.5, 4.0, -1.0]], [[2.0, 1.0, -3.5], [0.25, -0.5, 6.0]]], np.float32)
REDUCE = {
    "reduce_sum": np.sum, "reduce_prod": np.prod, "reduce_mean": np.mean, "reduce_max": np.max, "reduce_min": np.min,
    "reduce_l1_norm": lambda x, axis, keepdims: np.abs(x).sum(axis=axis, keepdims=keepdims),
    "reduce_l2_norm": lambda x, axis, keepdims: np.sqrt((x * x).sum(axis=axis, keepdims=keepdims)),
    "reduce_sum_square": lambda x, axis, keepdims: (x * x).sum(axis=axis, keepdims=keepdims),
    "reduce_log_sum_exp": lambda x, axis, keepdims: np.log(np.exp(x).sum(axis=axis, keepdims=keepdims)),
}


@pytest.mark.parametrize("opset", [17, 21])
@pytest.mark.parametrize(("axes", "keep"), [([1], False), ([0, 2], True), ([-1], True), (None, False)])
@pytest.mark.parametrize("op", sorted(REDUCE))
def test_reductions(op: str, axes: list[int] | None, keep: bool, opset: int) -> None:
    kwargs = {"keep_dims": keep} if axes is None else {"axes": axes, "keep_dims": keep}
    prog = program({"x": X}, lambda b, x: getattr(b, op)(x=x, **kwargs))
    axis = None if axes is None else tuple(axes)
    _check(prog, {"x": X}, REDUCE[op](X.astype(np.float64), axis=axis, keepdims=keep), opset=opset)


def test_reduce_log_sum_and_empty_axes() -> None:
    x = np.abs(X) + 0.5
    prog = program({"x": x}, lambda b, x: b.reduce_log_sum(x=x, axes=[1, 2]))
    _check(prog, {"x": x}, np.log(x.astype(np.float64).sum(axis=(1, 2))))
    for op, part in (("reduce_l1_norm", np.abs(X)), ("reduce_sum_square", X * X), ("reduce_mean", X)):
        prog = program({"x": X}, lambda b, x, op=op: getattr(b, op)(x=x, axes=np.zeros(0, np.int32)))
        _check(prog, {"x": X}, part)


def test_int_reductions() -> None:
    x = np.array([[7, -3, 2], [-9, 4, 4]], np.int32)
    # mean: 6/3 = 2, -1/3 -> 0 (toward zero); l2: sqrt(62) = 7.87 -> 7, sqrt(113) = 10.6 -> 10;
    # log_sum_exp: 7.0067 -> 7, 4.6931 -> 4; log_sum of [7+(-3)+2 = 6, -1]: 1.79 -> 1, NaN -> int32 min
    for op, want in (("reduce_sum", [6, -1]), ("reduce_mean", [2, 0]), ("reduce_max", [7, 4]),
                     ("reduce_prod", [-42, -144]), ("reduce_l2_norm", [7, 10]), ("reduce_log_sum_exp", [7, 4]),
                     ("reduce_log_sum", [1, -(2**31)])):
        prog = program({"x": x}, lambda b, x, op=op: getattr(b, op)(x=x, axes=[1]))
        got, interp = run_both(prog, {"x": x})
        np.testing.assert_array_equal(only(got), np.array(want, np.int32), err_msg=op)
        np.testing.assert_array_equal(only(got), only(interp), err_msg=op)
    big = np.array([[50000, -50000, 3]], np.int32)  # squares overflow int32: the norm is computed in float64
    prog = program({"x": big}, lambda b, x: b.reduce_l2_norm(x=x, axes=[1]))
    got, interp = run_both(prog, {"x": big})
    np.testing.assert_array_equal(only(got), np.array([70710], np.int32))  # sqrt(5e9 + 9) = 70710.68
    np.testing.assert_array_equal(only(got), only(interp))


@pytest.mark.parametrize("op", ["reduce_argmax", "reduce_argmin"])
@pytest.mark.parametrize("keep", [False, True])
def test_arg_reductions_first_index_on_ties(op: str, keep: bool) -> None:
    x = np.array([[1.0, 5.0, 5.0, -2.0], [-2.0, 0.0, -2.0, 3.0]], np.float32)
    prog = program({"x": x}, lambda b, x: getattr(b, op)(x=x, axis=1, keep_dims=keep))
    got, interp = run_both(prog, {"x": x})
    want = np.array([1, 3] if op == "reduce_argmax" else [3, 0], np.int32)
    np.testing.assert_array_equal(only(got), want[:, None] if keep else want)
    assert only(got).dtype == np.int32
    np.testing.assert_array_equal(only(got), only(interp))


@pytest.mark.parametrize(("exclusive", "reverse"), [(False, False), (True, False), (False, True), (True, True)])
def test_cumsum(exclusive: bool, reverse: bool) -> None:
    x = np.array([[1.0, 2.0, 4.0, 8.0], [16.0, 32.0, 64.0, 128.0]], np.float32)
    prog = program({"x": x}, lambda b, x: b.cumsum(x=x, axis=-1, exclusive=exclusive, reverse=reverse))
    r = x[:, ::-1] if reverse else x
    c = np.cumsum(r, axis=1)
    if exclusive:
        c = np.concatenate([np.zeros((2, 1), np.float32), c[:, :-1]], axis=1)
    _check(prog, {"x": x}, c[:, ::-1] if reverse else c, 0)


@pytest.mark.parametrize("ascending", [False, True])
def test_topk_and_argsort(ascending: bool) -> None:
    x = np.array([[3.0, 1.0, 3.0, -2.0, 7.0], [0.0, 0.0, -1.0, 5.0, 5.0]], np.float32)
    prog = program({"x": x}, lambda b, x: b.topk(x=x, k=3, axis=1, ascending=ascending))
    got, interp = run_both(prog, {"x": x})
    values, indices = got.values()
    # ties keep index order in both directions
    order = np.array([sorted(range(5), key=lambda i, r=r: (r[i] if ascending else -r[i], i)) for r in x])
    np.testing.assert_array_equal(indices, order[:, :3].astype(np.int32))
    np.testing.assert_array_equal(values, np.take_along_axis(x, order[:, :3], axis=1))
    for g, i in zip(got.values(), interp.values()):
        np.testing.assert_array_equal(g, i)
    prog = program({"x": x}, lambda b, x: b.argsort(x=x, axis=-1, ascending=ascending))
    got, interp = run_both(prog, {"x": x})
    np.testing.assert_array_equal(only(got), order.astype(np.int32))
    np.testing.assert_array_equal(only(got), only(interp))
