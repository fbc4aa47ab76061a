"""Resizing: upsample_nearest_neighbor, upsample_bilinear, resize_nearest_neighbor,
resize_bilinear, resize (iOS17) and crop_resize as ``upsample``, ``resizeBilinear`` and
``cropResize`` layers.

Sampling grids (UpsampleLayerParams.LinearUpsampleMode, SamplingMode) against MIL's modes:
ALIGN_CORNERS_TRUE = STRICT_ALIGN_CORNERS (``(in - 1) / (out - 1)`` spacing), ALIGN_CORNERS_FALSE =
UNALIGN_CORNERS (half-pixel centres), DEFAULT = MIL DEFAULT (``i * in / out``); SamplingMode's four
methods are MIL's other four modes one to one, and UNALIGN_CORNERS at a fixed size is an
``upsample`` by the size ratio. Nearest-neighbour layers repeat pixels, so only integer
upscaling is exact (MIL's half-pixel nearest and floor(i / s) both reduce to ``i // s`` then);
other nearest resizes are refused rather than switched to bilinear.
"""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....formats.proto import NeuralNetwork_pb2 as nn
from ....ir.core import Op, Value
from ..emitter import NetworkEmitter, op_input, rank, static_shape
from ._common import single, x_blob
from ._window import flag, text
from .registry import lowering

_SAMPLING = {"STRICT_ALIGN_CORNERS": nn.SamplingMode.STRICT_ALIGN_ENDPOINTS_MODE,
             "ALIGN_CORNERS": nn.SamplingMode.ALIGN_ENDPOINTS_MODE,
             "DEFAULT": nn.SamplingMode.UPSAMPLE_MODE,
             "OFFSET_CORNERS": nn.SamplingMode.ROI_ALIGN_MODE}
_LINEAR_MODES = {"STRICT_ALIGN_CORNERS": nn.UpsampleLayerParams.ALIGN_CORNERS_TRUE,
                 "UNALIGN_CORNERS": nn.UpsampleLayerParams.ALIGN_CORNERS_FALSE,
                 "DEFAULT": nn.UpsampleLayerParams.DEFAULT}
_BOX_MODES = {"CORNERS_HEIGHT_FIRST": nn.BoxCoordinatesMode.CORNERS_HEIGHT_FIRST,
              "CORNERS_WIDTH_FIRST": nn.BoxCoordinatesMode.CORNERS_WIDTH_FIRST,
              "CENTER_SIZE_HEIGHT_FIRST": nn.BoxCoordinatesMode.CENTER_SIZE_HEIGHT_FIRST,
              "CENTER_SIZE_WIDTH_FIRST": nn.BoxCoordinatesMode.CENTER_SIZE_WIDTH_FIRST}


def _number(e: NetworkEmitter, op: Op, key: str) -> float:
    return float(np.asarray(e.const_param(op, key)).reshape(-1)[0])


def _integral(values: list[float]) -> bool:
    return all(float(v).is_integer() and v >= 1 for v in values)


def _float_only(x: Value, what: str) -> None:
    if not x.type.dtype.is_float:  # type: ignore[union-attr]
        raise LoweringError(f"{what} of a {x.type.dtype} tensor: layers compute in fp32 and the op truncates "  # type: ignore[union-attr]
                            "to integers")


def _upsample(e: NetworkEmitter, op: Op, scales: list[float], *, nearest: bool, linear_mode: str = "DEFAULT") -> None:
    p = single(e, op, "upsample")
    if nearest:
        p.mode = nn.UpsampleLayerParams.NN
    else:
        p.mode = nn.UpsampleLayerParams.BILINEAR
        p.linearUpsampleMode = _LINEAR_MODES[linear_mode]
        if linear_mode != "DEFAULT":
            e.state.need(5, "upsample linearUpsampleMode ALIGN_CORNERS_*")
    if _integral(scales):
        p.scalingFactor.extend(int(s) for s in scales)
    else:
        p.fractionalScalingFactor.extend(scales)
        e.state.need(5, "upsample fractionalScalingFactor")


def _hw(v: Value) -> list[int] | None:
    shape = static_shape(v)
    return None if shape is None else shape[-2:]


def _scaled_sizes_agree(x: Value, scales: list[float], want: list[int]) -> bool:
    """Whether an upsample by ``scales`` (fp32 factors) gives ``want`` from x's static H, W."""
    hw = _hw(x)
    return hw is not None and all(_floors_to(n, np.float32(s), m) for n, s, m in zip(hw, scales, want))


@lowering("upsample_nearest_neighbor", note="upsample NN (integer factors); 1 / integer factors as sliceStatic")
def _upsample_nearest(e: NetworkEmitter, op: Op) -> None:
    scales = [_number(e, op, "scale_factor_height"), _number(e, op, "scale_factor_width")]
    if _integral(scales):
        _upsample(e, op, scales, nearest=True)
        return
    # source floor(i * fp32(1 / scale)): every f-th pixel from 0 when that inverse is an integer f
    inverse = [float(np.float32(1.0 / s)) for s in scales]
    out = static_shape(op.outputs[0])
    exact = all(float(s).is_integer() if s >= 1 else v.is_integer() for s, v in zip(scales, inverse))
    if out is None or not exact:
        raise LoweringError(f"nearest-neighbour upsampling by {scales}: the layers repeat or skip pixels by integer "
                            "factors only")
    up = [int(s) if s >= 1 else 1 for s in scales]
    down = [int(v) if s < 1 else 1 for v, s in zip(inverse, scales)]
    _nearest_to(e, op, op.inputs["x"], out[-2:], up, down, [0, 0])


@lowering("upsample_bilinear", note="upsample BILINEAR (align_corners / half-pixel modes and fractional factors: "
                                    "spec 5)")
def _upsample_bilinear(e: NetworkEmitter, op: Op) -> None:
    align = flag(e, op, "align_corners")
    half = flag(e, op, "half_pixel_centers") if "half_pixel_centers" in op.inputs else not align
    mode = "STRICT_ALIGN_CORNERS" if align else "UNALIGN_CORNERS" if half else "DEFAULT"
    scales = [_number(e, op, "scale_factor_height"), _number(e, op, "scale_factor_width")]
    if not _integral(scales):
        out = static_shape(op.outputs[0])
        if out is None:
            raise LoweringError(f"fractional factors {scales} of a flexible size: the output size must be static")
        if mode == "DEFAULT":  # Core ML takes fractional factors only with the ALIGN_CORNERS_* modes
            _resize_linear(e, op, op.inputs["x"], out[-2:], mode)
            return
        if not _scaled_sizes_agree(op.inputs["x"], scales, out[-2:]):
            raise LoweringError(f"fractional factors {scales}: the layer's floor(size * factor) does not give the "
                                f"op's size {out[-2:]}")
    _upsample(e, op, scales, nearest=False, linear_mode=mode)


def _ratio(n: int, m: int) -> float:
    """An fp32 factor f with floor(n * f) == m (m / n rounded, or the next fp32 up when m / n
    rounds down): the layer places the half-pixel samples from the sizes, the factor only sizes."""
    f = np.float32(m / n)
    for _ in range(4):
        if _floors_to(n, f, m):
            break
        f = np.nextafter(f, np.float32(np.inf))
    return float(f)


def _floors_to(n: int, f: np.float32, m: int) -> bool:
    """floor(n * f) == m whether the product is taken in fp32 or fp64."""
    return int(np.floor(np.float32(n) * f)) == m == int(np.floor(n * float(f)))


def _resize_linear(e: NetworkEmitter, op: Op, x: Value, size: list[int], mode: str) -> None:
    """Bilinear resize of x's last two axes to ``size`` on MIL sampling grid ``mode``."""
    if mode in _SAMPLING:
        p = single(e, op, "resizeBilinear", [e.blob(x)])
        p.targetSize.extend(size)
        p.mode.samplingMethod = _SAMPLING[mode]
        return
    hw = _hw(x)  # UNALIGN_CORNERS: an upsample by the size ratio
    if hw is None:
        raise LoweringError("UNALIGN_CORNERS (half-pixel) resizing to a fixed size needs static input sizes (it is "
                            "an upsample by the size ratio)")
    scales = [_ratio(n, m) for n, m in zip(hw, size)]
    if not _scaled_sizes_agree(x, scales, size):
        raise LoweringError(f"UNALIGN_CORNERS resizing {hw} -> {size}: no fp32 factor gives these sizes")
    p = single(e, op, "upsample", [e.blob(x)])
    p.mode, p.linearUpsampleMode = nn.UpsampleLayerParams.BILINEAR, nn.UpsampleLayerParams.ALIGN_CORNERS_FALSE
    e.state.need(5, "upsample linearUpsampleMode ALIGN_CORNERS_FALSE")
    if _integral(scales):
        p.scalingFactor.extend(int(s) for s in scales)
    else:
        p.fractionalScalingFactor.extend(scales)


@lowering("resize_bilinear", note="resizeBilinear (spec 3); UNALIGN_CORNERS as upsample ALIGN_CORNERS_FALSE (spec 5)")
def _resize_bilinear(e: NetworkEmitter, op: Op) -> None:
    size = [int(_number(e, op, "target_size_height")), int(_number(e, op, "target_size_width"))]
    _resize_linear(e, op, op.inputs["x"], size, text(e, op, "sampling_mode"))


def _size_factors(x: Value, size: list[int]) -> tuple[list[int], list[int]]:
    """Per axis (upscale, downscale) integer factors taking x's last two axes to ``size``."""
    hw = _hw(x)
    if hw is None or any(m % n and n % m for m, n in zip(size, hw)):
        raise LoweringError(f"nearest-neighbour resizing {hw or 'a flexible size'} -> {size}: the layers repeat or "
                            "skip pixels by integer factors only")
    return [m // n if m >= n else 1 for m, n in zip(size, hw)], [n // m if n > m else 1 for m, n in zip(size, hw)]


def _nearest_to(e: NetworkEmitter, op: Op, x: Value, size: list[int], up: list[int], down: list[int],
                starts: list[int]) -> None:
    """Nearest resize of x's last two axes to ``size``: integer upscaling repeats pixels
    (``upsample`` NN; every nearest rule gives source ``i // f`` then), integer downscaling keeps
    every f-th pixel from ``starts`` (``sliceStatic``)."""
    src, out = e.blob(x), e.define(op.outputs[0])
    if any(f > 1 for f in down):
        r = rank(x)
        sliced = out if all(f == 1 for f in up) else e.fresh(f"{op.name}_subsampled")
        p = e.layer("sliceStatic", f"{op.name}_subsampled", [src], [sliced])
        p.beginIds.extend([0] * (r - 2) + starts)
        p.beginMasks.extend([True] * (r - 2) + [False, False])
        p.endIds.extend([0] * (r - 2) + [b + (m - 1) * f + 1 for b, m, f in zip(starts, size, down)])
        p.endMasks.extend([True] * (r - 2) + [False, False])
        p.strides.extend([1] * (r - 2) + down)
        src = sliced
    if all(f == 1 for f in up):
        if src != out:  # no resize at all
            e.bind(op.outputs[0], src)
        return
    p = e.layer("upsample", op.name, [src], [out])
    p.mode = nn.UpsampleLayerParams.NN
    p.scalingFactor.extend(up)


def _half_pixel(x: Value, size: list[int]) -> tuple[list[int], list[int], list[int]]:
    """Factors and first source pixels of the half-pixel rule ``floor((i + 0.5) * in / out)``:
    ``i * f + f // 2`` when downscaling by an integer f."""
    up, down = _size_factors(x, size)
    return up, down, [f // 2 for f in down]


@lowering("resize_nearest_neighbor", note="upsample NN / sliceStatic (integer up- or downscaling)")
def _resize_nearest(e: NetworkEmitter, op: Op) -> None:
    size = [int(_number(e, op, "target_size_height")), int(_number(e, op, "target_size_width"))]
    _nearest_to(e, op, op.inputs["x"], size, *_half_pixel(op.inputs["x"], size))


@lowering("resize", note="resizeBilinear / upsample for a constant target shape over the last two axes")
def _resize(e: NetworkEmitter, op: Op) -> None:
    """iOS17 resize of the last ``resized_dims`` axes (a 0 size keeps the axis, but LINEAR still
    samples it on the mode's grid, as resizeBilinear does with that size)."""
    x: Value = op.inputs["x"]
    n = int(_number(e, op, "resized_dims"))
    shape_v = e.const(op.inputs["shape"])
    if shape_v is None:
        raise LoweringError("a run-time target shape: the resizing layers take fixed sizes")
    if n == 0:
        e.bind(op.outputs[0], x_blob(e, op))
        return
    if n > 2 or rank(x) < 3:
        raise LoweringError(f"resizing {n} axes of a rank-{rank(x)} tensor: the layers resize the last two axes of "
                            "rank >= 3 tensors")
    out = static_shape(op.outputs[0])
    if out is None:
        raise LoweringError("the resized shape must be static")
    size = out[-2:]
    mode = text(e, op, "sampling_mode")
    if text(e, op, "interpolation_mode") == "NEAREST_NEIGHBOR":
        _nearest_to(e, op, x, size, *_half_pixel(x, size))
        return
    _float_only(x, "LINEAR resize")
    if n == 1 and mode == "OFFSET_CORNERS":
        raise LoweringError("OFFSET_CORNERS resizing of W only: the layers would resample H too, which that grid "
                            "does not leave unchanged")
    _resize_linear(e, op, x, size, mode)


@lowering("crop_resize", kind="decomposed", note="expandDims + cropResize (spec 3); iOS17 boxes/box_indices are "
                                                 "packed into the [N, 1, 5, 1, 1] RoI layout first")
def _crop_resize(e: NetworkEmitter, op: Op) -> None:
    pad_value = e.param(op, "pad_value") if "pad_value" in op.opdef.signature.inputs else 0.0
    if pad_value is None or float(np.asarray(pad_value).reshape(-1)[0]) != 0.0:
        raise LoweringError("pad_value other than 0: cropResize pads with 0")
    images = e.fresh(f"{op.name}_images")
    e.layer("expandDims", f"{op.name}_images", [x_blob(e, op)], [images]).axes.append(0)
    iOS17 = "boxes" in op.opdef.signature.inputs
    out = e.define(op.outputs[0])
    roi = _packed_roi(e, op) if iOS17 else e.blob(op.inputs["roi"])
    layer_out = e.fresh(f"{op.name}_rank5") if iOS17 else out
    p = e.layer("cropResize", op.name, [images, roi], [layer_out])
    p.targetSize.extend([int(_number(e, op, "target_height")), int(_number(e, op, "target_width"))])
    p.normalizedCoordinates = flag(e, op, "normalized_coordinates")
    mode = text(e, op, "sampling_mode")
    if mode not in _SAMPLING:
        raise LoweringError(f"sampling_mode {mode}: SamplingMode has no half-pixel method")
    p.mode.samplingMethod = _SAMPLING[mode]
    p.boxIndicesMode.boxMode = _BOX_MODES[text(e, op, "box_coordinate_mode")]
    p.spatialScale = _number(e, op, "spatial_scale")
    if iOS17:
        e.layer("squeeze", f"{op.name}_squeeze", [layer_out], [out]).axes.append(1)


def _packed_roi(e: NetworkEmitter, op: Op) -> str:
    """iOS17 ``boxes [N, 4]`` and ``box_indices [N]`` as the ``[N, 1, 5, 1, 1]`` RoI blob."""
    boxes = op.inputs["boxes"]
    idx_v = op_input(op, "box_indices")
    if idx_v is not None:
        idx = e.blob(idx_v)
    else:
        shape = static_shape(boxes)
        if shape is None:
            raise LoweringError("default box_indices need a static number of boxes")
        idx = e.load_constant(None, np.arange(shape[0], dtype=np.float32), f"{op.name}_box_indices")
    col = e.fresh(f"{op.name}_index_column")
    e.layer("expandDims", f"{op.name}_index_column", [idx], [col]).axes.append(1)
    rows = e.fresh(f"{op.name}_roi_rows")
    e.layer("concatND", f"{op.name}_roi_rows", [col, e.blob(boxes)], [rows]).axis = 1
    roi = e.fresh(f"{op.name}_roi")
    e.layer("expandDims", f"{op.name}_roi", [rows], [roi]).axes.extend([1, 3, 4])
    return roi
