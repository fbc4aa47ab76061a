"""The classic elementwise layers: unary, add, multiply, average, max, min, scale, bias, dot,
loadConstant and loadConstantND.

Multi-input layers broadcast numpy-style. That is the spec's "limited broadcasting" in both
conventions: rank-5 tensors are [Seq, Batch, C, H, W], so the shapes it lists ([1], [C], [1, H, W],
[C, H, W], and [B, ...] forms) line up from the end and broadcast over their unit axes; ND tensors
align from the end too. Parameters of scale and bias ([1], [C], [1, H, W] or [C, H, W]) bind to
the last three axes (C = -3, H = -2, W = -1), which again serves both conventions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ....formats.proto import NeuralNetwork_pb2
from ....ir.core import Value
from ....ir.shapes import ShapeError, broadcast_shapes
from ....ir.types import TensorType, is_static_dim
from ..context import LayerContext
from ..registry import lowers

Unary = NeuralNetwork_pb2.UnaryFunctionLayerParams


def check_broadcast(ctx: LayerContext, values: Sequence[Value]) -> None:
    """Fail (a malformed layer) unless the inputs' shapes broadcast together."""
    shapes = [v.type.shape for v in values if isinstance(v.type, TensorType) and v.type.shape is not None]
    try:
        broadcast_shapes(*shapes)
    except ShapeError:
        listed = ", ".join(str([str(d) for d in s]) for s in shapes)
        raise ctx.fail(f"input shapes {listed} do not broadcast") from None


# ---------------------------------------------------------------------------------------------
# unary


@lowers("unary")
def unary(ctx: LayerContext) -> Value:
    """f(scale * x + shift), f by ``type``; the spec's formulas, epsilons where it gives them."""
    ctx.expect_inputs(1)
    p = ctx.params
    b, n = ctx.b, ctx.name
    x = ctx.input()
    if p.scale == 0.0:
        ctx.note(f"layer '{n}': unary scale is 0 (the proto default), so the layer computes f({p.shift}) "
                 f"for every element, as the formula scale * x + shift says")
    if p.scale != 1.0:
        x = b.mul(x=x, y=float(p.scale), name=f"{n}_scaled")
    if p.shift != 0.0:
        x = b.add(x=x, y=float(p.shift), name=f"{n}_shifted")
    kind = p.type
    if kind == Unary.SQRT:
        return b.sqrt(x=x, name=n)
    if kind == Unary.RSQRT:
        return b.rsqrt(x=x, epsilon=float(p.epsilon), name=n)  # 1 / sqrt(x + epsilon)
    if kind == Unary.INVERSE:
        return b.inverse(x=x, epsilon=float(p.epsilon), name=n)  # 1 / (x + epsilon)
    if kind == Unary.POWER:
        return b.pow(x=x, y=float(p.alpha), name=n)
    if kind == Unary.EXP:
        return b.exp(x=x, name=n)
    if kind == Unary.LOG:
        return b.log(x=x, epsilon=0.0, name=n)  # the spec's log x has no epsilon (MIL's default is 1e-45)
    if kind == Unary.ABS:
        return b.abs(x=x, name=n)
    if kind == Unary.THRESHOLD:
        return b.threshold(x=x, alpha=float(p.alpha), name=n)  # max(alpha, x)
    raise ctx.fail(f"unknown unary function type {kind}", field="type")


# ---------------------------------------------------------------------------------------------
# add, multiply, average, max, min


def _fold(ctx: LayerContext, op: Callable[..., Value], name: str) -> Value:
    """((x1 op x2) op x3) ... with broadcasting; the last op takes ``name``."""
    xs = ctx.inputs
    check_broadcast(ctx, xs)
    acc = xs[0]
    for i, v in enumerate(xs[1:], start=2):
        acc = op(x=acc, y=v, name=name if i == len(xs) else f"{name}_{i}")
    return acc


@lowers("add")
def add(ctx: LayerContext) -> Value:
    """The sum of the inputs; one input: x + alpha."""
    ctx.expect_inputs(1, -1)
    if len(ctx.inputs) == 1:
        return ctx.b.add(x=ctx.input(), y=float(ctx.params.alpha), name=ctx.name)
    return _fold(ctx, ctx.b.add, ctx.name)


@lowers("multiply")
def multiply(ctx: LayerContext) -> Value:
    """The product of the inputs; one input: alpha * x."""
    ctx.expect_inputs(1, -1)
    if len(ctx.inputs) == 1:
        return ctx.b.mul(x=ctx.input(), y=float(ctx.params.alpha), name=ctx.name)
    return _fold(ctx, ctx.b.mul, ctx.name)


@lowers("average")
def average(ctx: LayerContext) -> Value:
    """(x1 + ... + xn) / n."""
    ctx.expect_inputs(1, -1)
    if len(ctx.inputs) == 1:
        return ctx.b.identity(x=ctx.input(), name=ctx.name)
    total = _fold(ctx, ctx.b.add, f"{ctx.name}_sum")
    return ctx.b.real_div(x=total, y=float(len(ctx.inputs)), name=ctx.name)


@lowers("max", "min")
def extremum(ctx: LayerContext) -> Value:
    """The elementwise maximum (minimum) of the inputs."""
    ctx.expect_inputs(1, -1)
    if len(ctx.inputs) == 1:
        return ctx.b.identity(x=ctx.input(), name=ctx.name)
    return _fold(ctx, ctx.b.maximum if ctx.kind == "max" else ctx.b.minimum, ctx.name)


# ---------------------------------------------------------------------------------------------
# scale, bias


def _chw_parameter(ctx: LayerContext, x: Value, wp: NeuralNetwork_pb2.WeightParams, shape: Sequence[int],
                   what: str, shape_field: str) -> Value:
    """A [1], [C], [1, H, W] or [C, H, W] parameter as a value broadcasting over axes -3.. of x.
    Its sizes other than 1 must be x's; a size of 1 broadcasts."""
    dims = [int(d) for d in shape]
    if dims == [1]:
        return ctx.weight(wp, (1,), what)  # [1] keeps x's rank, whatever it is
    if len(dims) not in (1, 3):
        raise ctx.fail(f"{what} shape {dims} is not [1], [C], [1, H, W] or [C, H, W]", field=shape_field)
    xs = ctx.shape(x)
    if len(xs) < 3:
        raise ctx.fail(f"needs an input of rank >= 3 for a {what} of shape {dims}, got rank {len(xs)}")
    target = (dims[0], 1, 1) if len(dims) == 1 else tuple(dims)
    for axis, want, got in zip("CHW", target, xs[-3:]):
        if want != 1 and is_static_dim(got) and int(got) != want:
            raise ctx.fail(f"{what} shape {dims} does not fit an input of shape {[str(d) for d in xs]} "
                           f"({axis} is {got})", field=shape_field)
    return ctx.weight(wp, target, what)


@lowers("scale")
def scale(ctx: LayerContext) -> Value:
    """x * scale (+ bias when hasBias), both broadcast over [C, H, W]."""
    ctx.expect_inputs(1)
    p = ctx.params
    x = ctx.input()
    s = _chw_parameter(ctx, x, p.scale, p.shapeScale, "scale", "shapeScale")
    if not p.hasBias:
        return ctx.b.mul(x=x, y=s, name=ctx.name)
    bias = _chw_parameter(ctx, x, p.bias, p.shapeBias, "bias", "shapeBias")
    return ctx.b.add(x=ctx.b.mul(x=x, y=s, name=f"{ctx.name}_scaled"), y=bias, name=ctx.name)


@lowers("bias")
def bias(ctx: LayerContext) -> Value:
    """x + bias, broadcast over [C, H, W]."""
    ctx.expect_inputs(1)
    x = ctx.input()
    return ctx.b.add(x=x, y=_chw_parameter(ctx, x, ctx.params.bias, ctx.params.shape, "bias", "shape"),
                     name=ctx.name)


# ---------------------------------------------------------------------------------------------
# dot


@lowers("dot")
def dot(ctx: LayerContext) -> Value:
    """The dot product over the channel axis (-3) of two [..., C, 1, 1] tensors, keeping the rank
    ([..., 1, 1, 1]); with cosineSimilarity, divided by the product of the two L2 norms."""
    ctx.expect_inputs(2)
    x, y = ctx.inputs
    sx, sy = ctx.shape(x), ctx.shape(y)
    if len(sx) != len(sy):
        raise ctx.fail(f"inputs have different ranks ({len(sx)} and {len(sy)})")
    for s in (sx, sy):
        if len(s) < 3:
            raise ctx.fail(f"needs inputs of rank >= 3 ([..., C, 1, 1]), got rank {len(s)}")
        if any(is_static_dim(d) and int(d) != 1 for d in s[-2:]):
            raise ctx.fail(f"needs inputs whose last two dimensions are 1, got shape {[str(d) for d in s]}")
    check_broadcast(ctx, [x, y])
    b, n = ctx.b, ctx.name
    if not ctx.params.cosineSimilarity:
        return b.reduce_sum(x=b.mul(x=x, y=y, name=f"{n}_prod"), axes=[-3], keep_dims=True, name=n)
    d = b.reduce_sum(x=b.mul(x=x, y=y, name=f"{n}_prod"), axes=[-3], keep_dims=True, name=f"{n}_dot")
    nx = b.reduce_l2_norm(x=x, axes=[-3], keep_dims=True, name=f"{n}_norm_x")
    ny = b.reduce_l2_norm(x=y, axes=[-3], keep_dims=True, name=f"{n}_norm_y")
    return b.real_div(x=d, y=b.mul(x=nx, y=ny, name=f"{n}_norms"), name=n)


# ---------------------------------------------------------------------------------------------
# loadConstant, loadConstantND


@lowers("loadConstant")
def load_constant(ctx: LayerContext) -> Value:
    """The constant of shape [C, H, W] as a rank-5 [1, 1, C, H, W] tensor (in ND networks too)."""
    ctx.expect_inputs(0)
    dims = [int(d) for d in ctx.params.shape]
    if len(dims) != 3:
        raise ctx.fail(f"shape must be [C, H, W], got {dims}", field="shape")
    return ctx.weight(ctx.params.data, (1, 1, *dims), "data", axis=2)


@lowers("loadConstantND")
def load_constant_nd(ctx: LayerContext) -> Value:
    """The constant in its declared shape."""
    ctx.expect_inputs(0)
    dims = [int(d) for d in ctx.params.shape]
    if not dims:
        raise ctx.fail("shape is empty (a constant needs rank >= 1)", field="shape")
    return ctx.weight(ctx.params.data, dims, "data")
