"""ONNX activations as IR ops.

One IR op where MIL has the same formula (relu, sigmoid, tanh via elementwise, elu,
leaky_relu, sigmoid_hard, softplus, softsign, gelu); the others are the ONNX formula written in IR
ops: Selu = gamma * elu(x, alpha); Celu = alpha * elu(x / alpha, 1); Mish = x * tanh(softplus(x));
HardSwish = x * sigmoid_hard(x, 1/6, 1/2); ThresholdedRelu = x where x > alpha (MIL's
thresholded_relu keeps x == alpha); PRelu and Clip as select / maximum / minimum, which take
broadcast and run-time slopes and bounds, and integers.
"""

from __future__ import annotations

import numpy as np

from ...ir.core import Value
from .context import FLOATS, NUMERIC, Ctx, Node
from .registry import onnx_op


def _float_attr(ctx: Ctx, name: str, default: float) -> float:
    return float(ctx.attr(name, default))


@onnx_op("Relu", versions=(1, 14))
def relu(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, NUMERIC)
    if x.type.dtype.is_float:
        return [ctx.b.relu(x=x)]
    return [ctx.b.maximum(x=x, y=ctx.const(0, x))]  # integer Relu (opset 14)


@onnx_op("Sigmoid", versions=(1, 13))
def sigmoid(ctx: Ctx, node: Node) -> list[Value]:
    return [ctx.b.sigmoid(x=ctx.input(0, FLOATS))]


@onnx_op("LeakyRelu", versions=(1, 16))
def leaky_relu(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, FLOATS)
    return [ctx.b.leaky_relu(x=x, alpha=ctx.const(_float_attr(ctx, "alpha", 0.01), x))]


@onnx_op("Elu", versions=(1, 22))
def elu(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, FLOATS)
    return [ctx.b.elu(x=x, alpha=ctx.const(_float_attr(ctx, "alpha", 1.0), x))]


@onnx_op("Selu", versions=(1, 22))
def selu(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, FLOATS)
    alpha = _float_attr(ctx, "alpha", 1.67326319217681884765625)
    gamma = _float_attr(ctx, "gamma", 1.05070102214813232421875)
    return [ctx.b.mul(x=ctx.b.elu(x=x, alpha=ctx.const(alpha, x)), y=ctx.const(gamma, x))]


@onnx_op("Celu", versions=(12, 28))
def celu(ctx: Ctx, node: Node) -> list[Value]:
    b, x = ctx.b, ctx.input(0, FLOATS)
    alpha = _float_attr(ctx, "alpha", 1.0)
    scaled = b.real_div(x=x, y=ctx.const(alpha, x))
    return [b.mul(x=b.elu(x=scaled, alpha=ctx.const(1.0, x)), y=ctx.const(alpha, x))]


@onnx_op("HardSigmoid", versions=(1, 22))
def hard_sigmoid(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, FLOATS)
    return [ctx.b.sigmoid_hard(x=x, alpha=ctx.const(_float_attr(ctx, "alpha", 0.2), x),
                               beta=ctx.const(_float_attr(ctx, "beta", 0.5), x))]


@onnx_op("HardSwish", versions=(14, 22))
def hard_swish(ctx: Ctx, node: Node) -> list[Value]:
    b, x = ctx.b, ctx.input(0, FLOATS)
    return [b.mul(x=x, y=b.sigmoid_hard(x=x, alpha=ctx.const(1.0 / 6.0, x), beta=ctx.const(0.5, x)))]


@onnx_op("Softplus", "Softsign", versions=(1, 22))
def softplus_softsign(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, FLOATS)
    return [ctx.b.add_op(node.op_type.lower(), {"x": x}).outputs[0]]


@onnx_op("Mish", versions=(18, 22))
def mish(ctx: Ctx, node: Node) -> list[Value]:
    b, x = ctx.b, ctx.input(0, FLOATS)
    return [b.mul(x=x, y=b.tanh(x=b.softplus(x=x)))]


@onnx_op("Gelu", versions=(20, 20))
def gelu(ctx: Ctx, node: Node) -> list[Value]:
    approximate = ctx.attr("approximate", "none")
    modes = {"none": "EXACT", "tanh": "TANH_APPROXIMATION"}
    if approximate not in modes:
        raise ctx.format_error(f"approximate must be 'none' or 'tanh', not '{approximate}'")
    return [ctx.b.gelu(x=ctx.input(0, FLOATS), mode=modes[approximate])]


@onnx_op("ThresholdedRelu", versions=(10, 22))
def thresholded_relu(ctx: Ctx, node: Node) -> list[Value]:
    b, x = ctx.b, ctx.input(0, FLOATS)
    alpha = ctx.const(_float_attr(ctx, "alpha", 1.0), x)
    return [b.select(cond=b.greater(x=x, y=alpha), a=x, b=ctx.const(0.0, x))]


@onnx_op("PRelu", versions=(1, 16))
def prelu(ctx: Ctx, node: Node) -> list[Value]:
    """x where x >= 0, slope * x elsewhere (slope broadcast to x, as ONNX's unidirectional rule).
    Before opset 7 a 1-D slope of C > 1 values is per channel (axis 1), as Caffe2 defined it and
    ONNX's pytorch-converted tests expect; one value is shared."""
    b = ctx.b
    x = ctx.input(0, NUMERIC)
    slope = ctx.input(1, NUMERIC)
    if slope.type.dtype != x.type.dtype:
        slope = b.cast(x=slope, dtype=x.type.dtype.name)
    if node.version < 7 and ctx.rank(slope) == 1 and ctx.rank(x) > 2:
        n = slope.type.shape[0]
        if isinstance(n, (int, np.integer)) and int(n) > 1:
            slope = b.reshape(x=slope, shape=np.array([-1] + [1] * (ctx.rank(x) - 2), np.int32))
    return [b.select(cond=b.less(x=x, y=ctx.const(0, x)), a=b.mul(x=x, y=slope), b=x)]


@onnx_op("Clip", versions=(11, 13))
def clip(ctx: Ctx, node: Node) -> list[Value]:
    """min(max(x, lo), hi) with optional run-time bounds (so lo > hi gives hi, as ONNX defines)."""
    b = ctx.b
    x = ctx.input(0, NUMERIC)
    for i, ir_op in ((1, "maximum"), (2, "minimum")):
        bound = ctx.optional_input(i, NUMERIC)
        if bound is not None:
            if bound.type.dtype != x.type.dtype:
                bound = b.cast(x=bound, dtype=x.type.dtype.name)
            x = b.add_op(ir_op, {"x": x, "y": bound}).outputs[0]
    if not ctx.has(1) and not ctx.has(2):
        x = b.identity(x=x)
    return [x]


@onnx_op("Clip", versions=(1, 6))
def clip_attrs(ctx: Ctx, node: Node) -> list[Value]:
    b, x = ctx.b, ctx.input(0, FLOATS)
    lo, hi = _float_attr(ctx, "min", -3.4028234663852886e38), _float_attr(ctx, "max", 3.4028234663852886e38)
    return [b.minimum(x=b.maximum(x=x, y=ctx.const(lo, x)), y=ctx.const(hi, x))]
