"""The elementwise layers of spec 4+: unary math (clip, rounding, trigonometric, hyperbolic, erf,
gelu), comparisons, logical operators, the broadcastable binary operators and where.

NeuralNetwork tensors are float at run time: a comparison or logical layer outputs 1.0 where its
condition holds and 0.0 elsewhere, and a logical input (or where's condition) is true where it is
not 0.0 (NaN included). The MIL ops compute on bool, so these lowerings convert at both ends.
Broadcasting is numpy's.
"""

from __future__ import annotations

from ....formats.proto import NeuralNetwork_pb2
from ....ir.builder import Builder
from ....ir.core import Value
from ....ir.shapes import broadcast_shapes
from ....ir.types import TensorType
from ..context import LayerContext
from ..registry import lowers
from .elementwise import check_broadcast

# Layers that are one MIL op of the same meaning.
_UNARY = {
    "ceil": "ceil", "floor": "floor", "sign": "sign", "round": "round", "exp2": "exp2",
    "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan",
    "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "atanh": "atanh", "erf": "erf",
}
_BINARY = {
    "addBroadcastable": "add", "subtractBroadcastable": "sub", "multiplyBroadcastable": "mul",
    "divideBroadcastable": "real_div", "floorDivBroadcastable": "floor_div", "modBroadcastable": "mod",
    "powBroadcastable": "pow", "maxBroadcastable": "maximum", "minBroadcastable": "minimum",
}
_COMPARE = {
    "equal": "equal", "notEqual": "not_equal", "lessThan": "less", "lessEqual": "less_equal",
    "greaterThan": "greater", "greaterEqual": "greater_equal",
}
_LOGICAL = {"logicalAnd": "logical_and", "logicalOr": "logical_or", "logicalXor": "logical_xor"}


@lowers(*_UNARY)
def math_unary(ctx: LayerContext) -> Value:
    # round: the spec says "the nearest integer" without a tie rule; MIL round is the same op.
    ctx.expect_inputs(1)
    return getattr(ctx.b, _UNARY[ctx.kind])(x=ctx.input(), name=ctx.name)


@lowers(*_BINARY)
def broadcastable_binary(ctx: LayerContext) -> Value:
    # mod: MIL mod (x - floor(x / y) * y, the divisor's sign) is what coremltools maps to and from
    # modBroadcastable; the spec gives no sign rule.
    ctx.expect_inputs(2)
    check_broadcast(ctx, ctx.inputs)
    return getattr(ctx.b, _BINARY[ctx.kind])(x=ctx.input(0), y=ctx.input(1), name=ctx.name)


@lowers("clip")
def clip(ctx: LayerContext) -> Value:
    """min(max(x, minVal), maxVal)."""
    ctx.expect_inputs(1)
    lo, hi = float(ctx.params.minVal), float(ctx.params.maxVal)
    b, n = ctx.b, ctx.name
    if lo < hi:
        return b.clip(x=ctx.input(), alpha=lo, beta=hi, name=n)
    # MIL clip requires alpha < beta from iOS17 on; the formula itself gives maxVal everywhere.
    return b.minimum(x=b.maximum(x=ctx.input(), y=lo, name=f"{n}_low"), y=hi, name=n)


@lowers("gelu")
def gelu(ctx: LayerContext) -> Value:
    """EXACT, TANH_APPROXIMATION or SIGMOID_APPROXIMATION: MIL's gelu modes, by the same names."""
    ctx.expect_inputs(1)
    mode = ctx.params.mode
    names = NeuralNetwork_pb2.GeluLayerParams.GeluMode
    if mode not in names.values():
        raise ctx.fail(f"unknown gelu mode {mode}", field="mode")
    return ctx.b.gelu(x=ctx.input(), mode=names.Name(mode), name=ctx.name)


# ---------------------------------------------------------------------------------------------
# asinh, acosh: no MIL op, composed


def _asinh_magnitude(b: Builder, a: Value, n: str) -> Value:
    """asinh(a) for a >= 0, to a few ulps over the whole range.

    Below 1: atanh(a / sqrt(1 + a^2)) (the textbook log(a + sqrt(a^2 + 1)) would lose the low
    bits of a small a to the rounding of the sum near 1). From 1 on: log(a) + log(1 + sqrt(1 +
    (1/a)^2)), which does not overflow where a^2 does. select keeps NaN (a NaN fails a < 1).
    """
    hyp = b.sqrt(x=b.add(x=b.mul(x=a, y=a, name=f"{n}_sq"), y=1.0, name=f"{n}_sq1"), name=f"{n}_hyp")
    small = b.atanh(x=b.real_div(x=a, y=hyp, name=f"{n}_tanh"), name=f"{n}_small")
    inv = b.real_div(x=1.0, y=a, name=f"{n}_inv")
    root = b.sqrt(x=b.add(x=b.mul(x=inv, y=inv, name=f"{n}_inv_sq"), y=1.0, name=f"{n}_inv_sq1"), name=f"{n}_root")
    log_root = b.log(x=b.add(x=root, y=1.0, name=f"{n}_root1"), name=f"{n}_log_root")
    large = b.add(x=b.log(x=a, name=f"{n}_log"), y=log_root, name=f"{n}_large")
    return b.select(cond=b.less(x=a, y=1.0, name=f"{n}_is_small"), a=small, b=large, name=f"{n}_magnitude")


@lowers("asinh")
def asinh(ctx: LayerContext) -> Value:
    """sign(x) * asinh(|x|) (asinh is odd)."""
    ctx.expect_inputs(1)
    b, n, x = ctx.b, ctx.name, ctx.input()
    magnitude = _asinh_magnitude(b, b.abs(x=x, name=f"{n}_abs"), n)
    return b.mul(x=b.sign(x=x, name=f"{n}_sign"), y=magnitude, name=n)


@lowers("acosh")
def acosh(ctx: LayerContext) -> Value:
    """2 asinh(sqrt((x - 1) / 2)) (the half-argument identity): exact x - 1 near 1, no x^2
    overflow, NaN below 1 as acosh."""
    ctx.expect_inputs(1)
    b, n = ctx.b, ctx.name
    half = b.mul(x=b.sub(x=ctx.input(), y=1.0, name=f"{n}_m1"), y=0.5, name=f"{n}_half")
    magnitude = _asinh_magnitude(b, b.sqrt(x=half, name=f"{n}_sqrt"), n)
    return b.mul(x=magnitude, y=2.0, name=n)


# ---------------------------------------------------------------------------------------------
# comparisons, logical operators, where


def _truth(ctx: LayerContext, v: Value, what: str) -> Value:
    """A float tensor as bool: nonzero (NaN included) is true."""
    return ctx.b.not_equal(x=v, y=0.0, name=f"{ctx.name}_{what}")


def _as_float(ctx: LayerContext, v: Value) -> Value:
    return ctx.b.cast(x=v, dtype="fp32", name=ctx.name)


@lowers(*_COMPARE)
def compare(ctx: LayerContext) -> Value:
    """x1 op x2, or x1 op alpha with one input; 1.0 where true, 0.0 elsewhere."""
    ctx.expect_inputs(1, 2)
    x = ctx.input(0)
    if len(ctx.inputs) == 2:
        check_broadcast(ctx, ctx.inputs)
        y: Value | float = ctx.input(1)
    else:
        y = float(ctx.params.alpha)
    return _as_float(ctx, getattr(ctx.b, _COMPARE[ctx.kind])(x=x, y=y, name=f"{ctx.name}_bool"))


@lowers(*_LOGICAL)
def logical_binary(ctx: LayerContext) -> Value:
    ctx.expect_inputs(2)
    check_broadcast(ctx, ctx.inputs)
    x, y = (_truth(ctx, v, f"truth{i}") for i, v in enumerate(ctx.inputs))
    return _as_float(ctx, getattr(ctx.b, _LOGICAL[ctx.kind])(x=x, y=y, name=f"{ctx.name}_bool"))


@lowers("logicalNot")
def logical_not(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1)
    # x == 0 is NOT(x != 0) in one op
    return _as_float(ctx, ctx.b.equal(x=ctx.input(), y=0.0, name=f"{ctx.name}_bool"))


@lowers("whereBroadcastable")
def where(ctx: LayerContext) -> Value:
    """x where the condition is nonzero, else y; all three broadcast."""
    ctx.expect_inputs(3)
    check_broadcast(ctx, ctx.inputs)
    cond, x, y = ctx.inputs
    b, n = ctx.b, ctx.name
    truth = _truth(ctx, cond, "cond")
    shapes = [v.type.shape if isinstance(v.type, TensorType) else None for v in (cond, x, y)]
    if None in shapes or broadcast_shapes(*shapes[1:]) != broadcast_shapes(*shapes):
        # coremltools types select's result as broadcast(a, b), ignoring cond (so its MIL loader
        # rejects the program): x is first brought to the full shape, times ones (exact for all).
        every = b.logical_or(x=truth, y=b.logical_not(x=truth, name=f"{n}_false"), name=f"{n}_every")
        x = b.mul(x=x, y=b.cast(x=every, dtype="fp32", name=f"{n}_ones"), name=f"{n}_full")
    return b.select(cond=truth, a=x, b=y, name=n)
