"""Resizing lowered to upsample / resizeBilinear / cropResize layers, written, read back by our NN
frontend and run. Oracles: torch ``F.interpolate`` (nearest, bilinear with align_corners True and
False = half-pixel centres) and, for the grids torch lacks, the sampling positions written here from
the MIL op documentation (DEFAULT: ``i * in / out``; ALIGN_CORNERS: corner to corner, one sample at
the centre; TF crop_and_resize for boxes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from converter.errors import UnsupportedError
from converter.formats.model_file import read_model_file
from tests.nn_backend.helpers import assert_close, layer_kinds, program, run_nn

RNG = np.random.default_rng(5)


def _r(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a))


def _run(tmp_path: Path, feeds: dict, body, opset: str = "iOS15") -> tuple[dict, Path]:  # type: ignore[no-untyped-def]
    path = tmp_path / "m.mlmodel"
    return run_nn(program(feeds, body, opset=opset), feeds, path), path


def _layer(path: Path):  # type: ignore[no-untyped-def]
    return read_model_file(path).model.neuralNetwork.layers[0]


def _spec(path: Path) -> int:
    return read_model_file(path).model.specificationVersion


def _lerp_rows(x: np.ndarray, axis: int, pos: np.ndarray) -> np.ndarray:
    """Linear interpolation along ``axis`` at positions in [0, n - 1] (float64 reference)."""
    n = x.shape[axis]
    lo = np.clip(np.floor(pos), 0, n - 1).astype(int)
    hi = np.minimum(lo + 1, n - 1)
    f = (pos - lo).reshape((-1,) + (1,) * (x.ndim - 1 - axis))
    return np.take(x, lo, axis=axis) * (1 - f) + np.take(x, hi, axis=axis) * f


def _bilinear(x: np.ndarray, out: tuple[int, int], grid) -> np.ndarray:  # type: ignore[no-untyped-def]
    y = x.astype(np.float64)
    for axis, m in zip((-2, -1), out):
        n = x.shape[axis]
        y = _lerp_rows(y, y.ndim + axis, grid(n, m))
    return y


def _default_grid(n: int, m: int) -> np.ndarray:  # TF's legacy resize: i * in / out
    return np.minimum(np.arange(m) * n / m, n - 1)


def _align_grid(n: int, m: int) -> np.ndarray:  # corner to corner; one sample sits at the centre
    return np.array([(n - 1) / 2]) if m == 1 else np.arange(m) * (n - 1) / (m - 1)


# -- upsample ops ----------------------------------------------------------------------------------


def test_upsample_nearest_neighbor_integer_factors(tmp_path: Path) -> None:
    x = _r(2, 3, 4, 5)
    got, path = _run(tmp_path, {"x": x}, lambda b, x: [b.upsample_nearest_neighbor(
        x=x, scale_factor_height=np.float32(2), scale_factor_width=np.float32(3), name="y")])
    assert_close(got["y"], F.interpolate(_t(x), scale_factor=(2, 3), mode="nearest").numpy())
    assert layer_kinds(path) == {"upsample": 1} and list(_layer(path).upsample.scalingFactor) == [2, 3]


def test_upsample_nearest_neighbor_by_one_over_an_integer_keeps_every_nth_pixel(tmp_path: Path) -> None:
    x = _r(1, 2, 7, 4)
    got, path = _run(tmp_path, {"x": x}, lambda b, x: [b.upsample_nearest_neighbor(
        x=x, scale_factor_height=np.float32(1 / 3), scale_factor_width=np.float32(2), name="y")])
    assert_close(got["y"], F.interpolate(_t(x), scale_factor=(1 / 3, 2), mode="nearest").numpy())
    assert layer_kinds(path) == {"sliceStatic": 1, "upsample": 1}


def test_fractional_nearest_upsampling_is_refused(tmp_path: Path) -> None:
    x = _r(1, 1, 4, 4)
    prog = program({"x": x}, lambda b, x: [b.upsample_nearest_neighbor(
        x=x, scale_factor_height=np.float32(1.5), scale_factor_width=np.float32(2), name="y")])
    with pytest.raises(UnsupportedError, match="integer"):
        run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")


@pytest.mark.parametrize("align", [True, False])
@pytest.mark.parametrize("scales", [(2.0, 3.0), (1.5, 2.5)])
def test_upsample_bilinear_align_corners_modes(tmp_path: Path, align: bool, scales: tuple[float, float]) -> None:
    x = _r(1, 2, 4, 6)
    got, path = _run(tmp_path, {"x": x}, lambda b, x: [b.upsample_bilinear(
        x=x, scale_factor_height=np.float32(scales[0]), scale_factor_width=np.float32(scales[1]),
        align_corners=align, name="y")])
    want = F.interpolate(_t(x), scale_factor=scales, mode="bilinear", align_corners=align,
                         recompute_scale_factor=True)
    assert_close(got["y"], want.numpy())
    up = _layer(path).upsample
    assert up.linearUpsampleMode == (up.ALIGN_CORNERS_TRUE if align else up.ALIGN_CORNERS_FALSE)
    assert _spec(path) == 5


def test_upsample_bilinear_without_half_pixel_centres_is_the_default_mode(tmp_path: Path) -> None:
    x = _r(1, 2, 3, 5)
    got, path = _run(tmp_path, {"x": x}, lambda b, x: [b.upsample_bilinear(
        x=x, scale_factor_height=np.float32(3), scale_factor_width=np.float32(2), align_corners=False,
        half_pixel_centers=False, name="y")], opset="iOS16")
    assert_close(got["y"], _bilinear(x, (9, 10), _default_grid))
    assert _layer(path).upsample.linearUpsampleMode == 0  # DEFAULT
    # fractional factors: Core ML allows them only with ALIGN_CORNERS_*, so a resizeBilinear
    got, path = _run(tmp_path, {"x": x}, lambda b, x: [b.upsample_bilinear(
        x=x, scale_factor_height=np.float32(1.5), scale_factor_width=np.float32(2.5), align_corners=False,
        half_pixel_centers=False, name="y")], opset="iOS16")
    assert_close(got["y"], _bilinear(x, (4, 12), _default_grid))
    assert layer_kinds(path) == {"resizeBilinear": 1}


# -- resize ops ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["STRICT_ALIGN_CORNERS", "ALIGN_CORNERS", "DEFAULT"])
def test_resize_bilinear_sampling_modes(tmp_path: Path, mode: str) -> None:
    x = _r(2, 3, 5, 7)
    out = (8, 4) if mode == "DEFAULT" else (8, 1)  # ALIGN_CORNERS and STRICT differ at size 1 only
    got, path = _run(tmp_path, {"x": x}, lambda b, x: [b.resize_bilinear(
        x=x, target_size_height=out[0], target_size_width=out[1], sampling_mode=mode, name="y")])
    if mode == "STRICT_ALIGN_CORNERS":
        want = F.interpolate(_t(x), size=out, mode="bilinear", align_corners=True).numpy()
    else:
        want = _bilinear(x, out, _align_grid if mode == "ALIGN_CORNERS" else _default_grid)
    assert_close(got["y"], want)
    assert layer_kinds(path) == {"resizeBilinear": 1}
    assert _spec(path) == 4


def test_resize_bilinear_half_pixel_is_an_upsample_by_the_size_ratio(tmp_path: Path) -> None:
    x = _r(1, 2, 5, 7)
    got, path = _run(tmp_path, {"x": x}, lambda b, x: [b.resize_bilinear(
        x=x, target_size_height=8, target_size_width=4, sampling_mode="UNALIGN_CORNERS", name="y")])
    assert_close(got["y"], F.interpolate(_t(x), size=(8, 4), mode="bilinear", align_corners=False).numpy())
    assert layer_kinds(path) == {"upsample": 1}


def test_resize_nearest_neighbor_integer_up_and_downscaling_and_refusal(tmp_path: Path) -> None:
    x = _r(1, 2, 3, 4)
    got, path = _run(tmp_path, {"x": x}, lambda b, x: [b.resize_nearest_neighbor(
        x=x, target_size_height=9, target_size_width=8, name="y")])
    assert_close(got["y"], F.interpolate(_t(x), size=(9, 8), mode="nearest-exact").numpy())
    assert list(_layer(path).upsample.scalingFactor) == [3, 2]
    x = _r(1, 2, 12, 8)  # downscaling by 4 and 2: pixels f // 2 + i * f
    got, path = _run(tmp_path, {"x": x}, lambda b, x: [b.resize_nearest_neighbor(
        x=x, target_size_height=3, target_size_width=4, name="y")])
    assert_close(got["y"], F.interpolate(_t(x), size=(3, 4), mode="nearest-exact").numpy())
    assert layer_kinds(path) == {"sliceStatic": 1}
    prog = program({"x": x}, lambda b, x: [b.resize_nearest_neighbor(x=x, target_size_height=5, target_size_width=8,
                                                                     name="y")])
    with pytest.raises(UnsupportedError, match="integer factors"):
        run_nn(prog, {"x": x}, tmp_path / "n.mlmodel")


def test_resize_ios17_linear_and_nearest(tmp_path: Path) -> None:
    x = _r(1, 2, 4, 5)
    got, path = _run(tmp_path, {"x": x}, lambda b, x: [b.resize(
        x=x, shape=np.array([7, 0], np.int32), resized_dims=np.uint32(2), interpolation_mode="LINEAR",
        sampling_mode="STRICT_ALIGN_CORNERS", name="y")], opset="iOS17")
    assert_close(got["y"], F.interpolate(_t(x), size=(7, 5), mode="bilinear", align_corners=True).numpy())
    assert layer_kinds(path) == {"resizeBilinear": 1}
    got, path = _run(tmp_path, {"x": x}, lambda b, x: [b.resize(
        x=x, shape=np.array([8, 10], np.int32), resized_dims=np.uint32(2), interpolation_mode="NEAREST_NEIGHBOR",
        sampling_mode="DEFAULT", name="y")], opset="iOS17")
    assert_close(got["y"], F.interpolate(_t(x), size=(8, 10), mode="nearest").numpy())
    assert layer_kinds(path) == {"upsample": 1}


# -- crop_resize -----------------------------------------------------------------------------------


def _tf_crop_and_resize(image: np.ndarray, box: np.ndarray, out: tuple[int, int]) -> np.ndarray:
    """TF crop_and_resize of [C, H, W] at a pixel box (y1, x1, y2, x2), extrapolating with 0."""
    c, h, w = image.shape
    ys = _align_grid_box(box[0], box[2], out[0])
    xs = _align_grid_box(box[1], box[3], out[1])
    res = np.zeros((c, *out))
    for i, yy in enumerate(ys):
        for j, xx in enumerate(xs):
            if not (0 <= yy <= h - 1 and 0 <= xx <= w - 1):
                continue
            y0, x0 = int(np.floor(yy)), int(np.floor(xx))
            y1, x1 = min(y0 + 1, h - 1), min(x0 + 1, w - 1)
            fy, fx = yy - y0, xx - x0
            top = image[:, y0, x0] * (1 - fx) + image[:, y0, x1] * fx
            bottom = image[:, y1, x0] * (1 - fx) + image[:, y1, x1] * fx
            res[:, i, j] = top * (1 - fy) + bottom * fy
    return res


def _align_grid_box(start: float, end: float, m: int) -> np.ndarray:
    return np.array([(start + end) / 2]) if m == 1 else start + np.arange(m) * (end - start) / (m - 1)


def test_crop_resize_with_image_indices(tmp_path: Path) -> None:
    x = _r(2, 3, 6, 7)
    # [N, 1, 5, 1, 1]: image index, then (x1, y1, x2, y2) as CORNERS_WIDTH_FIRST, in pixels scaled by 0.5
    boxes = np.array([[1, 2, 1, 10, 8], [0, 0, 2, 6, 10]], np.float32)
    roi = boxes.reshape(2, 1, 5, 1, 1)
    got, path = _run(tmp_path, {"x": x, "roi": roi}, lambda b, x, roi: [b.crop_resize(
        x=x, roi=roi, target_height=3, target_width=4, normalized_coordinates=False, spatial_scale=np.float32(0.5),
        box_coordinate_mode="CORNERS_WIDTH_FIRST", sampling_mode="ALIGN_CORNERS", name="y")])
    want = np.stack([_tf_crop_and_resize(x[int(bx[0])], 0.5 * bx[[2, 1, 4, 3]], (3, 4)) for bx in boxes])[:, None]
    assert_close(got["y"], want)
    assert layer_kinds(path) == {"expandDims": 1, "cropResize": 1}


def test_crop_resize_ios17_boxes_and_indices(tmp_path: Path) -> None:
    x = _r(2, 2, 5, 6)
    boxes = np.array([[0.1, 0.2, 0.9, 0.7], [0.0, 0.5, 0.6, 1.0], [0.3, 0.0, 0.8, 0.4]], np.float32)
    idx = np.array([1, 0, 1], np.int32)
    got, path = _run(tmp_path, {"x": x, "boxes": boxes, "idx": idx}, lambda b, x, bx, i: [b.crop_resize(
        x=x, boxes=bx, box_indices=i, target_height=4, target_width=2, normalized_coordinates=True,
        sampling_mode="ALIGN_CORNERS", name="y")], opset="iOS17")
    scale = np.array([4, 5, 4, 5], np.float64)  # normalized: times (H - 1, W - 1)
    want = np.stack([_tf_crop_and_resize(x[k], bx * scale, (4, 2)) for bx, k in zip(boxes, idx)])
    assert_close(got["y"], want)
    assert layer_kinds(path)["cropResize"] == 1 and layer_kinds(path)["squeeze"] == 1


def test_resize_ios17_of_the_last_axis_only(tmp_path: Path) -> None:
    x = _r(2, 3, 6)
    got, path = _run(tmp_path, {"x": x}, lambda b, x: [b.resize(
        x=x, shape=np.array([9], np.int32), resized_dims=np.uint32(1), interpolation_mode="LINEAR",
        sampling_mode="DEFAULT", name="y")], opset="iOS17")
    want = _lerp_rows(x.astype(np.float64), 2, _default_grid(6, 9))  # H (3) is not resampled
    assert_close(got["y"], want)
    assert layer_kinds(path) == {"resizeBilinear": 1}
    prog = program({"x": x}, lambda b, x: [b.resize(
        x=x, shape=np.array([9], np.int32), resized_dims=np.uint32(1), interpolation_mode="LINEAR",
        sampling_mode="OFFSET_CORNERS", name="y")], opset="iOS17")
    with pytest.raises(UnsupportedError, match="OFFSET_CORNERS"):
        run_nn(prog, {"x": x}, tmp_path / "n.mlmodel")
