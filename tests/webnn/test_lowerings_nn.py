"""Convolutions, pools, matrix products and normalizations lowered to WebNN, run in the real browser in
both layouts against torch (or numpy formulas written here from the MIL spec, where torch has no form:
asymmetric padding is an explicit F.pad before torch's op, TF's 'same' rule is written out).

Inputs are chosen so swapped parameters fail: H != W, non-square kernels, strides, dilations, pads
with top != bottom != left != right, groups > 1."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import converter
from converter.errors import UnsupportedError
from converter.ir.builder import new_program
from converter.ir.types import tensor

from .browser_client import WebnnBrowser
from .helpers import conv_stem, rand, run_webnn

LAYOUTS = ["nchw", "nhwc"]
TOL = {"rtol": 1e-4, "atol": 1e-4}


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a))


def _same_pads(n: int, k: int, s: int, d: int = 1) -> tuple[int, int]:
    """TF's SAME padding (MIL 'same'): the output is ceil(n / s); an odd total pads more at the end."""
    total = max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0)
    return total // 2, total - total // 2


def _pad_hw(x: np.ndarray, top: int, bottom: int, left: int, right: int, value: float = 0.0) -> torch.Tensor:
    return F.pad(_t(x), (left, right, top, bottom), value=value)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_conv_every_parameter(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    x = rand((1, 4, 7, 10), 1)
    w1, b1 = rand((6, 2, 3, 2), 2), rand((6,), 3)       # groups 2, custom pads, strides (2, 1), dilations (1, 2)
    w2 = rand((5, 4, 4, 3), 4)                          # 'same' with odd totals, strides (2, 3)
    w3, b3 = rand((3, 4, 2, 3), 5), rand((3,), 6)       # 'valid', dilations (2, 1)
    w4 = rand((4, 1, 4, 2), 7)                          # depthwise, 'same_lower'
    prog = new_program({"x": tensor("fp32", [1, 4, 7, 10])}, lambda b, x: [
        b.conv(x=x, weight=w1, bias=b1, strides=[2, 1], pad_type="custom", pad=[1, 2, 0, 3], dilations=[1, 2],
               groups=2, name="custom"),
        b.conv(x=x, weight=w2, strides=[2, 3], pad_type="same", name="same"),
        b.conv(x=x, weight=w3, bias=b3, pad_type="valid", dilations=[2, 1], name="valid"),
        b.conv(x=x, weight=w4, strides=[2, 3], pad_type="same_lower", groups=4, name="same_lower"),
        b.conv(x=x, weight=w2, strides=[1, 2], dilations=[2, 3], pad_type="same", name="same_dilated")],
        opset="iOS17")
    out = run_webnn(webnn_browser, prog, {"x": x}, tmp_path / "m", layout=layout)
    ref = F.conv2d(_pad_hw(x, 1, 2, 0, 3), _t(w1), _t(b1), stride=(2, 1), dilation=(1, 2), groups=2)
    np.testing.assert_allclose(out["custom"], ref.numpy(), **TOL)
    (t, bo), (le, r) = _same_pads(7, 4, 2), _same_pads(10, 3, 3)
    assert (t, bo, le, r) == (1, 2, 1, 1)  # odd total in H: the extra row at the bottom
    ref = F.conv2d(_pad_hw(x, t, bo, le, r), _t(w2), stride=(2, 3))
    np.testing.assert_allclose(out["same"], ref.numpy(), **TOL)
    ref = F.conv2d(_t(x), _t(w3), _t(b3), dilation=(2, 1))
    np.testing.assert_allclose(out["valid"], ref.numpy(), **TOL)
    assert _lower(7, 4, 2) == (2, 1) and _lower(10, 2, 3) == (1, 0)  # same_lower: the odd one at the start
    ref = F.conv2d(_pad_hw(x, *_lower(7, 4, 2), *_lower(10, 2, 3)), _t(w4), stride=(2, 3), groups=4)
    np.testing.assert_allclose(out["same_lower"], ref.numpy(), **TOL)
    (t, bo), (le, r) = _same_pads(7, 4, 1, 2), _same_pads(10, 3, 2, 3)
    assert (t, bo, le, r) == (3, 3, 2, 3)
    ref = F.conv2d(_pad_hw(x, t, bo, le, r), _t(w2), stride=(1, 2), dilation=(2, 3))
    np.testing.assert_allclose(out["same_dilated"], ref.numpy(), **TOL)


def _lower(n: int, k: int, s: int) -> tuple[int, int]:
    small, big = _same_pads(n, k, s)
    return big, small


@pytest.mark.parametrize("layout", LAYOUTS)
def test_conv_1d_runs_as_2d(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    x, w, bias = rand((1, 3, 11), 1), rand((4, 3, 3), 2), rand((4,), 3)
    prog = new_program({"x": tensor("fp32", [1, 3, 11])}, lambda b, x: [
        b.conv(x=x, weight=w, bias=bias, strides=[2], pad_type="custom", pad=[1, 3], dilations=[2], name="y")])
    out = run_webnn(webnn_browser, prog, {"x": x}, tmp_path / "m", layout=layout)
    ref = F.conv1d(F.pad(_t(x), (1, 3)), _t(w), _t(bias), stride=2, dilation=2)
    np.testing.assert_allclose(out["y"], ref.numpy(), **TOL)


def _conv_t_full(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, s, d, groups: int) -> np.ndarray:  # noqa: ANN001
    return F.conv_transpose2d(_t(x), _t(w), None if bias is None else _t(bias), stride=s, dilation=d,
                              groups=groups).numpy()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_conv_transpose_every_parameter(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    x = rand((1, 4, 3, 5), 1)
    w1, b1 = rand((4, 3, 3, 4), 2), rand((6,), 3)   # groups 2 -> 6 output channels
    w2 = rand((4, 2, 3, 4), 4)
    w3, b3 = rand((4, 2, 2, 3), 5), rand((2,), 6)
    w4 = rand((4, 3, 2, 2), 7)
    prog = new_program({"x": tensor("fp32", [1, 4, 3, 5])}, lambda b, x: [
        b.conv_transpose(x=x, weight=w1, bias=b1, strides=[2, 3], dilations=[2, 1], pad_type="custom",
                         pad=[1, 0, 2, 1], groups=2, name="custom"),
        b.conv_transpose(x=x, weight=w2, strides=[2, 2], pad_type="same", name="same"),
        # output_shape one beyond the full result in both dims: zero-extended, then the bias
        b.conv_transpose(x=x, weight=w3, bias=b3, strides=[3, 2], pad_type="custom", pad=[1, 1, 0, 2],
                         output_shape=[1, 2, 7, 10], name="out_shape"),
        # 'same' with a kernel smaller than the stride: the output D*s is longer than the full result
        b.conv_transpose(x=x, weight=w4, strides=[3, 2], pad_type="same", name="same_short"),
        # 'valid' with an output_shape shorter than the full result: cut at the end
        b.conv_transpose(x=x, weight=w2, strides=[2, 2], pad_type="valid", output_shape=[1, 2, 5, 9],
                         name="valid_cut")])
    out = run_webnn(webnn_browser, prog, {"x": x}, tmp_path / "m", layout=layout)
    full = _conv_t_full(x, w1, b1, (2, 3), (2, 1), 2)               # [1, 6, 9, 15]
    np.testing.assert_allclose(out["custom"], full[:, :, 1:, 2:-1], **TOL)
    full = _conv_t_full(x, w2, None, (2, 2), (1, 1), 1)             # [1, 2, 7, 12]; same: [6, 10]
    np.testing.assert_allclose(out["same"], full[:, :, 0:6, 1:11], **TOL)
    full = _conv_t_full(x, w3, None, (3, 2), (1, 1), 1)             # [1, 2, 8, 11]: crop 1 / 0 before
    ext = np.zeros((1, 2, 8, 12), np.float32)
    ext[:, :, :8, :11] = full
    np.testing.assert_allclose(out["out_shape"], ext[:, :, 1:8, 0:10] + b3.reshape(1, 2, 1, 1), **TOL)
    full = _conv_t_full(x, w4, None, (3, 2), (1, 1), 1)             # [1, 3, 8, 10]; same: [9, 10]
    ext = np.zeros((1, 3, 9, 10), np.float32)
    ext[:, :, :8] = full
    np.testing.assert_allclose(out["same_short"], ext, **TOL)
    full = _conv_t_full(x, w2, None, (2, 2), (1, 1), 1)
    np.testing.assert_allclose(out["valid_cut"], full[:, :, :5, :9], **TOL)


def test_conv_transpose_output_beyond_a_stride_is_refused(tmp_path: Path) -> None:
    w = rand((2, 2, 2, 2), 1)
    prog = new_program({"x": tensor("fp32", [1, 2, 3, 3])}, lambda b, x: [
        b.conv_transpose(x=x, weight=w, strides=[2, 2], output_shape=[1, 2, 9, 6], name="y")])
    with pytest.raises(UnsupportedError, match="full transposed convolution"):
        converter.convert(prog, to="webnn", out=tmp_path / "m", passes="none")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_max_and_l2_pool(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    x = rand((1, 3, 7, 9), 1)
    prog = new_program({"x": tensor("fp32", [1, 3, 7, 9])}, lambda b, x: [
        b.max_pool(x=conv_stem(b, x, 3), kernel_sizes=[3, 2], strides=[2, 1], pad_type="custom", pad=[1, 0, 2, 1],
                   name="custom"),
        b.max_pool(x=conv_stem(b, x, 3), kernel_sizes=[2, 3], strides=[2, 2], pad_type="valid", ceil_mode=True,
                   name="ceil"),
        b.max_pool(x=conv_stem(b, x, 3), kernel_sizes=[3, 3], strides=[2, 3], pad_type="custom", pad=[1, 1, 1, 1],
                   ceil_mode=True, name="ceil_pad"),
        b.max_pool(x=conv_stem(b, x, 3), kernel_sizes=[4, 3], strides=[3, 2], pad_type="same", name="same"),
        b.max_pool(x=conv_stem(b, x, 3), kernel_sizes=[2, 2], strides=[3, 3], pad_type="valid", ceil_mode=True,
                   name="ceil_past_end"),
        b.l2_pool(x=conv_stem(b, x, 3), kernel_sizes=[3, 2], strides=[2, 3], pad_type="custom", pad=[0, 2, 1, 0],
                  name="l2"),
        b.l2_pool(x=conv_stem(b, x, 3), kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid", ceil_mode=True,
                  name="l2_ceil")])
    out = run_webnn(webnn_browser, prog, {"x": x}, tmp_path / "m", layout=layout)
    inf = float("-inf")
    np.testing.assert_allclose(out["custom"], F.max_pool2d(_pad_hw(x, 1, 0, 2, 1, inf), (3, 2), (2, 1)).numpy())
    np.testing.assert_allclose(out["ceil"], F.max_pool2d(_t(x), (2, 3), (2, 2), ceil_mode=True).numpy())
    np.testing.assert_allclose(out["ceil_pad"],
                               F.max_pool2d(_t(x), (3, 3), (2, 3), padding=1, ceil_mode=True).numpy())
    (t, bo), (le, r) = _same_pads(7, 4, 3), _same_pads(9, 3, 2)
    np.testing.assert_allclose(out["same"], F.max_pool2d(_pad_hw(x, t, bo, le, r, inf), (4, 3), (3, 2)).numpy())
    np.testing.assert_allclose(out["ceil_past_end"], _windows(x, (2, 2), (3, 3), (3, 4), np.max, -np.inf))

    def sum_pool(xp: torch.Tensor, k, s, ceil: bool = False) -> np.ndarray:  # noqa: ANN001
        return F.avg_pool2d(xp, k, s, ceil_mode=ceil, divisor_override=1).numpy()

    np.testing.assert_allclose(out["l2"], np.sqrt(sum_pool(_pad_hw(x, 0, 2, 1, 0) ** 2, (3, 2), (2, 3))), **TOL)
    np.testing.assert_allclose(out["l2_ceil"], np.sqrt(sum_pool(_t(x) ** 2, (2, 2), (2, 2), True)), **TOL)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_avg_pool_padding_ceil_mode_and_exclusion(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    x = rand((1, 3, 7, 9), 1)

    def pool(b, x, name: str, **kw):  # noqa: ANN001, ANN202
        return b.avg_pool(x=conv_stem(b, x, 3), name=name, **kw)

    cases = {
        "incl": dict(kernel_sizes=[3, 5], strides=[2, 3], pad_type="custom", pad=[1, 1, 2, 2],
                     exclude_padding_from_average=False),
        "excl": dict(kernel_sizes=[3, 5], strides=[2, 3], pad_type="custom", pad=[1, 1, 2, 2],
                     exclude_padding_from_average=True),
        "ceil": dict(kernel_sizes=[2, 3], strides=[2, 2], pad_type="valid", ceil_mode=True),
        "ceil_pad_incl": dict(kernel_sizes=[3, 3], strides=[2, 3], pad_type="custom", pad=[1, 1, 1, 1],
                              ceil_mode=True, exclude_padding_from_average=False),
        "ceil_pad_excl": dict(kernel_sizes=[3, 3], strides=[2, 3], pad_type="custom", pad=[1, 1, 1, 1],
                              ceil_mode=True, exclude_padding_from_average=True),
        "asym_incl": dict(kernel_sizes=[3, 2], strides=[2, 1], pad_type="custom", pad=[2, 0, 0, 1],
                          exclude_padding_from_average=False),
        "asym_excl": dict(kernel_sizes=[3, 2], strides=[2, 1], pad_type="custom", pad=[2, 0, 0, 1],
                          exclude_padding_from_average=True),
        "same": dict(kernel_sizes=[4, 3], strides=[3, 2], pad_type="same", exclude_padding_from_average=True),
        "same_incl": dict(kernel_sizes=[4, 3], strides=[3, 2], pad_type="same", exclude_padding_from_average=False),
        # a kernel smaller than the stride: ceil_mode's last window along W starts past the input
        "ceil_past_end": dict(kernel_sizes=[2, 2], strides=[3, 3], pad_type="valid", ceil_mode=True),
    }
    prog = new_program({"x": tensor("fp32", [1, 3, 7, 9])},
                       lambda b, x: [pool(b, x, name, **kw) for name, kw in cases.items()])
    out = run_webnn(webnn_browser, prog, {"x": x}, tmp_path / "m", layout=layout)
    tx = _t(x)
    np.testing.assert_allclose(out["incl"], F.avg_pool2d(tx, (3, 5), (2, 3), (1, 2), count_include_pad=True), **TOL)
    np.testing.assert_allclose(out["excl"], F.avg_pool2d(tx, (3, 5), (2, 3), (1, 2), count_include_pad=False), **TOL)
    np.testing.assert_allclose(out["ceil"], F.avg_pool2d(tx, (2, 3), (2, 2), ceil_mode=True), **TOL)
    np.testing.assert_allclose(out["ceil_pad_incl"], F.avg_pool2d(tx, 3, (2, 3), 1, ceil_mode=True,
                                                                  count_include_pad=True), **TOL)
    np.testing.assert_allclose(out["ceil_pad_excl"], F.avg_pool2d(tx, 3, (2, 3), 1, ceil_mode=True,
                                                                  count_include_pad=False), **TOL)

    def excluded(top: int, bottom: int, left: int, right: int, k, s) -> np.ndarray:  # noqa: ANN001
        """Sum over the input cells of each window / their count (padding neither summed nor counted)."""
        total = F.avg_pool2d(_pad_hw(x, top, bottom, left, right), k, s, divisor_override=1)
        count = F.avg_pool2d(_pad_hw(np.ones_like(x), top, bottom, left, right), k, s, divisor_override=1)
        return (total / count).numpy()

    np.testing.assert_allclose(out["asym_incl"], F.avg_pool2d(_pad_hw(x, 2, 0, 0, 1), (3, 2), (2, 1)), **TOL)
    np.testing.assert_allclose(out["asym_excl"], excluded(2, 0, 0, 1, (3, 2), (2, 1)), **TOL)
    np.testing.assert_allclose(out["same"], excluded(*_same_pads(7, 4, 3), *_same_pads(9, 3, 2), (4, 3), (3, 2)),
                               **TOL)
    np.testing.assert_allclose(out["same_incl"], F.avg_pool2d(_pad_hw(x, *_same_pads(7, 4, 3), *_same_pads(9, 3, 2)),
                                                              (4, 3), (3, 2)), **TOL)
    np.testing.assert_allclose(out["ceil_past_end"], _windows(x, (2, 2), (3, 3), (3, 4), np.mean, 0.0), **TOL)


def _windows(x: np.ndarray, k, s, outs, reduce, empty: float) -> np.ndarray:  # noqa: ANN001
    """MIL pooling without padding, window by window: ``reduce`` of the input cells a window covers
    (ceil_mode may add windows that hang over the end or start past it: ``empty`` for those)."""
    y = np.full(x.shape[:2] + tuple(outs), empty, np.float32)
    for i in range(outs[0]):
        for j in range(outs[1]):
            cells = x[:, :, i * s[0]:i * s[0] + k[0], j * s[1]:j * s[1] + k[1]]
            if cells.size:
                y[:, :, i, j] = reduce(cells, axis=(2, 3))
    return y


@pytest.mark.parametrize("layout", LAYOUTS)
def test_linear_ranks_and_bias(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    w, bias = rand((3, 4), 1), rand((3,), 2)
    x1, x2, x3 = rand((4,), 3), rand((2, 4), 4), rand((2, 5, 4), 5)
    prog = new_program({"x1": tensor("fp32", [4]), "x2": tensor("fp32", [2, 4]), "x3": tensor("fp32", [2, 5, 4])},
                       lambda b, x1, x2, x3: [
                           b.linear(x=x1, weight=w, bias=bias, name="r1"), b.linear(x=x1, weight=w, name="r1n"),
                           b.linear(x=x2, weight=w, bias=bias, name="r2"), b.linear(x=x2, weight=w, name="r2n"),
                           b.linear(x=x3, weight=w, bias=bias, name="r3"), b.linear(x=x3, weight=w, name="r3n")])
    out = run_webnn(webnn_browser, prog, {"x1": x1, "x2": x2, "x3": x3}, tmp_path / "m", layout=layout)
    for name, xv in (("r1", x1), ("r2", x2), ("r3", x3)):
        np.testing.assert_allclose(out[name], F.linear(_t(xv), _t(w), _t(bias)).numpy(), **TOL)
        np.testing.assert_allclose(out[name + "n"], F.linear(_t(xv), _t(w)).numpy(), **TOL)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_matmul_transposes_constants_and_vectors(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    a, bm, d = rand((2, 3, 4), 1), rand((2, 5, 4), 2), rand((2, 3, 5), 6)     # runtime
    c = rand((5, 4), 3)                                # constant
    v, cv = rand((4,), 4), rand((3,), 5)               # rank-1 runtime / constant
    prog = new_program({"a": tensor("fp32", [2, 3, 4]), "bm": tensor("fp32", [2, 5, 4]), "d": tensor("fp32", [2, 3, 5]),
                        "v": tensor("fp32", [4])},
                       lambda b, a, bm, d, v: [
                           b.matmul(x=a, y=bm, transpose_y=True, name="ty"),
                           b.matmul(x=a, y=d, transpose_x=True, name="tx"),
                           b.matmul(x=bm, y=a, transpose_y=True, name="ty2"),
                           b.matmul(x=a, y=c, transpose_y=True, name="const_ty"),
                           b.matmul(x=c, y=d, transpose_x=True, transpose_y=True, name="const_txy"),
                           b.matmul(x=a, y=v, name="mat_vec"),
                           b.matmul(x=v, y=c, transpose_y=True, name="vec_const"),
                           b.matmul(x=cv, y=a, name="cvec_mat"),
                           b.matmul(x=v, y=v, name="dot")])
    out = run_webnn(webnn_browser, prog, {"a": a, "bm": bm, "d": d, "v": v}, tmp_path / "m", layout=layout)
    ta, tb, tc, tv, tcv = _t(a), _t(bm), _t(c), _t(v), _t(cv)
    refs = {"ty": ta @ tb.transpose(-1, -2), "tx": ta.transpose(-1, -2) @ _t(d), "ty2": tb @ ta.transpose(-1, -2),
            "const_ty": ta @ tc.T, "const_txy": tc.T @ _t(d).transpose(-1, -2), "mat_vec": torch.matmul(ta, tv),
            "vec_const": torch.matmul(tv, tc.T), "cvec_mat": torch.matmul(tcv, ta), "dot": torch.matmul(tv, tv)}
    for name, ref in refs.items():
        np.testing.assert_allclose(out[name], ref.numpy(), **TOL, err_msg=name)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_batch_and_instance_norm(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    x, x3 = rand((2, 3, 4, 5), 1), rand((2, 3, 6), 2)
    mean, var, gamma, beta = rand((3,), 3), rand((3,), 4, 0.5, 2.0), rand((3,), 5), rand((3,), 6)
    prog = new_program({"x": tensor("fp32", [2, 3, 4, 5]), "x3": tensor("fp32", [2, 3, 6])}, lambda b, x, x3: [
        b.batch_norm(x=conv_stem(b, x, 3), mean=mean, variance=var, gamma=gamma, beta=beta, epsilon=0.1, name="bn"),
        b.batch_norm(x=conv_stem(b, x, 3), mean=mean, variance=var, name="bn_plain"),
        b.batch_norm(x=x3, mean=mean, variance=var, gamma=gamma, beta=beta, epsilon=0.01, name="bn3"),
        b.instance_norm(x=conv_stem(b, x, 3), gamma=gamma, beta=beta, epsilon=0.1, name="in4"),
        b.instance_norm(x=x3, gamma=gamma, beta=beta, epsilon=0.01, name="in3"),
        b.instance_norm(x=x3, name="in3_plain")])
    out = run_webnn(webnn_browser, prog, {"x": x, "x3": x3}, tmp_path / "m", layout=layout)
    tm, tvr, tg, tb = _t(mean), _t(var), _t(gamma), _t(beta)
    np.testing.assert_allclose(out["bn"], F.batch_norm(_t(x), tm, tvr, tg, tb, eps=0.1).numpy(), **TOL)
    np.testing.assert_allclose(out["bn_plain"], F.batch_norm(_t(x), tm, tvr, eps=1e-5).numpy(), **TOL)
    np.testing.assert_allclose(out["bn3"], F.batch_norm(_t(x3), tm, tvr, tg, tb, eps=0.01).numpy(), **TOL)
    np.testing.assert_allclose(out["in4"], F.instance_norm(_t(x), weight=tg, bias=tb, eps=0.1).numpy(), **TOL)
    np.testing.assert_allclose(out["in3"], F.instance_norm(_t(x3), weight=tg, bias=tb, eps=0.01).numpy(), **TOL)
    np.testing.assert_allclose(out["in3_plain"], F.instance_norm(_t(x3), eps=1e-5).numpy(), **TOL)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_layer_norm_axes_subsets(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    x = rand((2, 3, 4, 5), 1)
    g_hw, b_hw = rand((4, 5), 2), rand((4, 5), 3)
    g_c, b_c = rand((3,), 4), rand((3,), 5)
    g_cw = rand((3, 5), 6)
    prog = new_program({"x": tensor("fp32", [2, 3, 4, 5])}, lambda b, x: [
        b.layer_norm(x=conv_stem(b, x, 3), axes=[-2, -1], gamma=g_hw, beta=b_hw, epsilon=0.1, name="hw"),
        b.layer_norm(x=conv_stem(b, x, 3), axes=[1], gamma=g_c, beta=b_c, epsilon=0.01, name="c"),
        b.layer_norm(x=conv_stem(b, x, 3), axes=[3, 1], gamma=g_cw, name="cw"),
        b.layer_norm(x=x, name="all")])
    out = run_webnn(webnn_browser, prog, {"x": x}, tmp_path / "m", layout=layout)

    def ln(axes: tuple[int, ...], eps: float) -> np.ndarray:
        mu = x.mean(axis=axes, keepdims=True)
        return (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=axes, keepdims=True) + eps)

    np.testing.assert_allclose(out["hw"], F.layer_norm(_t(x), (4, 5), _t(g_hw), _t(b_hw), eps=0.1).numpy(), **TOL)
    np.testing.assert_allclose(out["c"], ln((1,), 0.01) * g_c.reshape(3, 1, 1) + b_c.reshape(3, 1, 1), **TOL)
    np.testing.assert_allclose(out["cw"], ln((1, 3), 1e-5) * g_cw.reshape(3, 1, 5), **TOL)
    np.testing.assert_allclose(out["all"], F.layer_norm(_t(x), (2, 3, 4, 5), eps=1e-5).numpy(), **TOL)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_1d_pools_and_conv_transpose(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    """Rank-3 (1-D) forms run as 2-D with a unit height: padding, ceil_mode and the divisor must land on
    the width, not the height."""
    x = rand((1, 3, 10), 1)
    w, bias = rand((3, 2, 4), 2), rand((2,), 3)
    prog = new_program({"x": tensor("fp32", [1, 3, 10])}, lambda b, x: [
        b.max_pool(x=x, kernel_sizes=[3], strides=[2], pad_type="custom", pad=[1, 1], ceil_mode=True, name="max"),
        b.avg_pool(x=x, kernel_sizes=[3], strides=[2], pad_type="custom", pad=[1, 1], ceil_mode=True,
                   exclude_padding_from_average=False, name="avg_incl"),
        b.avg_pool(x=x, kernel_sizes=[4], strides=[3], pad_type="custom", pad=[2, 1],
                   exclude_padding_from_average=True, name="avg_excl"),
        b.l2_pool(x=x, kernel_sizes=[2], strides=[3], pad_type="valid", name="l2"),
        b.conv_transpose(x=x, weight=w, bias=bias, strides=[3], pad_type="custom", pad=[2, 1], name="convt")])
    out = run_webnn(webnn_browser, prog, {"x": x}, tmp_path / "m", layout=layout)
    tx = _t(x)
    np.testing.assert_allclose(out["max"], F.max_pool1d(tx, 3, 2, 1, ceil_mode=True).numpy())
    np.testing.assert_allclose(out["avg_incl"], F.avg_pool1d(tx, 3, 2, 1, ceil_mode=True, count_include_pad=True),
                               **TOL)
    total = F.avg_pool1d(F.pad(tx, (2, 1)), 4, 3) * 4
    count = F.avg_pool1d(F.pad(torch.ones_like(tx), (2, 1)), 4, 3) * 4
    np.testing.assert_allclose(out["avg_excl"], (total / count).numpy(), **TOL)
    np.testing.assert_allclose(out["l2"], np.sqrt(F.avg_pool1d(tx ** 2, 2, 3).numpy() * 2), **TOL)
    full = F.conv_transpose1d(tx, _t(w), _t(bias), stride=3).numpy()
    np.testing.assert_allclose(out["convt"], full[..., 2:-1], **TOL)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_linear_after_a_flattened_conv_output(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    """Under nhwc the flatten reshapes the NHWC data and linear permutes its weight columns instead."""
    x = rand((1, 3, 2, 4), 1)
    w, bias = rand((5, 24), 2), rand((5,), 3)
    prog = new_program({"x": tensor("fp32", [1, 3, 2, 4])}, lambda b, x: [
        b.linear(x=b.reshape(x=conv_stem(b, x, 3), shape=[1, 24]), weight=w, bias=bias, name="y")])
    out = run_webnn(webnn_browser, prog, {"x": x}, tmp_path / "m", layout=layout)
    np.testing.assert_allclose(out["y"], x.reshape(1, 24) @ w.T + bias, **TOL)



@pytest.mark.parametrize("layout", LAYOUTS)
def test_conv_and_conv_transpose_with_runtime_weights(webnn_browser: WebnnBrowser, tmp_path: Path,
                                                      layout: str) -> None:
    x, w, wt = rand((1, 4, 6, 7), 1), rand((6, 2, 2, 3), 2), rand((4, 3, 3, 2), 3)
    prog = new_program({"x": tensor("fp32", [1, 4, 6, 7]), "w": tensor("fp32", [6, 2, 2, 3]),
                        "wt": tensor("fp32", [4, 3, 3, 2])}, lambda b, x, w, wt: [
        b.conv(x=x, weight=w, strides=[2, 1], pad_type="custom", pad=[1, 0, 2, 1], groups=2, name="conv"),
        b.conv_transpose(x=x, weight=wt, strides=[2, 3], pad_type="custom", pad=[0, 1, 1, 0], name="convt")],
        opset="iOS17")
    out = run_webnn(webnn_browser, prog, {"x": x, "w": w, "wt": wt}, tmp_path / "m", layout=layout)
    ref = F.conv2d(_pad_hw(x, 1, 0, 2, 1), _t(w), stride=(2, 1), groups=2).numpy()
    np.testing.assert_allclose(out["conv"], ref, **TOL)
    full = _conv_t_full(x, wt, None, (2, 3), (1, 1), 1)
    np.testing.assert_allclose(out["convt"], full[:, :, 0:-1, 1:], **TOL)


def test_conv_transpose_with_groups_and_a_runtime_weight_is_refused(tmp_path: Path) -> None:
    prog = new_program({"x": tensor("fp32", [1, 4, 3, 3]), "w": tensor("fp32", [4, 1, 2, 2])}, lambda b, x, w: [
        b.conv_transpose(x=x, weight=w, groups=2, name="y")], opset="iOS17")
    with pytest.raises(UnsupportedError, match="conv_transpose 'y'.*constant weight"):
        converter.convert(prog, to="webnn", out=tmp_path / "m", passes="none")


@pytest.mark.parametrize("op", ["linear", "matmul", "reduce_mean"])
def test_integer_forms_without_a_webnn_form_are_refused(tmp_path: Path, op: str) -> None:
    def body(b, i):  # noqa: ANN001, ANN202
        if op == "linear":
            return [b.linear(x=i, weight=np.ones((2, 3), np.int32), name="y")]
        if op == "matmul":
            return [b.matmul(x=i, y=np.ones((3, 2), np.int32), name="y")]
        return [b.reduce_mean(x=i, axes=[1], name="y")]

    prog = new_program({"i": tensor("int32", [2, 3])}, body)
    with pytest.raises(UnsupportedError, match=f"{op} 'y': .*(float|int32)"):
        converter.convert(prog, to="webnn", out=tmp_path / "m", passes="none")
