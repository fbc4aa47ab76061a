"""linear, matmul, einsum and scaled_dot_product_attention through the ONNX backend under
onnxruntime, against numpy / torch written here, and against our interpreter."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from .helpers import assert_close, only, op_types, program, run_both

rng = np.random.default_rng(7)


def _r(*shape: int, dt=np.float32) -> np.ndarray:  # noqa: ANN001
    return rng.standard_normal(shape).astype(dt)


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_linear(rank: int) -> None:
    x = _r(*(2, 3, 5)[3 - rank:])
    w, b = _r(4, 5), _r(4)
    prog = program({"x": x}, lambda bb, x: bb.linear(x=x, weight=w, bias=b))
    got, interp = run_both(prog, {"x": x})
    assert_close(only(got), x.astype(np.float64) @ w.T.astype(np.float64) + b, 1e-5)
    assert_close(only(got), only(interp), 1e-5)
    if rank == 2:
        assert op_types(prog) == ["Gemm"]


def test_linear_without_bias_and_fp32_weight_for_fp16_x() -> None:
    x = _r(3, 5).astype(np.float16)
    w = _r(4, 5)
    prog = program({"x": x}, lambda bb, x: bb.linear(x=x, weight=w), opset="iOS17")
    got, interp = run_both(prog, {"x": x})
    assert only(got).dtype == np.float16
    assert_close(only(got), x.astype(np.float64) @ w.T.astype(np.float64), 2e-3)
    assert_close(only(got), only(interp), 1e-3)


@pytest.mark.parametrize(("xs", "ys", "tx", "ty"), [
    ((3, 4), (4, 5), False, False), ((2, 3, 4), (5, 4), False, True), ((4, 3), (2, 1, 4, 5), True, False),
    ((4,), (4, 5), False, False), ((2, 3, 4), (4,), False, False), ((2, 4, 3), (2, 5, 4), True, True),
])
def test_matmul(xs: tuple, ys: tuple, tx: bool, ty: bool) -> None:
    x, y = _r(*xs), _r(*ys)
    prog = program({"x": x, "y": y}, lambda b, x, y: b.matmul(x=x, y=y, transpose_x=tx, transpose_y=ty))
    got, interp = run_both(prog, {"x": x, "y": y})
    xt = np.swapaxes(x, -1, -2) if tx else x
    yt = np.swapaxes(y, -1, -2) if ty else y
    assert_close(only(got), np.matmul(xt.astype(np.float64), yt.astype(np.float64)), 1e-5)
    assert_close(only(got), only(interp), 1e-5)


def test_matmul_const_transposed_operand_and_ints() -> None:
    x = _r(2, 3)
    c = _r(5, 3)
    prog = program({"x": x}, lambda b, x: b.matmul(x=x, y=c, transpose_y=True))
    assert_close(only(run_both(prog, {"x": x})[0]), x.astype(np.float64) @ c.T, 1e-5)
    assert "Transpose" not in op_types(prog)
    i, j = np.array([[2, -3], [4, 5]], np.int32), np.array([[7, 1], [-2, 6]], np.int32)
    prog = program({"i": i, "j": j}, lambda b, i, j: b.matmul(x=i, y=j))
    np.testing.assert_array_equal(only(run_both(prog, {"i": i, "j": j})[0]), i @ j)


@pytest.mark.parametrize(("equation", "xs", "ys"), [
    ("nchw,nwhu->nchu", (2, 3, 4, 5), (2, 5, 4, 6)),
    ("abcd,adce->abce", (1, 3, 4, 5), (2, 5, 1, 6)),  # renamed letters, batch and H broadcast
    ("chw,whr->chr", (3, 4, 5), (5, 4, 2)),
])
def test_einsum(equation: str, xs: tuple, ys: tuple) -> None:
    x, y = _r(*xs), _r(*ys)
    prog = program({"x": x, "y": y}, lambda b, x, y: b.einsum(values=(x, y), equation=equation))
    got, interp = run_both(prog, {"x": x, "y": y})
    rank = len(xs)
    lead = np.broadcast_shapes(xs[:-3], ys[:-3]) if rank == 4 else ()
    h = max(xs[-2], ys[-2])
    xb = np.broadcast_to(x, lead + (xs[-3], h, xs[-1])).astype(np.float64)
    yb = np.broadcast_to(y, lead + (ys[-3], h, ys[-1])).astype(np.float64)
    want = np.einsum("...chk,...khu->...chu", xb, yb)
    assert_close(only(got), want, 1e-5)
    assert_close(only(got), only(interp), 1e-5)


@pytest.mark.parametrize("mask", [None, "bool", "float"])
def test_scaled_dot_product_attention(mask: str | None) -> None:
    q, k, v = _r(2, 3, 4, 8), _r(2, 3, 6, 8), _r(2, 3, 6, 5)
    feeds = {"q": q, "k": k, "v": v}
    m = None
    if mask == "bool":
        m = rng.random((4, 6)) > 0.3
        m[:, 0] = True
    elif mask == "float":
        m = _r(1, 4, 6)
    kwargs = {} if m is None else {"attn_mask": m}
    prog = program(feeds, lambda b, q, k, v: b.scaled_dot_product_attention(query=q, key=k, value=v, **kwargs),
                   opset="iOS18")
    got, interp = run_both(prog, feeds)
    tm = None if m is None else torch.from_numpy(m)
    want = torch.nn.functional.scaled_dot_product_attention(torch.from_numpy(q), torch.from_numpy(k),
                                                            torch.from_numpy(v), attn_mask=tm).numpy()
    assert_close(only(got), want, 1e-5)
    assert_close(only(got), only(interp), 1e-5)


def test_matmul_with_a_constant_of_another_dtype() -> None:
    """iOS17: one const operand may have another dtype; the result takes the other's (fp16 here)."""
    x = _r(3, 4).astype(np.float16)
    c = _r(4, 2)
    prog = program({"x": x}, lambda b, x: b.matmul(x=x, y=c), opset="iOS17")
    got, interp = run_both(prog, {"x": x})
    assert only(got).dtype == np.float16
    assert_close(only(got), x.astype(np.float64) @ c.astype(np.float64), 2e-3)
    assert_close(only(got), only(interp), 1e-3)
