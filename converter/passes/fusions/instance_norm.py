"""instance_norm: a normalization over the spatial axes of [N, C, *D] with per-channel gamma/beta.

layer_norm.py turns the decomposition (mean, sub, square, mean, add eps, rsqrt, mul) into a
``layer_norm`` over its axes; when those are the spatial axes [2, ..., r-1] of a rank 3 or 4 x
and the scale or shift that follows is one value per channel (axis 1), it is an instance norm::

    %n = layer_norm(x=%x, axes=[2, 3], epsilon=1e-5)           # x: [N, C, H, W]
    %s = mul(x=%n, y=%gamma)                                   # gamma: [C, 1, 1] or [1, C, 1, 1]
    %y = add(x=%s, y=%beta)                                    # beta: likewise
        ->    %s = instance_norm(x=%x, gamma=[C], epsilon=1e-5)
              %y = instance_norm(x=%x, gamma=[C], beta=[C], epsilon=1e-5)   (the next rule)

(``layer_norm + beta`` alone also becomes ``instance_norm(beta=...)``.) gamma/beta varying along
any other axis are refused here (the layer_norm rules take those over the normalized axes).
Not exact, as layer_norm.py explains: the kernel applies gamma and beta in fp32 in one pass.
"""

from __future__ import annotations

import numpy as np

from ...ir.builder import Builder
from ...ir.core import Op, Value
from ..rewrite import ABSENT, Match, Refuse, const, op, rule, var
from ._params import aligned, rank_of, static_shape, storage, varying_axes
from .layer_norm import norm_axes_of


def per_channel(x: Value, param: np.ndarray, what: str) -> np.ndarray | str:
    """``param`` (broadcast against x) as [C] when it is one value per channel, else why not."""
    shape = static_shape(x)
    if shape is None:
        return "x's shape is not static"
    al = aligned(param, len(shape))
    if al is None:
        return f"{what} has rank {np.ndim(param)}, more than x's {len(shape)}"
    axes = varying_axes(al)
    if any(a != 1 for a in axes):
        return f"{what} varies along axis {[a for a in axes if a != 1][0]}: not one value per channel (axis 1)"
    return np.ascontiguousarray(np.broadcast_to(al.reshape(-1), [shape[1]]))


def _spatial(ln: Op, x: Value) -> str | None:
    rank = rank_of(x)
    if rank is None or not 3 <= rank <= 4:
        return f"instance_norm needs x of rank 3 or 4, x has rank {rank}"
    axes = norm_axes_of(ln, x)
    if axes != list(range(2, rank)):
        return f"the layer_norm's axes {axes} are not the spatial axes {list(range(2, rank))}"
    return None


def _from_layer_norm(b: Builder, m: Match, param_name: str) -> Value:
    ln, x = m.op("ln"), m["x"]
    why = _spatial(ln, x)
    if why is not None:
        raise Refuse(why)
    p = per_channel(x, np.asarray(m.value(param_name)), param_name)
    if isinstance(p, str):
        raise Refuse(p)
    eps = ln.inputs.get("epsilon")
    return b.instance_norm(x=x, **{param_name: p.astype(storage(x))}, epsilon=eps)


@rule(op.mul(x=op.layer_norm("ln", x=var("x"), gamma=ABSENT, beta=ABSENT), y=const("gamma")), exact=False)
def instance_norm_gamma(b: Builder, m: Match):
    """``layer_norm(x, axes=spatial) * gamma[C] -> instance_norm(x, gamma)``.

        %n = layer_norm(x=%x, axes=[2, 3], epsilon=1e-5)
        %y = mul(x=%n, y=%gamma)      ->    %y = instance_norm(x=%x, gamma=gamma.reshape(C), epsilon=1e-5)"""
    return _from_layer_norm(b, m, "gamma")


@rule(op.add(x=op.layer_norm("ln", x=var("x"), gamma=ABSENT, beta=ABSENT), y=const("beta")), exact=False)
def instance_norm_beta_only(b: Builder, m: Match):
    """``layer_norm(x, axes=spatial) + beta[C] -> instance_norm(x, beta)``.

        %n = layer_norm(x=%x, axes=[2, 3], epsilon=1e-5)
        %y = add(x=%n, y=%beta)       ->    %y = instance_norm(x=%x, beta=beta.reshape(C), epsilon=1e-5)"""
    return _from_layer_norm(b, m, "beta")


@rule(op.add(x=op.instance_norm("inorm", x=var("x"), beta=ABSENT), y=const("beta")), exact=False)
def instance_norm_beta(b: Builder, m: Match):
    """``instance_norm(x, gamma?) + beta[C] -> instance_norm(x, gamma?, beta)``.

        %n = instance_norm(x=%x, gamma=%g, epsilon=1e-5)
        %y = add(x=%n, y=%beta)       ->    %y = instance_norm(x=%x, gamma=%g, beta=%beta, epsilon=1e-5)"""
    x = m["x"]
    p = per_channel(x, np.asarray(m.value("beta")), "beta")
    if isinstance(p, str):
        raise Refuse(p)
    inputs = {**m.op("inorm").inputs, "beta": p.astype(storage(x))}
    return b.instance_norm(**{k: inputs.get(k) for k in ("x", "gamma", "beta", "epsilon")})


RULES = [instance_norm_gamma, instance_norm_beta_only, instance_norm_beta]
