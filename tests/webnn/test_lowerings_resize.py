"""Resize family in the real browser's WebNN, both layouts, against oracles we did not write:
torch.nn.functional.interpolate where torch has the same rule (half-pixel and align-corners bilinear,
nearest with 1/scale, 'nearest-exact' = half-pixel nearest), else numpy formulas written here from the
MIL spec's sampling modes. Sizes are non-square and H/W scales differ, so swapped axes, swapped
align_corners or a wrong sampling mode fail."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from .browser_client import WebnnBrowser
from .lowering_util import LAYOUTS, assert_close, model_js, nhwc_source, run_program

RNG = np.random.default_rng(7)
X = RNG.standard_normal((2, 3, 5, 7)).astype(np.float32)


def _torch(x: np.ndarray, **kw) -> np.ndarray:  # noqa: ANN003
    return F.interpolate(torch.from_numpy(x), **kw).numpy()


def _bilinear(x: np.ndarray, pos_h: np.ndarray, pos_w: np.ndarray) -> np.ndarray:
    """Separable linear interpolation of the last two axes at source positions (in [0, n - 1])."""
    def along(a: np.ndarray, axis: int, pos: np.ndarray) -> np.ndarray:
        n = a.shape[axis]
        lo = np.floor(pos).astype(int)
        hi = np.minimum(lo + 1, n - 1)
        t = (pos - lo).reshape([-1 if i == axis % a.ndim else 1 for i in range(a.ndim)])
        return np.take(a, lo, axis=axis) * (1 - t) + np.take(a, hi, axis=axis) * t
    return along(along(x.astype(np.float64), -2, pos_h), -1, pos_w)


def _positions(mode: str, n: int, m: int) -> np.ndarray:
    """MIL resize_bilinear sampling modes (spec text), source position of each output index."""
    i = np.arange(m, dtype=np.float64)
    if mode in ("STRICT_ALIGN_CORNERS", "ALIGN_CORNERS"):
        if m == 1:
            return np.array([0.0 if mode == "STRICT_ALIGN_CORNERS" else (n - 1) / 2])
        return i * (n - 1) / (m - 1)
    if mode == "DEFAULT":
        p = i * n / m
    elif mode == "OFFSET_CORNERS":
        p = (i + 0.5) * max(1, n - 1) / m
    else:  # UNALIGN_CORNERS
        p = (i + 0.5) * n / m - 0.5
    return np.clip(p, 0, n - 1)


def _run(browser: WebnnBrowser, tmp: Path, layout: str, x: np.ndarray, make, opset: str = "iOS17"):  # noqa: ANN001, ANN202
    def body(b, xv):  # noqa: ANN001, ANN202
        src = nhwc_source(b, xv, x.shape[1]) if x.ndim == 4 and x.dtype == np.float32 else xv
        return make(b, src)
    folder = tmp / layout
    return run_program(browser, folder, {"x": x}, body, layout=layout, opset=opset)[0], model_js(folder)


SIZES = [(8, 4), (9, 14), (1, 3), (5, 7)]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("size", SIZES, ids=str)
@pytest.mark.parametrize("mode", ["DEFAULT", "STRICT_ALIGN_CORNERS", "ALIGN_CORNERS", "OFFSET_CORNERS",
                                  "UNALIGN_CORNERS"])
def test_resize_bilinear(mode: str, size: tuple[int, int], layout: str, webnn_browser: WebnnBrowser,
                         tmp_path: Path) -> None:
    h, w = size
    got, js = _run(webnn_browser, tmp_path, layout, X, lambda b, x: b.resize_bilinear(
        x=x, target_size_height=h, target_size_width=w, sampling_mode=mode))
    want = _bilinear(X, _positions(mode, 5, h), _positions(mode, 7, w))
    assert_close(got, want)
    if mode == "UNALIGN_CORNERS" and size != (1, 3):
        assert_close(got, _torch(X, size=(h, w), mode="bilinear", align_corners=False))
    if mode == "STRICT_ALIGN_CORNERS":
        assert_close(got, _torch(X, size=(h, w), mode="bilinear", align_corners=True))
    if layout == "nhwc":  # resized on the NHWC operand: transposes only into the conv and out of the graph
        assert js.count("builder.transpose(") == 2


@pytest.mark.parametrize("layout", LAYOUTS)
def test_resize_bilinear_rank5_and_rank3(layout: str, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    x5 = RNG.standard_normal((2, 1, 3, 4, 6)).astype(np.float32)
    got, _ = _run(webnn_browser, tmp_path, layout, x5, lambda b, x: b.resize_bilinear(
        x=x, target_size_height=7, target_size_width=3, sampling_mode="UNALIGN_CORNERS"))
    assert_close(got, _torch(x5.reshape(2, 3, 4, 6), size=(7, 3), mode="bilinear",
                             align_corners=False).reshape(2, 1, 3, 7, 3))
    x3 = RNG.standard_normal((3, 4, 6)).astype(np.float32)
    got, _ = _run(webnn_browser, tmp_path / "r3", layout, x3, lambda b, x: b.resize_bilinear(
        x=x, target_size_height=2, target_size_width=9, sampling_mode="STRICT_ALIGN_CORNERS"))
    assert_close(got, _torch(x3[None], size=(2, 9), mode="bilinear", align_corners=True)[0])


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("scales", [(2.0, 3.0), (3.0, 2.0), (1.5, 2.5)], ids=str)
@pytest.mark.parametrize("align", [True, False])
def test_upsample_bilinear(align: bool, scales: tuple[float, float], layout: str, webnn_browser: WebnnBrowser,
                           tmp_path: Path) -> None:
    got, js = _run(webnn_browser, tmp_path, layout, X, lambda b, x: b.upsample_bilinear(
        x=x, scale_factor_height=scales[0], scale_factor_width=scales[1], align_corners=align), opset="iOS15")
    size = (int(5 * scales[0]), int(7 * scales[1]))
    assert_close(got, _torch(X, size=size, mode="bilinear", align_corners=align))
    if not align:  # half-pixel: WebNN's own resample2d
        assert "builder.resample2d(" in js and 'mode: "linear"' in js


@pytest.mark.parametrize("layout", LAYOUTS)
def test_upsample_bilinear_legacy_tf_mode(layout: str, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    got, _ = _run(webnn_browser, tmp_path, layout, X, lambda b, x: b.upsample_bilinear(
        x=x, scale_factor_height=2.0, scale_factor_width=1.5, align_corners=False, half_pixel_centers=False),
        opset="iOS16")
    assert_close(got, _bilinear(X, _positions("DEFAULT", 5, 10), _positions("DEFAULT", 7, 10)))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("scales", [(2.0, 3.0), (3.0, 1.0), (1.5, 2.5), (0.5, 2.0)], ids=str)
def test_upsample_nearest_neighbor(scales: tuple[float, float], layout: str, webnn_browser: WebnnBrowser,
                                   tmp_path: Path) -> None:
    x = RNG.standard_normal((1, 2, 6, 5)).astype(np.float32)
    got, js = _run(webnn_browser, tmp_path, layout, x, lambda b, v: b.upsample_nearest_neighbor(
        x=v, scale_factor_height=scales[0], scale_factor_width=scales[1]))
    assert_close(got, _torch(x, scale_factor=scales, mode="nearest", recompute_scale_factor=False), 0.0)
    if scales in ((2.0, 3.0), (3.0, 1.0)):
        assert "builder.resample2d(" in js


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("size", [(8, 3), (12, 10), (3, 2), (9, 7)], ids=str)
def test_resize_nearest_neighbor(size: tuple[int, int], layout: str, webnn_browser: WebnnBrowser,
                                 tmp_path: Path) -> None:
    x = RNG.standard_normal((1, 2, 6, 5)).astype(np.float32)
    got, _ = _run(webnn_browser, tmp_path, layout, x, lambda b, v: b.resize_nearest_neighbor(
        x=v, target_size_height=size[0], target_size_width=size[1]))
    assert_close(got, _torch(x, size=size, mode="nearest-exact"), 0.0)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_resize_ios17(layout: str, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    got, _ = _run(webnn_browser, tmp_path / "a", layout, X, lambda b, x: b.resize(
        x=x, shape=np.array([9, 4], np.int32), resized_dims=2, interpolation_mode="LINEAR",
        sampling_mode="UNALIGN_CORNERS"))
    assert_close(got, _torch(X, size=(9, 4), mode="bilinear", align_corners=False))
    got, _ = _run(webnn_browser, tmp_path / "b", layout, X, lambda b, x: b.resize(
        x=x, shape=np.array([7, 3], np.int32), resized_dims=2, interpolation_mode="NEAREST_NEIGHBOR",
        sampling_mode="DEFAULT"))
    assert_close(got, _torch(X, size=(7, 3), mode="nearest-exact"), 0.0)
    got, _ = _run(webnn_browser, tmp_path / "c", layout, X, lambda b, x: b.resize(
        x=x, shape=np.array([11], np.int32), resized_dims=1, interpolation_mode="LINEAR",
        sampling_mode="STRICT_ALIGN_CORNERS"))
    assert_close(got, _torch(X.reshape(6, 5, 7), size=11, mode="linear", align_corners=True).reshape(2, 3, 5, 11))
    # 0 keeps a size: only W is resized
    got, _ = _run(webnn_browser, tmp_path / "d", layout, X, lambda b, x: b.resize(
        x=x, shape=np.array([0, 3], np.int32), resized_dims=2, interpolation_mode="LINEAR",
        sampling_mode="DEFAULT"))
    assert_close(got, _bilinear(X, np.arange(5.0), _positions("DEFAULT", 7, 3)))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_resize_linear_int32_truncates(layout: str, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    xi = RNG.integers(-50, 50, (1, 2, 3, 4)).astype(np.int32)
    got, _ = _run(webnn_browser, tmp_path, layout, xi, lambda b, x: b.resize(
        x=x, shape=np.array([5, 7], np.int32), resized_dims=2, interpolation_mode="LINEAR",
        sampling_mode="STRICT_ALIGN_CORNERS"))
    want = np.trunc(_bilinear(xi, _positions("STRICT_ALIGN_CORNERS", 3, 5), _positions("STRICT_ALIGN_CORNERS", 4, 7)))  # steps of 0.5: exact in fp32
    np.testing.assert_array_equal(got.reshape(want.shape), want)
