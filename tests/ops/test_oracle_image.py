"""Image resampling and spatial rearrangement against onnxruntime and PyTorch.

How MIL's conventions map onto the oracles:
- resize_bilinear / resize sampling modes -> ONNX Resize coordinate_transformation_mode:
  STRICT_ALIGN_CORNERS = align_corners, ALIGN_CORNERS = align_corners (one output: half_pixel, the
  centre), DEFAULT = asymmetric, UNALIGN_CORNERS = half_pixel; OFFSET_CORNERS = ONNX RoiAlign over
  the whole image (output_half_pixel, one sample per bin: steps of max(1, in - 1) / out from half a
  step in).
- crop_resize: (STRICT_)ALIGN_CORNERS per box = ONNX Resize tf_crop_and_resize (TF's
  crop_and_resize, extrapolation = pad_value); OFFSET_CORNERS = ONNX RoiAlign (output_half_pixel,
  one sample per bin).
- resample: PyTorch grid_sample after mapping the coordinates to pixels; Core ML's 'reflection'
  is torch's reflection with align_corners=True, 'symmetric' with align_corners=False (the
  pairing coremltools uses), a constant c is ``grid_sample(x - c) + c`` with zero padding.
"""

from __future__ import annotations

import zlib

import numpy as np
import onnx
import pytest
import torch
from onnx import helper

from converter.ir.interpreter import run
from converter.ir.symexpr import evaluate
from converter.ir.types import Symbol, TensorType, dtype
from tests.oracles.onnx_oracle import run_onnx, run_onnx_node

from .harness import Case, assert_close, build_program, run_op

ORACLE = {
    "resize_bilinear": "onnxruntime Resize (linear; align_corners / asymmetric / half_pixel), onnxruntime RoiAlign",
    "resize_nearest_neighbor": "PyTorch interpolate mode='nearest-exact'",
    "upsample_bilinear": "PyTorch interpolate bilinear (size=..., align_corners); onnxruntime Resize asymmetric",
    "upsample_nearest_neighbor": "PyTorch interpolate nearest (scale_factor, recompute_scale_factor=False)",
    "resize": "onnxruntime Resize and RoiAlign (linear, also int32); PyTorch interpolate nearest-exact",
    "crop": "onnxruntime Slice",
    "crop_resize": "onnxruntime Resize tf_crop_and_resize per box, onnxruntime RoiAlign",
    "resample": "PyTorch grid_sample",
    "affine": "PyTorch affine_grid + grid_sample",
    "pixel_shuffle": "PyTorch pixel_shuffle",
    "pixel_unshuffle": "PyTorch pixel_unshuffle",
    "depth_to_space": "onnxruntime DepthToSpace mode DCR",
    "space_to_depth": "onnxruntime SpaceToDepth",
    "space_to_batch": "onnxruntime graph of TF's SpaceToBatchND steps (Pad, Reshape, Transpose, Reshape)",
    "batch_to_space": "onnxruntime graph of TF's BatchToSpaceND steps (Reshape, Transpose, Reshape, Slice)",
    "pad": "onnxruntime Pad (constant / reflect / edge), PyTorch F.pad",
    "sliding_windows": "PyTorch Tensor.unfold",
}

_MODES = ("STRICT_ALIGN_CORNERS", "ALIGN_CORNERS", "DEFAULT", "OFFSET_CORNERS", "UNALIGN_CORNERS")
_FP16 = dict(rtol=2e-3, atol=2e-3)
_FP32 = dict(rtol=1e-5, atol=1e-5)


def _rng(key: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(key.encode()))


def _tol(dt) -> dict:
    return _FP16 if np.dtype(dt) == np.float16 else _FP32


def _ort_resize(x: np.ndarray, sizes: tuple[int, ...], ctm: str, *, mode: str = "linear",
                roi: np.ndarray | None = None, **attrs) -> np.ndarray:
    """ONNX Resize of a 4-D array to ``sizes`` (N and C unchanged)."""
    inits = {"sizes": np.array(x.shape[:2] + tuple(sizes), np.int64)}
    order = ["x", "", "", "sizes"]
    if roi is not None:
        inits["roi"] = roi.astype(np.float32)
        order[1] = "roi"
    return run_onnx_node("Resize", {"x": x}, {"mode": mode, "coordinate_transformation_mode": ctm, **attrs},
                         initializers=inits, input_order=order)[0]


def _ort_linear(x4: np.ndarray, mode: str, oh: int, ow: int) -> np.ndarray:
    """The MIL sampling mode on the last two dims of a 4-D fp32 array, through ONNX Resize."""
    h, w = x4.shape[2:]
    if mode == "OFFSET_CORNERS":  # RoI Align over the whole image, one sample per bin
        rois = np.tile(np.array([0, 0, w - 1, h - 1], np.float32), (len(x4), 1))
        return run_onnx_node("RoiAlign", {"x": x4}, {"mode": "avg", "output_height": oh, "output_width": ow,
                                                     "sampling_ratio": 1, "coordinate_transformation_mode":
                                                     "output_half_pixel"},
                             initializers={"rois": rois, "batch_indices": np.arange(len(x4))})[0]
    ctm = {"STRICT_ALIGN_CORNERS": "align_corners", "ALIGN_CORNERS": "align_corners", "DEFAULT": "asymmetric",
           "UNALIGN_CORNERS": "half_pixel"}[mode]
    if mode == "ALIGN_CORNERS" and 1 in (oh, ow):
        # one sample sits at the centre: half_pixel's (in - 1) / 2; resize each axis on its own
        y = x4
        for axis, n in ((2, oh), (3, ow)):
            sizes = (n, y.shape[3]) if axis == 2 else (y.shape[2], n)
            y = _ort_resize(y, sizes, "half_pixel" if n == 1 else "align_corners")
        return y
    return _ort_resize(x4, (oh, ow), ctm)


# ---------------------------------------------------------------------------------------------
# resize_bilinear, resize, upsample_*, resize_nearest_neighbor


_SIZES = [((5, 4), (9, 7)), ((6, 8), (4, 3)), ((4, 5), (1, 1)), ((1, 3), (3, 5)), ((3, 3), (3, 3))]


@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("in_hw,out_hw", _SIZES, ids=[f"{a[0]}x{a[1]}-to-{b[0]}x{b[1]}" for a, b in _SIZES])
@pytest.mark.parametrize("mode", _MODES)
def test_resize_bilinear_vs_onnxruntime(mode: str, in_hw: tuple, out_hw: tuple, dt: str):
    x = _rng(f"{mode}{in_hw}{dt}").standard_normal((2, 3) + in_hw).astype(dt)
    got = run_op("resize_bilinear", {"x": x}, {"target_size_height": out_hw[0], "target_size_width": out_hw[1],
                                               "sampling_mode": mode})[0]
    want = _ort_linear(x.astype(np.float32), mode, *out_hw)
    assert got.dtype == np.dtype(dt)
    assert_close(got, want.astype(dt), **_tol(dt), what=mode)


@pytest.mark.parametrize("shape", [(6, 4), (2, 2, 3, 4, 5)], ids=["rank2-batch", "rank5"])
def test_resize_bilinear_any_leading_rank_and_special_values(shape):
    x = _rng(str(shape)).standard_normal((2,) + shape).astype(np.float32)
    x.reshape(-1)[[0, 5, 9]] = [np.nan, np.inf, -np.inf]
    got = run_op("resize_bilinear", {"x": x}, {"target_size_height": 7, "target_size_width": 3,
                                               "sampling_mode": "UNALIGN_CORNERS"})[0]
    x4 = x.reshape((-1, 1) + x.shape[-2:])
    want = _ort_resize(x4, (7, 3), "half_pixel").reshape(x.shape[:-2] + (7, 3))
    assert_close(got, want, **_FP32)


def _torch_nearest_exact(x: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    x4 = torch.from_numpy(x.astype(np.float32).reshape((-1, 1) + x.shape[-2:]))
    y = torch.nn.functional.interpolate(x4, size=size, mode="nearest-exact").numpy()
    return y.reshape(x.shape[:-2] + size).astype(x.dtype)


@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("in_hw,out_hw", _SIZES + [((7, 5), (3, 2)), ((4, 4), (10, 6))])
def test_resize_nearest_neighbor_vs_torch(in_hw: tuple, out_hw: tuple, dt: str):
    x = _rng(f"nn{in_hw}{out_hw}").standard_normal((1, 2, 3) + in_hw).astype(dt)
    got = run_op("resize_nearest_neighbor", {"x": x}, {"target_size_height": out_hw[0],
                                                       "target_size_width": out_hw[1]})[0]
    np.testing.assert_array_equal(got, _torch_nearest_exact(x, out_hw))


@pytest.mark.parametrize("sh,sw", [(2, 3), (1.5, 2.5), (0.5, 0.7), (1.0, 0.34), (2.2, 1.0)])
def test_upsample_nearest_neighbor_vs_torch(sh, sw):
    x = _rng(f"unn{sh}{sw}").standard_normal((2, 3, 5, 7)).astype(np.float32)
    got = run_op("upsample_nearest_neighbor", {"x": x}, {"scale_factor_height": sh, "scale_factor_width": sw})[0]
    scales = (float(np.float32(sh)), float(np.float32(sw)))  # the const holds fp32 (or int32) values
    want = torch.nn.functional.interpolate(torch.from_numpy(x), scale_factor=scales, mode="nearest",
                                           recompute_scale_factor=False).numpy()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("align", [True, False])
@pytest.mark.parametrize("sh,sw", [(2, 3), (1.5, 2.5), (0.5, 0.75), (1.0, 1.7)])
def test_upsample_bilinear_vs_torch(sh, sw, align: bool, dt: str):
    x = _rng(f"ub{sh}{sw}{align}").standard_normal((2, 3, 4, 6)).astype(dt)
    params = {"scale_factor_height": float(sh), "scale_factor_width": float(sw), "align_corners": align}
    got = run_op("upsample_bilinear", {"x": x}, params)[0]
    size = (int(np.floor(4 * np.float32(sh))), int(np.floor(6 * np.float32(sw))))
    want = torch.nn.functional.interpolate(torch.from_numpy(x.astype(np.float32)), size=size, mode="bilinear",
                                           align_corners=align).numpy()
    assert_close(got, want.astype(dt), **_tol(dt))


@pytest.mark.parametrize("sh,sw", [(2, 3), (1.5, 0.5)])
def test_upsample_bilinear_iOS16_legacy_vs_onnxruntime(sh, sw):
    """half_pixel_centers=False without align_corners: TF's legacy ``i * in / out`` (ONNX asymmetric)."""
    x = _rng(f"legacy{sh}").standard_normal((1, 2, 4, 6)).astype(np.float32)
    got = run_op("upsample_bilinear", {"x": x}, {"scale_factor_height": float(sh), "scale_factor_width": float(sw),
                                                 "align_corners": False, "half_pixel_centers": False},
                 opset="iOS16")[0]
    want = _ort_resize(x, (int(4 * sh), int(6 * sw)), "asymmetric")
    assert_close(got, want, **_FP32)
    default = run_op("upsample_bilinear", {"x": x}, {"scale_factor_height": float(sh),
                                                     "scale_factor_width": float(sw), "align_corners": False},
                     opset="iOS16")[0]
    assert_close(default, _ort_resize(x, (int(4 * sh), int(6 * sw)), "half_pixel"), **_FP32)


@pytest.mark.parametrize("mode", _MODES)
@pytest.mark.parametrize("resized_dims,shape", [(2, [3, 0, 7]), (1, [6]), (2, [5, 2])])
def test_resize_iOS17_linear_vs_onnxruntime(mode: str, resized_dims: int, shape: list[int]):
    x = _rng(f"r17{mode}{shape}").standard_normal((2, 3, 4, 5)).astype(np.float32)
    got = run_op("resize", {"x": x, "shape": np.array(shape, np.int32)},
                 {"resized_dims": np.uint32(resized_dims), "sampling_mode": mode}, opset="iOS17")[0]
    tail = shape[-resized_dims:]
    oh, ow = (tail[0] or 4, tail[1] or 5) if resized_dims == 2 else (4, tail[0])
    if resized_dims == 1:  # one axis: the height keeps its size (4 -> 4 is the identity in every mode but OFFSET)
        want = _ort_linear(x.reshape(6, 1, 4, 5).transpose(0, 2, 1, 3).reshape(24, 1, 1, 5), mode, 1, ow)
        want = want.reshape(6, 4, ow).reshape(2, 3, 4, ow)
    else:
        want = _ort_linear(x, mode, oh, ow)
    assert_close(got, want, **_FP32, what=mode)


def test_resize_iOS17_int32_vs_onnxruntime():
    """int32 linear results truncate toward zero, as onnxruntime's integer Resize does (half-step grids
    keep every weight exact, so both sides truncate the same real value)."""
    x = _rng("r17int").integers(-100, 100, (1, 2, 3, 4)).astype(np.int32)
    got = run_op("resize", {"x": x}, {"shape": [5, 7], "resized_dims": np.uint32(2),
                                      "sampling_mode": "ALIGN_CORNERS"}, opset="iOS17")[0]
    want = _ort_resize(x, (5, 7), "align_corners")
    assert (want != np.floor(want.astype(np.float32))).sum() == 0 and (got < 0).any()
    np.testing.assert_array_equal(got, want)


def test_resize_iOS17_nearest_vs_torch():
    x = _rng("r17nn").standard_normal((1, 2, 5, 4)).astype(np.float16)
    got = run_op("resize", {"x": x, "shape": np.array([1, 3, 9], np.int32)},
                 {"resized_dims": np.uint32(2), "interpolation_mode": "NEAREST_NEIGHBOR"}, opset="iOS17")[0]
    np.testing.assert_array_equal(got, _torch_nearest_exact(x, (3, 9)))


def test_resize_symbolic_shape_gives_fresh_symbols():
    x = np.zeros((1, 2, 3, 4), np.float32)
    case = Case("resize", {"x": x, "shape": np.array([5, 6], np.int32)}, {"resized_dims": np.uint32(1)},
                opset="iOS17")
    prog, feeds = build_program(case)
    shape = prog.main.outputs[0].type.shape
    assert shape[:3] == (1, 2, 3) and isinstance(shape[3], Symbol)
    assert list(run(prog, feeds).values())[0].shape == (1, 2, 3, 6)


# ---------------------------------------------------------------------------------------------
# crop, crop_resize


def test_crop_vs_onnxruntime():
    x = _rng("crop").standard_normal((2, 3, 6, 7)).astype(np.float16)
    got = run_op("crop", {"x": x}, {"crop_height": [1, 2], "crop_width": [3, 0]})[0]
    want = run_onnx_node("Slice", {"x": x}, initializers={"starts": np.array([1, 3]), "ends": np.array([4, 7]),
                                                          "axes": np.array([2, 3])})[0]
    np.testing.assert_array_equal(got, want)


def _ort_crop_and_resize(image: np.ndarray, corners: np.ndarray, out_hw: tuple[int, int],
                         pad_value: float) -> np.ndarray:
    """TF crop_and_resize of a [C, H, W] image over a pixel box (h1, w1, h2, w2)."""
    h, w = image.shape[1:]
    h1, w1, h2, w2 = corners
    roi = np.array([0, 0, h1 / (h - 1), w1 / (w - 1), 1, 1, h2 / (h - 1), w2 / (w - 1)])
    return _ort_resize(image[None].astype(np.float32), out_hw, "tf_crop_and_resize", roi=roi,
                       extrapolation_value=float(pad_value))[0]


def _ort_roi_align(image: np.ndarray, corners: np.ndarray, out_hw: tuple[int, int]) -> np.ndarray:
    h1, w1, h2, w2 = corners
    rois = np.array([[w1, h1, w2, h2]], np.float32)
    return run_onnx_node("RoiAlign", {"x": image[None].astype(np.float32)},
                         {"mode": "avg", "output_height": out_hw[0], "output_width": out_hw[1], "sampling_ratio": 1,
                          "spatial_scale": 1.0, "coordinate_transformation_mode": "output_half_pixel"},
                         initializers={"rois": rois, "batch_indices": np.array([0], np.int64)})[0][0]


def _to_mode(corners: np.ndarray, mode: str) -> np.ndarray:
    """(h1, w1, h2, w2) boxes written in box_coordinate_mode ``mode``."""
    h1, w1, h2, w2 = corners.T
    if mode.startswith("CENTER_SIZE"):
        h1, w1, h2, w2 = (h1 + h2) / 2, (w1 + w2) / 2, h2 - h1, w2 - w1
    rows = [w1, h1, w2, h2] if mode.endswith("WIDTH_FIRST") else [h1, w1, h2, w2]
    return np.stack(rows, axis=1).astype(np.float32)


_CORNERS = np.array([[0.5, 1.0, 4.5, 5.0], [3.2, 4.0, 1.0, 0.5], [-1.0, 2.0, 6.5, 7.5], [1.0, 1.0, 2.0, 2.0]],
                    np.float32)  # in range, inverted, partly outside, small
_INSIDE = np.array([[0.5, 1.0, 4.5, 5.0], [1.2, 0.3, 3.9, 2.1], [0.0, 0.0, 5.0, 6.0]], np.float32)


@pytest.mark.parametrize("opset", ["iOS15", "iOS16", "iOS17"])
@pytest.mark.parametrize("sampling", ["ALIGN_CORNERS", "STRICT_ALIGN_CORNERS", "OFFSET_CORNERS"])
@pytest.mark.parametrize("box_mode", ["CORNERS_HEIGHT_FIRST", "CORNERS_WIDTH_FIRST", "CENTER_SIZE_HEIGHT_FIRST",
                                      "CENTER_SIZE_WIDTH_FIRST"])
def test_crop_resize_vs_onnxruntime(box_mode: str, sampling: str, opset: str):
    rng = _rng(f"cr{box_mode}{sampling}{opset}")
    x = rng.standard_normal((2, 3, 6, 7)).astype(np.float32)
    corners = _INSIDE if sampling == "OFFSET_CORNERS" else _CORNERS
    out_hw = (3, 4) if sampling != "ALIGN_CORNERS" else (1, 3)
    pad_value = -2.5 if opset != "iOS15" else 0.0
    normalized = opset == "iOS16"
    boxes = _to_mode(corners, box_mode) / (np.array([5, 6, 5, 6] if not box_mode.endswith("WIDTH_FIRST")
                                                    else [6, 5, 6, 5], np.float32) if normalized else 1)
    indices = np.arange(len(corners)) % 2
    params = {"target_height": out_hw[0], "target_width": out_hw[1], "box_coordinate_mode": box_mode,
              "sampling_mode": sampling, "normalized_coordinates": normalized}
    if opset != "iOS15":
        params["pad_value"] = pad_value
    if opset == "iOS17":
        got = run_op("crop_resize", {"x": x, "boxes": boxes, "box_indices": indices.astype(np.int32)}, params,
                     opset=opset)[0]
    else:
        roi = np.concatenate([indices[:, None].astype(np.float32), boxes], axis=1).reshape(-1, 1, 5, 1, 1)
        got = run_op("crop_resize", {"x": x, "roi": roi}, params, opset=opset)[0][:, 0]
    for n, (i, box) in enumerate(zip(indices, corners)):
        if sampling == "OFFSET_CORNERS":
            want = _ort_roi_align(x[i], box, out_hw)
        else:
            want = _ort_crop_and_resize(x[i], box, out_hw, pad_value)
        assert_close(got[n], want, rtol=1e-5, atol=1e-5, what=f"box {n}")


def test_crop_resize_every_box_on_every_image_and_spatial_scale_vs_onnxruntime():
    """iOS15 roi [N, 1, 4, 1, 1]: output [N, B, C, h, w]; spatial_scale multiplies the coordinates."""
    x = _rng("cr4").standard_normal((3, 2, 5, 6)).astype(np.float16)
    roi = (_INSIDE[:2] * 2).reshape(2, 1, 4, 1, 1)
    got = run_op("crop_resize", {"x": x, "roi": roi.astype(np.float16)},
                 {"target_height": 4, "target_width": 2, "spatial_scale": 0.5, "sampling_mode": "ALIGN_CORNERS"})[0]
    assert got.shape == (2, 3, 2, 4, 2) and got.dtype == np.float16
    for n in range(2):
        for b in range(3):
            want = _ort_crop_and_resize(x[b], _INSIDE[n], (4, 2), 0.0)
            assert_close(got[n, b], want.astype(np.float16), **_FP16)


@pytest.mark.parametrize("mode", _MODES)
def test_crop_resize_whole_image_box_is_resize_bilinear(mode: str):
    """crop_resize samples boxes "with the same convention as resize_bilinear": a box spanning the
    image resizes it. This reaches DEFAULT and UNALIGN_CORNERS, which no oracle expresses for boxes."""
    x = _rng(f"whole{mode}").standard_normal((2, 3, 5, 6)).astype(np.float32)
    boxes = np.array([[0, 0, 4, 5], [0, 0, 4, 5]], np.float32)
    got = run_op("crop_resize", {"x": x, "boxes": boxes}, {"target_height": 7, "target_width": 4,
                                                           "sampling_mode": mode}, opset="iOS17")[0]
    assert_close(got, _ort_linear(x, mode, 7, 4), **_FP32)


def test_crop_resize_iOS17_default_indices_and_uint16_boxes_vs_onnxruntime():
    x = _rng("cr17").standard_normal((2, 3, 6, 7)).astype(np.float32)
    boxes = np.array([[1, 2, 4, 6], [0, 0, 5, 3]], np.uint16)
    got = run_op("crop_resize", {"x": x, "boxes": boxes}, {"target_height": 3, "target_width": 3,
                                                           "sampling_mode": "STRICT_ALIGN_CORNERS"}, opset="iOS17")[0]
    for n in range(2):
        assert_close(got[n], _ort_crop_and_resize(x[n], boxes[n].astype(np.float32), (3, 3), 0.0), **_FP32)


# ---------------------------------------------------------------------------------------------
# resample, affine


def _pixels(c: np.ndarray, size: int, mode: str, align: bool) -> np.ndarray:
    """The documented coordinate conventions, as pixel coordinates (0 = first pixel centre)."""
    c = c.astype(np.float64)
    if mode == "unnormalized":
        return c
    if mode == "normalized_zero_to_one":
        return c * (size - 1) if align else c * size - 0.5
    return (c + 1) / 2 * (size - 1) if align else ((c + 1) * size - 1) / 2


def _torch_resample(x, cx, cy, sampling, padding, pad_value, coords, align):
    torch_align = {"reflection": True, "symmetric": False}.get(padding, align)
    grid = []
    for c, size in ((cx, x.shape[3]), (cy, x.shape[2])):
        p = _pixels(c, size, coords, align)
        grid.append(2 * p / (size - 1) - 1 if torch_align else (2 * p + 1) / size - 1)
    grid = torch.from_numpy(np.stack(grid, axis=-1).astype(np.float32))
    mode = {"constant": "zeros", "border": "border", "reflection": "reflection", "symmetric": "reflection"}[padding]
    shift = pad_value if padding == "constant" else 0.0
    y = torch.nn.functional.grid_sample(torch.from_numpy(x.astype(np.float32)) - shift, grid, mode=sampling,
                                        padding_mode=mode, align_corners=torch_align)
    return (y + shift).numpy()


_COORDS = {"unnormalized": (-2.5, 8.5), "normalized_minus_one_to_one": (-1.6, 1.6),
           "normalized_zero_to_one": (-0.4, 1.4)}


@pytest.mark.parametrize("align", [True, False])
@pytest.mark.parametrize("coords", sorted(_COORDS))
@pytest.mark.parametrize("padding", ["constant", "border", "reflection", "symmetric"])
@pytest.mark.parametrize("sampling", ["bilinear", "nearest"])
def test_resample_vs_torch_grid_sample(sampling: str, padding: str, coords: str, align: bool):
    rng = _rng(f"rs{sampling}{padding}{coords}{align}")
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    lo, hi = _COORDS[coords]
    c = rng.uniform(lo, hi, (2, 4, 7, 2)).astype(np.float32)
    params = {"sampling_mode": sampling, "padding_mode": padding, "padding_value": 0.75,
              "coordinates_mode": coords, "align_corners": align}
    got = run_op("resample", {"x": x, "coordinates": c}, params)[0]
    want = _torch_resample(x, c[..., 0], c[..., 1], sampling, padding, 0.75, coords, align)
    assert_close(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opset,cdt", [("iOS16", np.float16), ("iOS17", np.int16), ("iOS17", np.uint8),
                                       ("iOS15", np.int32)])
def test_resample_coordinate_dtypes_vs_torch(opset: str, cdt):
    rng = _rng(f"rsdt{opset}{np.dtype(cdt)}")
    x = rng.standard_normal((1, 2, 4, 5)).astype(np.float16)
    unnormalized = np.dtype(cdt).kind in "iu"
    c = (rng.integers(0, 6, (1, 3, 3, 2)) if unnormalized else rng.uniform(-1, 1, (1, 3, 3, 2))).astype(cdt)
    coords = "unnormalized" if unnormalized else "normalized_minus_one_to_one"
    params = {"sampling_mode": "bilinear", "padding_mode": "border", "padding_value": 0.0,
              "coordinates_mode": coords, "align_corners": True}
    got = run_op("resample", {"x": x, "coordinates": c}, params, opset=opset)[0]
    assert got.dtype == np.float16
    want = _torch_resample(x, c[..., 0], c[..., 1], "bilinear", "border", 0.0, coords, True)
    assert_close(got, want.astype(np.float16), **_FP16)


@pytest.mark.parametrize("padding,torch_padding,align", [("constant", "zeros", True), ("border", "border", False),
                                                         ("reflection", "reflection", True),
                                                         ("symmetric", "reflection", False)])
def test_resample_as_coremltools_maps_torch_grid_sample(padding, torch_padding, align):
    """Normalized [-1, 1] coordinates passed straight through, as coremltools converts grid_sample."""
    rng = _rng(f"direct{padding}{align}")
    x = rng.standard_normal((2, 3, 4, 7)).astype(np.float32)
    grid = rng.uniform(-2.5, 2.5, (2, 5, 3, 2)).astype(np.float32)
    got = run_op("resample", {"x": x, "coordinates": grid},
                 {"sampling_mode": "bilinear", "padding_mode": padding, "padding_value": 0.0,
                  "coordinates_mode": "normalized_minus_one_to_one", "align_corners": align})[0]
    want = torch.nn.functional.grid_sample(torch.from_numpy(x), torch.from_numpy(grid), padding_mode=torch_padding,
                                           align_corners=align)
    assert_close(got, want.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("rows", [1, 2])
@pytest.mark.parametrize("align", [True, False])
def test_affine_vs_torch_affine_grid(align: bool, rows: int):
    rng = _rng(f"affine{align}{rows}")
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    theta = (np.tile(np.eye(2, 3), (rows, 1, 1)) + rng.normal(0, 0.4, (rows, 2, 3))).astype(np.float32)
    got = run_op("affine", {"x": x, "transform_matrix": theta.reshape(rows, 6)},
                 {"output_height": 4, "output_width": 7, "sampling_mode": "bilinear", "padding_mode": "constant",
                  "padding_value": 0.0, "coordinates_mode": "normalized_minus_one_to_one", "align_corners": align})[0]
    grid = torch.nn.functional.affine_grid(torch.from_numpy(np.broadcast_to(theta, (2, 2, 3)).copy()), [2, 3, 4, 7],
                                           align_corners=align)
    want = torch.nn.functional.grid_sample(torch.from_numpy(x), grid, align_corners=align).numpy()
    assert_close(got, want, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# Block rearrangements


@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("f", [1, 2, 3])
def test_pixel_shuffle_and_unshuffle_vs_torch(f: int, dt: str):
    x = _rng(f"ps{f}").standard_normal((2, 2 * f * f, 3, 4)).astype(dt)
    got = run_op("pixel_shuffle", {"x": x}, {"upscale_factor": f})[0]
    np.testing.assert_array_equal(got, torch.nn.functional.pixel_shuffle(torch.from_numpy(x), f).numpy())
    y = _rng(f"pu{f}").standard_normal((2, 3, 2 * f, 3 * f)).astype(dt)
    got = run_op("pixel_unshuffle", {"x": y}, {"downscale_factor": np.uint32(f)}, opset="iOS16")[0]
    np.testing.assert_array_equal(got, torch.nn.functional.pixel_unshuffle(torch.from_numpy(y), f).numpy())


@pytest.mark.parametrize("f", [1, 2, 3])
def test_depth_to_space_and_space_to_depth_vs_onnxruntime(f: int):
    x = _rng(f"d2s{f}").standard_normal((2, 3 * f * f, 2, 3)).astype(np.float32)
    got = run_op("depth_to_space", {"x": x}, {"block_size": f})[0]
    np.testing.assert_array_equal(got, run_onnx_node("DepthToSpace", {"x": x}, {"blocksize": f, "mode": "DCR"})[0])
    y = _rng(f"s2d{f}").standard_normal((2, 3, 2 * f, 4 * f)).astype(np.float16)
    got = run_op("space_to_depth", {"x": y}, {"block_size": f})[0]
    want = run_onnx_node("SpaceToDepth", {"x": y.astype(np.float32)}, {"blocksize": f})[0]
    np.testing.assert_array_equal(got, want.astype(np.float16))


def _const(name: str, value: list[int]) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(
        name, onnx.TensorProto.INT64, [len(value)], [int(v) for v in value]))


def _tf_space_to_batch(x: np.ndarray, block: list[int], pads: list[list[int]]) -> np.ndarray:
    """TF SpaceToBatchND, step by step as its documentation states, on NHWC, as an ONNX graph."""
    n, c, h, w = x.shape
    (bh, bw), ((p0, p1), (q0, q1)) = block, pads
    hp, wp = h + p0 + p1, w + q0 + q1
    nodes = [helper.make_node("Transpose", ["x"], ["nhwc"], perm=[0, 2, 3, 1]),
             _const("pads", [0, p0, q0, 0, 0, p1, q1, 0]), helper.make_node("Pad", ["nhwc", "pads"], ["padded"]),
             # 1. reshape to [batch, H/bh, bh, W/bw, bw, C]
             _const("s1", [n, hp // bh, bh, wp // bw, bw, c]), helper.make_node("Reshape", ["padded", "s1"], ["r1"]),
             # 2. permute to [bh, bw, batch, H/bh, W/bw, C]
             helper.make_node("Transpose", ["r1"], ["t1"], perm=[2, 4, 0, 1, 3, 5]),
             # 3. fold the block into the batch
             _const("s2", [bh * bw * n, hp // bh, wp // bw, c]), helper.make_node("Reshape", ["t1", "s2"], ["r2"]),
             helper.make_node("Transpose", ["r2"], ["out"], perm=[0, 3, 1, 2])]
    return run_onnx(nodes, {"x": x}, ["out"])[0]


def _tf_batch_to_space(x: np.ndarray, block: list[int], crops: list[list[int]]) -> np.ndarray:
    """TF BatchToSpaceND, step by step as its documentation states, on NHWC, as an ONNX graph."""
    nb, c, h, w = x.shape
    (bh, bw), ((c0, c1), (d0, d1)) = block, crops
    n = nb // (bh * bw)
    nodes = [helper.make_node("Transpose", ["x"], ["nhwc"], perm=[0, 2, 3, 1]),
             # 1. reshape to [bh, bw, batch / (bh bw), H, W, C]
             _const("s1", [bh, bw, n, h, w, c]), helper.make_node("Reshape", ["nhwc", "s1"], ["r1"]),
             # 2. permute to [batch / (bh bw), H, bh, W, bw, C]
             helper.make_node("Transpose", ["r1"], ["t1"], perm=[2, 3, 0, 4, 1, 5]),
             # 3. merge the blocks into H and W, 4. crop
             _const("s2", [n, h * bh, w * bw, c]), helper.make_node("Reshape", ["t1", "s2"], ["r2"]),
             _const("starts", [c0, d0]), _const("ends", [h * bh - c1, w * bw - d1]), _const("axes", [1, 2]),
             helper.make_node("Slice", ["r2", "starts", "ends", "axes"], ["cropped"]),
             helper.make_node("Transpose", ["cropped"], ["out"], perm=[0, 3, 1, 2])]
    return run_onnx(nodes, {"x": x}, ["out"])[0]


@pytest.mark.parametrize("block,amounts", [([2, 2], [[0, 0], [0, 0]]), ([2, 3], [[1, 1], [2, 1]]),
                                           ([1, 3], [[0, 0], [1, 2]]), ([3, 1], [[2, 1], [0, 0]])])
def test_space_to_batch_and_batch_to_space_vs_onnxruntime_tf_steps(block, amounts):
    rng = _rng(f"s2b{block}{amounts}")
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    got = run_op("space_to_batch", {"x": x}, {"block_shape": block, "paddings": amounts})[0]
    assert_close(got, _tf_space_to_batch(x, block, amounts), rtol=0, atol=0)
    y = rng.standard_normal((2 * block[0] * block[1], 3, 3, 4)).astype(np.float16)
    got = run_op("batch_to_space", {"x": y}, {"block_shape": block, "crops": amounts})[0]
    np.testing.assert_array_equal(got, _tf_batch_to_space(y.astype(np.float32), block, amounts).astype(np.float16))


# ---------------------------------------------------------------------------------------------
# pad, sliding_windows

_PADS = [
    ("constant-last2", (2, 3, 4, 5), [1, 2, 0, 3], "constant"),
    ("constant-all", (2, 3, 4), [0, 1, 2, 0, 1, 1], "constant"),
    ("reflect-max", (1, 2, 4, 5), [3, 1, 4, 4], "reflect"),
    ("reflect-last1", (3, 6), [2, 5], "reflect"),
    ("replicate", (1, 2, 3, 4), [3, 3, 0, 4], "replicate"),
    ("replicate-5d", (1, 2, 2, 3, 2), [1, 0, 1, 2, 2, 1], "replicate"),
]
_ONNX_PAD_MODE = {"constant": "constant", "reflect": "reflect", "replicate": "edge"}


@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("case_id,shape,pad,mode", _PADS, ids=[p[0] for p in _PADS])
def test_pad_vs_onnxruntime(case_id: str, shape: tuple, pad: list[int], mode: str, dt: str):
    x = _rng(case_id).standard_normal(shape).astype(dt)
    x.reshape(-1)[:3] = [np.nan, np.inf, -0.0]
    got = run_op("pad", {"x": x}, {"pad": pad, "mode": mode, "constant_val": -1.25})[0]
    full = [0] * (2 * len(shape) - len(pad)) + pad
    onnx_pads = np.array(full[0::2] + full[1::2], np.int64)
    want = run_onnx_node("Pad", {"x": x.astype(np.float32)}, {"mode": _ONNX_PAD_MODE[mode]}, initializers={
        "pads": onnx_pads, "value": np.array(-1.25, np.float32)})[0]
    np.testing.assert_array_equal(got, want.astype(dt))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want.astype(dt)))  # -0.0 and NaN kept as is


def test_pad_runtime_pad_vs_torch():
    """A run-time pad (every dim) gives fresh symbols; values as torch's 3-d reflect padding."""
    x = _rng("padrt").standard_normal((2, 3, 4)).astype(np.float32)
    case = Case("pad", {"x": x, "pad": np.array([0, 1, 2, 0, 1, 3], np.int32)}, {"mode": "reflect"})
    prog, feeds = build_program(case)
    assert all(isinstance(d, Symbol) for d in prog.main.outputs[0].type.shape)
    got = list(run(prog, feeds).values())[0]
    want = torch.nn.functional.pad(torch.from_numpy(x)[None, None], (1, 3, 2, 0, 0, 1), mode="reflect")[0, 0]
    assert_close(got, want.numpy())


@pytest.mark.parametrize("opset,dt", [("iOS15", np.float32), ("iOS15", np.int32), ("iOS17", np.bool_),
                                      ("iOS17", np.int8), ("iOS17", np.float16)])
@pytest.mark.parametrize("axis,size,stride", [(1, 3, 1), (-1, 2, 3), (0, 5, 2), (2, 7, 1)])
def test_sliding_windows_vs_torch_unfold(axis: int, size: int, stride: int, opset: str, dt):
    x = _rng(f"sw{axis}{size}").integers(-9, 9, (5, 6, 7)).astype(dt)
    got = run_op("sliding_windows", {"x": x}, {"axis": axis, "size": size, "stride": stride}, opset=opset)[0]
    want = torch.from_numpy(x).unfold(axis, size, stride).movedim(-1, axis % 3 + 1).numpy()
    np.testing.assert_array_equal(got, want)


def test_sliding_windows_symbolic_axis():
    x = np.zeros((2, 9, 3), np.float32)
    case = Case("sliding_windows", {"x": x}, {"axis": 1, "size": 4, "stride": 2},
                input_types={"x": TensorType(dtype("fp32"), (2, Symbol("L"), 3))})
    prog, feeds = build_program(case)
    shape = prog.main.outputs[0].type.shape
    L = Symbol("L")
    assert shape == (2, (L - 4) // 2 + 1, 4, 3)  # (L - size) // stride + 1
    assert list(run(prog, feeds).values())[0].shape == (2, 3, 4, 3) == tuple(evaluate(d, {"L": 9}) for d in shape)


# ---------------------------------------------------------------------------------------------
# Values written in the op documentation and in coremltools' Core ML-checked tests


_DOC_GRIDS = {  # resize_bilinear docstring: Xin = 2, x = [0, 1], so the output is the grid itself
    ("UNALIGN_CORNERS", 5): [0, 0.1, 0.5, 0.9, 1], ("STRICT_ALIGN_CORNERS", 5): [0, 0.25, 0.5, 0.75, 1],
    ("ALIGN_CORNERS", 5): [0, 0.25, 0.5, 0.75, 1], ("DEFAULT", 5): [0, 0.4, 0.8, 1, 1],
    ("OFFSET_CORNERS", 5): [0.1, 0.3, 0.5, 0.7, 0.9],
    ("UNALIGN_CORNERS", 6): [0, 0, 1 / 3, 2 / 3, 1, 1], ("ALIGN_CORNERS", 6): [0, 0.2, 0.4, 0.6, 0.8, 1],
    ("DEFAULT", 6): [0, 1 / 3, 2 / 3, 1, 1, 1], ("OFFSET_CORNERS", 6): [1 / 12, 0.25, 5 / 12, 7 / 12, 0.75, 11 / 12],
}


@pytest.mark.parametrize("mode,n", sorted(_DOC_GRIDS))
def test_resize_bilinear_documented_grids(mode: str, n: int):
    got = run_op("resize_bilinear", {"x": np.array([0, 1], np.float32).reshape(1, 1, 2)},
                 {"target_size_height": 1, "target_size_width": n, "sampling_mode": mode})[0]
    assert_close(got.reshape(-1), np.array(_DOC_GRIDS[(mode, n)], np.float32), rtol=0, atol=1e-6)


def test_crop_resize_coremltools_expected_values():
    """Expected outputs of coremltools' crop_resize tests (run on Core ML there)."""
    x = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)

    def crop(roi, h, w, normalized=False, **kw):
        return run_op("crop_resize", {"x": x, "roi": np.array(roi, np.float32).reshape(1, 1, -1, 1, 1)},
                      {"target_height": h, "target_width": w, "normalized_coordinates": normalized,
                       "sampling_mode": "ALIGN_CORNERS", **kw})[0].reshape(-1)

    assert_close(crop([1, 1, 2, 2], 2, 2), np.array([6, 7, 10, 11], np.float32))
    assert_close(crop([1, 1, 2, 2], 1, 1), np.array([8.5], np.float32))
    assert_close(crop([0, 0, 0, 1 / 3, 1 / 3], 2, 2, True), np.array([1, 2, 5, 6], np.float32))
    assert_close(crop([2, 2, 1, 1], 2, 2), np.array([11, 10, 7, 6], np.float32))
    assert_close(crop([1, 1, 2, 2], 4, 4)[:4], np.array([6, 19 / 3, 20 / 3, 7], np.float32))
    boxes = np.array([[0.1, 0.3, 1.3, 1.0], [0.5, 1.8, 1.0, 0.3], [0.0, 0.4, 0.6, 0.7]], np.float32)
    got = run_op("crop_resize", {"x": x, "boxes": boxes, "box_indices": np.zeros(3, np.int32)},
                 {"target_height": 2, "target_width": 2, "normalized_coordinates": True,
                  "sampling_mode": "ALIGN_CORNERS", "pad_value": 10.0}, opset="iOS17")[0]
    want = [3.1, 5.2, 10, 10, 10, 7.9, 10, 13.9, 2.2, 3.1, 9.4, 10.3]
    assert_close(got.reshape(-1), np.array(want, np.float32), rtol=1e-5, atol=1e-5)


def test_resize_nearest_coremltools_expected_values():
    x = np.array([-6.174, 9.371], np.float32).reshape(1, 1, 1, 2, 1)
    got = run_op("resize", {"x": x}, {"shape": [1, 1, 3, 2], "resized_dims": np.uint32(2),
                                      "interpolation_mode": "NEAREST_NEIGHBOR"}, opset="iOS17")[0]
    np.testing.assert_array_equal(got.reshape(-1), np.array([-6.174] * 2 + [9.371] * 4, np.float32))


def test_depth_to_space_neuralnetwork_spec_example():
    x = np.arange(1, 17, dtype=np.float32).reshape(1, 8, 1, 2)
    got = run_op("depth_to_space", {"x": x}, {"block_size": 2})[0]
    want = [[[1, 5, 2, 6], [9, 13, 10, 14]], [[3, 7, 4, 8], [11, 15, 12, 16]]]
    np.testing.assert_array_equal(got[0], np.array(want, np.float32))
