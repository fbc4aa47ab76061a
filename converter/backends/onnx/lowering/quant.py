"""Compressed weights (constexpr_*) and run-time quantize / dequantize (converter/ir/ops/quant.py).

A constexpr op is a constant whose compressed form is what keeps a model small; it is written in
a form onnxruntime expands exactly, else materialized (the IR kernel run at conversion time, the
dense result an initializer):

- ``constexpr_affine_dequantize`` and the integer ``constexpr_blockwise_shift_scale``:
  ``DequantizeLinear`` (``(q - zero_point) * scale`` in fp32, as MIL computes it) per tensor, per
  axis, or blocked along one axis (opset 21; a scale that also varies along another axis, float
  data or offset, and below opset 21 a blocked layout or 4-bit data are materialized). A scale of size 1 along
  the other axes is repeated to the data's size there, as blocked DequantizeLinear requires. An
  fp16 result is DequantizeLinear with the fp32 scale, then Cast: one rounding, as in MIL.
- ``constexpr_lut_to_dense`` with one scalar table (iOS16; iOS18 without blocks or vectors):
  ``Gather(lut, Cast(indices))``, the indices unpacked to one uint8 each at conversion time;
  other iOS18 tables are materialized.
- ``constexpr_cast``: ``Cast`` of the fp16 initializer (exact).
- ``constexpr_sparse_to_dense``, ``constexpr_lut_to_sparse``, ``constexpr_sparse_blockwise_shift_scale``:
  materialized (a uint1 mask has no ONNX type: such a value is only read by the constexpr op that
  materializes the dense tensor from it).
- ``quantize``: ``QuantizeLinear`` in fp32 (round half to even, saturation as in MIL) after NaN is
  replaced by 0 (MIL's quantize gives the zero point for NaN; ONNX leaves it undefined);
  ``dequantize``: ``DequantizeLinear``, Cast to fp16 when the scale is fp16.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....errors import LoweringError
from ....ir.bitpack import unpack_subbyte
from ....ir.core import Op, Value
from ....ir.shapes import normalize_axis
from ....ir.types import DType
from ..emitter import ONNX_TYPES, OnnxEmitter, onnx_type
from ._params import known_value, materialize
from .registry import lowering

_MATERIALIZED_NOTE = "materialized: the dense constant as an initializer (no exact ONNX form)"


def _known(v: Value) -> Any:
    """The value of a constant or of a constexpr op's result (evaluated at conversion time)."""
    val = known_value(v)
    if val is None:
        raise LoweringError(f"'{v.name}' must be a constant")
    return val


def _write_materialized(e: OnnxEmitter, op: Op) -> None:
    values = materialize(op)
    for i, (v, val) in enumerate(zip(op.outputs, values)):
        dt = e.dtype(v)
        if dt.name in ONNX_TYPES:
            e.constant(np.asarray(val), onnx_type(dt), name=e.out(op, i))
            continue
        readers = [u for u in v.users() if u.opdef is None or "constexpr" not in u.opdef.traits]
        if readers:
            raise LoweringError(f"result '{v.name}' is {dt.name}, which ONNX has no type for, and "
                                f"'{readers[0].type}' reads it")


@lowering("constexpr_sparse_to_dense", "constexpr_lut_to_sparse", "constexpr_sparse_blockwise_shift_scale",
          kind="decomposed", note=_MATERIALIZED_NOTE)
def _materialized(e: OnnxEmitter, op: Op) -> None:
    _write_materialized(e, op)


@lowering("constexpr_cast", note="Cast of the fp16 initializer to fp32")
def _constexpr_cast(e: OnnxEmitter, op: Op) -> None:
    e.node("Cast", [e.input(op, "source_val")], [e.out(op)], to=onnx_type("fp32"))


# -- DequantizeLinear -----------------------------------------------------------------------------


def _dequantize_linear(e: OnnxEmitter, op: Op, data: np.ndarray, data_dt: DType, scale: np.ndarray,
                       zero_point: np.ndarray | None, out_dt: DType, axis: int | None = None,
                       block_size: int | None = None) -> None:
    """``(data - zero_point) * scale`` as DequantizeLinear with an fp32 scale, then Cast when the
    result is fp16; the data and zero point stay in their integer type."""
    q = e.constant(data, onnx_type(data_dt))
    s = e.constant(np.asarray(scale, np.float32))
    zp = None if zero_point is None else e.constant(np.asarray(zero_point), onnx_type(data_dt))
    attrs = {"axis": axis, "block_size": block_size}
    if out_dt.name == "fp32":
        e.node("DequantizeLinear", [q, s, zp], [e.out(op)], **attrs)
    else:
        e.node("Cast", [e.node("DequantizeLinear", [q, s, zp], **attrs)], [e.out(op)], to=onnx_type(out_dt))


def _per_axis(scale: np.ndarray, zp: np.ndarray | None, shape: tuple[int, ...], axis: int
              ) -> tuple[np.ndarray, np.ndarray | None, int | None]:
    """Scale and zero point as ONNX wants them: both scalars (per tensor) or both vectors along axis."""
    scale, zp = np.asarray(scale), None if zp is None else np.asarray(zp)
    if scale.ndim == 0 and (zp is None or zp.ndim == 0):
        return scale, zp, None
    n = shape[axis]
    scale = np.broadcast_to(scale.reshape(-1), (n,)).copy()
    if zp is not None:
        zp = np.broadcast_to(zp.reshape(-1), (n,)).copy()
    return scale, zp, axis


@lowering("constexpr_affine_dequantize", note="DequantizeLinear (per tensor or per axis), Cast to fp16")
def _affine_dequantize(e: OnnxEmitter, op: Op) -> None:
    data = np.asarray(_known(op.inputs["quantized_data"]))
    axis = normalize_axis(int(np.asarray(e.const_param(op, "axis"))), data.ndim)
    scale, zp, ax = _per_axis(np.asarray(_known(op.inputs["scale"])), np.asarray(_known(op.inputs["zero_point"])),
                              data.shape, axis)
    _dequantize_linear(e, op, data, e.dtype(op.inputs["quantized_data"]), scale, zp, e.dtype(op.outputs[0]), ax)


def _block_layout(data_shape: tuple[int, ...], scale_shape: tuple[int, ...]) -> tuple[str, int | None, int | None]:
    """How a block-wise scale maps to DequantizeLinear: ("tensor"|"axis"|"blocked"|"none", axis, block).

    Blocked DequantizeLinear takes a scale of the data's shape except along one axis; a scale of
    size 1 along other axes is repeated there. Blocks on two axes have no DequantizeLinear form."""
    if all(m == 1 for m in scale_shape):
        return "tensor", None, None
    full = [i for i, (n, m) in enumerate(zip(data_shape, scale_shape)) if m == n and n > 1]
    if len(full) == 1 and all(m == 1 or i == full[0] for i, m in enumerate(scale_shape)):
        return "axis", full[0], None
    blocked = [i for i, (n, m) in enumerate(zip(data_shape, scale_shape)) if 1 < m < n]
    if len(blocked) > 1:
        return "none", None, None
    if blocked:
        axis = blocked[0]
    else:  # a scale varying along several whole axes: blocks of 1 along the first one
        axis = full[0]
    return "blocked", axis, data_shape[axis] // scale_shape[axis]


@lowering("constexpr_blockwise_shift_scale",
          note="DequantizeLinear (per tensor, per axis, or blocked along one axis from opset 21) for integer "
               "data and offset; else materialized")
def _blockwise_shift_scale(e: OnnxEmitter, op: Op) -> None:
    data_v = op.inputs["data"]
    data_dt = e.dtype(data_v)
    off_v = op.inputs.get("offset")
    off_dt = e.dtype(off_v) if isinstance(off_v, Value) else None
    data = np.asarray(_known(data_v))
    scale = np.asarray(_known(op.inputs["scale"]))
    kind, axis, block = _block_layout(data.shape, scale.shape)
    exact = (data_dt.is_int and data_dt.name in ONNX_TYPES and (off_dt is None or off_dt == data_dt)
             and kind != "none" and (e.opset >= 21 or (kind != "blocked" and data_dt.bits == 8)))
    if not exact:
        _write_materialized(e, op)
        return
    offset = None if off_dt is None else np.asarray(_known(off_v))
    out_dt = e.dtype(op.outputs[0])
    if kind == "tensor":
        _dequantize_linear(e, op, data, data_dt, scale.reshape(()), None if offset is None else offset.reshape(()),
                           out_dt)
    elif kind == "axis":
        _dequantize_linear(e, op, data, data_dt, scale.reshape(-1), None if offset is None else offset.reshape(-1),
                           out_dt, axis)
    else:  # blocked along `axis`: the other dims repeated to the data's size
        full = tuple(m if i == axis else n for i, (n, m) in enumerate(zip(data.shape, scale.shape)))
        scale = np.broadcast_to(scale, full).copy()
        offset = None if offset is None else np.broadcast_to(offset, full).copy()
        _dequantize_linear(e, op, data, data_dt, scale, offset, out_dt, axis, block)


# -- palettization --------------------------------------------------------------------------------


@lowering("constexpr_lut_to_dense", kind="decomposed",
          note="Gather(lut, Cast(uint8 indices)) for one scalar table; else materialized")
def _lut_to_dense(e: OnnxEmitter, op: Op) -> None:
    lut = np.asarray(_known(op.inputs["lut"]))
    indices = np.asarray(_known(op.inputs["indices"]))
    if op.opdef.signature.since == "iOS18":
        if lut.shape[-1] != 1 or any(d != 1 for d in lut.shape[:-2]):
            _write_materialized(e, op)
            return
        lut = lut.reshape(-1)
        idx = indices.astype(np.uint8)
    else:
        shape = tuple(int(d) for d in np.asarray(e.const_param(op, "shape")).reshape(-1))
        nbits = lut.size.bit_length() - 1
        idx = unpack_subbyte(indices.astype(np.uint8), nbits, int(np.prod(shape))).reshape(shape)
    table = e.constant(lut, onnx_type(e.dtype(op.inputs["lut"])))
    positions = e.cast(e.constant(idx, onnx_type("uint8")), "int32")
    e.node("Gather", [table, positions], [e.out(op)], axis=0)


# -- run-time quantization ---------------------------------------------------------------------------


def _quant_params(e: OnnxEmitter, op: Op, x: Value, out_dt: DType) -> tuple[str, str, int | None]:
    """fp32 scale, zero point of the integer type (zeros when absent), axis (None: per tensor)."""
    scale = np.asarray(e.const_param(op, "scale"), np.float32)
    zp_v = op.inputs.get("zero_point")
    zp = np.asarray(e.const_param(op, "zero_point")) if isinstance(zp_v, Value) else np.zeros(scale.shape,
                                                                                                out_dt.storage)
    axis = None
    if scale.ndim:
        axis = normalize_axis(int(np.asarray(e.const_param(op, "axis"))), e.rank(x))
    return e.constant(scale), e.constant(zp.astype(out_dt.storage), onnx_type(out_dt)), axis


@lowering("quantize", kind="decomposed", note="QuantizeLinear in fp32 after NaN -> 0 (MIL: NaN gives the zero point)")
def _quantize(e: OnnxEmitter, op: Op) -> None:
    x = op.inputs["input"]
    out_dt = e.dtype(op.outputs[0])
    scale, zp, axis = _quant_params(e, op, x, out_dt)
    xf = e.name(x) if e.dtype(x).name == "fp32" else e.cast(e.name(x), "fp32")
    xf = e.node("Where", [e.node("IsNaN", [xf]), e.scalar(0.0, "fp32"), xf])
    e.node("QuantizeLinear", [xf, scale, zp], [e.out(op)], axis=axis)


@lowering("dequantize", note="DequantizeLinear with an fp32 scale, Cast to fp16 for an fp16 scale")
def _dequantize(e: OnnxEmitter, op: Op) -> None:
    x = op.inputs["input"]
    scale, zp, axis = _quant_params(e, op, x, e.dtype(x))
    out_dt = e.dtype(op.outputs[0])
    if out_dt.name == "fp32":
        e.node("DequantizeLinear", [e.name(x), scale, zp], [e.out(op)], axis=axis)
    else:
        y = e.node("DequantizeLinear", [e.name(x), scale, zp], axis=axis)
        e.node("Cast", [y], [e.out(op)], to=onnx_type(out_dt))
