"""BitShift, BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot, written exactly in int32 arithmetic.

The IR (MIL) has no bitwise ops. Integer operands are computed in int32 (small types widened:
int8/int16 sign-extended, uint8/uint16 zero-extended; the driver casts results back, and int ->
int casts wrap), so a bitwise result on the widened values, wrapped back, is the ONNX result:

- ``~x = -1 - x`` (two's complement, exact for every int32 including INT_MIN);
- and/or/xor: the 32 bits of each operand as a trailing axis — bit k < 31 is
  ``floor_div(x, 2^k) mod 2`` (flooring division gives two's complement bits of negative values
  too), bit 31 is ``x < 0`` — combined per bit as integers (a*b, a+b-a*b, (a+b) mod 2) and
  summed back with weights 2^k and -2^31 for the sign bit (the sum never overflows int32);
- BitShift (opset 28 semantics, which also define what opset 11 left undefined): left is
  ``x * 2^s`` with int32 wrap (2^s as two factors <= 2^16 so no constant overflows), right is
  flooring division by ``2^s`` (an arithmetic shift, sign-extending for signed types); a shift
  that is negative or >= the type's width gives the sign fill alone (-1 for a right shift of a
  negative x, else 0), as does a right shift >= 31 of the int32-held value.

64-bit and uint32 operands are held in int32 (the dtype policy): results are exact modulo 2^32,
which is all the held type keeps (uint32/uint64 values >= 2^31 are outside the policy's range).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from ...ir.core import Value
from .context import Ctx, Node
from .registry import onnx_op

INT32 = ("int32",)
_INT32_MIN = np.int32(np.iinfo(np.int32).min)
#: Bit width of each integer ONNX element type.
_WIDTH = {TensorProto.INT8: 8, TensorProto.UINT8: 8, TensorProto.INT16: 16, TensorProto.UINT16: 16,
          TensorProto.INT32: 32, TensorProto.UINT32: 32, TensorProto.INT64: 64, TensorProto.UINT64: 64}


def _operands(ctx: Ctx) -> tuple[Value, Value]:
    return ctx.input(0, INT32), ctx.input(1, INT32)


def _bits(ctx: Ctx, x: Value) -> tuple[Value, Value]:
    """(bits 0..30 of int32 ``x`` on a new trailing axis, as int32 0/1; bit 31, shape of x)."""
    b = ctx.b
    powers = np.asarray([1 << k for k in range(31)], np.int32)
    low = b.mod(x=b.floor_div(x=b.expand_dims(x=x, axes=[-1]), y=powers), y=np.int32(2))
    sign = b.cast(x=b.less(x=x, y=np.int32(0)), dtype="int32")
    return low, sign


def _from_bits(ctx: Ctx, low: Value, sign: Value) -> Value:
    b = ctx.b
    powers = np.asarray([1 << k for k in range(31)], np.int32)
    value = b.reduce_sum(x=b.mul(x=low, y=powers), axes=[-1], keep_dims=False)
    return b.add(x=value, y=b.mul(x=sign, y=_INT32_MIN))


def _combine(ctx: Ctx, op: str, a: Value, c: Value) -> Value:
    """Per-bit and/or/xor of two 0/1 int32 tensors."""
    b = ctx.b
    if op == "BitwiseAnd":
        return b.mul(x=a, y=c)
    if op == "BitwiseOr":
        return b.sub(x=b.add(x=a, y=c), y=b.mul(x=a, y=c))
    return b.mod(x=b.add(x=a, y=c), y=np.int32(2))


@onnx_op("BitwiseAnd", "BitwiseOr", "BitwiseXor", versions=(18, 28))
def bitwise_binary(ctx: Ctx, node: Node) -> list[Value]:
    x, y = _operands(ctx)
    x_low, x_sign = _bits(ctx, x)
    y_low, y_sign = _bits(ctx, y)
    return [_from_bits(ctx, _combine(ctx, node.op_type, x_low, y_low), _combine(ctx, node.op_type, x_sign, y_sign))]


@onnx_op("BitwiseNot", versions=(18, 28))
def bitwise_not(ctx: Ctx, node: Node) -> list[Value]:
    return [ctx.b.sub(x=np.int32(-1), y=ctx.input(0, INT32))]


def _clamp(ctx: Ctx, y: Value, top: int) -> Value:
    """int32 ``y`` clamped to [0, top]."""
    return ctx.b.minimum(x=ctx.b.maximum(x=y, y=np.int32(0)), y=np.int32(top))


@onnx_op("BitShift", versions=(11, 28))
def bit_shift(ctx: Ctx, node: Node) -> list[Value]:
    direction = ctx.required_attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise ctx.format_error(f"direction must be LEFT or RIGHT, not '{direction}'")
    width = _WIDTH.get(ctx.input_elem_type(0))
    if width is None:
        raise ctx.unsupported("the element type of X is unknown")
    b = ctx.b
    x, y = _operands(ctx)
    zero = np.int32(0)
    if direction == "LEFT":
        limit = min(width, 32)  # a left shift by >= 32 leaves no bit of an int32-held value
        s = _clamp(ctx, y, limit - 1)
        first = b.minimum(x=s, y=np.int32(16))
        shifted = b.mul(x=b.mul(x=x, y=b.pow(x=np.int32(2), y=first)), y=b.pow(x=np.int32(2), y=b.sub(x=s, y=first)))
        valid = b.logical_and(x=b.greater_equal(x=y, y=zero), y=b.less(x=y, y=np.int32(limit)))
        return [b.select(cond=valid, a=shifted, b=zero)]
    limit = min(width, 31)  # shifts of 31 or more leave the sign fill of an int32-held value
    s = _clamp(ctx, y, 30)
    shifted = b.floor_div(x=x, y=b.pow(x=np.int32(2), y=s))
    fill = b.select(cond=b.less(x=x, y=zero), a=np.int32(-1), b=zero)
    valid = b.logical_and(x=b.greater_equal(x=y, y=zero), y=b.less(x=y, y=np.int32(limit)))
    return [b.select(cond=valid, a=shifted, b=fill)]
