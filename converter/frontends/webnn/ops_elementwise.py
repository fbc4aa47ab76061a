"""Element-wise WebNN ops (spec 8.9.13-8.9.15 and the activations) as IR ops.

Most are one IR op; the others are written as the spec's formula in IR ops (neg, reciprocal,
hardSwish, isNaN, isInfinite, prelu, clamp on integers), never approximated.
"""

from __future__ import annotations

import math

from ...ir.core import Value
from .context import Ctx
from .graph import Operator
from .registry import maps

FLOATS = ("fp32", "fp16")

_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "real_div", "max": "maximum", "min": "minimum",
           "pow": "pow"}
_COMPARE = {"equal": "equal", "notEqual": "not_equal", "greater": "greater", "greaterOrEqual": "greater_equal",
            "lesser": "less", "lesserOrEqual": "less_equal"}
_LOGICAL = {"logicalAnd": "logical_and", "logicalOr": "logical_or", "logicalXor": "logical_xor"}
_UNARY_FLOAT = {"ceil": "ceil", "cos": "cos", "erf": "erf", "exp": "exp", "floor": "floor", "log": "log",
                "roundEven": "round", "sin": "sin", "sqrt": "sqrt", "tan": "tan", "tanh": "tanh",
                "sigmoid": "sigmoid", "softplus": "softplus", "softsign": "softsign"}


def _binary_args(ctx: Ctx, op: Operator, allowed: tuple[str, ...] = ("fp32", "fp16", "int32")) -> tuple[Value, Value]:
    return ctx.operand(op.args["a"], allowed), ctx.operand(op.args["b"], allowed)


@maps(*_BINARY)
def binary(ctx: Ctx, op: Operator) -> list[Value]:
    x, y = _binary_args(ctx, op)
    return [ctx.b.add_op(_BINARY[op.method], {"x": x, "y": y}).outputs[0]]


@maps(*_COMPARE, out="uint8")
def compare(ctx: Ctx, op: Operator) -> list[Value]:
    x, y = _binary_args(ctx, op)
    return [ctx.b.add_op(_COMPARE[op.method], {"x": x, "y": y}).outputs[0]]


@maps(*_LOGICAL, out="uint8")
def logical(ctx: Ctx, op: Operator) -> list[Value]:
    x, y = ctx.as_bool(op.args["a"]), ctx.as_bool(op.args["b"])
    return [ctx.b.add_op(_LOGICAL[op.method], {"x": x, "y": y}).outputs[0]]


@maps("logicalNot", out="uint8")
def logical_not(ctx: Ctx, op: Operator) -> list[Value]:
    return [ctx.b.logical_not(x=ctx.as_bool(op.args["a"]))]


@maps("isNaN", out="uint8")
def is_nan(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["a"])
    return [ctx.b.not_equal(x=x, y=x)]  # NaN is the only value unequal to itself


@maps("isInfinite", out="uint8")
def is_infinite(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["a"])
    if x.type.dtype.name not in FLOATS:
        return [ctx.b.not_equal(x=x, y=x)]  # integers are never infinite: all zeros
    return [ctx.b.equal(x=ctx.b.abs(x=x), y=ctx.const(math.inf, x))]


@maps(*_UNARY_FLOAT)
def unary_float(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["input"], FLOATS)
    return [ctx.b.add_op(_UNARY_FLOAT[op.method], {"x": x}).outputs[0]]


@maps("abs", "sign")
def abs_sign(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["input"])
    return [ctx.b.add_op(op.method, {"x": x}).outputs[0]]


@maps("identity")
def identity(ctx: Ctx, op: Operator) -> list[Value]:
    return [ctx.b.identity(x=ctx.value(op.args["input"]))]


@maps("neg")
def neg(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["input"])
    return [ctx.b.mul(x=x, y=ctx.const(-1, x))]


@maps("reciprocal")
def reciprocal(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["input"], FLOATS)
    return [ctx.b.real_div(x=ctx.const(1.0, x), y=x)]  # IR inverse adds an epsilon


@maps("relu")
def relu(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["input"])
    if x.type.dtype.name in FLOATS:
        return [ctx.b.relu(x=x)]
    return [ctx.b.maximum(x=x, y=ctx.const(0, x))]


@maps("gelu")
def gelu(ctx: Ctx, op: Operator) -> list[Value]:
    return [ctx.b.gelu(x=ctx.operand(op.args["input"], FLOATS), mode="EXACT")]


@maps("elu")
def elu(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["input"], FLOATS)
    return [ctx.b.elu(x=x, alpha=ctx.const(op.options.get("alpha", 1.0), x))]


@maps("leakyRelu")
def leaky_relu(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["input"], FLOATS)
    return [ctx.b.leaky_relu(x=x, alpha=ctx.const(op.options.get("alpha", 0.01), x))]


@maps("linear")
def linear(ctx: Ctx, op: Operator) -> list[Value]:
    """WebNN ``linear`` is ``alpha * x + beta`` (IR linear_activation), not a fully connected layer."""
    x = ctx.operand(op.args["input"], FLOATS)
    return [ctx.b.linear_activation(x=x, alpha=ctx.const(op.options.get("alpha", 1.0), x),
                                    beta=ctx.const(op.options.get("beta", 0.0), x))]


@maps("hardSigmoid")
def hard_sigmoid(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["input"], FLOATS)
    return [ctx.b.sigmoid_hard(x=x, alpha=ctx.const(op.options.get("alpha", 0.2), x),
                               beta=ctx.const(op.options.get("beta", 0.5), x))]


@maps("hardSwish")
def hard_swish(ctx: Ctx, op: Operator) -> list[Value]:
    """Spec: ``x * max(0, min(6, x + 3)) / 6``."""
    b = ctx.b
    x = ctx.operand(op.args["input"], FLOATS)
    t = b.clip(x=b.add(x=x, y=ctx.const(3.0, x)), alpha=ctx.const(0.0, x), beta=ctx.const(6.0, x))
    return [b.real_div(x=b.mul(x=x, y=t), y=ctx.const(6.0, x))]


@maps("clamp")
def clamp(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["input"])
    y = x
    lo, hi = (None if v is None or (isinstance(v, float) and math.isnan(v)) else v  # a NaN bound is no bound
              for v in (op.options.get("minValue"), op.options.get("maxValue")))
    if x.type.dtype.name not in FLOATS:
        info_lo, info_hi = -(1 << 31), (1 << 31) - 1
        lo = None if lo is None else max(min(math.ceil(lo), info_hi), info_lo)
        hi = None if hi is None else max(min(math.floor(hi), info_hi), info_lo)
    if lo is not None:
        y = ctx.b.maximum(x=y, y=ctx.const(lo, x))
    if hi is not None:
        y = ctx.b.minimum(x=y, y=ctx.const(hi, x))
    return [y if y is not x else ctx.b.identity(x=x)]


@maps("prelu")
def prelu(ctx: Ctx, op: Operator) -> list[Value]:
    """``slope`` broadcasts to the input (any shape): ``where(x < 0, x * slope, x)``."""
    b = ctx.b
    x = ctx.operand(op.args["input"])
    slope = ctx.operand(op.args["slope"])
    return [b.select(cond=b.less(x=x, y=ctx.const(0, x)), a=b.mul(x=x, y=slope), b=x)]


@maps("where", out=lambda ctx, op: [ctx.wdtype(op.args["trueValue"])])
def where(ctx: Ctx, op: Operator) -> list[Value]:
    cond = ctx.as_bool(op.args["condition"])
    allowed = ("fp32", "fp16", "int32", "bool")
    a, c = ctx.operand(op.args["trueValue"], allowed), ctx.operand(op.args["falseValue"], allowed)
    return [ctx.b.select(cond=cond, a=a, b=c)]
