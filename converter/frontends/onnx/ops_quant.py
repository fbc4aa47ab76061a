"""ONNX quantization ops as float / int32 arithmetic in IR ops.

MIL's quantize/dequantize take only constant scales and zero points and int8/uint8 data, so the
ONNX formulas are written out (exact for every integer type the IR holds):

- QuantizeLinear: ``clip(round_half_even(x / scale) + zero_point, qmin, qmax)`` (the division
  in x's float type, as ONNX's reference; the sum in fp32), then cast to the output type: int8,
  uint8, int16, uint16, and int4/uint4/int2/uint2 held in int8/uint8 (already in range, so
  exact). Scales and zero points per tensor (scalar), per axis (1-D along ``axis``) or blocked
  (``block_size``: each entry covers that many elements along ``axis``; expanded with a gather
  of ``i // block_size``). float8/float4 results are refused: the IR cannot round to them.
- DequantizeLinear: ``(x - zero_point) * scale`` in fp32 (float8/float4 inputs are held exactly
  in fp32; the driver casts to the scale's or ``output_dtype``'s type). Constant int8/uint8/
  int4/uint4 weights with constant parameters become one ``constexpr_blockwise_shift_scale``
  (iOS18), so a QDQ model's weights stay compressed in the program.
- DynamicQuantizeLinear: uint8 with ``scale = (max(0, max x) - min(0, min x)) / 255`` (1/255 when
  both are 0) and ``zero_point = round(clip(-min / scale, 0, 255))``, as ONNX's reference.
- MatMulInteger / QLinearMatMul: int32 matmul of the zero-point-shifted operands (exact), then
  QLinearMatMul requantizes ``rint(C * (a_scale * b_scale / y_scale)) + y_zero_point`` in fp32.
- ConvInteger / QLinearConv: the IR conv takes only floats, so the shifted int operands are
  convolved in fp32, which is exact while every partial sum stays below 2**24; when the weights
  could exceed that the weights are split as ``16 * hi + lo`` (two convs, recombined in int32),
  and a layer too large even for that is refused.
"""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto

from ...ir.core import Value
from ...ir.types import is_static_dim
from .context import FLOATS, Ctx, Node, narrow, normalize_axis
from .registry import onnx_op

#: Integer result types: (min, max, IR dtype holding them).
INT_RANGES: dict[int, tuple[int, int, str]] = {
    TensorProto.UINT8: (0, 255, "uint8"), TensorProto.INT8: (-128, 127, "int8"),
    TensorProto.UINT16: (0, 65535, "uint16"), TensorProto.INT16: (-32768, 32767, "int16"),
    TensorProto.UINT4: (0, 15, "uint8"), TensorProto.INT4: (-8, 7, "int8"),
}
for _name, _lo, _hi, _held in (("UINT2", 0, 3, "uint8"), ("INT2", -2, 1, "int8")):
    if hasattr(TensorProto, _name):
        INT_RANGES[getattr(TensorProto, _name)] = (_lo, _hi, _held)
#: fp32 represents every integer of magnitude up to this exactly.
EXACT_FP32_INT = 1 << 24


def _rank(ctx: Ctx, v: Value) -> int:
    if v.type.shape is None:
        raise ctx.unsupported("an operand of unknown rank")
    return len(v.type.shape)


def _f32(ctx: Ctx, v: Value) -> Value:
    return v if v.type.dtype.name == "fp32" else ctx.b.cast(x=v, dtype="fp32")


def quant_param(ctx: Ctx, i: int, x: Value, axis: int, block_size: int) -> Value | None:
    """Input ``i`` (a scale or zero point) in fp32, shaped to broadcast against ``x``: a scalar
    as it is, a 1-D per-axis vector along ``axis``, a blocked tensor repeated ``block_size``
    times along ``axis`` (the last block may be cut short)."""
    if not ctx.has(i):
        return None
    b = ctx.b
    p = _f32(ctx, ctx.input(i))
    rank = _rank(ctx, x)
    prank = _rank(ctx, p)
    if prank == 0:
        return p
    axis = normalize_axis(ctx, axis, rank)
    if block_size <= 0:
        if prank != 1:
            raise ctx.format_error(f"input {i} must be a scalar or a 1-D per-axis tensor without block_size")
        if rank == 0:
            return b.reshape(x=p, shape=[])
        shape = [1] * rank
        shape[axis] = -1
        return b.reshape(x=p, shape=shape)
    if prank != rank:
        raise ctx.format_error(f"input {i} must have the rank of x for blocked quantization")
    n = x.type.shape[axis]
    if not is_static_dim(n):
        raise ctx.unsupported("blocked quantization needs the size of the blocked axis at conversion time")
    idx = (ctx.arange(int(n), "the block index of each element").astype(np.int64) // block_size).astype(np.int32)
    return b.gather(x=p, indices=idx, axis=axis)


def _axis_and_block(ctx: Ctx, x: Value) -> tuple[int, int]:
    """``axis`` (normalized only when in range: a per-tensor scale ignores it) and ``block_size``."""
    rank = _rank(ctx, x)
    axis = int(ctx.attr("axis", 1))
    if -rank <= axis < rank:
        axis %= rank
    return axis, int(ctx.attr("block_size", 0) or 0)


def _result_type(ctx: Ctx, node: Node, zp_index: int) -> int:
    """The ONNX element type of the node's output (shape inference, else the zero point's type,
    else ``output_dtype``, else uint8)."""
    et = ctx.elem_types.get(node.outputs[0])
    if et:
        return et
    et = ctx.input_elem_type(zp_index)
    if et:
        return et
    return int(ctx.attr("output_dtype", 0) or 0) or TensorProto.UINT8


def saturate_to(ctx: Ctx, q: Value, elem_type: int) -> Value:
    """fp32 integers ``q`` clipped to ``elem_type``'s range and cast to the IR dtype holding it."""
    if elem_type not in INT_RANGES:
        from .context import elem_type_name

        raise ctx.unsupported(f"quantizing to {elem_type_name(elem_type)}: Core ML programs cannot round to it")
    lo, hi, held = INT_RANGES[elem_type]
    b = ctx.b
    q = b.minimum(x=b.maximum(x=q, y=np.float32(lo)), y=np.float32(hi))
    return ctx.held_in_range(b.cast(x=q, dtype=held))


@onnx_op("QuantizeLinear", versions=(10, 28))
def quantize_linear(ctx: Ctx, node: Node) -> list[Value]:
    b = ctx.b
    x = ctx.input(0, FLOATS)
    axis, block = _axis_and_block(ctx, x)
    out_type = _result_type(ctx, node, 2)
    if out_type not in INT_RANGES:
        return [saturate_to(ctx, x, out_type)]  # refuses, naming the type
    scale = quant_param(ctx, 1, x, axis, block)
    if x.type.dtype.name != "fp32":  # divide in x's type, as ONNX's reference does
        scale = b.cast(x=scale, dtype=x.type.dtype.name)
    q = _f32(ctx, b.round(x=b.real_div(x=x, y=scale)))
    zp = quant_param(ctx, 2, x, axis, block)
    if zp is not None:
        q = b.add(x=q, y=zp)
    return [saturate_to(ctx, q, out_type)]


#: ONNX integer types a constant DequantizeLinear keeps compressed -> the IR dtype of the data.
CONSTEXPR_DATA = {TensorProto.INT8: "int8", TensorProto.UINT8: "uint8", TensorProto.INT4: "int4",
                  TensorProto.UINT4: "uint4"}


def constant_dequantize(ctx: Ctx, node: Node) -> Value | None:
    """A DequantizeLinear of constant int8/uint8/int4/uint4 data with constant parameters as one
    ``constexpr_blockwise_shift_scale`` (the weights stay compressed in the program), or None when
    the parameters do not fit it (a blocked axis not divisible by block_size, a scalar)."""
    data_type = ctx.input_elem_type(0)
    data, scale = ctx.const_input(0), ctx.const_input(1)
    zp = ctx.const_input(2) if ctx.has(2) else None
    if data_type not in CONSTEXPR_DATA or data is None or scale is None or (ctx.has(2) and zp is None):
        return None
    data, scale = narrow(np.asarray(data), "x"), narrow(np.asarray(scale), "x_scale")
    if data.ndim == 0 or scale.dtype not in (np.float32, np.float16):
        return None
    rank = data.ndim
    axis = int(ctx.attr("axis", 1))
    block = int(ctx.attr("block_size", 0) or 0)
    if scale.ndim == 0 or scale.size == 1 and block <= 0:
        shape = [1] * rank
    elif block <= 0:
        if not -rank <= axis < rank or scale.ndim != 1:
            return None
        shape = [1] * rank
        shape[axis % rank] = scale.size
    else:
        if scale.ndim != rank or not -rank <= axis < rank or data.shape[axis % rank] % block:
            return None
        shape = list(scale.shape)
    b = ctx.b
    inputs = {"data": b.const(data, CONSTEXPR_DATA[data_type]), "scale": b.const(scale.reshape(shape))}
    if zp is not None:
        inputs["offset"] = b.const(narrow(np.asarray(zp), "x_zero_point").reshape(shape), CONSTEXPR_DATA[data_type])
    return b.add_op("constexpr_blockwise_shift_scale", inputs).outputs[0]


@onnx_op("DequantizeLinear", versions=(10, 28))
def dequantize_linear(ctx: Ctx, node: Node) -> list[Value]:
    """Constant weights stay compressed (`constant_dequantize`); else ``(x - zp) * scale`` in fp32."""
    compressed = constant_dequantize(ctx, node)
    if compressed is not None:
        return [compressed]
    b = ctx.b
    x = _f32(ctx, ctx.input(0))
    axis, block = _axis_and_block(ctx, x)
    zp = quant_param(ctx, 2, x, axis, block)
    if zp is not None:
        x = b.sub(x=x, y=zp)
    return [b.mul(x=x, y=quant_param(ctx, 1, x, axis, block))]


@onnx_op("DynamicQuantizeLinear", versions=(11, 11))
def dynamic_quantize_linear(ctx: Ctx, node: Node) -> list[Value]:
    b = ctx.b
    x = _f32(ctx, ctx.input(0, FLOATS))
    hi = b.maximum(x=b.reduce_max(x=x, keep_dims=False), y=np.float32(0))
    lo = b.minimum(x=b.reduce_min(x=x, keep_dims=False), y=np.float32(0))
    span = b.sub(x=hi, y=lo)
    span = b.select(cond=b.equal(x=span, y=np.float32(0)), a=np.float32(1), b=span)
    scale = b.real_div(x=span, y=np.float32(255))
    zp = b.round(x=b.minimum(x=b.maximum(x=b.sub(x=np.float32(0), y=b.real_div(x=lo, y=scale)), y=np.float32(0)),
                             y=np.float32(255)))
    q = b.add(x=b.round(x=b.real_div(x=x, y=scale)), y=zp)
    return [saturate_to(ctx, q, TensorProto.UINT8), scale, saturate_to(ctx, zp, TensorProto.UINT8)]


# -- integer matmul ----------------------------------------------------------------------------


def _shifted_int(ctx: Ctx, i: int, zp_i: int, row_param: bool) -> Value:
    """Input ``i`` minus its zero point (input ``zp_i``) in int32; a 1-D zero point of the left
    operand is per row (reshaped to [M, 1])."""
    b = ctx.b
    v = ctx.input(i, ("int32",))
    if not ctx.has(zp_i):
        return v
    zp = ctx.input(zp_i, ("int32",))
    if row_param and _rank(ctx, zp) == 1 and _rank(ctx, v) >= 2:
        zp = b.expand_dims(x=zp, axes=[-1])
    return b.sub(x=v, y=zp)


@onnx_op("MatMulInteger", versions=(10, 10))
def matmul_integer(ctx: Ctx, node: Node) -> list[Value]:
    a = _shifted_int(ctx, 0, 2, True)
    bb = _shifted_int(ctx, 1, 3, False)
    return [ctx.b.matmul(x=a, y=bb)]


def _requantize(ctx: Ctx, acc: Value, factor: Value, zp_i: int, out_type: int) -> Value:
    """``clip(rint(acc * factor) + zero_point)`` in the output's integer type."""
    b = ctx.b
    q = b.round(x=b.mul(x=_f32(ctx, acc), y=factor))
    if ctx.has(zp_i):
        q = b.add(x=q, y=_f32(ctx, ctx.input(zp_i)))
    return saturate_to(ctx, q, out_type)


def _scale(ctx: Ctx, i: int) -> Value:
    return _f32(ctx, ctx.input(i, FLOATS))


@onnx_op("QLinearMatMul", versions=(10, 21))
def qlinear_matmul(ctx: Ctx, node: Node) -> list[Value]:
    b = ctx.b
    a = _shifted_int(ctx, 0, 2, True)
    bb = _shifted_int(ctx, 3, 5, False)
    a_scale = _scale(ctx, 1)
    if _rank(ctx, a_scale) == 1 and _rank(ctx, a) >= 2:
        a_scale = b.expand_dims(x=a_scale, axes=[-1])
    factor = b.real_div(x=b.mul(x=a_scale, y=_scale(ctx, 4)), y=_scale(ctx, 6))
    return [_requantize(ctx, b.matmul(x=a, y=bb), factor, 7, _result_type(ctx, node, 7))]


# -- integer convolution -----------------------------------------------------------------------


def conv_params(ctx: Ctx, x: Value, kernel: tuple[int, ...]) -> dict:
    """MIL conv parameters from ONNX's strides / dilations / pads / auto_pad / group."""
    n = len(kernel)
    strides = [int(s) for s in ctx.attr("strides", None) or [1] * n]
    dilations = [int(d) for d in ctx.attr("dilations", None) or [1] * n]
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if auto_pad in ("NOTSET", "VALID"):
        pads = [int(p) for p in ctx.attr("pads", None) or [0] * (2 * n)] if auto_pad == "NOTSET" else [0] * (2 * n)
        pad = [v for i in range(n) for v in (pads[i], pads[i + n])]
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pad = []
        for i in range(n):
            size = x.type.shape[2 + i]
            if not is_static_dim(size):
                raise ctx.unsupported("auto_pad SAME_* needs static spatial sizes")
            total = max((math.ceil(int(size) / strides[i]) - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1
                        - int(size), 0)
            small = total // 2
            pad += [small, total - small] if auto_pad == "SAME_UPPER" else [total - small, small]
    else:
        raise ctx.format_error(f"unknown auto_pad '{auto_pad}'")
    return {"strides": strides, "dilations": dilations, "pad_type": "custom", "pad": pad,
            "groups": int(ctx.attr("group", 1))}


def _zp_per_channel(ctx: Ctx, zp: Value, rank: int) -> Value:
    """A per-output-channel weight zero point [M] as [M, 1, 1, ...]."""
    if _rank(ctx, zp) == 1:
        return ctx.b.reshape(x=zp, shape=[-1] + [1] * (rank - 1))
    return zp


def integer_conv(ctx: Ctx, x_i: int, xzp_i: int, w_i: int, wzp_i: int) -> Value:
    """int32 conv of (x - x_zero_point) and (w - w_zero_point), computed exactly in fp32 convs."""
    b = ctx.b
    x = _f32(ctx, ctx.input(x_i, ("int32",)))
    if ctx.has(xzp_i):
        x = b.sub(x=x, y=_f32(ctx, ctx.input(xzp_i, ("int32",))))
    w_int = ctx.input(w_i, ("int32",))
    rank = _rank(ctx, w_int)
    if ctx.has(wzp_i):
        w_int = b.sub(x=w_int, y=_zp_per_channel(ctx, ctx.input(wzp_i, ("int32",)), rank))
    kernel = tuple(w_int.type.shape[2:])
    if not all(is_static_dim(k) for k in kernel) or not is_static_dim(w_int.type.shape[1]):
        raise ctx.unsupported("the weight shape must be known at conversion time")
    params = conv_params(ctx, x, tuple(int(k) for k in kernel))
    # bound of every partial sum: |x'| <= 255 (8-bit operands) times the sum of |w'| over a window
    terms = int(w_int.type.shape[1]) * math.prod(int(k) for k in kernel)
    if terms * 255 * 255 < EXACT_FP32_INT:
        return b.cast(x=b.conv(x=x, weight=_f32(ctx, w_int), **params), dtype="int32")
    if terms * 255 * 16 >= EXACT_FP32_INT:
        raise ctx.unsupported(f"an integer conv over {terms} terms per output cannot be computed exactly in fp32")
    lo = b.mod(x=w_int, y=np.int32(16))  # in [0, 16)
    hi = b.floor_div(x=b.sub(x=w_int, y=lo), y=np.int32(16))  # in [-16, 16)
    conv_lo = b.cast(x=b.conv(x=x, weight=_f32(ctx, lo), **params), dtype="int32")
    conv_hi = b.cast(x=b.conv(x=x, weight=_f32(ctx, hi), **params), dtype="int32")
    return b.add(x=b.mul(x=conv_hi, y=np.int32(16)), y=conv_lo)


@onnx_op("ConvInteger", versions=(10, 10))
def conv_integer(ctx: Ctx, node: Node) -> list[Value]:
    return [integer_conv(ctx, 0, 2, 1, 3)]


@onnx_op("QLinearConv", versions=(10, 10))
def qlinear_conv(ctx: Ctx, node: Node) -> list[Value]:
    """inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B."""
    b = ctx.b
    acc = integer_conv(ctx, 0, 2, 3, 5)
    rank = _rank(ctx, acc)
    if ctx.has(8):
        acc = b.add(x=acc, y=b.reshape(x=ctx.input(8, ("int32",)), shape=[-1] + [1] * (rank - 2)))
    w_scale = _scale(ctx, 4)
    if _rank(ctx, w_scale) == 1:
        w_scale = b.reshape(x=w_scale, shape=[-1] + [1] * (rank - 2))
    factor = b.real_div(x=b.mul(x=_scale(ctx, 1), y=w_scale), y=_scale(ctx, 6))
    return [_requantize(ctx, acc, factor, 7, _result_type(ctx, node, 7))]
