"""Random layers -> MIL random ops: normal, uniform and Bernoulli fills (shape of an input, a static
shape, or a run-time shape vector) and categoricalDistribution.

The distributions are the spec's; the streams are not Core ML's (no one outside Core ML can
reproduce those). ``seed`` passes through (MIL takes an int32 seed, -1 meaning unseeded as in
coremltools' builder). Parameters are taken as written, zeros included (a normal fill with stdDev 0
is its mean, a uniform fill with minVal = maxVal that value); categoricalDistribution's ``eps`` and
``temperature`` default to 1e-10 and 1.0 when 0 (the spec's comments). Values that contradict the
spec's definitions are refused: a negative (or NaN) stdDev, minVal above maxVal (the spec calls them
the lower and upper bound; MIL's random_uniform leaves high < low undefined), prob outside [0, 1].

categoricalDistribution draws ``numSamples`` class indices (as floats) per distribution on the last
axis, from ``softmax(x / temperature)`` when ``isLogits`` and from ``softmax(log(max(x, eps)) /
temperature)`` (``x`` being probabilities, ``eps`` keeping log finite) otherwise.
"""

from __future__ import annotations

import numpy as np

from ....ir.core import Value
from ....ir.types import is_static_dim
from ..context import LayerContext
from ..registry import lowers

INT32 = (-(2**31), 2**31 - 1)


def _seed(ctx: LayerContext) -> np.int32:
    seed = int(ctx.params.seed)
    if not INT32[0] <= seed <= INT32[1]:
        raise ctx.unsupported(f"seed {seed} is outside the int32 range MIL random ops take", field="seed")
    return np.int32(seed)


def _shape(ctx: LayerContext) -> Value:
    """The output shape as an int32 vector, by the layer's variant (Like, Static, Dynamic)."""
    b, name = ctx.b, ctx.name
    if ctx.kind.endswith("Static"):
        ctx.expect_inputs(0)
        dims = [int(d) for d in ctx.params.outputShape]
        if not dims:
            raise ctx.fail("outputShape is empty", field="outputShape")
        if max(dims) > INT32[1]:
            raise ctx.fail(f"outputShape {dims} has a size beyond the int32 range", field="outputShape")
        return b.const(np.array(dims, np.int32), name=f"{name}_shape")
    ctx.expect_inputs(1)
    x = ctx.input(0)
    if ctx.kind.endswith("Like"):
        shape = ctx.shape(x)
        if all(is_static_dim(d) for d in shape):  # a const keeps the output type exact
            return b.const(np.array([int(d) for d in shape], np.int32), name=f"{name}_shape")
        return b.shape(x=x, name=f"{name}_shape")
    if ctx.rank(x) != 1:
        raise ctx.fail(f"the shape input must be a vector, has shape {list(ctx.shape(x))}")
    return x if x.type.dtype.name == "int32" else b.cast(x=x, dtype="int32", name=f"{name}_shape")


@lowers("randomNormalLike", "randomNormalStatic", "randomNormalDynamic")
def random_normal(ctx: LayerContext) -> Value:
    p = ctx.params
    if not p.stdDev >= 0.0:
        raise ctx.fail(f"stdDev {p.stdDev} is not a standard deviation (must be >= 0)", field="stdDev")
    return ctx.b.random_normal(shape=_shape(ctx), mean=np.float32(p.mean), stddev=np.float32(p.stdDev),
                               seed=_seed(ctx), name=ctx.name)


@lowers("randomUniformLike", "randomUniformStatic", "randomUniformDynamic")
def random_uniform(ctx: LayerContext) -> Value:
    p = ctx.params
    if not p.minVal <= p.maxVal:
        raise ctx.fail(f"minVal {p.minVal} is above maxVal {p.maxVal} (the lower and upper bound of the range)",
                       field="minVal")
    return ctx.b.random_uniform(shape=_shape(ctx), low=np.float32(p.minVal), high=np.float32(p.maxVal),
                                seed=_seed(ctx), name=ctx.name)


@lowers("randomBernoulliLike", "randomBernoulliStatic", "randomBernoulliDynamic")
def random_bernoulli(ctx: LayerContext) -> Value:
    p = ctx.params
    if not 0.0 <= p.prob <= 1.0:
        raise ctx.fail(f"prob {p.prob} is not a probability", field="prob")
    return ctx.b.random_bernoulli(shape=_shape(ctx), prob=np.float32(p.prob), seed=_seed(ctx), name=ctx.name)


@lowers("categoricalDistribution")
def categorical_distribution(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1)
    p = ctx.params
    b, name = ctx.b, ctx.name
    n = int(p.numSamples)
    if not 1 <= n <= INT32[1]:
        raise ctx.fail(f"numSamples {n} must be positive", field="numSamples")
    temperature = float(p.temperature) or 1.0
    eps = float(p.eps) or 1e-10
    logits = ctx.input(0)
    if ctx.rank(logits) < 1:
        raise ctx.fail("the input must have rank >= 1")
    if not p.isLogits:
        logits = b.log(x=b.maximum(x=logits, y=np.float32(eps), name=f"{name}_floor"), name=f"{name}_logits")
    if temperature != 1.0:
        logits = b.real_div(x=logits, y=np.float32(temperature), name=f"{name}_tempered")
    return b.random_categorical(x=logits, mode="logits", size=np.int32(n), seed=_seed(ctx), name=name)
