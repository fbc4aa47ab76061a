"""Resizing through the ONNX backend, run by onnxruntime.

Oracles: torch.nn.functional.interpolate (bilinear align_corners=True/False with the output size,
nearest with a scale factor, nearest-exact), and the MIL sampling modes written here from the op
documentation (positions over [0, n - 1], clamped; linear interpolation between floor and floor + 1)
for the modes torch has no equivalent of; our interpreter on the same program. Sizes are
non-square, up and down, so a swapped axis or mode shows.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import converter
from converter.ir.builder import new_program
from converter.ir.types import Symbol, TensorType, dtype

from .helpers import assert_close, only, op_types, program, run_both, run_onnx

RNG = np.random.default_rng(21)
X = RNG.standard_normal((2, 3, 4, 6)).astype(np.float32)


def positions(mode: str, n: int, m: int) -> np.ndarray:
    """Where MIL's sampling mode puts m samples over an axis of n pixels (clamped to [0, n - 1])."""
    i = np.arange(m, dtype=np.float64)
    if mode in ("STRICT_ALIGN_CORNERS", "ALIGN_CORNERS"):
        if m == 1:
            return np.array([0.0 if mode == "STRICT_ALIGN_CORNERS" else (n - 1) / 2])
        p = i * (n - 1) / (m - 1)
    elif mode == "DEFAULT":
        p = i * n / m
    elif mode == "OFFSET_CORNERS":
        p = (i + 0.5) * max(1, n - 1) / m
    else:  # UNALIGN_CORNERS: half-pixel centres
        p = (i + 0.5) * n / m - 0.5
    return np.clip(p, 0, n - 1)


def bilinear(x: np.ndarray, mode: str, h: int, w: int) -> np.ndarray:
    y = x.astype(np.float64)
    for axis, m in ((-2, h), (-1, w)):
        n = y.shape[axis]
        p = positions(mode, n, m)
        lo = np.floor(p).astype(int)
        hi = np.minimum(lo + 1, n - 1)
        t = (p - lo).reshape((-1, 1) if axis == -2 else (-1,))
        y = np.take(y, lo, axis=axis) * (1 - t) + np.take(y, hi, axis=axis) * t
    return y


MODES = ["STRICT_ALIGN_CORNERS", "ALIGN_CORNERS", "DEFAULT", "OFFSET_CORNERS", "UNALIGN_CORNERS"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("size", [(7, 3), (1, 9), (2, 1)])
def test_resize_bilinear_sampling_modes(mode: str, size: tuple[int, int]) -> None:
    prog = program({"x": X}, lambda b, x: b.resize_bilinear(x=x, target_size_height=size[0],
                                                            target_size_width=size[1], sampling_mode=mode))
    got, interp = run_both(prog, {"x": X})
    assert_close(only(got), bilinear(X, mode, *size), 1e-5)
    assert_close(only(got), only(interp), 1e-5)
    uses_resize = "Resize" in op_types(prog)
    assert uses_resize == (mode != "OFFSET_CORNERS" and not (mode == "ALIGN_CORNERS" and 1 in size))


@pytest.mark.parametrize("align", [True, False])
def test_resize_bilinear_matches_torch(align: bool) -> None:
    mode = "STRICT_ALIGN_CORNERS" if align else "UNALIGN_CORNERS"
    prog = program({"x": X}, lambda b, x: b.resize_bilinear(x=x, target_size_height=9, target_size_width=4,
                                                            sampling_mode=mode))
    want = F.interpolate(torch.from_numpy(X), size=(9, 4), mode="bilinear", align_corners=align).numpy()
    assert_close(only(run_onnx(prog, {"x": X})), want, 1e-5)


@pytest.mark.parametrize("shape", [(3, 4, 6), (1, 1, 3, 4, 6)])
def test_resize_bilinear_other_ranks(shape: tuple[int, ...]) -> None:
    """Rank 3 and the rank-5 [1, 1, C, H, W] NeuralNetwork layers give (DeepLabV3)."""
    x = RNG.standard_normal(shape).astype(np.float32)
    prog = program({"x": x}, lambda b, x: b.resize_bilinear(x=x, target_size_height=7, target_size_width=11,
                                                            sampling_mode="STRICT_ALIGN_CORNERS"))
    got, interp = run_both(prog, {"x": x})
    assert_close(only(got), bilinear(x, "STRICT_ALIGN_CORNERS", 7, 11), 1e-5)
    assert only(got).shape == shape[:-2] + (7, 11)
    assert_close(only(got), only(interp), 1e-5)


@pytest.mark.parametrize("align,half", [(True, False), (False, True), (False, False)])
def test_upsample_bilinear_modes(align: bool, half: bool) -> None:
    prog = program({"x": X}, lambda b, x: b.upsample_bilinear(x=x, scale_factor_height=2.5, scale_factor_width=1.5,
                                                              align_corners=align, half_pixel_centers=half),
                   opset="iOS16")
    got, interp = run_both(prog, {"x": X})
    mode = "STRICT_ALIGN_CORNERS" if align else "UNALIGN_CORNERS" if half else "DEFAULT"
    assert only(got).shape == (2, 3, 10, 9)
    assert_close(only(got), bilinear(X, mode, 10, 9), 1e-5)
    assert_close(only(got), only(interp), 1e-5)
    if mode != "DEFAULT":  # torch recomputes the positions from the sizes, as MIL does
        want = F.interpolate(torch.from_numpy(X), scale_factor=(2.5, 1.5), mode="bilinear", align_corners=align,
                             recompute_scale_factor=True).numpy()
        assert_close(only(got), want, 1e-5)


@pytest.mark.parametrize("scales", [(2.0, 3.0), (1.5, 0.5), (3.0, 1.0)])
def test_upsample_nearest_matches_torch(scales: tuple[float, float]) -> None:
    prog = program({"x": X}, lambda b, x: b.upsample_nearest_neighbor(
        x=x, scale_factor_height=scales[0], scale_factor_width=scales[1]))
    got, interp = run_both(prog, {"x": X})
    want = F.interpolate(torch.from_numpy(X), scale_factor=scales, mode="nearest").numpy()
    np.testing.assert_array_equal(only(got), want)
    np.testing.assert_array_equal(only(got), only(interp))


@pytest.mark.parametrize("size", [(7, 4), (3, 13), (1, 2)])
def test_resize_nearest_neighbor_is_half_pixel(size: tuple[int, int]) -> None:
    prog = program({"x": X}, lambda b, x: b.resize_nearest_neighbor(x=x, target_size_height=size[0],
                                                                    target_size_width=size[1]))
    got, interp = run_both(prog, {"x": X})
    want = F.interpolate(torch.from_numpy(X), size=size, mode="nearest-exact").numpy()
    np.testing.assert_array_equal(only(got), want)
    np.testing.assert_array_equal(only(got), only(interp))


def _symbolic_program(body, opset: str = "iOS17"):  # noqa: ANN001, ANN202
    t = TensorType(dtype("fp32"), (Symbol("n"), 3, Symbol("h"), Symbol("w")))
    return new_program([("x", t)], body, opset=opset)


def test_symbolic_sizes_go_through_resize() -> None:
    """Input sizes known only at run time: Resize with sizes computed from Shape."""
    prog = _symbolic_program(lambda b, x: [
        b.upsample_nearest_neighbor(x=x, scale_factor_height=2.0, scale_factor_width=3.0, name="near"),
        b.upsample_bilinear(x=x, scale_factor_height=2.0, scale_factor_width=1.5, align_corners=False, name="lin"),
        b.resize_nearest_neighbor(x=x, target_size_height=5, target_size_width=3, name="hp")])
    got, interp = run_both(prog, {"x": X})
    np.testing.assert_array_equal(got["near"], X.repeat(2, axis=2).repeat(3, axis=3))
    assert_close(got["lin"], bilinear(X, "UNALIGN_CORNERS", 8, 9), 1e-5)
    want = F.interpolate(torch.from_numpy(X), size=(5, 3), mode="nearest-exact").numpy()
    np.testing.assert_array_equal(got["hp"], want)
    for k in interp:
        assert_close(got[k], interp[k], 1e-5)


@pytest.mark.parametrize("interp_mode", ["LINEAR", "NEAREST_NEIGHBOR"])
@pytest.mark.parametrize("runtime_shape", [False, True])
def test_resize_with_shape(interp_mode: str, runtime_shape: bool) -> None:
    """resize reads the sizes from the end of `shape`, 0 keeping the input's size."""
    shape = np.array([2, 3, 0, 10], np.int32)
    feeds = {"x": X, "s": shape} if runtime_shape else {"x": X}

    def body(b, x, s=None):  # noqa: ANN001, ANN202
        return b.resize(x=x, shape=s if runtime_shape else shape, resized_dims=np.uint32(2),
                        interpolation_mode=interp_mode, sampling_mode="UNALIGN_CORNERS")

    prog = program(feeds, body, opset="iOS17")
    got, interp = run_both(prog, feeds)
    if interp_mode == "LINEAR":
        want = bilinear(X, "UNALIGN_CORNERS", 4, 10)
    else:
        want = F.interpolate(torch.from_numpy(X), size=(4, 10), mode="nearest-exact").numpy()
    assert_close(only(got), want, 1e-5)
    assert_close(only(got), only(interp), 1e-5)


def test_resize_one_dim_offset_corners() -> None:
    """resized_dims 1: only the last dim is resampled (OFFSET_CORNERS would move the others)."""
    prog = program({"x": X}, lambda b, x: b.resize(x=x, shape=np.array([5], np.int32), resized_dims=np.uint32(1),
                                                   interpolation_mode="LINEAR", sampling_mode="OFFSET_CORNERS"),
                   opset="iOS17")
    got, interp = run_both(prog, {"x": X})
    p = positions("OFFSET_CORNERS", 6, 5)
    lo = np.floor(p).astype(int)
    want = X[..., lo] * (1 - (p - lo)) + X[..., np.minimum(lo + 1, 5)] * (p - lo)
    assert_close(only(got), want, 1e-5)
    assert_close(only(got), only(interp), 1e-5)


def test_resize_int32_linear_truncates() -> None:
    """3 -> 5 with aligned corners: weights 0, 1/2 (exact in fp32), so truncation sees exact halves
    and quarters, negative ones included."""
    x = (RNG.standard_normal((1, 2, 3, 3)) * 50).astype(np.int32)
    prog = program({"x": x}, lambda b, x: b.resize(x=x, shape=np.array([5, 5], np.int32), resized_dims=np.uint32(2),
                                                   interpolation_mode="LINEAR", sampling_mode="ALIGN_CORNERS"),
                   opset="iOS17")
    got, interp = run_both(prog, {"x": x})
    np.testing.assert_array_equal(only(got), np.trunc(bilinear(x, "ALIGN_CORNERS", 5, 5)).astype(np.int32))
    np.testing.assert_array_equal(only(got), only(interp))


def test_fp16_is_rounded_once() -> None:
    x = X.astype(np.float16)
    prog = program({"x": x}, lambda b, x: b.resize_bilinear(x=x, target_size_height=5, target_size_width=7,
                                                            sampling_mode="OFFSET_CORNERS"), opset="iOS16")
    got, interp = run_both(prog, {"x": x})
    assert only(got).dtype == np.float16
    assert_close(only(got), bilinear(x.astype(np.float32), "OFFSET_CORNERS", 5, 7), 1e-3)
    np.testing.assert_array_equal(only(got), only(interp))


def test_opset_17_resize() -> None:
    prog = program({"x": X}, lambda b, x: b.resize_bilinear(x=x, target_size_height=5, target_size_width=2,
                                                            sampling_mode="DEFAULT"))
    assert_close(only(run_onnx(prog, {"x": X}, opset=17)), bilinear(X, "DEFAULT", 5, 2), 1e-5)
    assert_close(only(run_onnx(prog, {"x": X}, opset=17)), only(converter.run(prog, {"x": X})), 1e-5)
