"""resample / affine / crop_resize through the ONNX backend (GridSample), run by onnxruntime.

Oracles: torch.nn.functional.grid_sample (bilinear/nearest; zeros, border and reflection padding
with the align_corners that matches MIL's reflection rule) and affine_grid; MIL's constant padding
value and its 'symmetric' padding, and crop_resize's TF crop_and_resize sampling, written here
from the op documentation; our interpreter on the same program."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from .helpers import assert_close, only, op_types, program, run_both

RNG = np.random.default_rng(33)
X = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
GRID = (RNG.random((2, 3, 6, 2)) * 3 - 1.5).astype(np.float32)  # normalized, some outside [-1, 1]


def _resample(coords: np.ndarray, **kw):  # noqa: ANN003, ANN202
    params = dict(sampling_mode="bilinear", padding_mode="constant", padding_value=np.float32(0),
                  coordinates_mode="normalized_minus_one_to_one", align_corners=False)
    params.update(kw)
    feeds = {"x": X, "c": coords}
    return program(feeds, lambda b, x, c: b.resample(x=x, coordinates=c, **params)), feeds


def _torch(grid: np.ndarray, mode: str, padding: str, align: bool) -> np.ndarray:
    return F.grid_sample(torch.from_numpy(X), torch.from_numpy(grid), mode=mode, padding_mode=padding,
                         align_corners=align).numpy()


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("sampling", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding", ["constant", "border"])
def test_resample_matches_torch(align: bool, sampling: str, padding: str) -> None:
    prog, feeds = _resample(GRID, sampling_mode=sampling, padding_mode=padding, align_corners=align)
    got, interp = run_both(prog, feeds)
    want = _torch(GRID, sampling, "zeros" if padding == "constant" else "border", align)
    assert_close(only(got), want, 1e-5)
    assert_close(only(got), only(interp), 1e-5)
    assert "GridSample" in op_types(prog)


def test_resample_constant_padding_value() -> None:
    """Taps outside the image read padding_value (torch's zeros padding on x - v, plus v)."""
    prog, feeds = _resample(GRID, padding_value=np.float32(2.5))
    got, interp = run_both(prog, feeds)
    want = F.grid_sample(torch.from_numpy(X - 2.5), torch.from_numpy(GRID), align_corners=False).numpy() + 2.5
    assert_close(only(got), want, 1e-5)
    assert_close(only(got), only(interp), 1e-5)


def _unnormalize(grid: np.ndarray, align: bool) -> np.ndarray:
    """Normalized [-1, 1] (x, y) -> pixels of a [4, 5] image."""
    size = np.array([5, 4], np.float32)
    return ((grid + 1) / 2 * (size - 1) if align else ((grid + 1) * size - 1) / 2).astype(np.float32)


@pytest.mark.parametrize("coords", ["unnormalized", "normalized_zero_to_one"])
@pytest.mark.parametrize("align", [False, True])
def test_resample_coordinate_modes(coords: str, align: bool) -> None:
    c = _unnormalize(GRID, align) if coords == "unnormalized" else ((GRID + 1) / 2).astype(np.float32)
    prog, feeds = _resample(c, coordinates_mode=coords, align_corners=align)
    got, interp = run_both(prog, feeds)
    assert_close(only(got), _torch(GRID, "bilinear", "zeros", align), 1e-5)
    assert_close(only(got), only(interp), 1e-5)


def test_resample_reflection_mirrors_about_pixel_centres() -> None:
    """MIL 'reflection' = torch reflection with align_corners=True whatever the op's align_corners;
    the coordinates are pixels, so align_corners only changes nothing else here."""
    pixels = _unnormalize(GRID, True)
    prog, feeds = _resample(pixels, padding_mode="reflection", coordinates_mode="unnormalized", align_corners=False)
    got, interp = run_both(prog, feeds)
    assert_close(only(got), _torch(GRID, "bilinear", "reflection", True), 1e-5)
    assert_close(only(got), only(interp), 1e-5)


def test_resample_symmetric_mirrors_about_edges() -> None:
    """MIL 'symmetric' (|1 2 3| -> 2 1 |1 2 3| 3 2) = torch reflection with align_corners=False."""
    pixels = _unnormalize(GRID, False)
    prog, feeds = _resample(pixels, padding_mode="symmetric", coordinates_mode="unnormalized", align_corners=True)
    got, interp = run_both(prog, feeds)
    assert_close(only(got), _torch(GRID, "bilinear", "reflection", False), 1e-5)
    assert_close(only(got), only(interp), 1e-5)


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("rows", [1, 2])
def test_affine_matches_torch(align: bool, rows: int) -> None:
    theta = np.array([[0.9, -0.3, 0.2, 0.4, 1.1, -0.15], [1.2, 0.1, -0.3, -0.2, 0.8, 0.25]], np.float32)[:rows]
    prog = program({"x": X}, lambda b, x: b.affine(
        x=x, transform_matrix=theta, output_height=3, output_width=7, sampling_mode="bilinear",
        padding_mode="constant", padding_value=np.float32(0), coordinates_mode="normalized_minus_one_to_one",
        align_corners=align))
    got, interp = run_both(prog, {"x": X})
    t = torch.from_numpy(np.broadcast_to(theta, (2, 6)).reshape(2, 2, 3).copy())
    grid = F.affine_grid(t, [2, 3, 3, 7], align_corners=align)
    want = F.grid_sample(torch.from_numpy(X), grid, align_corners=align).numpy()
    assert_close(only(got), want, 1e-5)
    assert_close(only(got), only(interp), 1e-5)


def _crop_resize_formula(x: np.ndarray, box: np.ndarray, h: int, w: int, mode: str, pad: float) -> np.ndarray:
    """One image [C, H, W], one box (h1, w1, h2, w2) in pixels: TF crop_and_resize with MIL's sampling modes."""
    def pos(start: float, end: float, n_out: int) -> np.ndarray:
        i = np.arange(n_out, dtype=np.float64)
        ext = end - start
        if mode == "STRICT_ALIGN_CORNERS":
            return np.array([start]) if n_out == 1 else start + i * ext / (n_out - 1)
        if mode == "ALIGN_CORNERS":
            return np.array([(start + end) / 2]) if n_out == 1 else start + i * ext / (n_out - 1)
        p = {"DEFAULT": i * (ext + 1) / n_out, "OFFSET_CORNERS": (i + 0.5) * max(1.0, ext) / n_out,
             "UNALIGN_CORNERS": (i + 0.5) * (ext + 1) / n_out - 0.5}[mode]
        return np.clip(start + p, min(start, end), max(start, end))

    py, px = pos(box[0], box[2], h), pos(box[1], box[3], w)
    out = np.empty((x.shape[0], h, w))
    for a, yy in enumerate(py):
        for b, xx in enumerate(px):
            if not (0 <= yy <= x.shape[1] - 1 and 0 <= xx <= x.shape[2] - 1):
                out[:, a, b] = pad
                continue
            y0, x0 = int(np.floor(yy)), int(np.floor(xx))
            y1, x1 = min(y0 + 1, x.shape[1] - 1), min(x0 + 1, x.shape[2] - 1)
            fy, fx = yy - y0, xx - x0
            top = x[:, y0, x0] * (1 - fx) + x[:, y0, x1] * fx
            bottom = x[:, y1, x0] * (1 - fx) + x[:, y1, x1] * fx
            out[:, a, b] = top * (1 - fy) + bottom * fy
    return out


BOXES = np.array([[0.5, 1.0, 2.5, 3.75], [3.0, 4.0, -1.0, 0.5], [1.0, 0.2, 1.0, 4.5]], np.float32)  # h1 w1 h2 w2


@pytest.mark.parametrize("mode", ["STRICT_ALIGN_CORNERS", "ALIGN_CORNERS", "DEFAULT", "OFFSET_CORNERS",
                                  "UNALIGN_CORNERS"])
def test_crop_resize_ios17_sampling_modes(mode: str) -> None:
    indices = np.array([1, 0, 1], np.int32)
    feeds = {"x": X, "boxes": BOXES}
    prog = program(feeds, lambda b, x, boxes: b.crop_resize(
        x=x, boxes=boxes, box_indices=indices, target_height=3, target_width=4, sampling_mode=mode,
        pad_value=np.float32(-7.0)), opset="iOS17")
    got, interp = run_both(prog, feeds)
    want = np.stack([_crop_resize_formula(X[i], box, 3, 4, mode, -7.0) for i, box in zip(indices, BOXES)])
    assert_close(only(got), want, 1e-5)
    assert_close(only(got), only(interp), 1e-5)


def test_crop_resize_ios17_normalized_centre_size_width_first() -> None:
    boxes = np.array([[0.5, 0.4, 0.5, 0.6], [0.25, 0.75, 0.3, 0.2]], np.float32)  # (wc, hc, ww, hh), normalized
    feeds = {"x": X, "boxes": boxes}
    prog = program(feeds, lambda b, x, bx: b.crop_resize(
        x=x, boxes=bx, target_height=2, target_width=5, normalized_coordinates=True, spatial_scale=np.float32(1.0),
        box_coordinate_mode="CENTER_SIZE_WIDTH_FIRST", sampling_mode="ALIGN_CORNERS", pad_value=np.float32(0.5)),
        opset="iOS17")
    got, interp = run_both(prog, feeds)
    wc, hc, ww, hh = boxes.T
    corners = np.stack([(hc - hh / 2) * 3, (wc - ww / 2) * 4, (hc + hh / 2) * 3, (wc + ww / 2) * 4], axis=1)
    want = np.stack([_crop_resize_formula(X[i], box, 2, 5, "ALIGN_CORNERS", 0.5) for i, box in enumerate(corners)])
    assert_close(only(got), want, 1e-5)
    assert_close(only(got), only(interp), 1e-5)


@pytest.mark.parametrize("coords", [4, 5])
def test_crop_resize_ios16_roi(coords: int) -> None:
    """iOS16 roi [N, 1, 4|5, 1, 1]: 5 coordinates start with the image index (output [N, 1, C, h, w]);
    4 apply each box to every image (output [N, B, C, h, w])."""
    idx = np.array([[1.0], [0.0], [1.0]], np.float32)
    roi = (np.concatenate([idx, BOXES], axis=1) if coords == 5 else BOXES)[:, None, :, None, None]
    feeds = {"x": X, "roi": roi.astype(np.float32)}
    prog = program(feeds, lambda b, x, r: b.crop_resize(
        x=x, roi=r, target_height=3, target_width=2, spatial_scale=np.float32(0.8), sampling_mode="DEFAULT",
        pad_value=np.float32(1.5)), opset="iOS16")
    got, interp = run_both(prog, feeds)
    boxes = BOXES * np.float32(0.8)
    if coords == 5:
        want = np.stack([_crop_resize_formula(X[int(i)], box, 3, 2, "DEFAULT", 1.5) for i, box in zip(idx[:, 0], boxes)])
        want = want[:, None]
    else:
        want = np.stack([np.stack([_crop_resize_formula(X[b], box, 3, 2, "DEFAULT", 1.5) for b in range(2)])
                         for box in boxes])
    assert only(got).shape == want.shape
    assert_close(only(got), want, 1e-5)
    assert_close(only(got), only(interp), 1e-5)


def test_fp16_grid_sample_rounds_once() -> None:
    x = X.astype(np.float16)
    feeds = {"x": x, "c": GRID.astype(np.float16)}
    prog = program(feeds, lambda b, x, c: b.resample(
        x=x, coordinates=c, sampling_mode="bilinear", padding_mode="border", padding_value=np.float16(0),
        coordinates_mode="normalized_minus_one_to_one", align_corners=True), opset="iOS16")
    got, interp = run_both(prog, feeds)
    assert only(got).dtype == np.float16
    assert_close(only(got), only(interp), 2e-3)
