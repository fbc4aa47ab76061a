"""ActivationParams: the 13 activation kinds of the NeuralNetwork spec."""

from __future__ import annotations

import numpy as np

from ....ir.core import Value
from ....ir.types import is_static_dim
from ..context import LayerContext
from ..registry import lowers


def _per_channel(ctx: LayerContext, x: Value, wp, what: str) -> np.ndarray:
    """A [C] or [1] parameter shaped to broadcast over axis -3 of ``x`` (the channel axis)."""
    rank = ctx.rank(x)
    c = ctx.shape(x)[-3] if rank >= 3 else None
    if c is not None and is_static_dim(c) and ctx.weight_holds(wp, int(c), what):
        n = int(c)
    elif ctx.weight_holds(wp, 1, what):
        n = 1
    else:
        n = ctx.weight_count(wp, what)
        if c is None or is_static_dim(c):
            raise ctx.fail(f"{what} has {n} values for {c} channels", field=what)
    vals = ctx.weight_array(wp, (n,), what)
    return vals.reshape((-1, 1, 1)) if rank >= 3 else vals


@lowers("activation")
def activation(ctx: LayerContext) -> Value:
    p = ctx.params
    kind = p.WhichOneof("NonlinearityType")
    x = ctx.input()
    b, n = ctx.b, ctx.name
    if kind == "ReLU":
        return b.relu(x=x, name=n)
    if kind == "leakyReLU":
        return b.leaky_relu(x=x, alpha=np.float32(p.leakyReLU.alpha), name=n)
    if kind == "tanh":
        return b.tanh(x=x, name=n)
    if kind == "scaledTanh":
        return b.scaled_tanh(x=x, alpha=np.float32(p.scaledTanh.alpha), beta=np.float32(p.scaledTanh.beta), name=n)
    if kind == "sigmoid":
        return b.sigmoid(x=x, name=n)
    if kind == "sigmoidHard":
        return b.sigmoid_hard(x=x, alpha=np.float32(p.sigmoidHard.alpha), beta=np.float32(p.sigmoidHard.beta),
                              name=n)
    if kind == "linear":
        return b.linear_activation(x=x, alpha=np.float32(p.linear.alpha), beta=np.float32(p.linear.beta), name=n)
    if kind == "PReLU":
        alpha = _per_channel(ctx, x, p.PReLU.alpha, "alpha")
        # max(0, x) + alpha * min(0, x), per channel (prelu's own op needs rank >= 3 and C alphas)
        neg = b.minimum(x=x, y=np.float32(0), name=f"{n}_neg")
        return b.add(x=b.relu(x=x, name=f"{n}_pos"), y=b.mul(x=neg, y=alpha, name=f"{n}_scaled"), name=n)
    if kind == "ELU":
        return b.elu(x=x, alpha=np.float32(p.ELU.alpha), name=n)
    if kind == "thresholdedReLU":
        return b.thresholded_relu(x=x, alpha=np.float32(p.thresholdedReLU.alpha), name=n)
    if kind == "softsign":
        return b.softsign(x=x, name=n)
    if kind == "softplus":
        return b.softplus(x=x, name=n)
    if kind == "parametricSoftplus":
        alpha = _per_channel(ctx, x, p.parametricSoftplus.alpha, "alpha")
        beta = _per_channel(ctx, x, p.parametricSoftplus.beta, "beta")
        # alpha * log(1 + exp(beta * x)), per channel
        return b.mul(x=b.softplus(x=b.mul(x=x, y=beta, name=f"{n}_bx"), name=f"{n}_sp"), y=alpha, name=n)
    raise ctx.fail(f"unknown activation '{kind}'")


@lowers("clampedReLU")
def clamped_relu(ctx: LayerContext) -> Value:
    p = ctx.params
    return ctx.b.clamped_relu(x=ctx.input(), alpha=np.float32(p.alpha), beta=np.float32(p.beta), name=ctx.name)
