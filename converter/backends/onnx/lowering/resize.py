"""Resizing (converter/ir/ops/image.py): upsample_nearest_neighbor, upsample_bilinear,
resize_nearest_neighbor, resize_bilinear, resize.

Linear: ONNX ``Resize(mode="linear")`` with ``sizes`` (the sample positions follow the actual
sizes, as MIL's do) where MIL's sampling mode has an ONNX coordinate transformation:

    STRICT_ALIGN_CORNERS -> align_corners (one output sample: position 0, as ONNX gives)
    ALIGN_CORNERS        -> align_corners when the output has more than one sample
    DEFAULT              -> asymmetric  (i * in / out)
    UNALIGN_CORNERS      -> half_pixel  ((i + 0.5) * in / out - 0.5)

ONNX's linear mode clamps positions to the input as MIL does. ALIGN_CORNERS with one sample (the
centre) and OFFSET_CORNERS have no ONNX mode: the positions are computed at conversion time (the
IR's sampling grid; static input sizes) and the result is ``Gather(lo) * (1 - t) + Gather(hi) * t``
per axis, MIL's formula.

Nearest: with static input sizes, ``Gather`` of the source indices computed at conversion time by
MIL's rule (exact whatever the float rounding of a runtime). Otherwise ``Resize(mode="nearest")``:
upsample_nearest_neighbor with integer scales as ``asymmetric``/``floor``, the half-pixel rule of
resize_nearest_neighbor / resize as ``tf_half_pixel_for_nn``/``floor``.

Resize runs on a rank-4 view ``[-1, 1, H, W]`` of the input (onnxruntime's linear Resize takes
2-D or 4-D data); ``axes`` is not needed. fp16 is computed in fp32 and rounded once; an int32
``resize`` LINEAR result truncates toward zero (Cast), as MIL's does.
"""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....ir.core import Op, Value
from ....ir.ops.image import half_pixel_nearest, sampling_grid
from ....ir.types import DType, TensorType, is_static_dim
from ..emitter import OnnxEmitter
from ._common import bool_param, finish_fp32, float_param, int_param, str_param
from .registry import lowering

_COORDINATE_MODES = {"STRICT_ALIGN_CORNERS": "align_corners", "ALIGN_CORNERS": "align_corners",
                     "DEFAULT": "asymmetric", "UNALIGN_CORNERS": "half_pixel"}


def _dims(e: OnnxEmitter, v: Value, k: int) -> list[int | None]:
    """The last ``k`` dims of ``v`` (None where symbolic)."""
    shape = e.tensor_type(v).shape
    if shape is None:
        raise LoweringError(f"'{v.name}' has an unknown rank")
    return [int(d) if is_static_dim(d) else None for d in shape[-k:]]


def _shape_of(e: OnnxEmitter, v: Value) -> str:
    """``v``'s shape as an int64 tensor (a constant when static)."""
    t = e.tensor_type(v)
    if t.shape is not None and all(is_static_dim(d) for d in t.shape):
        return e.int64s([int(d) for d in t.shape])
    return e.node("Shape", [e.name(v)])


def _out_shape(e: OnnxEmitter, op: Op, sizes: str) -> str:
    """The result's shape: the input's leading dims then ``sizes`` (int64 [2])."""
    t = e.tensor_type(op.outputs[0])
    if t.shape is not None and all(is_static_dim(d) for d in t.shape):
        return e.int64s([int(d) for d in t.shape])
    lead = e.node("Slice", [e.node("Shape", [e.input(op)]), e.int64s([0]), e.int64s([-2])])
    return e.node("Concat", [lead, sizes], axis=0)


def _compute_dtype(e: OnnxEmitter, x: str, dt: DType) -> str:
    return x if dt.name == "fp32" else e.cast(x, "fp32")




def _resize_node(e: OnnxEmitter, op: Op, x: str, sizes: str, out_hw: list[int] | None, **attrs: object) -> str:
    """ONNX Resize of the last two dims of ``x`` (``op``'s input) to ``sizes`` (int64 [2]; its
    value ``out_hw`` when known)."""
    xv = op.inputs["x"]
    rank = e.rank(xv)
    h, w = _dims(e, xv, 2)
    if rank == 4:
        x4 = x
    elif h is not None and w is not None:
        x4 = e.node("Reshape", [x, e.int64s([-1, 1, h, w])])
    else:
        hw = e.node("Slice", [e.node("Shape", [x]), e.int64s([-2]), e.int64s([rank])])
        x4 = e.node("Reshape", [x, e.node("Concat", [e.int64s([-1, 1]), hw], axis=0)])
    shape = e.tensor_type(xv).shape
    if shape is not None and all(is_static_dim(d) for d in shape) and out_hw is not None:
        lead = [int(d) for d in shape[:2]] if rank == 4 else [int(np.prod([int(d) for d in shape[:-2]])), 1]
        full = e.int64s(lead + list(out_hw))
    else:
        lead4 = e.node("Slice", [e.node("Shape", [x4]), e.int64s([0]), e.int64s([2])])
        full = e.node("Concat", [lead4, sizes], axis=0)
    y4 = e.node("Resize", [x4, None, None, full], **attrs)
    return y4 if rank == 4 else e.node("Reshape", [y4, _out_shape(e, op, sizes)])


def _gather_nearest(e: OnnxEmitter, x: str, rank: int, indices: list[np.ndarray]) -> str:
    for axis, idx in zip((rank - 2, rank - 1), indices):
        x = e.node("Gather", [x, e.constant(np.asarray(idx, np.int64))], axis=axis)
    return x


def _lerp_axis(e: OnnxEmitter, x: str, rank: int, axis: int, n_in: int, pos: np.ndarray) -> str:
    """MIL's linear interpolation along ``axis`` at conversion-time positions within [0, n_in - 1]."""
    lo = np.clip(np.floor(pos), 0, n_in - 1).astype(np.int64)
    hi = np.minimum(lo + 1, n_in - 1)
    frac = (pos - lo).astype(np.float32).reshape((-1,) + (1,) * (rank - 1 - axis))
    a = e.node("Gather", [x, e.constant(lo)], axis=axis)
    b = e.node("Gather", [x, e.constant(hi)], axis=axis)
    return e.node("Add", [e.node("Mul", [a, e.constant(1 - frac)]), e.node("Mul", [b, e.constant(frac)])])


def _linear(e: OnnxEmitter, op: Op, out_hw: list[int] | None, mode: str, sizes: str | None = None,
            resized: int = 2) -> None:
    """Bilinear resize of the last two dims to ``out_hw`` (or the runtime ``sizes``) with MIL's
    sampling ``mode`` (of the last ``resized`` dims only: the others keep their size and samples);
    result in the op's dtype."""
    xv = op.inputs["x"]
    dt = e.dtype(xv)
    x = _compute_dtype(e, e.name(xv), dt)
    rank = e.rank(xv)
    coord = _COORDINATE_MODES.get(mode)
    if mode == "ALIGN_CORNERS" and (out_hw is None or 1 in out_hw):
        coord = None
    if coord is not None:
        sizes = sizes or e.int64s(out_hw)
        y = _resize_node(e, op, x, sizes, out_hw, mode="linear", coordinate_transformation_mode=coord)
        finish_fp32(e, op, y, dt)
        return
    in_hw = _dims(e, xv, 2)
    if out_hw is None or None in in_hw:
        raise LoweringError(f"sampling_mode {mode} is written with positions computed at conversion time and "
                            f"needs static sizes, got x {e.tensor_type(xv)}")
    for axis, n_in, n_out in list(zip((rank - 2, rank - 1), in_hw, out_hw))[2 - resized:]:
        x = _lerp_axis(e, x, rank, axis, n_in, sampling_grid(mode, 0.0, float(n_in - 1), n_out))
    finish_fp32(e, op, x, dt)


@lowering("resize_bilinear", note="Resize linear (align_corners / asymmetric / half_pixel per sampling_mode); "
                                  "Gather + lerp for OFFSET_CORNERS and one-sample ALIGN_CORNERS")
def _resize_bilinear(e: OnnxEmitter, op: Op) -> None:
    out_hw = [int_param(e, op, "target_size_height"), int_param(e, op, "target_size_width")]
    _linear(e, op, out_hw, str_param(e, op, "sampling_mode"))


def _upsample_sizes(e: OnnxEmitter, op: Op) -> tuple[list[int] | None, str, tuple[float, float]]:
    """Output sizes floor(in * scale): static, or computed at run time (int64 [2])."""
    scales = (float_param(e, op, "scale_factor_height"), float_param(e, op, "scale_factor_width"))
    t = e.tensor_type(op.outputs[0])
    if t.shape is not None and all(is_static_dim(d) for d in t.shape[-2:]):
        out_hw = [int(d) for d in t.shape[-2:]]
        return out_hw, e.int64s(out_hw), scales
    rank = e.rank(op.inputs["x"])
    hw = e.cast(e.node("Slice", [e.node("Shape", [e.input(op)]), e.int64s([rank - 2]), e.int64s([rank])]), "fp64")
    scaled = e.node("Floor", [e.node("Mul", [hw, e.constant(np.asarray(scales, np.float64))])])
    return None, e.cast(scaled, "int64"), scales


@lowering("upsample_bilinear", note="Resize linear with sizes (align_corners, half_pixel or asymmetric)")
def _upsample_bilinear(e: OnnxEmitter, op: Op) -> None:
    align = bool_param(e, op, "align_corners")
    half = (not align) if not isinstance(op.inputs.get("half_pixel_centers"), Value) else bool_param(
        e, op, "half_pixel_centers")
    mode = "STRICT_ALIGN_CORNERS" if align else "UNALIGN_CORNERS" if half else "DEFAULT"
    out_hw, sizes, _ = _upsample_sizes(e, op)
    _linear(e, op, out_hw, mode, sizes)


@lowering("upsample_nearest_neighbor", note="Gather of MIL's source indices (static sizes); Resize nearest "
                                            "asymmetric/floor for integer scales otherwise")
def _upsample_nearest(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    in_hw = _dims(e, xv, 2)
    out_hw, sizes, scales = _upsample_sizes(e, op)
    if None not in in_hw and out_hw is not None:
        idx = []
        for n_in, n_out, s in zip(in_hw, out_hw, scales):
            inv = np.float32(1.0 / s)
            idx.append(np.minimum(np.floor(np.arange(n_out, dtype=np.float32) * inv).astype(np.int64), n_in - 1))
        e.node("Identity", [_gather_nearest(e, e.name(xv), e.rank(xv), idx)], [e.out(op)])
        return
    if any(s != int(s) for s in scales):
        raise LoweringError(f"fractional scale factors {scales} need static input sizes, got x {e.tensor_type(xv)}")
    y = _resize_node(e, op, e.name(xv), sizes, out_hw, mode="nearest", coordinate_transformation_mode="asymmetric",
                     nearest_mode="floor")
    e.node("Identity", [y], [e.out(op)])


def _nearest_half_pixel(e: OnnxEmitter, op: Op, out_hw: list[int] | None, sizes: str) -> None:
    xv = op.inputs["x"]
    in_hw = _dims(e, xv, 2)
    if None not in in_hw and out_hw is not None:
        idx = [half_pixel_nearest(n_in, n_out) for n_in, n_out in zip(in_hw, out_hw)]
        e.node("Identity", [_gather_nearest(e, e.name(xv), e.rank(xv), idx)], [e.out(op)])
        return
    y = _resize_node(e, op, e.name(xv), sizes, out_hw, mode="nearest",
                     coordinate_transformation_mode="tf_half_pixel_for_nn",
                     nearest_mode="floor")
    e.node("Identity", [y], [e.out(op)])


@lowering("resize_nearest_neighbor", note="Gather of the half-pixel source indices floor((i + 0.5) in / out)")
def _resize_nearest(e: OnnxEmitter, op: Op) -> None:
    out_hw = [int_param(e, op, "target_size_height"), int_param(e, op, "target_size_width")]
    _nearest_half_pixel(e, op, out_hw, e.int64s(out_hw))


@lowering("resize", note="as resize_bilinear / resize_nearest_neighbor; run-time sizes through Resize")
def _resize(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    n = int_param(e, op, "resized_dims")
    rank = e.rank(xv)
    t = e.tensor_type(op.outputs[0])
    if n == 0:
        e.node("Identity", [e.name(xv)], [e.out(op)])
        return
    if n not in (1, 2) or rank < 2:
        raise LoweringError(f"resized_dims {n} of a rank-{rank} x: written for 1 or 2 resized dims")
    out_hw: list[int] | None = None
    if isinstance(t, TensorType) and t.shape is not None and all(is_static_dim(d) for d in t.shape[-2:]):
        out_hw = [int(d) for d in t.shape[-2:]]
        sizes = e.int64s(out_hw)
    else:  # run-time sizes: the tail of `shape`, 0 keeping the input's size
        tail = e.node("Slice", [e.cast(e.input(op, "shape"), "int64"), e.int64s([-n]),
                                e.int64s([np.iinfo(np.int64).max])])
        have = e.node("Slice", [e.node("Shape", [e.name(xv)]), e.int64s([rank - n]), e.int64s([rank])])
        tail = e.node("Where", [e.node("Equal", [tail, e.int64s([0])]), have, tail])
        sizes = tail if n == 2 else e.node("Concat", [e.node("Slice", [e.node("Shape", [e.name(xv)]),
                                                                       e.int64s([rank - 2]), e.int64s([rank - 1])]),
                                                      tail], axis=0)
    if str_param(e, op, "interpolation_mode") == "NEAREST_NEIGHBOR":
        _nearest_half_pixel(e, op, out_hw, sizes)
        return
    _linear(e, op, out_hw, str_param(e, op, "sampling_mode"), sizes, resized=n)
