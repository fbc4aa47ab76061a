"""Element-wise ONNX ops: arithmetic, comparisons, logic, unary math, variadic Sum/Max/Min/Mean.

Operands are cast up to what the IR op takes (`Ctx.widen`); the driver casts results back to the
ONNX output type. Where ONNX and MIL differ the ONNX formula is written in IR ops: integer ``Div``
truncates toward zero (MIL ``floor_div`` floors), ``Mod`` with ``fmod=1`` takes the dividend's
sign (MIL ``mod`` the divisor's), ``IsInf`` honours ``detect_negative``/``detect_positive``.
The IR has no bitwise ops, so BitShift / Bitwise* are left unmapped.
"""

from __future__ import annotations

import math

from ...ir.core import Value
from .context import FLOATS, NUMERIC, Ctx, Node
from .registry import onnx_op

_ARITH = {"Add": "add", "Sub": "sub", "Mul": "mul"}
_COMPARE = {"Equal": "equal", "Greater": "greater", "Less": "less", "GreaterOrEqual": "greater_equal",
            "LessOrEqual": "less_equal"}
_LOGICAL = {"And": "logical_and", "Or": "logical_or", "Xor": "logical_xor"}
_UNARY_FLOAT = {"Sqrt": "sqrt", "Exp": "exp", "Sin": "sin", "Cos": "cos", "Tan": "tan",
                "Asin": "asin", "Acos": "acos", "Atan": "atan", "Sinh": "sinh", "Cosh": "cosh", "Atanh": "atanh",
                "Erf": "erf", "Floor": "floor", "Ceil": "ceil", "Round": "round", "Tanh": "tanh"}


def _op(ctx: Ctx, ir_op: str, **inputs: Value) -> Value:
    return ctx.b.add_op(ir_op, inputs).outputs[0]


def _pair(ctx: Ctx, allowed: tuple[str, ...] = NUMERIC) -> tuple[Value, Value]:
    """The two operands in one common IR dtype (ONNX requires equal types; fp16 with fp32 can only
    meet here through the dtype policy, e.g. fp64 held as fp32)."""
    x, y = ctx.input(0, allowed), ctx.input(1, allowed)
    if x.type.dtype != y.type.dtype:
        y = ctx.b.cast(x=y, dtype=x.type.dtype.name)
    return x, legacy_broadcast(ctx, x, y)


def legacy_broadcast(ctx: Ctx, x: Value, y: Value) -> Value:
    """Before opset 7, ``broadcast=1`` with an ``axis`` aligns B's dims with A's from ``axis`` (not
    from the end): B gets trailing 1s so that numpy broadcasting gives the same pairing. Without
    ``axis`` (suffix matching) or without broadcast (equal shapes) numpy's rule already agrees."""
    node = ctx.node
    if node.version >= 7 or not int(ctx.attr("broadcast", 0)) or "axis" not in node.attrs:
        return y
    rx, ry = ctx.rank(x), ctx.rank(y)
    axis = int(ctx.attr("axis"))
    axis = axis + rx if axis < 0 else axis
    trailing = rx - axis - ry
    if trailing < 0:
        raise ctx.format_error(f"B of rank {ry} does not fit A of rank {rx} from axis {axis}")
    if trailing == 0:
        return y
    return ctx.b.expand_dims(x=y, axes=list(range(ry, ry + trailing)))


@onnx_op(*_ARITH, versions=(1, 14))
def arith(ctx: Ctx, node: Node) -> list[Value]:
    x, y = _pair(ctx)
    return [_op(ctx, _ARITH[node.op_type], x=x, y=y)]


def truncating_div(ctx: Ctx, x: Value, y: Value) -> Value:
    """Integer x / y rounded toward zero (C, ONNX) from MIL's flooring division:
    sign(x) * sign(y) * floor_div(|x|, |y|)."""
    b = ctx.b
    q = b.floor_div(x=b.abs(x=x), y=b.abs(x=y))
    return b.mul(x=b.mul(x=b.sign(x=x), y=b.sign(x=y)), y=q)


@onnx_op("Div", versions=(1, 14))
def div(ctx: Ctx, node: Node) -> list[Value]:
    x, y = _pair(ctx)
    if x.type.dtype.is_float:
        return [ctx.b.real_div(x=x, y=y)]
    return [truncating_div(ctx, x, y)]


@onnx_op("Pow", versions=(1, 15))
def pow_(ctx: Ctx, node: Node) -> list[Value]:
    """Result in X's type; a float exponent on an integer base is computed in fp32 and truncated
    (what onnx's reference does: ``np.power(x, y).astype(x.dtype)``)."""
    x, y = ctx.input(0, NUMERIC), ctx.input(1, NUMERIC)
    y = legacy_broadcast(ctx, x, y)
    if x.type.dtype == y.type.dtype:
        return [ctx.b.pow(x=x, y=y)]
    if x.type.dtype.is_float:
        return [ctx.b.pow(x=x, y=ctx.b.cast(x=y, dtype=x.type.dtype.name))]
    return [ctx.b.pow(x=ctx.b.cast(x=x, dtype="fp32"), y=ctx.b.cast(x=y, dtype="fp32"))]


@onnx_op("Mod", versions=(10, 28))
def mod(ctx: Ctx, node: Node) -> list[Value]:
    """fmod=0: the divisor's sign (MIL ``mod``, Python ``%``); fmod=1: the dividend's sign (C fmod),
    sign(x) * mod(|x|, |y|), exact since both operands of ``mod`` are then non-negative."""
    x, y = _pair(ctx)
    fmod = int(ctx.attr("fmod", 0))
    if fmod not in (0, 1):
        raise ctx.format_error(f"fmod must be 0 or 1, not {fmod}")
    if fmod == 0:
        return [ctx.b.mod(x=x, y=y)]
    b = ctx.b
    return [b.mul(x=b.sign(x=x), y=b.mod(x=b.abs(x=x), y=b.abs(x=y)))]


@onnx_op("Equal", versions=(7, 19))
@onnx_op("Greater", "Less", versions=(7, 13))
@onnx_op("GreaterOrEqual", "LessOrEqual", versions=(12, 16))
def compare(ctx: Ctx, node: Node) -> list[Value]:
    x, y = _pair(ctx)
    return [_op(ctx, _COMPARE[node.op_type], x=x, y=y)]


@onnx_op(*_LOGICAL, versions=(7, 7))
def logical(ctx: Ctx, node: Node) -> list[Value]:
    return [_op(ctx, _LOGICAL[node.op_type], x=ctx.input(0, ("bool",)), y=ctx.input(1, ("bool",)))]


@onnx_op("Not", versions=(1, 1))
def logical_not(ctx: Ctx, node: Node) -> list[Value]:
    return [ctx.b.logical_not(x=ctx.input(0, ("bool",)))]


@onnx_op("Sqrt", "Exp", "Floor", "Ceil", "Tanh", versions=(1, 13))
@onnx_op("Erf", versions=(9, 13))
@onnx_op("Sin", "Cos", "Tan", "Asin", "Acos", "Atan", versions=(7, 22))
@onnx_op("Sinh", "Cosh", "Atanh", versions=(9, 22))
@onnx_op("Round", versions=(11, 22))
def unary_float(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, FLOATS)
    return [_op(ctx, _UNARY_FLOAT[node.op_type], x=x)]


@onnx_op("Log", versions=(1, 13))
def log(ctx: Ctx, node: Node) -> list[Value]:
    """MIL log is log(x + epsilon): epsilon 0 gives ONNX's log (log 0 = -inf)."""
    x = ctx.input(0, FLOATS)
    return [ctx.b.log(x=x, epsilon=ctx.const(0.0, x))]


@onnx_op("Asinh", versions=(9, 22))
def asinh(ctx: Ctx, node: Node) -> list[Value]:
    """log(x + sqrt(x^2 + 1)) (no IR op)."""
    b, x = ctx.b, ctx.input(0, FLOATS)
    return [b.log(x=b.add(x=x, y=b.sqrt(x=b.add(x=b.mul(x=x, y=x), y=ctx.const(1.0, x)))), epsilon=ctx.const(0.0, x))]


@onnx_op("Acosh", versions=(9, 22))
def acosh(ctx: Ctx, node: Node) -> list[Value]:
    """log(x + sqrt(x^2 - 1)) (no IR op)."""
    b, x = ctx.b, ctx.input(0, FLOATS)
    return [b.log(x=b.add(x=x, y=b.sqrt(x=b.sub(x=b.mul(x=x, y=x), y=ctx.const(1.0, x)))), epsilon=ctx.const(0.0, x))]


@onnx_op("Abs", versions=(1, 13))
@onnx_op("Sign", versions=(9, 13))
def abs_sign(ctx: Ctx, node: Node) -> list[Value]:
    return [_op(ctx, node.op_type.lower(), x=ctx.input(0, NUMERIC))]


@onnx_op("Neg", versions=(1, 13))
def neg(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, NUMERIC)
    return [ctx.b.mul(x=x, y=ctx.const(-1, x))]


@onnx_op("Reciprocal", versions=(1, 13))
def reciprocal(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, FLOATS)
    return [ctx.b.real_div(x=ctx.const(1.0, x), y=x)]


@onnx_op("IsNaN", versions=(9, 20))
def is_nan(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, FLOATS)
    return [ctx.b.not_equal(x=x, y=x)]  # NaN is the only value unequal to itself


@onnx_op("IsInf", versions=(10, 20))
def is_inf(ctx: Ctx, node: Node) -> list[Value]:
    b, x = ctx.b, ctx.input(0, FLOATS)
    neg, pos = int(ctx.attr("detect_negative", 1)), int(ctx.attr("detect_positive", 1))
    if neg and pos:
        return [b.equal(x=b.abs(x=x), y=ctx.const(math.inf, x))]
    if pos:
        return [b.equal(x=x, y=ctx.const(math.inf, x))]
    if neg:
        return [b.equal(x=x, y=ctx.const(-math.inf, x))]
    return [b.equal(x=x, y=ctx.const(math.nan, x))]  # detects nothing: all false (nothing equals NaN)


@onnx_op("Sum", "Mean", "Max", "Min", versions=(1, 13))
def variadic(ctx: Ctx, node: Node) -> list[Value]:
    """Left fold over the (broadcast) inputs; Mean divides the sum by the input count."""
    ir = {"Sum": "add", "Mean": "add", "Max": "maximum", "Min": "minimum"}[node.op_type]
    n = len(node.inputs)
    allowed = FLOATS if node.op_type == "Mean" else NUMERIC
    acc = ctx.input(0, allowed)
    for i in range(1, n):
        y = ctx.input(i, allowed)
        if y.type.dtype != acc.type.dtype:
            y = ctx.b.cast(x=y, dtype=acc.type.dtype.name)
        acc = _op(ctx, ir, x=acc, y=y)
    if node.op_type == "Mean":
        acc = ctx.b.real_div(x=acc, y=ctx.const(float(n), acc))
    return [acc]
