"""Image resampling and spatial rearrangement.

Resizing (resize, resize_bilinear, resize_nearest_neighbor, upsample_*), cropping (crop,
crop_resize), grid sampling (resample, affine), block rearrangement (pixel_shuffle,
pixel_unshuffle, depth_to_space, space_to_depth, space_to_batch, batch_to_space), pad and
sliding_windows.

Interpolating kernels compute coordinates and values in fp32 (fp16 inputs widened) and round
once to the output dtype, as PyTorch and onnxruntime do.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..opdef import EvalArgs, InferArgs, OpDef, register
from ..shapes import dim_op, never_positive, normalize_axis
from ..symexpr import floordiv
from ..types import Dim, TensorType, Type, fresh_symbol, is_static_dim
from ._util import as_int_list
from .conv import str_param

_F32 = np.float32


def _int(a: InferArgs | EvalArgs, name: str) -> int:
    return int(np.asarray(a.value(name)).reshape(-1)[0])


def _float(a: InferArgs | EvalArgs, name: str) -> float:
    return float(np.asarray(a.value(name)).reshape(-1)[0])


def _bool(a: InferArgs | EvalArgs, name: str) -> bool:
    return bool(np.asarray(a.value(name)).reshape(-1)[0])


def _choice(a: InferArgs | EvalArgs, name: str, allowed: tuple[str, ...]) -> str:
    value = str_param(a, name)
    if value not in allowed:
        raise a.fail(f"{name} must be one of {', '.join(allowed)}, got '{value}'")
    return value


def _min_rank(a: InferArgs, name: str, rank: int) -> TensorType:
    t = a.tensor_type(name)
    if t.shape is not None and len(t.shape) < rank:
        raise a.fail(f"{name} must have rank >= {rank}, got shape {list(t.shape)}")
    return t


def _rank(a: InferArgs, name: str, rank: int) -> TensorType:
    t = a.tensor_type(name)
    if t.shape is not None and len(t.shape) != rank:
        raise a.fail(f"{name} must have rank {rank}, got shape {list(t.shape)}")
    return t


def _unknown_dims(n: int) -> tuple[Dim, ...]:
    """Dims of a tensor of known rank whose shape is unknown: independent fresh symbols."""
    return tuple(fresh_symbol() for _ in range(n))


def _with_last2(t: TensorType, h: Dim, w: Dim) -> TensorType:
    return TensorType(t.dtype, None if t.shape is None else tuple(t.shape[:-2]) + (h, w))


def _positive(a: InferArgs | EvalArgs, **sizes: int) -> None:
    for name, n in sizes.items():
        if n < 1:
            raise a.fail(f"{name} must be positive, got {n}")


def _out(a: EvalArgs, y: np.ndarray) -> list[Any]:
    return [np.ascontiguousarray(y).astype(a.out_types[0].dtype.storage, copy=False)]


# ---------------------------------------------------------------------------------------------
# Sampling grids and linear interpolation


SAMPLING_MODES = ("STRICT_ALIGN_CORNERS", "ALIGN_CORNERS", "DEFAULT", "OFFSET_CORNERS", "UNALIGN_CORNERS")


def sampling_grid(mode: str, start: float, end: float, n_out: int) -> np.ndarray:
    """Positions of ``n_out`` samples over the pixel interval [start, end] (MIL's sampling modes).

    For a whole axis of ``n`` pixels the interval is [0, n - 1]; crop_resize uses a box. Modes:
    STRICT_ALIGN_CORNERS spans the interval (one sample: its start); ALIGN_CORNERS likewise but one
    sample sits at its centre; DEFAULT steps by ``n / n_out`` from the start (TF's legacy resize);
    OFFSET_CORNERS steps by ``max(1, n - 1) / n_out`` from half a step in (RoI Align);
    UNALIGN_CORNERS uses half-pixel centres. The last three are clamped to the interval.
    """
    i = np.arange(n_out, dtype=_F32)
    extent = _F32(end - start)
    if mode in ("STRICT_ALIGN_CORNERS", "ALIGN_CORNERS"):
        if n_out == 1:
            return np.array([start if mode == "STRICT_ALIGN_CORNERS" else (start + end) / 2], _F32)
        return _F32(start) + i * (extent / _F32(n_out - 1))
    if mode == "DEFAULT":
        pos = i * ((extent + 1) / _F32(n_out))
    elif mode == "OFFSET_CORNERS":
        delta = max(_F32(1), extent) / _F32(n_out)
        pos = (i + _F32(0.5)) * delta
    else:  # UNALIGN_CORNERS
        pos = (i + _F32(0.5)) * ((extent + 1) / _F32(n_out)) - _F32(0.5)
    return np.clip(_F32(start) + pos, min(start, end), max(start, end)).astype(_F32)


def lerp_axis(x: np.ndarray, axis: int, pos: np.ndarray) -> np.ndarray:
    """Linear interpolation of ``x`` along ``axis`` at positions within [0, size - 1]."""
    n = x.shape[axis]
    lo = np.clip(np.floor(pos), 0, n - 1).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    frac = (pos - lo).astype(_F32).reshape((-1,) + (1,) * (x.ndim - 1 - axis % x.ndim))
    with np.errstate(all="ignore"):  # inf and NaN propagate as IEEE says
        return np.take(x, lo, axis=axis) * (1 - frac) + np.take(x, hi, axis=axis) * frac


def _resize_linear(x: np.ndarray, sizes: dict[int, int], mode: str) -> np.ndarray:
    """Separable linear resize of the given axes to the given sizes."""
    y = x.astype(_F32)
    for axis, n_out in sizes.items():
        y = lerp_axis(y, axis, sampling_grid(mode, 0.0, float(x.shape[axis] - 1), n_out))
    return y


def half_pixel_nearest(n_in: int, n_out: int) -> np.ndarray:
    """Source index of each output index: ``floor((i + 0.5) * n_in / n_out)`` (TF half-pixel nearest,
    PyTorch 'nearest-exact')."""
    scale = _F32(n_in) / _F32(n_out)
    idx = np.floor((np.arange(n_out, dtype=_F32) + _F32(0.5)) * scale).astype(np.int64)
    return np.minimum(idx, n_in - 1)


def _gather_axes(x: np.ndarray, indices: dict[int, np.ndarray]) -> np.ndarray:
    for axis, idx in indices.items():
        x = np.take(x, idx, axis=axis)
    return x


# ---------------------------------------------------------------------------------------------
# Resizing


@register
class ResizeBilinear(OpDef):
    """Bilinear resize of the last two dims to a fixed size; sampling_mode places the samples."""

    op_type = "resize_bilinear"

    def infer(self, a: InferArgs) -> list[Type]:
        x = _min_rank(a, "x", 3)
        _choice(a, "sampling_mode", SAMPLING_MODES)
        h, w = _int(a, "target_size_height"), _int(a, "target_size_width")
        _positive(a, target_size_height=h, target_size_width=w)
        return [_with_last2(x, h, w)]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = np.asarray(a["x"])
        sizes = {x.ndim - 2: _int(a, "target_size_height"), x.ndim - 1: _int(a, "target_size_width")}
        return _out(a, _resize_linear(x, sizes, str_param(a, "sampling_mode")))


@register
class ResizeNearestNeighbor(OpDef):
    """Nearest-neighbour resize of the last two dims with half-pixel centres.

    Source index ``floor((i + 0.5) * in / out)``: coremltools produces this op for TF's
    ResizeNearestNeighbor(half_pixel_centers=True); for integer upscaling it equals every other
    nearest rule.
    """

    op_type = "resize_nearest_neighbor"

    def infer(self, a: InferArgs) -> list[Type]:
        x = _min_rank(a, "x", 3)
        h, w = _int(a, "target_size_height"), _int(a, "target_size_width")
        _positive(a, target_size_height=h, target_size_width=w)
        return [_with_last2(x, h, w)]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = np.asarray(a["x"])
        h, w = x.ndim - 2, x.ndim - 1
        idx = {h: half_pixel_nearest(x.shape[h], _int(a, "target_size_height")),
               w: half_pixel_nearest(x.shape[w], _int(a, "target_size_width"))}
        return _out(a, _gather_axes(x, idx))


class _Upsample(OpDef):
    """Scale the last two dims by constant factors: output ``floor(in * scale)``."""

    def _scales(self, a: InferArgs | EvalArgs) -> tuple[float, float]:
        sh, sw = _float(a, "scale_factor_height"), _float(a, "scale_factor_width")
        if sh <= 0 or sw <= 0:
            raise a.fail(f"scale factors must be positive, got {sh} and {sw}")
        return sh, sw

    @staticmethod
    def _scaled(n: Dim, scale: float) -> Dim:
        """``floor(n * scale)``; for a symbolic ``n``, ``(n * p) floordiv q`` when the scale is a
        dyadic fraction p/q with q <= 2**16 (then ``n * scale`` is exact in float64 and the kernel's
        floor agrees for any n below 2**36), else a fresh symbol."""
        if scale == 1:
            return n
        if is_static_dim(n):
            return int(np.floor(int(n) * scale))
        frac = Fraction(float(scale))
        if frac.denominator > 1 << 16:
            return fresh_symbol()
        return floordiv(n * frac.numerator, frac.denominator)

    def infer(self, a: InferArgs) -> list[Type]:
        x = _min_rank(a, "x", 3)
        sh, sw = self._scales(a)
        if x.shape is None:
            return [x]
        h, w = self._scaled(x.shape[-2], sh), self._scaled(x.shape[-1], sw)
        for d in (h, w):
            if never_positive(d):
                raise a.fail(f"scaling {list(x.shape[-2:])} by ({sh}, {sw}) leaves an empty dim")
        return [_with_last2(x, h, w)]

    def out_sizes(self, a: EvalArgs, x: np.ndarray) -> tuple[int, int]:
        sh, sw = self._scales(a)
        return int(np.floor(x.shape[-2] * sh)), int(np.floor(x.shape[-1] * sw))


@register
class UpsampleNearestNeighbor(_Upsample):
    """Nearest-neighbour upsampling by (possibly fractional) scale factors.

    Source index ``min(floor(i * (1 / scale)), in - 1)`` in fp32, as PyTorch computes
    ``interpolate(mode='nearest', scale_factor=s)``, which coremltools converts to this op.
    """

    op_type = "upsample_nearest_neighbor"

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = np.asarray(a["x"])
        idx = {}
        for axis, scale, n_out in zip((x.ndim - 2, x.ndim - 1), self._scales(a), self.out_sizes(a, x)):
            inv = _F32(1.0 / scale)
            src = np.floor(np.arange(n_out, dtype=_F32) * inv).astype(np.int64)
            idx[axis] = np.minimum(src, x.shape[axis] - 1)
        return _out(a, _gather_axes(x, idx))


@register
class UpsampleBilinear(_Upsample):
    """Bilinear upsampling; samples are placed from the actual sizes (PyTorch's
    ``recompute_scale_factor=True``).

    align_corners maps corner to corner (STRICT_ALIGN_CORNERS). Otherwise half_pixel_centers (iOS16,
    default ``not align_corners``) picks half-pixel centres (UNALIGN_CORNERS) or TF's legacy
    ``i * in / out`` (DEFAULT). Both flags true has no defined meaning (TF rejects it too).
    """

    op_type = "upsample_bilinear"

    def _mode(self, a: InferArgs | EvalArgs) -> str:
        align = _bool(a, "align_corners")
        half_pixel = not align if not a.has("half_pixel_centers") else _bool(a, "half_pixel_centers")
        if align and half_pixel:
            raise a.fail("align_corners and half_pixel_centers cannot both be true")
        return "STRICT_ALIGN_CORNERS" if align else "UNALIGN_CORNERS" if half_pixel else "DEFAULT"

    def infer(self, a: InferArgs) -> list[Type]:
        self._mode(a)
        return super().infer(a)

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = np.asarray(a["x"])
        sizes = dict(zip((x.ndim - 2, x.ndim - 1), self.out_sizes(a, x)))
        return _out(a, _resize_linear(x, sizes, self._mode(a)))


@register
class Resize(OpDef):
    """Resize the last ``resized_dims`` dims to sizes read at run time from the end of ``shape``
    (0 keeps the input size).

    LINEAR interpolates separably with sampling_mode's grid (int32 results truncate toward zero,
    as a C cast). NEAREST_NEIGHBOR uses resize_nearest_neighbor's half-pixel rule whatever the
    sampling_mode: coremltools maps TF's half-pixel nearest resize to it with DEFAULT.
    """

    op_type = "resize"
    _INTERPOLATION = ("LINEAR", "NEAREST_NEIGHBOR")

    def _check(self, a: InferArgs, x: TensorType, n_resized: int) -> None:
        shape_t = _rank(a, "shape", 1)
        k = shape_t.shape[0] if shape_t.shape is not None else None
        if is_static_dim(k) and n_resized > int(k):
            raise a.fail(f"resized_dims ({n_resized}) exceeds the length of shape ({k})")
        if x.shape is not None and (n_resized > len(x.shape) or (is_static_dim(k) and int(k) > len(x.shape))):
            raise a.fail(f"cannot resize {n_resized} of the {len(x.shape)} dims of x with a shape of length {k}")

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        _choice(a, "interpolation_mode", self._INTERPOLATION)
        _choice(a, "sampling_mode", SAMPLING_MODES)
        n = _int(a, "resized_dims")
        self._check(a, x, n)
        if x.shape is None:
            return [x]
        shape = a.value("shape")
        tail = as_int_list(shape)[-n:] if shape is not None and n else None
        dims = list(x.shape)
        for i in range(n):
            axis = len(dims) - n + i
            if tail is None:
                dims[axis] = fresh_symbol()
            elif tail[i] < 0:
                raise a.fail(f"shape holds a negative size {tail[i]}")
            elif tail[i]:
                dims[axis] = tail[i]
        return [TensorType(x.dtype, tuple(dims))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = np.asarray(a["x"])
        n = _int(a, "resized_dims")
        tail = as_int_list(a["shape"])[-n:] if n else []
        if any(s < 0 for s in tail):
            raise a.fail(f"shape holds a negative size: {tail}")
        sizes = {x.ndim - n + i: (s if s else x.shape[x.ndim - n + i]) for i, s in enumerate(tail)}
        if str_param(a, "interpolation_mode") == "NEAREST_NEIGHBOR":
            return _out(a, _gather_axes(x, {ax: half_pixel_nearest(x.shape[ax], m) for ax, m in sizes.items()}))
        y = _resize_linear(x, sizes, str_param(a, "sampling_mode"))
        return _out(a, np.trunc(y) if x.dtype.kind == "i" else y)


# ---------------------------------------------------------------------------------------------
# Cropping


@register
class Crop(OpDef):
    """Remove ``crop_height = [top, bottom]`` rows and ``crop_width = [left, right]`` columns."""

    op_type = "crop"

    def _crops(self, a: InferArgs | EvalArgs) -> tuple[list[int], list[int]]:
        ch, cw = as_int_list(a.value("crop_height")), as_int_list(a.value("crop_width"))
        if len(ch) != 2 or len(cw) != 2 or min(ch + cw) < 0:
            raise a.fail(f"crop_height and crop_width must each hold 2 non-negative values, got {ch} and {cw}")
        return ch, cw

    def infer(self, a: InferArgs) -> list[Type]:
        x = _min_rank(a, "x", 3)
        ch, cw = self._crops(a)
        if x.shape is None:
            return [x]
        h = x.shape[-2] if sum(ch) == 0 else dim_op(lambda d: d - sum(ch), x.shape[-2])
        w = x.shape[-1] if sum(cw) == 0 else dim_op(lambda d: d - sum(cw), x.shape[-1])
        for d, c, n in ((h, ch, x.shape[-2]), (w, cw, x.shape[-1])):
            if never_positive(d):
                raise a.fail(f"cropping {c} from a dim of size {n} leaves nothing")
        return [_with_last2(x, h, w)]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = np.asarray(a["x"])
        (t, b), (left, r) = self._crops(a)
        return _out(a, x[..., t:x.shape[-2] - b, left:x.shape[-1] - r])


_BOX_MODES = ("CORNERS_HEIGHT_FIRST", "CORNERS_WIDTH_FIRST", "CENTER_SIZE_HEIGHT_FIRST", "CENTER_SIZE_WIDTH_FIRST")


def box_corners(boxes: np.ndarray, mode: str) -> np.ndarray:
    """``[N, 4]`` boxes in ``mode`` -> ``[N, 4]`` as (h_start, w_start, h_end, w_end)."""
    b = boxes.astype(_F32)
    if mode.endswith("WIDTH_FIRST"):
        b = b[:, [1, 0, 3, 2]]
    if mode.startswith("CENTER_SIZE"):
        centre, size = b[:, :2], b[:, 2:]
        b = np.concatenate([centre - size / 2, centre + size / 2], axis=1)
    return b


def crop_and_resize(image: np.ndarray, box: np.ndarray, out_hw: tuple[int, int], mode: str,
                    pad_value: float) -> np.ndarray:
    """Bilinear samples of a ``[C, H, W]`` image over one box (pixel coordinates).

    Samples outside ``[0, size - 1]`` on either axis take ``pad_value`` (TF's crop_and_resize
    extrapolation, which Core ML follows).
    """
    y = image.astype(_F32)
    outside = np.zeros(out_hw, bool)
    for axis, (start, end), n_out in zip((1, 2), ((box[0], box[2]), (box[1], box[3])), out_hw):
        pos = sampling_grid(mode, float(start), float(end), n_out)
        off = (pos < 0) | (pos > image.shape[axis] - 1)
        outside |= off[:, None] if axis == 1 else off[None, :]
        y = lerp_axis(y, axis, np.clip(pos, 0, image.shape[axis] - 1))
    return np.where(outside, _F32(pad_value), y)


@register
class CropResize(OpDef):
    """Crop boxes out of ``x`` ``[B, C, H, W]`` and resize each bilinearly to
    ``[target_height, target_width]``.

    Box coordinates are pixels (``normalized_coordinates`` scales them by ``H - 1`` / ``W - 1``),
    times ``spatial_scale``; sampling_mode places samples inside each box as resize_bilinear does
    over a whole axis. iOS15/16 take ``roi`` ``[N, 1, 4 or 5, 1, 1]``: 4 coordinates apply each box
    to every image (output ``[N, B, C, h, w]``); 5 prepend the image index (output
    ``[N, 1, C, h, w]``, as the op's documentation states). iOS16 adds pad_value (iOS15 pads
    with 0). iOS17 takes ``boxes [N, 4]`` and ``box_indices [N]`` (default ``0..N-1``) and returns
    ``[N, C, h, w]``.
    """

    op_type = "crop_resize"

    def default_box_indices(self, a: InferArgs | EvalArgs) -> np.ndarray | None:
        if isinstance(a, EvalArgs):
            return np.arange(np.asarray(a["boxes"]).shape[0], dtype=np.int32)
        n = a.tensor_type("boxes").shape
        return np.arange(int(n[0]), dtype=np.int32) if n is not None and is_static_dim(n[0]) else None

    def _common(self, a: InferArgs | EvalArgs) -> tuple[int, int]:
        _choice(a, "box_coordinate_mode", _BOX_MODES)
        _choice(a, "sampling_mode", SAMPLING_MODES)
        h, w = _int(a, "target_height"), _int(a, "target_width")
        _positive(a, target_height=h, target_width=w)
        return h, w

    def infer(self, a: InferArgs) -> list[Type]:
        x = _rank(a, "x", 4)
        h, w = self._common(a)
        xs = x.shape or _unknown_dims(4)
        if self.signature.since == "iOS17":
            return [TensorType(x.dtype, (self._infer_boxes(a, xs[0]), xs[1], h, w))]
        roi = _rank(a, "roi", 5)
        if roi.shape is None:
            return [TensorType(x.dtype, (fresh_symbol(), fresh_symbol(), xs[1], h, w))]
        coords = roi.shape[2]
        if any(is_static_dim(roi.shape[i]) and int(roi.shape[i]) != 1 for i in (1, 3, 4)) or (
                is_static_dim(coords) and int(coords) not in (4, 5)):
            raise a.fail(f"roi must have shape [N, 1, 4 or 5, 1, 1], got {list(roi.shape)}")
        per_image = fresh_symbol() if not is_static_dim(coords) else xs[0] if int(coords) == 4 else 1
        return [TensorType(x.dtype, (roi.shape[0], per_image, xs[1], h, w))]

    def _infer_boxes(self, a: InferArgs, batch: Dim) -> Dim:
        boxes = _rank(a, "boxes", 2)
        if boxes.shape is None:
            return fresh_symbol()
        n = boxes.shape[0]
        if is_static_dim(boxes.shape[1]) and int(boxes.shape[1]) != 4:
            raise a.fail(f"boxes must have shape [N, 4], got {list(boxes.shape)}")
        if _bool(a, "normalized_coordinates") and not boxes.dtype.is_float:
            raise a.fail(f"normalized boxes must be fp16 or fp32, got {boxes.dtype}")
        if a.has("box_indices"):
            idx = _rank(a, "box_indices", 1)
            if idx.shape is not None and is_static_dim(idx.shape[0]) and is_static_dim(n) and idx.shape[0] != n:
                raise a.fail(f"box_indices must have shape [{n}], got {list(idx.shape)}")
        indices = a.value("box_indices")
        if indices is not None and is_static_dim(batch) and np.asarray(indices).size:
            top = int(np.max(indices))
            if top >= int(batch):
                raise a.fail(f"box index {top} is out of range for a batch of {batch}")
        return n

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = np.asarray(a["x"])
        out_hw = self._common(a)
        if self.signature.since == "iOS17":
            boxes, indices = np.asarray(a["boxes"]), np.asarray(a["box_indices"]).astype(np.int64)
        else:
            roi = np.asarray(a["roi"]).reshape(a["roi"].shape[0], -1)
            boxes = roi[:, -4:]
            indices = roi[:, 0].astype(np.int64) if roi.shape[1] == 5 else None
        if indices is not None and indices.size and (indices.min() < 0 or indices.max() >= x.shape[0]):
            raise a.fail(f"box indices {indices.tolist()} out of range for a batch of {x.shape[0]}")
        corners = box_corners(boxes, str_param(a, "box_coordinate_mode")) * _F32(_float(a, "spatial_scale"))
        if _bool(a, "normalized_coordinates"):
            corners = corners * np.array([x.shape[2] - 1, x.shape[3] - 1] * 2, _F32)
        pad_value = _float(a, "pad_value") if "pad_value" in self.signature.inputs else 0.0
        mode = str_param(a, "sampling_mode")

        def crop(image: int, box: np.ndarray) -> np.ndarray:
            return crop_and_resize(x[image], box, out_hw, mode, pad_value)

        if indices is None:  # every box on every image
            y = np.stack([np.stack([crop(b, box) for b in range(x.shape[0])]) for box in corners])
        else:
            y = np.stack([crop(int(i), box) for i, box in zip(indices, corners)])
            if self.signature.since != "iOS17":
                y = y[:, None]
        return _out(a, y)


# ---------------------------------------------------------------------------------------------
# Grid sampling


_SAMPLING = ("bilinear", "nearest")
_PADDING = ("constant", "border", "reflection", "symmetric")
_COORDINATES = ("unnormalized", "normalized_minus_one_to_one", "normalized_zero_to_one")


def to_pixels(c: np.ndarray, size: int, mode: str, align_corners: bool) -> np.ndarray:
    """Sampling coordinates along one axis of ``size`` pixels -> pixel coordinates."""
    if mode == "unnormalized":
        return c
    if mode == "normalized_minus_one_to_one":
        return (c + 1) / 2 * (size - 1) if align_corners else ((c + 1) * size - 1) / 2
    return c * (size - 1) if align_corners else c * size - _F32(0.5)


def _reflect(c: np.ndarray, low: float, high: float) -> np.ndarray:
    """Fold coordinates into [low, high] by repeated mirroring at the bounds."""
    span = high - low
    if span <= 0:
        return np.full_like(c, low)
    d = np.abs(c - low)
    flips = np.floor(d / span)
    extra = d - flips * span
    return np.where(flips % 2 == 0, low + extra, high - extra)


def apply_padding_mode(c: np.ndarray, size: int, mode: str) -> np.ndarray:
    """Map out-of-image pixel coordinates as the padding mode says ('constant' keeps them).

    'reflection' mirrors about the edge pixel centres (|1 2 3| -> 3 2 |1 2 3| 2 1), 'symmetric'
    about the image edges (|1 2 3| -> 2 1 |1 2 3| 3 2), 'border' clamps.
    """
    if mode == "border":
        return np.clip(c, 0, size - 1)
    if mode == "reflection":
        return np.clip(_reflect(c, 0.0, size - 1.0), 0, size - 1)
    if mode == "symmetric":
        return np.clip(_reflect(c, -0.5, size - 0.5), 0, size - 1)
    return c


def grid_sample(x: np.ndarray, px: np.ndarray, py: np.ndarray, sampling: str, padding: str,
                pad_value: float) -> np.ndarray:
    """Sample ``x [B, C, H, W]`` at pixel coordinates ``px, py [B, Ho, Wo]`` -> ``[B, C, Ho, Wo]``.

    Out-of-image taps read pad_value under 'constant' padding; nearest rounds half to even
    (PyTorch's grid_sample, which coremltools maps to this op).
    """
    _, _, h, w = x.shape
    px, py = apply_padding_mode(px, w, padding), apply_padding_mode(py, h, padding)
    batch = np.arange(x.shape[0])[:, None, None]

    def tap(ix: np.ndarray, iy: np.ndarray) -> np.ndarray:
        inside = (ix >= 0) & (ix < w) & (iy >= 0) & (iy < h)
        v = x[batch, :, np.clip(iy, 0, h - 1), np.clip(ix, 0, w - 1)]  # [B, Ho, Wo, C]
        return np.where(inside[..., None], v, _F32(pad_value))

    if sampling == "nearest":
        y = tap(np.rint(px).astype(np.int64), np.rint(py).astype(np.int64))
    else:
        x0, y0 = np.floor(px), np.floor(py)
        fx, fy = (px - x0)[..., None], (py - y0)[..., None]
        x0, y0 = x0.astype(np.int64), y0.astype(np.int64)
        with np.errstate(all="ignore"):
            top = tap(x0, y0) * (1 - fx) + tap(x0 + 1, y0) * fx
            bottom = tap(x0, y0 + 1) * (1 - fx) + tap(x0 + 1, y0 + 1) * fx
            y = top * (1 - fy) + bottom * fy
    return np.moveaxis(y, -1, 1)


class _GridSampler(OpDef):
    """Mode parameters shared by resample and affine."""

    def _modes(self, a: InferArgs | EvalArgs) -> tuple[str, str, str, bool]:
        return (_choice(a, "sampling_mode", _SAMPLING), _choice(a, "padding_mode", _PADDING),
                _choice(a, "coordinates_mode", _COORDINATES), _bool(a, "align_corners"))

    def sample(self, a: EvalArgs, x: np.ndarray, cx: np.ndarray, cy: np.ndarray) -> list[Any]:
        sampling, padding, coords, align = self._modes(a)
        px = to_pixels(cx.astype(_F32), x.shape[3], coords, align)
        py = to_pixels(cy.astype(_F32), x.shape[2], coords, align)
        y = grid_sample(x.astype(_F32), px, py, sampling, padding, _float(a, "padding_value"))
        return _out(a, y)


@register
class Resample(_GridSampler):
    """Sample ``x [B, C, H, W]`` at ``coordinates [B, Ho, Wo, 2]`` given as (x, y) = (w, h) pairs;
    iOS16 allows fp16 and iOS17 integer coordinates."""

    op_type = "resample"

    def infer(self, a: InferArgs) -> list[Type]:
        x, c = _rank(a, "x", 4), _rank(a, "coordinates", 4)
        self._modes(a)
        xs = x.shape or _unknown_dims(4)
        cs = c.shape or _unknown_dims(4)
        if is_static_dim(xs[0]) and is_static_dim(cs[0]) and int(xs[0]) != int(cs[0]):
            raise a.fail(f"x and coordinates disagree on the batch size: {xs[0]} vs {cs[0]}")
        if is_static_dim(cs[3]) and int(cs[3]) != 2:
            raise a.fail(f"coordinates must end in a dim of 2 (x, y), got {list(cs)}")
        return [TensorType(x.dtype, (xs[0], xs[1], cs[1], cs[2]))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        c = np.asarray(a["coordinates"])
        return self.sample(a, np.asarray(a["x"]), c[..., 0], c[..., 1])


def _normalized_axis(n: int, align_corners: bool) -> np.ndarray:
    """Normalized [-1, 1] coordinates of the centres of ``n`` output pixels (PyTorch's affine_grid)."""
    if n == 1:
        return np.zeros(1, _F32)
    i = np.arange(n, dtype=_F32)
    return (i * _F32(2 / (n - 1)) - 1) if align_corners else ((2 * i + 1) / _F32(n) - 1)


@register
class Affine(_GridSampler):
    """Warp ``x [B, C, H, W]`` by a 2x3 matrix per batch (or one for all): output pixel (x, y), in
    normalized coordinates, reads the input at ``(a0 x + a1 y + a2, b0 x + b1 y + b2)``.

    The documented modes only: bilinear, constant padding with value 0, coordinates normalized to
    [-1, 1] (PyTorch's affine_grid followed by grid_sample).
    """

    op_type = "affine"

    def _modes(self, a: InferArgs | EvalArgs) -> tuple[str, str, str, bool]:
        sampling, padding, coords, align = super()._modes(a)
        if (sampling, padding, coords) != ("bilinear", "constant", "normalized_minus_one_to_one"):
            raise a.fail("affine supports only sampling_mode 'bilinear', padding_mode 'constant' and "
                         f"coordinates_mode 'normalized_minus_one_to_one', got '{sampling}', '{padding}', '{coords}'")
        if _float(a, "padding_value") != 0:
            raise a.fail(f"affine pads with 0 only, got padding_value {_float(a, 'padding_value')}")
        return sampling, padding, coords, align

    def infer(self, a: InferArgs) -> list[Type]:
        x, m = _rank(a, "x", 4), _rank(a, "transform_matrix", 2)
        self._modes(a)
        h, w = _int(a, "output_height"), _int(a, "output_width")
        _positive(a, output_height=h, output_width=w)
        xs = x.shape or _unknown_dims(4)
        if m.shape is not None:
            d, six = m.shape
            if is_static_dim(six) and int(six) != 6:
                raise a.fail(f"transform_matrix must have shape [B or 1, 6], got {list(m.shape)}")
            if is_static_dim(d) and is_static_dim(xs[0]) and int(d) not in (1, int(xs[0])):
                raise a.fail(f"transform_matrix has {d} rows for a batch of {xs[0]}")
        return [TensorType(x.dtype, (xs[0], xs[1], h, w))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = np.asarray(a["x"])
        m = np.broadcast_to(np.asarray(a["transform_matrix"], _F32), (x.shape[0], 6))[:, :, None, None]
        align = _bool(a, "align_corners")
        gy = _normalized_axis(_int(a, "output_height"), align)[None, :, None]
        gx = _normalized_axis(_int(a, "output_width"), align)[None, None, :]
        cx = m[:, 0] * gx + m[:, 1] * gy + m[:, 2]
        cy = m[:, 3] * gx + m[:, 4] * gy + m[:, 5]
        return self.sample(a, x, cx, cy)


# ---------------------------------------------------------------------------------------------
# Block rearrangement between channels, space and batch


class _Rearrange(OpDef):
    """A rank-4 ``[N, C, H, W]`` rearrangement by a block factor ``f``: ``[N, C / f^2, H f, W f]``
    (channels to space) or ``[N, C f^2, H / f, W / f]`` (space to channels)."""

    factor_param = ""
    to_space = True  # channels -> space (else space -> channels)

    def factor(self, a: InferArgs | EvalArgs) -> int:
        f = _int(a, self.factor_param)
        if f < 1:
            raise a.fail(f"{self.factor_param} must be positive, got {f}")
        return f

    def infer(self, a: InferArgs) -> list[Type]:
        x = _rank(a, "x", 4)
        f = self.factor(a)
        if x.shape is None or f == 1:
            return [x]
        n, c, h, w = x.shape
        divided, divisor = ((c,), f * f) if self.to_space else ((h, w), f)
        if any(is_static_dim(d) and int(d) % divisor for d in divided):
            raise a.fail(f"{self.op_type}: shape {list(x.shape)} does not split into blocks of {f}")
        if self.to_space:
            dims = (n, dim_op(lambda d: d // (f * f), c), dim_op(lambda d: d * f, h), dim_op(lambda d: d * f, w))
        else:
            dims = (n, dim_op(lambda d: d * f * f, c), dim_op(lambda d: d // f, h), dim_op(lambda d: d // f, w))
        return [TensorType(x.dtype, dims)]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        return _out(a, self.rearrange(np.asarray(a["x"]), self.factor(a)))

    def rearrange(self, x: np.ndarray, f: int) -> np.ndarray:
        raise NotImplementedError


@register
class DepthToSpace(_Rearrange):
    """Channels to ``f x f`` spatial blocks, block position outermost in the channel index
    (ONNX DepthToSpace mode DCR, TF's order, the NeuralNetwork DEPTH_TO_SPACE example)."""

    op_type = "depth_to_space"
    factor_param = "block_size"

    def rearrange(self, x: np.ndarray, f: int) -> np.ndarray:
        n, c, h, w = x.shape
        y = x.reshape(n, f, f, c // (f * f), h, w).transpose(0, 3, 4, 1, 5, 2)
        return y.reshape(n, c // (f * f), h * f, w * f)


@register
class SpaceToDepth(_Rearrange):
    """Inverse of depth_to_space: each ``f x f`` block becomes channels, block position outermost."""

    op_type = "space_to_depth"
    factor_param = "block_size"
    to_space = False

    def rearrange(self, x: np.ndarray, f: int) -> np.ndarray:
        n, c, h, w = x.shape
        y = x.reshape(n, c, h // f, f, w // f, f).transpose(0, 3, 5, 1, 2, 4)
        return y.reshape(n, c * f * f, h // f, w // f)


@register
class PixelShuffle(_Rearrange):
    """Channels to ``f x f`` spatial blocks, channel outermost (PyTorch's PixelShuffle, ONNX CRD)."""

    op_type = "pixel_shuffle"
    factor_param = "upscale_factor"

    def rearrange(self, x: np.ndarray, f: int) -> np.ndarray:
        n, c, h, w = x.shape
        y = x.reshape(n, c // (f * f), f, f, h, w).transpose(0, 1, 4, 2, 5, 3)
        return y.reshape(n, c // (f * f), h * f, w * f)


@register
class PixelUnshuffle(_Rearrange):
    """Inverse of pixel_shuffle (PyTorch's PixelUnshuffle)."""

    op_type = "pixel_unshuffle"
    factor_param = "downscale_factor"
    to_space = False

    def rearrange(self, x: np.ndarray, f: int) -> np.ndarray:
        n, c, h, w = x.shape
        y = x.reshape(n, c, h // f, f, w // f, f).transpose(0, 1, 3, 5, 2, 4)
        return y.reshape(n, c * f * f, h // f, w // f)


class _BatchSpace(OpDef):
    """Shared checks of space_to_batch / batch_to_space: rank-4 x, 2 block sizes, [2, 2] amounts."""

    amounts_param = ""

    def _params(self, a: InferArgs | EvalArgs) -> tuple[list[int], list[list[int]]]:
        block = as_int_list(a.value("block_shape"))
        amounts = np.asarray(a.value(self.amounts_param))
        if len(block) != 2 or min(block) < 1 or amounts.shape != (2, 2) or amounts.min() < 0:
            raise a.fail(f"block_shape must hold 2 positive sizes and {self.amounts_param} be a non-negative "
                         f"[2, 2] tensor, got {block} and {amounts.tolist()}")
        return block, amounts.astype(int).tolist()


@register
class SpaceToBatch(_BatchSpace):
    """Zero-pad H and W, then move each ``block_shape`` block offset into the batch:
    output batch ``(i_h * block_w + i_w) * N + n`` (TF's SpaceToBatchND on NCHW)."""

    op_type = "space_to_batch"
    amounts_param = "paddings"

    def infer(self, a: InferArgs) -> list[Type]:
        x = _rank(a, "x", 4)
        block, pads = self._params(a)
        if x.shape is None:
            return [x]
        spatial = []
        for d, b, (p0, p1) in zip(x.shape[2:], block, pads):
            if is_static_dim(d) and (int(d) + p0 + p1) % b:
                raise a.fail(f"padded size {int(d) + p0 + p1} is not divisible by the block size {b}")
            spatial.append(d if b == 1 and p0 + p1 == 0 else dim_op(lambda n, b=b, p=p0 + p1: (n + p) // b, d))
        batch = x.shape[0] if block == [1, 1] else dim_op(lambda n: n * block[0] * block[1], x.shape[0])
        return [TensorType(x.dtype, (batch, x.shape[1], *spatial))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = np.asarray(a["x"])
        (bh, bw), pads = self._params(a)
        xp = np.pad(x, [(0, 0), (0, 0)] + [tuple(p) for p in pads])
        n, c, h, w = xp.shape
        y = xp.reshape(n, c, h // bh, bh, w // bw, bw).transpose(3, 5, 0, 1, 2, 4)
        return _out(a, y.reshape(bh * bw * n, c, h // bh, w // bw))


@register
class BatchToSpace(_BatchSpace):
    """Inverse of space_to_batch: batch blocks back into H and W, then crop (TF's BatchToSpaceND)."""

    op_type = "batch_to_space"
    amounts_param = "crops"

    def infer(self, a: InferArgs) -> list[Type]:
        x = _rank(a, "x", 4)
        block, crops = self._params(a)
        if x.shape is None:
            return [x]
        k = block[0] * block[1]
        if is_static_dim(x.shape[0]) and int(x.shape[0]) % k:
            raise a.fail(f"batch {x.shape[0]} is not divisible by the block size product {k}")
        spatial = []
        for d, b, (c0, c1) in zip(x.shape[2:], block, crops):
            size = d if b == 1 and c0 + c1 == 0 else dim_op(lambda n, b=b, c=c0 + c1: n * b - c, d)
            if never_positive(size):
                raise a.fail(f"cropping {c0 + c1} from {d} * {b} leaves nothing")
            spatial.append(size)
        batch = x.shape[0] if k == 1 else dim_op(lambda n: n // k, x.shape[0])
        return [TensorType(x.dtype, (batch, x.shape[1], *spatial))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = np.asarray(a["x"])
        (bh, bw), ((t, b), (left, r)) = self._params(a)
        nb, c, h, w = x.shape
        n = nb // (bh * bw)
        y = x.reshape(bh, bw, n, c, h, w).transpose(2, 3, 4, 0, 5, 1).reshape(n, c, h * bh, w * bw)
        return _out(a, y[:, :, t:h * bh - b, left:w * bw - r])


@register
class Pad(OpDef):
    """Pad the last ``len(pad) / 2`` dims by ``pad = [before_0, after_0, ...]`` (non-negative).

    Modes: 'constant' (constant_val), 'reflect' (mirror without repeating the edge; at most size-1
    per side), 'replicate' (repeat the edge; at most size per side, as documented). A run-time pad
    must cover every dim.
    """

    op_type = "pad"
    _MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge"}

    def _widths(self, a: InferArgs | EvalArgs, pad: Any, rank: int) -> list[tuple[int, int]]:
        p = as_int_list(pad)
        if len(p) % 2 or len(p) // 2 > rank:
            raise a.fail(f"pad must hold 2 values per padded dim, for at most {rank} dims; got {len(p)} values")
        if any(v < 0 for v in p):
            raise a.fail(f"pad must be non-negative, got {p}")
        return [(0, 0)] * (rank - len(p) // 2) + [(p[i], p[i + 1]) for i in range(0, len(p), 2)]

    def _check_limits(self, a: InferArgs | EvalArgs, mode: str, widths: list[tuple[int, int]], dims: tuple) -> None:
        slack = {"reflect": 1, "replicate": 0}.get(mode)
        if slack is None:
            return
        for d, (b, e) in zip(dims, widths):
            if is_static_dim(d) and (b or e) and max(b, e) > int(d) - slack:
                raise a.fail(f"'{mode}' padding of {max(b, e)} is too large for a dim of size {d}")

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        mode = _choice(a, "mode", tuple(self._MODES))
        pad_t = _rank(a, "pad", 1)
        if x.shape is None:
            return [x]
        rank = len(x.shape)
        pad = a.value("pad")
        if pad is None:
            n = pad_t.shape[0] if pad_t.shape is not None else None
            if is_static_dim(n) and int(n) != 2 * rank:
                raise a.fail(f"a run-time pad must hold {2 * rank} values (2 per dim of x), has {n}")
            return [TensorType(x.dtype, tuple(fresh_symbol() for _ in range(rank)))]
        widths = self._widths(a, pad, rank)
        self._check_limits(a, mode, widths, x.shape)
        dims = tuple(d if b + e == 0 else dim_op(lambda n, s=b + e: n + s, d) for d, (b, e) in zip(x.shape, widths))
        return [TensorType(x.dtype, dims)]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = np.asarray(a["x"])
        mode = str_param(a, "mode")
        widths = self._widths(a, a["pad"], x.ndim)
        self._check_limits(a, mode, widths, x.shape)
        if mode == "constant":
            return _out(a, np.pad(x, widths, constant_values=np.asarray(a["constant_val"]).astype(x.dtype)))
        return _out(a, np.pad(x, widths, mode=self._MODES[mode]))


@register
class SlidingWindows(OpDef):
    """Windows of ``size`` elements every ``stride`` along ``axis``: ``[*d0, L, *dn]`` ->
    ``[*d0, (L - size) // stride + 1, size, *dn]``."""

    op_type = "sliding_windows"

    def _params(self, a: InferArgs | EvalArgs, rank: int) -> tuple[int, int, int]:
        axis = normalize_axis(_int(a, "axis"), rank)
        size, stride = _int(a, "size"), _int(a, "stride")
        _positive(a, size=size, stride=stride)
        return axis, size, stride

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        if x.shape is None:
            return [x]
        if not x.shape:
            raise a.fail("x must have at least one dim")
        axis, size, stride = self._params(a, len(x.shape))
        n = x.shape[axis]
        if is_static_dim(n) and int(n) < size:
            raise a.fail(f"window size {size} exceeds the length {n} of axis {axis}")
        count = dim_op(lambda d: (d - size) // stride + 1, n)
        return [TensorType(x.dtype, x.shape[:axis] + (count, size) + x.shape[axis + 1:])]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = np.asarray(a["x"])
        axis, size, stride = self._params(a, x.ndim)
        windows = np.lib.stride_tricks.sliding_window_view(x, size, axis=axis)
        windows = windows[(slice(None),) * axis + (slice(None, None, stride),)]
        return _out(a, np.moveaxis(windows, -1, axis + 1))
