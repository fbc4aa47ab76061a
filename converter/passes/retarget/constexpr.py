"""Weight-compression (constexpr_*) ops between the iOS16/17 and iOS18 forms, both ways.

iOS16/17 -> iOS18
- constexpr_lut_to_dense: packed uint8 ``indices`` + flat ``lut`` + ``shape`` -> unpacked
  ``uint<n>`` indices of the weight's shape and a ``[1, .., 1, 2^n, 1]`` per-tensor lut.
- constexpr_sparse_to_dense: packed uint8 ``mask`` + ``shape`` -> a ``uint1`` mask of the weight's shape.
- constexpr_affine_dequantize -> constexpr_blockwise_shift_scale (the iOS18 form coremltools writes):
  scale / zero point (scalar or per-``axis``) become rank-matched ``[1, .., n, .., 1]`` tensors; an
  integer zero point of another dtype than the data becomes an fp32 offset (exact).
  Both compute ``scale * (data - offset)`` in fp32 with one rounding for int/fp32 offsets, so the
  dense weights are bit-identical.

iOS18 -> iOS16/17
- constexpr_lut_to_dense: a per-tensor scalar lut of 2/4/16/64/256 entries maps directly;
  per-block or vector luts, and 3-bit indices, are re-encoded as one table of the distinct values
  (exact) when there are at most 256 of them; otherwise there is no iOS16 form.
- constexpr_sparse_to_dense: the uint1 mask is packed; 4-bit data has no iOS16 form.
- constexpr_blockwise_shift_scale -> constexpr_affine_dequantize when the scale varies along at
  most one axis (blocks along it are expanded per element, exact); 4-bit data is widened to 8 bits
  (still compressed, said in a note); float data or scales varying along several axes have no
  iOS16 form.
- iOS16 cannot chain constexpr ops: an input computed by another constexpr op (joint compression:
  a quantized lut, palettized or quantized sparse values) is stored as the constant it computes
  and the outer compression is kept (said in a note).

Whatever has no form in the target is left to the MIL writer, which stores the dense weight, and
a note says so (see ``Context.decompress``).
"""

from __future__ import annotations

import numpy as np

from ...ir.bitpack import pack_subbyte, unpack_subbyte
from ...ir.core import Op, Value
from ...ir.shapes import normalize_axis
from ...ir.types import DTYPES, TensorType, is_static_shape
from .context import Context, Refusal, is_constexpr

IOS16_LUT_SIZES = (2, 4, 16, 64, 256)
_WIDER = {"int4": "int8", "uint4": "uint8"}


def _ints(val: object) -> tuple[int, ...]:
    return tuple(int(d) for d in np.asarray(val).reshape(-1))


def _dense_shape(op: Op) -> tuple[int, ...]:
    t = op.outputs[0].type
    if not isinstance(t, TensorType) or not is_static_shape(t.shape):
        raise Refusal(f"the weight's shape {t} is not static")
    return tuple(int(d) for d in t.shape)


def _dtype_of(v: Value) -> str:
    assert isinstance(v.type, TensorType)
    return v.type.dtype.name


def operand(ctx: Context, op: Op, key: str) -> Value:
    """``op``'s input ``key`` as the target can bind it: as it is, or, when it is computed by another
    constexpr op and the target cannot chain them, as the constant it computes (with a note)."""
    v = op.inputs[key]
    assert isinstance(v, Value)
    if v.is_const or ctx.chains_constexpr():
        return v
    producer = v.producer
    assert producer is not None
    ctx.note(f"{op.type}: input '{key}' is computed by {producer.type}, and {ctx.target} cannot chain "
             "constexpr ops: that input is stored as the constant it computes (the outer compression is kept)", op)
    return ctx.const(op, ctx.value(v), _dtype_of(v), f"{op.name}_{key}")


# ---------------------------------------------------------------------------------------------
# iOS16/17 -> iOS18


def lut_to_ios18(ctx: Context, op: Op) -> None:
    lut = np.asarray(ctx.value(op.inputs["lut"]))
    shape = _ints(ctx.value(op.inputs["shape"]))
    if not shape:
        ctx.decompress(op, f"a scalar lookup table has no {ctx.target} form (its indices need rank >= 1)")
        return
    nbits = lut.size.bit_length() - 1
    indices = unpack_subbyte(np.asarray(ctx.value(op.inputs["indices"]), np.uint8), nbits, int(np.prod(shape)))
    new = ctx.op(op, "constexpr_lut_to_dense", {
        "indices": ctx.const(op, indices.reshape(shape), f"uint{nbits}", f"{op.name}_indices"),
        "lut": ctx.const(op, lut.reshape((1,) * len(shape) + (lut.size, 1)), _dtype_of(op.inputs["lut"]),
                         f"{op.name}_lut"),
    }, op.name, [op.outputs[0].name])
    ctx.replace(op, new.outputs)


def sparse_to_ios18(ctx: Context, op: Op) -> None:
    shape = _ints(ctx.value(op.inputs["shape"]))
    if not shape:
        ctx.decompress(op, f"a scalar sparse value has no {ctx.target} form (its mask needs rank >= 1)")
        return
    mask = unpack_subbyte(np.asarray(ctx.value(op.inputs["mask"]), np.uint8), 1, int(np.prod(shape)))
    new = ctx.op(op, "constexpr_sparse_to_dense", {
        "nonzero_data": op.inputs["nonzero_data"],
        "mask": ctx.const(op, mask.reshape(shape), "uint1", f"{op.name}_mask"),
    }, op.name, [op.outputs[0].name])
    ctx.replace(op, new.outputs)


def affine_to_blockwise(ctx: Context, op: Op) -> None:
    data = op.inputs["quantized_data"]
    assert isinstance(data, Value) and isinstance(data.type, TensorType)
    rank = len(data.type.shape or ())
    if rank == 0:  # blockwise_shift_scale needs rank >= 1; iOS18 still has the iOS16 op
        ctx.repoint(op)
        return
    axis = normalize_axis(int(np.asarray(ctx.value(op.inputs["axis"]))), rank)
    scale, zero_point = np.asarray(ctx.value(op.inputs["scale"])), np.asarray(ctx.value(op.inputs["zero_point"]))
    n = max(scale.size, zero_point.size)
    shape = [1] * rank
    if scale.ndim or zero_point.ndim:
        shape[axis] = n
    offset_dtype = _dtype_of(op.inputs["zero_point"])
    if offset_dtype not in ("fp32", _dtype_of(data)):
        offset_dtype = "fp32"  # an integer offset must have the data's dtype; fp32 holds it exactly
    new = ctx.op(op, "constexpr_blockwise_shift_scale", {
        "data": data,
        "scale": ctx.const(op, np.broadcast_to(scale.reshape(-1) if scale.ndim else scale, (n,)).reshape(shape),
                           _dtype_of(op.inputs["scale"]), f"{op.name}_scale"),
        "offset": ctx.const(op, np.broadcast_to(zero_point.reshape(-1) if zero_point.ndim else zero_point,
                                                (n,)).reshape(shape).astype(DTYPES[offset_dtype].storage),
                            offset_dtype, f"{op.name}_offset"),
    }, op.name, [op.outputs[0].name])
    ctx.replace(op, new.outputs)


# ---------------------------------------------------------------------------------------------
# iOS18 -> iOS16/17


def _bits_view(a: np.ndarray) -> np.ndarray:
    """The raw bits of a float/int array as unsigned integers (so -0.0, 0.0 and NaN payloads stay apart)."""
    return np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")


def one_table(lut: np.ndarray, dense: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(table of 2/4/16/64/256 entries, codes) with ``table[codes] == dense`` bit for bit, when the
    dense values have at most 256 distinct bit patterns; else None."""
    values = np.unique(_bits_view(lut).reshape(-1))
    bits = _bits_view(dense).reshape(-1)
    if values.size > 256:
        values = np.unique(bits)
        if values.size > 256:
            return None
    size = next(s for s in IOS16_LUT_SIZES if s >= values.size)
    table = np.concatenate([values, np.full(size - values.size, values[-1], values.dtype)])
    codes = np.searchsorted(values, bits).astype(np.uint8)
    return table.view(lut.dtype), codes


def lut_to_ios16(ctx: Context, op: Op) -> None:
    shape = _dense_shape(op)
    lut_v = operand(ctx, op, "lut")
    lut = np.asarray(ctx.value(lut_v))
    indices = np.asarray(ctx.value(op.inputs["indices"]))
    palettes, vector_size = lut.shape[-2:]
    if vector_size == 1 and all(d == 1 for d in lut.shape[:-2]) and palettes in IOS16_LUT_SIZES:
        table, codes = lut.reshape(-1), indices.reshape(-1).astype(np.uint8)
    else:
        found = one_table(lut, np.asarray(ctx.value(op.outputs[0])))
        if found is None:
            ctx.decompress(op, f"a per-block or vector lookup table with more than 256 distinct values has no "
                               f"{ctx.target} form")
            return
        table, codes = found
        ctx.note(f"{op.type}: a per-block, vector or 3-bit lookup table is re-encoded as one {ctx.target} "
                 "table of its distinct values (exact)", op)
    nbits = table.size.bit_length() - 1
    new = ctx.op(op, "constexpr_lut_to_dense", {
        "indices": ctx.const(op, pack_subbyte(codes, nbits), "uint8", f"{op.name}_indices"),
        "lut": ctx.const(op, table, _dtype_of(lut_v), f"{op.name}_lut"),
        "shape": ctx.const(op, np.array(shape, np.uint32), "uint32", f"{op.name}_shape"),
    }, op.name, [op.outputs[0].name])
    ctx.replace(op, new.outputs)


def sparse_to_ios16(ctx: Context, op: Op) -> None:
    shape = _dense_shape(op)
    if _dtype_of(op.inputs["nonzero_data"]) in _WIDER:
        raise Refusal(f"4-bit sparse data has no {ctx.target} form (no {ctx.target} op reads a 4-bit tensor)")
    mask = np.asarray(ctx.value(op.inputs["mask"])).reshape(-1).astype(np.uint8)
    new = ctx.op(op, "constexpr_sparse_to_dense", {
        "nonzero_data": operand(ctx, op, "nonzero_data"),
        "mask": ctx.const(op, pack_subbyte(mask, 1), "uint8", f"{op.name}_mask"),
        "shape": ctx.const(op, np.array(shape, np.uint32), "uint32", f"{op.name}_shape"),
    }, op.name, [op.outputs[0].name])
    ctx.replace(op, new.outputs)


def blockwise_to_affine(ctx: Context, op: Op) -> None:
    data_v = op.inputs["data"]
    assert isinstance(data_v, Value)
    data_dtype = _dtype_of(data_v)
    if data_dtype in ("fp16", "fp32"):
        ctx.decompress(op, f"scaled float data has no {ctx.target} form")
        return
    scale = np.asarray(ctx.value(op.inputs["scale"]))
    varying = [i for i, d in enumerate(scale.shape) if d != 1]
    if len(varying) > 1:
        ctx.decompress(op, f"a scale varying along {len(varying)} axes has no {ctx.target} form")
        return
    shape = _dense_shape(op)
    axis = varying[0] if varying else 0

    def per_axis(p: np.ndarray) -> np.ndarray:
        """A block-wise parameter as iOS16 wants it: a scalar, or one value per element of ``axis``."""
        if not varying:
            return p.reshape(())
        return np.repeat(p.reshape(-1), shape[axis] // p.shape[axis])

    wide = _WIDER.get(data_dtype, data_dtype)
    if wide != data_dtype:
        ctx.note(f"{op.type}: 4-bit data is widened to 8 bits ({ctx.target} has no 4-bit form; still compressed)", op)
        data_in = ctx.const(op, np.asarray(ctx.value(data_v)).astype(DTYPES[wide].storage), wide, f"{op.name}_data")
    else:
        data_in = operand(ctx, op, "data")
    if "offset" in op.inputs:
        offset_v = op.inputs["offset"]
        assert isinstance(offset_v, Value)
        offset = np.asarray(ctx.value(offset_v))
        zp_dtype = "fp32" if _dtype_of(offset_v) in ("fp16", "fp32") else wide
    else:
        offset, zp_dtype = np.zeros(scale.shape, DTYPES[wide].storage), wide
    new = ctx.op(op, "constexpr_affine_dequantize", {
        "quantized_data": data_in,
        "zero_point": ctx.const(op, per_axis(offset).astype(DTYPES[zp_dtype].storage), zp_dtype, f"{op.name}_zero_point"),
        "scale": ctx.const(op, per_axis(scale), _dtype_of(op.inputs["scale"]), f"{op.name}_scale"),
        "axis": ctx.const(op, np.int32(axis), "int32", f"{op.name}_axis"),
    }, op.name, [op.outputs[0].name])
    ctx.replace(op, new.outputs)


def no_older_form(ctx: Context, op: Op) -> None:
    """iOS18-only compression (palettized or quantized sparse data) used by ordinary ops."""
    ctx.decompress(op, f"{ctx.target} has no form for it")


def inner_of_chain(ctx: Context, op: Op) -> bool:
    """A constexpr op whose results only other constexpr ops read: in a target that cannot chain
    them, its readers take the constant it computes (see ``operand``), so it is left alone."""
    return not ctx.chains_constexpr() and all(
        is_constexpr(u.user) for v in op.outputs for u in v.uses if isinstance(u.user, Op)) and all(
        isinstance(u.user, Op) for v in op.outputs for u in v.uses) and any(v.uses for v in op.outputs)
