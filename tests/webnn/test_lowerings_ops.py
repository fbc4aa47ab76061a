"""The remaining lowerings (normalizations, data movement, one_hot, topk, einsum, attention,
quantization, hyperbolic functions) in the real browser's WebNN, both layouts, against oracles we did
not write: torch (local_response_norm, scaled_dot_product_attention, conv2d), np.einsum, and numpy
formulas written here from the MIL spec. Parameters are asymmetric (non-square shapes, distinct
axes, negative indices) so a swapped parameter fails."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import converter
from converter.errors import UnsupportedError
from converter.ir.builder import new_program
from converter.ir.types import TensorType, dtype_of_array

from .browser_client import WebnnBrowser
from .lowering_util import LAYOUTS, assert_close, nhwc_source, run_program

RNG = np.random.default_rng(11)
X4 = RNG.standard_normal((2, 5, 3, 4)).astype(np.float32)


def _run(browser: WebnnBrowser, tmp: Path, layout: str, feeds: dict, make, opset: str = "iOS18",  # noqa: ANN001
         nhwc: bool = False) -> list[np.ndarray]:
    def body(b, *args):  # noqa: ANN001, ANN202
        if nhwc:
            args = [nhwc_source(b, args[0], feeds[next(iter(feeds))].shape[1]), *args[1:]]
        outs = make(b, *args)
        return outs
    return run_program(browser, tmp / layout, feeds, body, layout=layout, opset=opset)


def _refused(make, feeds: dict, match: str, opset: str = "iOS18", tmp: Path | None = None) -> None:  # noqa: ANN001
    types = [(n, TensorType(dtype_of_array(a), a.shape)) for n, a in feeds.items()]
    prog = new_program(types, make, opset=opset)
    with pytest.raises(UnsupportedError, match=match):
        converter.convert(prog, to="webnn", out=tmp / "refused", layout="nchw")


# -- regression: slice with strides (WebNN's sizes are input extents, not output counts) ----------------

@pytest.mark.parametrize("layout", LAYOUTS)
def test_strided_slice(layout: str, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    x = RNG.standard_normal((3, 8, 7)).astype(np.float32)
    (got,) = _run(webnn_browser, tmp_path, layout, {"x": x}, lambda b, v: b.slice_by_index(
        x=v, begin=np.array([0, 1, 0], np.int32), end=np.array([3, 8, 7], np.int32),
        stride=np.array([2, 2, 3], np.int32)))
    assert_close(got, x[0:3:2, 1:8:2, 0:7:3], 0.0)


# -- normalizations ----------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", LAYOUTS)
def test_l2_norm(layout: str, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    (got,) = _run(webnn_browser, tmp_path, layout, {"x": X4}, lambda b, v: b.l2_norm(x=v, epsilon=0.5), nhwc=True)
    x = X4.astype(np.float64)
    assert_close(got, x / np.sqrt(np.sum(x * x, axis=(1, 2, 3), keepdims=True) + 0.5))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("size", [3, 4, 1])
def test_local_response_norm(size: int, layout: str, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    (got,) = _run(webnn_browser, tmp_path, layout, {"x": X4}, lambda b, v: b.local_response_norm(
        x=v, size=size, alpha=0.3, beta=0.6, k=1.5), nhwc=True)
    want = F.local_response_norm(torch.from_numpy(X4), size, alpha=0.3, beta=0.6, k=1.5).numpy()
    assert_close(got, want)


# -- data movement -----------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("constant", [True, False])
def test_gather_nd(constant: bool, layout: str, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    x = RNG.standard_normal((4, 3, 5)).astype(np.float32)
    idx = np.array([[[0, -1], [3, 2]], [[-4, 0], [1, 1]]], np.int32)  # [2, 2, 2]: rows of x[i, j]
    feeds = {"x": x} if constant else {"x": x, "i": idx}
    make = ((lambda b, v: b.gather_nd(x=v, indices=idx)) if constant else
            (lambda b, v, i: b.gather_nd(x=v, indices=i)))
    (got,) = _run(webnn_browser, tmp_path, layout, feeds, make, opset="iOS16")  # negative indices: up to iOS16
    assert_close(got, x[idx[..., 0] % 4, idx[..., 1] % 3], 0.0)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_scatter_family_update(layout: str, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    data = RNG.standard_normal((4, 5)).astype(np.float32)
    upd_nd = RNG.standard_normal((3,)).astype(np.float32)
    idx_nd = np.array([[0, 4], [3, 1], [-1, 0]], np.int32)
    upd_ax = RNG.standard_normal((4, 2)).astype(np.float32)
    idx_ax = np.array([[4, 0], [1, 2], [3, -5], [0, 1]], np.int32)
    upd_sc = RNG.standard_normal((4, 2)).astype(np.float32)
    idx_sc = np.array([3, 1], np.int32)
    got = _run(webnn_browser, tmp_path, layout, {"d": data, "u1": upd_nd, "u2": upd_ax, "u3": upd_sc},
               lambda b, d, u1, u2, u3: [
                   b.scatter_nd(data=d, indices=idx_nd, updates=u1, mode="update"),
                   b.scatter_along_axis(data=d, indices=idx_ax, updates=u2, axis=1, mode="update"),
                   b.scatter(data=d, indices=idx_sc, updates=u3, axis=1, mode="update")],
               opset="iOS16")  # negative indices: up to iOS16
    want_nd = data.copy()
    for (i, j), u in zip(idx_nd, upd_nd):
        want_nd[i, j] = u
    want_ax = data.copy()
    np.put_along_axis(want_ax, idx_ax % 5, upd_ax, axis=1)
    want_sc = data.copy()
    want_sc[:, idx_sc] = upd_sc
    for g, w in zip(got, (want_nd, want_ax, want_sc)):
        assert_close(g, w, 0.0)


def test_scatter_add_and_data_dependent_indices_are_refused(tmp_path: Path) -> None:
    data = np.zeros((4, 5), np.float32)
    _refused(lambda b, d: b.scatter_nd(data=d, indices=np.array([[0, 1]], np.int32),
                                       updates=np.ones(1, np.float32), mode="add"),
             {"d": data}, "mode 'add' has no WebNN form", tmp=tmp_path)
    _refused(lambda b, d, i: b.scatter_along_axis(data=d, indices=i, updates=d, axis=0, mode="update"),
             {"d": data, "i": np.zeros((4, 5), np.int32)}, "indices must be known", tmp=tmp_path)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_space_to_batch_and_back(layout: str, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    x = RNG.standard_normal((2, 3, 4, 3)).astype(np.float32)
    block, pads = np.array([2, 3], np.int32), np.array([[1, 1], [2, 1]], np.int32)
    crops = np.array([[1, 1], [2, 1]], np.int32)
    got_s2b, got_back = _run(webnn_browser, tmp_path, layout, {"x": x}, lambda b, v: [
        s := b.space_to_batch(x=v, block_shape=block, paddings=pads),
        b.batch_to_space(x=s, block_shape=block, crops=crops)])
    # TF SpaceToBatchND on the spatial dims of NCHW, written from the MIL spec
    n, c = x.shape[:2]
    p = np.pad(x, [(0, 0), (0, 0), (1, 1), (2, 1)])
    hb, wb = p.shape[2] // 2, p.shape[3] // 3
    want = p.reshape(n, c, hb, 2, wb, 3).transpose(3, 5, 0, 1, 2, 4).reshape(6 * n, c, hb, wb)
    assert_close(got_s2b, want, 0.0)
    assert_close(got_back, x, 0.0)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_sliding_windows_and_reverse_sequence(layout: str, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    x = RNG.standard_normal((3, 9, 2)).astype(np.float32)
    lengths = np.array([1, 5], np.int32)
    win, rev = _run(webnn_browser, tmp_path, layout, {"x": x}, lambda b, v: [
        b.sliding_windows(x=v, axis=1, size=4, stride=2),
        b.reverse_sequence(x=v, lengths=np.array([1, 5, 9], np.int32), seq_axis=1, batch_axis=0)])
    starts = range(0, 9 - 4 + 1, 2)
    assert_close(win, np.stack([x[:, s:s + 4] for s in starts], axis=1), 0.0)
    want = x.copy()
    for i, n in enumerate([1, 5, 9]):
        want[i, :n] = x[i, :n][::-1]
    assert_close(rev, want, 0.0)
    del lengths


@pytest.mark.parametrize("layout", LAYOUTS)
def test_slice_update(layout: str, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    u = RNG.standard_normal((2, 2)).astype(np.float32)
    (got,) = _run(webnn_browser, tmp_path, layout, {"x": x, "u": u}, lambda b, v, w: b.slice_update(
        x=v, update=w, begin=np.array([1, 0], np.int32), end=np.array([4, 5], np.int32),
        stride=np.array([2, 3], np.int32)))
    want = x.copy()
    want[1:4:2, 0:5:3] = u
    assert_close(got, want, 0.0)


# -- one_hot, topk -----------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", LAYOUTS)
def test_one_hot(layout: str, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    idx = np.array([[0, 3, 1], [2, 2, 4]], np.int32)
    last, first = _run(webnn_browser, tmp_path, layout, {"i": idx}, lambda b, i: [
        b.one_hot(indices=i, one_hot_vector_size=5, axis=-1, on_value=2.5, off_value=-1.0),
        b.one_hot(indices=i, one_hot_vector_size=5, axis=0, on_value=7.0, off_value=0.0)])
    eye = np.eye(5)
    assert_close(last, np.where(eye[idx] == 1, 2.5, -1.0), 0.0)
    assert_close(first, np.moveaxis(eye[idx] * 7.0, -1, 0), 0.0)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("ascending", [False, True])
def test_topk_k1(ascending: bool, layout: str, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    x = RNG.standard_normal((3, 6, 4)).astype(np.float32)
    values, indices = _run(webnn_browser, tmp_path, layout, {"x": x}, lambda b, v: b.topk(
        x=v, k=1, axis=1, ascending=ascending))
    pick = np.argmin if ascending else np.argmax
    want_i = pick(x, axis=1)[:, None, :]
    assert_close(indices, want_i, 0.0)
    assert_close(values, np.take_along_axis(x, want_i, axis=1), 0.0)


def test_topk_k2_is_refused(tmp_path: Path) -> None:
    _refused(lambda b, v: b.topk(x=v, k=2, axis=0), {"x": np.zeros((3, 2), np.float32)}, "WebNN has no sort",
             tmp=tmp_path)


# -- einsum, attention -------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", LAYOUTS)
def test_einsum(layout: str, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    a = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    b4 = RNG.standard_normal((2, 5, 4, 6)).astype(np.float32)
    a3 = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    b3 = RNG.standard_normal((5, 1, 2)).astype(np.float32)  # H broadcast
    r4, r3 = _run(webnn_browser, tmp_path, layout, {"a": a, "b": b4, "c": a3, "d": b3}, lambda b, x, y, z, w: [
        b.einsum(values=(x, y), equation="nchw,nwhu->nchu"), b.einsum(values=(z, w), equation="chw,whr->chr")],
        opset="iOS15")
    assert_close(r4, np.einsum("nchw,nwhu->nchu", a, b4), 1e-5)
    assert_close(r3, np.einsum("chw,whr->chr", a3, np.broadcast_to(b3, (5, 4, 2))), 1e-5)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("mask", ["none", "bool", "float"])
def test_scaled_dot_product_attention(mask: str, layout: str, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    q = RNG.standard_normal((2, 3, 4, 8)).astype(np.float32)
    k = RNG.standard_normal((2, 3, 5, 8)).astype(np.float32)
    v = RNG.standard_normal((2, 3, 5, 6)).astype(np.float32)
    m_bool = RNG.random((4, 5)) > 0.3
    m_bool[:, 0] = True  # no fully masked row (NaN there in MIL, 0 in recent torch)
    m_float = RNG.standard_normal((1, 3, 4, 5)).astype(np.float32)
    m = {"none": None, "bool": m_bool, "float": m_float}[mask]
    kw = {} if m is None else {"attn_mask": m}
    (got,) = _run(webnn_browser, tmp_path, layout, {"q": q, "k": k, "v": v}, lambda b, x, y, z: b.scaled_dot_product_attention(
        query=x, key=y, value=z, **kw))
    want = F.scaled_dot_product_attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v),
                                          attn_mask=None if m is None else torch.from_numpy(m)).numpy()
    assert_close(got, want, 1e-5)


# -- quantization ------------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", LAYOUTS)
def test_dequantize_and_quantize(layout: str, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    q = RNG.integers(-128, 128, (3, 4)).astype(np.int8)
    x = (RNG.standard_normal((3, 4)) * 3).astype(np.float32)
    x[0, 0], x[1, 1] = 0.25, 1000.0  # a tie (round half to even) and a clamp
    scale = np.array([0.5, 0.1, 2.0], np.float32)
    zp = np.array([3, -2, 0], np.int8)
    deq, quant = _run(webnn_browser, tmp_path, layout, {"q": q, "x": x}, lambda b, a, y: [
        b.dequantize(input=a, zero_point=zp, scale=scale, axis=0),
        b.quantize(input=y, zero_point=np.array([10, 0, 200], np.uint8), scale=scale, axis=0,
                   output_dtype="uint8")])
    assert_close(deq, (q.astype(np.float64) - zp[:, None]) * scale[:, None], 1e-6)
    want = np.clip(np.round(x / scale[:, None]) + np.array([10, 0, 200])[:, None], 0, 255)
    np.testing.assert_array_equal(quant.reshape(want.shape), want)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_conv_quantized(layout: str, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    x = RNG.standard_normal((1, 3, 6, 5)).astype(np.float32)
    w = RNG.integers(0, 256, (4, 3, 3, 2)).astype(np.uint8)
    scale = np.array([0.01, 0.02, 0.03, 0.04], np.float32)
    bias = np.array([-1.0, 0.0, 0.5, -0.5], np.float32)
    (got,) = _run(webnn_browser, tmp_path, layout, {"x": x}, lambda b, v: b.conv_quantized(
        x=v, weight=w, quantization_type="linear", nbits=8, quant_scale=scale, quant_bias=bias,
        strides=[2, 1], pad_type="valid"), opset="iOS15")
    wf = w.astype(np.float32) * scale[:, None, None, None] + bias[:, None, None, None]
    want = F.conv2d(torch.from_numpy(x), torch.from_numpy(wf), stride=(2, 1)).numpy()
    assert_close(got, want, 1e-4)


# -- hyperbolic functions ----------------------------------------------------------------------------

@pytest.mark.parametrize("layout", LAYOUTS)
def test_sinh_cosh_atanh(layout: str, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    x = np.array([[-3.0, -0.5, -1e-3, 0.0], [1e-4, 0.3, 2.0, 5.0]], np.float32)
    y = np.array([[-0.99, -0.5, -1e-3, 0.0], [1e-4, 0.3, 0.7, 0.95]], np.float32)
    s, c, t = _run(webnn_browser, tmp_path, layout, {"x": x, "y": y}, lambda b, u, v: [
        b.sinh(x=u), b.cosh(x=u), b.atanh(x=v)])
    assert_close(s, np.sinh(x.astype(np.float64)), 1e-6)
    assert_close(c, np.cosh(x.astype(np.float64)), 1e-6)
    assert_close(t, np.arctanh(y.astype(np.float64)), 1e-6)


def test_inverse_trig_is_refused_with_its_reason(tmp_path: Path) -> None:
    _refused(lambda b, v: b.acos(x=v), {"x": np.zeros((2,), np.float32)}, "no inverse trigonometric", tmp=tmp_path)


# -- l2_pool, reductions, sign, identity -------------------------------------------------------------

def _l2_pool_numpy(x: np.ndarray, k: tuple[int, int], s: tuple[int, int], pads: tuple[int, int, int, int],
                   outs: tuple[int, int]) -> np.ndarray:
    """sqrt of the sum of squares over each window of the zero-padded input (MIL l2_pool); windows past
    the padded end (ceil_mode) see zeros too."""
    t, b_, l_, r = pads
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (t, b_ + k[0]), (l_, r + k[1])])
    y = np.zeros(x.shape[:2] + outs)
    for i in range(outs[0]):
        for j in range(outs[1]):
            win = xp[:, :, i * s[0]:i * s[0] + k[0], j * s[1]:j * s[1] + k[1]]
            y[:, :, i, j] = np.sqrt(np.sum(win * win, axis=(2, 3)))
    return y


@pytest.mark.parametrize("layout", LAYOUTS)
def test_l2_pool(layout: str, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    x = RNG.standard_normal((1, 2, 7, 6)).astype(np.float32)
    valid, custom, ceil = _run(webnn_browser, tmp_path, layout, {"x": x}, lambda b, v: [
        b.l2_pool(x=v, kernel_sizes=[3, 2], strides=[2, 1], pad_type="valid"),
        b.l2_pool(x=v, kernel_sizes=[2, 3], strides=[1, 2], pad_type="custom", pad=[1, 0, 0, 2]),
        b.l2_pool(x=v, kernel_sizes=[2, 2], strides=[2, 3], pad_type="valid", ceil_mode=True)], nhwc=True)
    assert_close(valid, _l2_pool_numpy(x, (3, 2), (2, 1), (0, 0, 0, 0), (3, 5)))
    assert_close(custom, _l2_pool_numpy(x, (2, 3), (1, 2), (1, 0, 0, 2), (7, 3)))
    assert_close(ceil, _l2_pool_numpy(x, (2, 2), (2, 3), (0, 0, 0, 0), (4, 3)))  # MIL: ceil((n - k) / s) + 1


@pytest.mark.parametrize("layout", LAYOUTS)
def test_reduction_edge_cases(layout: str, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    x = (RNG.random((2, 3, 4, 5)) + 0.5).astype(np.float32)
    outs = _run(webnn_browser, tmp_path, layout, {"x": x}, lambda b, v: [
        b.reduce_sum(x=v),  # every axis, a scalar
        b.reduce_max(x=v, axes=[-1, 1], keep_dims=True),  # negative axes on an NHWC operand
        b.reduce_prod(x=v, axes=[2]),
        b.reduce_log_sum_exp(x=v, axes=[0, 3]),
        b.reduce_argmax(x=v, axis=-3, keep_dims=False),
        b.sign(x=b.sub(x=v, y=np.float32(1.0))),
        b.identity(x=v)], nhwc=True)
    x64 = x.astype(np.float64)
    wants = [x64.sum(), x64.max(axis=(3, 1), keepdims=True), x64.prod(axis=2),
             np.log(np.exp(x64).sum(axis=(0, 3))), np.argmax(x64, axis=1), np.sign(x64 - 1), x64]
    for got, want in zip(outs, wants):
        assert_close(got, want, 1e-5)
