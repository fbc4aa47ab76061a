"""Grid sampling (converter/ir/ops/image.py): resample, affine, crop_resize as ONNX ``GridSample``.

GridSample reads normalized coordinates in [-1, 1]; with ``align_corners=1`` pixel ``p`` of an
axis of ``n`` is ``2 p / (n - 1) - 1``, with ``align_corners=0`` it is ``(2 p + 1) / n - 1``. MIL's
coordinates are turned into pixels (its three coordinate modes and align_corners), then into the
normalization whose reflection rule is MIL's padding mode:

- ``reflection`` (MIL mirrors about the edge pixel centres): ONNX reflection with align_corners=1;
- ``symmetric`` (about the image edges): ONNX reflection with align_corners=0;
- ``border``: ONNX border; ``constant`` with ``padding_value`` v: ONNX zeros padding applied to
  ``x - v``, then ``+ v`` (interpolation weights sum to 1, so every out-of-image tap reads v).

Both maps are affine per axis, so the grid is one Mul and one Add of the MIL coordinates (static
H and W). Nearest rounds half to even in both. ``affine``: the grid of PyTorch's affine_grid (MIL's
definition) as ``MatMul([x_n, y_n, 1], theta^T)`` over the normalized output pixel centres, then
GridSample. ``crop_resize``: the sample positions of MIL's sampling mode inside each box computed
from the boxes at run time, bilinear GridSample (align_corners=1, border), and ``pad_value`` where
a position falls outside the image (TF's crop_and_resize rule). Computed in fp32 (fp16 rounded once).
"""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....ir.core import Op, Value
from ....ir.types import is_static_dim
from ..emitter import OnnxEmitter
from ._common import bool_param, finish_fp32, float_param, int_param, str_param
from .registry import lowering


def _linear_mode(e: OnnxEmitter) -> str:
    """GridSample (4-D, opset 16) calls bilinear "bilinear" until opset 20 renames it "linear"."""
    return "linear" if e.opset >= 20 else "bilinear"


def _hw(e: OnnxEmitter, v: Value) -> tuple[int, int]:
    shape = e.tensor_type(v).shape
    if shape is None or len(shape) != 4 or not all(is_static_dim(d) for d in shape[2:]):
        raise LoweringError(f"grid sampling needs a static height and width, got x {e.tensor_type(v)}")
    return int(shape[2]), int(shape[3])


def _to_pixels(n: int, mode: str, align: bool) -> tuple[float, float]:
    """MIL coordinate c along an axis of n pixels -> pixel ``a c + b``."""
    if mode == "unnormalized":
        return 1.0, 0.0
    if mode == "normalized_minus_one_to_one":
        return ((n - 1) / 2, (n - 1) / 2) if align else (n / 2, (n - 1) / 2)
    return (n - 1, 0.0) if align else (n, -0.5)


def _to_grid(n: int, onnx_align: bool) -> tuple[float, float]:
    """Pixel p -> ONNX normalized ``a p + b``."""
    if onnx_align:
        return (2 / (n - 1), -1.0) if n > 1 else (0.0, 0.0)
    return 2 / n, 1 / n - 1


def _fp32(e: OnnxEmitter, v: Value) -> str:
    name = e.name(v)
    return name if e.dtype(v).name == "fp32" else e.cast(name, "fp32")


def _sample(e: OnnxEmitter, op: Op, x: str, grid: str, *, mode: str, padding: str, pad_value: float,
            align: bool) -> None:
    """GridSample with MIL's constant padding value, rounded to the op's dtype."""
    onnx_mode = _linear_mode(e) if mode == "bilinear" else "nearest"
    onnx_padding = {"constant": "zeros", "border": "border", "reflection": "reflection",
                    "symmetric": "reflection"}[padding]
    if padding == "constant" and pad_value != 0:
        x = e.node("Sub", [x, e.scalar(np.float32(pad_value), "fp32")])
    y = e.node("GridSample", [x, grid], mode=onnx_mode, padding_mode=onnx_padding, align_corners=int(align))
    if padding == "constant" and pad_value != 0:
        y = e.node("Add", [y, e.scalar(np.float32(pad_value), "fp32")])
    finish_fp32(e, op, y)


@lowering("resample", note="GridSample (coordinates mapped by one Mul/Add; MIL's constant/border/reflection/"
                           "symmetric padding kept)")
def _resample(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    h, w = _hw(e, xv)
    sampling, padding = str_param(e, op, "sampling_mode"), str_param(e, op, "padding_mode")
    coords, align = str_param(e, op, "coordinates_mode"), bool_param(e, op, "align_corners")
    onnx_align = {"reflection": True, "symmetric": False}.get(padding, align)
    scale, shift = [], []
    for n in (w, h):  # coordinates are (x, y) = (w, h) pairs
        a1, b1 = _to_pixels(n, coords, align)
        a2, b2 = _to_grid(n, onnx_align)
        scale.append(a2 * a1)
        shift.append(a2 * b1 + b2)
    c = _fp32(e, op.inputs["coordinates"])
    if not (coords == "normalized_minus_one_to_one" and onnx_align == align):
        c = e.node("Add", [e.node("Mul", [c, e.constant(np.array(scale, np.float32))]),
                           e.constant(np.array(shift, np.float32))])
    _sample(e, op, _fp32(e, xv), c, mode=sampling, padding=padding, pad_value=float_param(e, op, "padding_value"),
            align=onnx_align)


def _normalized_centres(n: int, align: bool) -> np.ndarray:
    """PyTorch's affine_grid coordinates of n output pixel centres in [-1, 1]."""
    if n == 1:
        return np.zeros(1, np.float64)
    i = np.arange(n, dtype=np.float64)
    return i * 2 / (n - 1) - 1 if align else (2 * i + 1) / n - 1


@lowering("affine", kind="decomposed", note="grid = [x, y, 1] @ theta^T over the output pixel centres, GridSample")
def _affine(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    _hw(e, xv)
    oh, ow = int_param(e, op, "output_height"), int_param(e, op, "output_width")
    align = bool_param(e, op, "align_corners")
    gy, gx = np.meshgrid(_normalized_centres(oh, align), _normalized_centres(ow, align), indexing="ij")
    base = np.stack([gx.ravel(), gy.ravel(), np.ones(oh * ow)], axis=-1).astype(np.float32)[None]  # [1, h*w, 3]
    theta = e.node("Reshape", [_fp32(e, op.inputs["transform_matrix"]), e.int64s([-1, 2, 3])])
    grid = e.node("MatMul", [e.constant(base), e.node("Transpose", [theta], perm=[0, 2, 1])])  # [B|1, h*w, 2]
    grid = e.node("Reshape", [grid, e.int64s([-1, oh, ow, 2])])
    x = _fp32(e, xv)
    batch = e.node("Shape", [x], start=0, end=1)
    grid = e.node("Expand", [grid, e.node("Concat", [batch, e.int64s([oh, ow, 2])], axis=0)])
    _sample(e, op, x, grid, mode="bilinear", padding="constant", pad_value=0.0, align=align)


# -- crop_resize ---------------------------------------------------------------------------------------


def _positions(e: OnnxEmitter, mode: str, start: str, end: str, n_out: int) -> str:
    """MIL's sample positions ``[N, n_out]`` over the intervals [start, end] (each ``[N, 1]``)."""
    i = np.arange(n_out, dtype=np.float32)[None]
    extent = e.node("Sub", [end, start])
    if mode in ("STRICT_ALIGN_CORNERS", "ALIGN_CORNERS"):
        if n_out == 1:
            if mode == "STRICT_ALIGN_CORNERS":
                return start
            return e.node("Mul", [e.node("Add", [start, end]), e.scalar(np.float32(0.5), "fp32")])
        step = e.node("Div", [extent, e.scalar(np.float32(n_out - 1), "fp32")])
        return e.node("Add", [start, e.node("Mul", [e.constant(i), step])])
    one = e.scalar(np.float32(1.0), "fp32")
    if mode == "DEFAULT":
        pos = e.node("Mul", [e.constant(i), e.node("Div", [e.node("Add", [extent, one]),
                                                           e.scalar(np.float32(n_out), "fp32")])])
    elif mode == "OFFSET_CORNERS":
        delta = e.node("Div", [e.node("Max", [one, extent]), e.scalar(np.float32(n_out), "fp32")])
        pos = e.node("Mul", [e.constant(i + np.float32(0.5)), delta])
    else:  # UNALIGN_CORNERS
        step = e.node("Div", [e.node("Add", [extent, one]), e.scalar(np.float32(n_out), "fp32")])
        pos = e.node("Sub", [e.node("Mul", [e.constant(i + np.float32(0.5)), step]), e.scalar(np.float32(0.5), "fp32")])
    pos = e.node("Add", [start, pos])
    lo, hi = e.node("Min", [start, end]), e.node("Max", [start, end])
    return e.node("Min", [e.node("Max", [pos, lo]), hi])


def _corners(e: OnnxEmitter, boxes: str, mode: str) -> list[str]:
    """[N, 4] boxes in MIL's box_coordinate_mode -> [N, 1] each of h_start, w_start, h_end, w_end."""
    cols = e.node("Split", [boxes, e.int64s([1, 1, 1, 1])], 4, axis=1)
    if mode.endswith("WIDTH_FIRST"):
        cols = [cols[1], cols[0], cols[3], cols[2]]
    if mode.startswith("CENTER_SIZE"):
        half = [e.node("Mul", [c, e.scalar(np.float32(0.5), "fp32")]) for c in cols[2:]]
        cols = [e.node("Sub", [cols[0], half[0]]), e.node("Sub", [cols[1], half[1]]),
                e.node("Add", [cols[0], half[0]]), e.node("Add", [cols[1], half[1]])]
    return cols


@lowering("crop_resize", kind="decomposed",
          note="sample positions from the boxes at run time, GridSample bilinear, pad_value outside the image")
def _crop_resize(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    h, w = _hw(e, xv)
    th, tw = int_param(e, op, "target_height"), int_param(e, op, "target_width")
    mode = str_param(e, op, "sampling_mode")
    x = _fp32(e, xv)
    ios17 = op.opdef.signature.since == "iOS17"
    every_image = False
    if ios17:
        boxes = _fp32(e, op.inputs["boxes"])
        if isinstance(op.inputs.get("box_indices"), Value):
            indices = e.input(op, "box_indices")
        else:
            indices = e.node("Range", [e.scalar(0, "int64"), e.node("Reshape", [
                e.node("Shape", [boxes], start=0, end=1), e.int64s([])]), e.scalar(1, "int64")])
    else:
        roi_shape = e.tensor_type(op.inputs["roi"]).shape
        coords = roi_shape[2] if roi_shape is not None else None
        if not is_static_dim(coords):
            raise LoweringError("roi needs a static number of coordinates (4 or 5)")
        roi = e.node("Reshape", [_fp32(e, op.inputs["roi"]), e.int64s([-1, int(coords)])])
        if int(coords) == 5:
            parts = e.node("Split", [roi, e.int64s([1, 4])], 2, axis=1)
            indices = e.cast(e.node("Reshape", [parts[0], e.int64s([-1])]), "int64")
            boxes = parts[1]
        else:
            boxes, indices, every_image = roi, None, True
    hs, ws, he, we = _corners(e, boxes, str_param(e, op, "box_coordinate_mode"))
    scale = float_param(e, op, "spatial_scale")
    norm = bool_param(e, op, "normalized_coordinates")
    axes = []
    for (start, end), n_in, n_out in (((hs, he), h, th), ((ws, we), w, tw)):
        factor = np.float32(scale) * (np.float32(n_in - 1) if norm else np.float32(1))
        if factor != 1:
            start, end = (e.node("Mul", [v, e.scalar(factor, "fp32")]) for v in (start, end))
        pos = _positions(e, mode, start, end, n_out)  # [N, n_out]
        outside = e.node("Or", [e.node("Less", [pos, e.scalar(np.float32(0), "fp32")]),
                                e.node("Greater", [pos, e.scalar(np.float32(n_in - 1), "fp32")])])
        pos = e.node("Clip", [pos, e.scalar(np.float32(0), "fp32"), e.scalar(np.float32(n_in - 1), "fp32")])
        a, b = _to_grid(n_in, True)
        axes.append((e.node("Add", [e.node("Mul", [pos, e.scalar(np.float32(a), "fp32")]),
                                    e.scalar(np.float32(b), "fp32")]), outside))
    (gy, out_y), (gx, out_x) = axes
    gy = e.node("Unsqueeze", [gy, e.int64s([2, 3])])  # [N, th, 1, 1]
    gx = e.node("Unsqueeze", [gx, e.int64s([1, 3])])  # [N, 1, tw, 1]
    n = e.node("Shape", [boxes], start=0, end=1)
    full = e.node("Concat", [n, e.int64s([th, tw, 1])], axis=0)
    grid = e.node("Concat", [e.node("Expand", [gx, full]), e.node("Expand", [gy, full])], axis=3)  # [N, th, tw, 2]
    mask = e.node("Or", [e.node("Unsqueeze", [out_y, e.int64s([2])]), e.node("Unsqueeze", [out_x, e.int64s([1])])])
    mask = e.node("Unsqueeze", [mask, e.int64s([1])])  # [N, 1, th, tw]
    pad = np.float32(float_param(e, op, "pad_value")) if "pad_value" in op.opdef.signature.inputs else np.float32(0)
    if every_image:  # every box on every image: [N * B] samples, image index fastest
        batch = e.node("Shape", [x], start=0, end=1)
        images = e.node("Tile", [x, e.node("Concat", [n, e.int64s([1, 1, 1])], axis=0)])  # [N*B, C, H, W]
        nb = e.node("Mul", [n, batch])
        grid = e.node("Reshape", [e.node("Expand", [e.node("Unsqueeze", [grid, e.int64s([1])]), e.node(
            "Concat", [n, batch, e.int64s([th, tw, 2])], axis=0)]), e.node("Concat", [nb, e.int64s([th, tw, 2])],
                                                                            axis=0)])
        mask = e.node("Reshape", [e.node("Expand", [e.node("Unsqueeze", [mask, e.int64s([1])]), e.node(
            "Concat", [n, batch, e.int64s([1, th, tw])], axis=0)]), e.node("Concat", [nb, e.int64s([1, th, tw])],
                                                                            axis=0)])
    else:
        images = e.node("Gather", [x, indices], axis=0)
    y = e.node("GridSample", [images, grid], mode=_linear_mode(e), padding_mode="border", align_corners=1)
    y = e.node("Where", [mask, e.scalar(pad, "fp32"), y])
    if not ios17:  # [N, B or 1, C, th, tw]
        lead = e.node("Concat", [n, e.int64s([-1])], axis=0)
        y = e.node("Reshape", [y, e.node("Concat", [lead, e.node("Shape", [x], start=1, end=2),
                                                    e.int64s([th, tw])], axis=0)])
    finish_fp32(e, op, y)
