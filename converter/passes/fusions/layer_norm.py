"""layer_norm from its decomposition over the last axes, then gamma and beta folded in.

The normalization (x of rank r, axes A = the last k axes, written negative or positive)::

    %mean = reduce_mean(x=%x, axes=A, keep_dims=true)
    %c    = sub(x=%x, y=%mean)
    %sq   = mul(x=%c, y=%c)                       # or square(x=%c), or pow(x=%c, y=2.0)
    %var  = reduce_mean(x=%sq, axes=A, keep_dims=true)
    %ve   = add(x=%var, y=1e-5)
    %r    = rsqrt(x=%ve, epsilon=1e-12)
    %y    = mul(x=%c, y=%r)                      ->    %y = layer_norm(x=%x, axes=A, epsilon=1e-5 + 1e-12)
    (or %s = sqrt(x=%ve); %y = real_div(x=%c, y=%s)  ->  layer_norm(x=%x, axes=A, epsilon=1e-5))

then, as separate rules (so each of gamma and beta may be absent)::

    %z = mul(x=layer_norm(x=%x, axes=A, epsilon=e), y=%gamma)
    %y = add(x=%z, y=%beta)          ->    %y = layer_norm(x=%x, axes=A, gamma=g, beta=b, epsilon=e)

The fused epsilon is the added constant plus rsqrt's own epsilon (``rsqrt(v) = 1 / sqrt(v +
epsilon)``, default 1e-12; coremltools' torch frontend writes it): ``1 / sqrt((var + eps) + e2)``
becomes ``1 / sqrt(var + (eps + e2))``, rounded once in x's dtype (1e-5 + 1e-12 is 1e-5 in fp32).
gamma/beta must vary only along the normalized axes (broadcast against x); they are stored with
the normalized shape ``x.shape[A]``. A normalization over the spatial axes of [N, C, H, W] with a
per-channel gamma/beta becomes instance_norm instead (instance_norm.py).

Refused: mean axes that differ between the two means, axes that are not the last ones, an
epsilon that is not one constant value, keep_dims false, gamma/beta varying along an axis that is
not normalized.

Not exact: layer_norm computes the same formula with its own order of rounding (fp32 pairwise
means, one division instead of rsqrt then a product, gamma/beta applied in fp32). The two agree
to a few ulps of the result for well-conditioned rows; where a row's spread is far below its mean
the rounding of the mean (|mean| * 2^-24) is amplified by up to 1/sqrt(eps) in either form, and
the two forms round it differently.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...ir.builder import Builder
from ...ir.core import Op, Value
from ...ir.shapes import ShapeError, normalize_axes
from ..rewrite import ABSENT, Match, OpPattern, Refuse, Rule, const, op, optional, rule, var
from ._params import aligned, rank_of, scalar, static_shape, storage, varying_axes

#: layer_norm's and instance_norm's default epsilon (the MIL signatures')
DEFAULT_EPSILON = 1e-5
#: rsqrt's default epsilon
RSQRT_EPSILON = 1e-12


def _centered() -> OpPattern:
    mean = op.reduce_mean("mean", x=var("x"), axes=const("axes"), keep_dims=True)
    return op.sub("c", x=var("x"), y=mean)


def _squares() -> dict[str, OpPattern]:
    c = var("c")
    return {"mul": op.mul(x=c, y=c), "square": op.square(x=c), "pow": op.pow(x=c, y=2.0)}


def _variance_plus_eps(square: OpPattern) -> OpPattern:
    var_ = op.reduce_mean("var", x=square, axes=const("axes2"), keep_dims=True)
    return op.add(x=var_, y=const("eps"))


def _patterns() -> dict[str, OpPattern]:
    out: dict[str, OpPattern] = {}
    for sq_name, sq in _squares().items():
        ve = _variance_plus_eps(sq)
        out[f"layer_norm_{sq_name}_rsqrt"] = op.mul(
            x=_centered(), y=op.rsqrt("rsqrt", x=ve, epsilon=optional(const("rsqrt_eps"))))
        out[f"layer_norm_{sq_name}_sqrt"] = op.real_div(x=_centered(), y=op.sqrt(x=ve))
    return out


def normalized_axes(m: Match) -> list[int] | str:
    """The two means' axes as sorted non-negative ints, when they are the same; else the reason."""
    rank = rank_of(m["x"])
    if rank is None:
        return "x's rank is unknown"
    try:
        a1 = sorted(normalize_axes([int(a) for a in np.asarray(m.value("axes")).reshape(-1)], rank))
        a2 = sorted(normalize_axes([int(a) for a in np.asarray(m.value("axes2")).reshape(-1)], rank))
    except ShapeError as e:
        return str(e)
    if a1 != a2:
        return f"the mean axes differ: {a1} for the mean, {a2} for the variance"
    if not a1:
        return "the means reduce no axis"
    return a1


def fused_epsilon(m: Match) -> float | str:
    """The added epsilon plus rsqrt's own (absent: its default in x's dtype), or why not a scalar."""
    eps = scalar(m.value("eps"))
    if eps is None:
        return "epsilon is not a scalar constant"
    if eps < 0:
        return f"epsilon {eps!r} is negative"
    try:
        m.op("rsqrt")
    except KeyError:  # the sqrt form: no epsilon of its own
        return eps
    own = m.get("rsqrt_eps")
    if own is None:
        return eps + float(storage(m["x"])(RSQRT_EPSILON))
    extra = scalar(own.const_val)
    if extra is None:
        return "rsqrt's epsilon is not a scalar constant"
    return eps + extra


def _check(m: Match) -> str | None:
    axes = normalized_axes(m)
    if isinstance(axes, str):
        return axes
    rank = rank_of(m["x"])
    assert rank is not None
    if axes != list(range(rank - len(axes), rank)):
        return f"axes {axes} are not the last axes of a rank-{rank} x"
    eps = fused_epsilon(m)
    return eps if isinstance(eps, str) else None


def _layer_norm(b: Builder, m: Match):
    axes = normalized_axes(m)
    eps = fused_epsilon(m)
    assert not isinstance(axes, str) and not isinstance(eps, str)
    x = m["x"]
    return b.layer_norm(x=x, axes=np.asarray(axes, dtype=np.int32), epsilon=storage(x)(eps))


def _make_rules() -> list[Rule]:
    rules = []
    for name, pattern in _patterns().items():
        def replace(b: Builder, m: Match):
            return _layer_norm(b, m)

        replace.__doc__ = __doc__
        rules.append(rule(pattern, check=_check, name=name, exact=False)(replace))
    return rules


# -- gamma and beta -------------------------------------------------------------------------------


def norm_axes_of(ln: Op, x: Value) -> list[int] | None:
    """A layer_norm's axes (sorted, non-negative), None if unknown."""
    rank = rank_of(x)
    axes = ln.inputs.get("axes")
    if rank is None:
        return None
    if axes is None:
        return list(range(rank))
    if isinstance(axes, tuple) or not axes.is_const:
        return None
    try:
        return sorted(normalize_axes([int(a) for a in np.asarray(axes.const_val).reshape(-1)], rank))
    except ShapeError:
        return None


def over_normalized_shape(x: Value, axes: list[int], param: np.ndarray, what: str) -> np.ndarray | str:
    """``param`` (broadcast against x) as an array of the normalized shape ``x.shape[axes]``, or why not."""
    shape = static_shape(x)
    if shape is None:
        return "x's shape is not static"
    al = aligned(param, len(shape))
    if al is None:
        return f"{what} has rank {np.ndim(param)}, more than x's {len(shape)}"
    outside = [a for a in varying_axes(al) if a not in axes]
    if outside:
        return f"{what} varies along axis {outside[0]}, which is not normalized (axes {axes})"
    full = np.broadcast_to(al, [shape[i] if i in axes else 1 for i in range(len(shape))])
    return np.ascontiguousarray(full.reshape([shape[i] for i in axes]))


def _affine(param_name: str) -> Callable[[Builder, Match], Value]:
    def replace(b: Builder, m: Match):
        ln, x = m.op("ln"), m["x"]
        axes = norm_axes_of(ln, x)
        if axes is None:
            raise Refuse("the layer_norm's axes are unknown")
        p = over_normalized_shape(x, axes, np.asarray(m.value(param_name)), param_name)
        if isinstance(p, str):
            raise Refuse(p)
        inputs = {**ln.inputs, param_name: p.astype(storage(x))}
        return b.layer_norm(**{k: inputs.get(k) for k in ("x", "axes", "gamma", "beta", "epsilon")})

    return replace


@rule(op.mul(x=op.layer_norm("ln", x=var("x"), gamma=ABSENT, beta=ABSENT), y=const("gamma")), exact=False)
def layer_norm_gamma(b: Builder, m: Match):
    """``layer_norm(x) * gamma -> layer_norm(x, gamma)``, gamma over the normalized axes.

        %n = layer_norm(x=%x, axes=[-1], epsilon=1e-5)
        %y = mul(x=%n, y=%gamma)      ->    %y = layer_norm(x=%x, axes=[-1], gamma=%gamma, epsilon=1e-5)
    Not exact: layer_norm applies gamma in fp32 inside its one kernel."""
    return _affine("gamma")(b, m)


@rule(op.add(x=op.layer_norm("ln", x=var("x"), beta=ABSENT), y=const("beta")), exact=False)
def layer_norm_beta(b: Builder, m: Match):
    """``layer_norm(x, gamma?) + beta -> layer_norm(x, gamma?, beta)``, beta over the normalized axes.

        %n = layer_norm(x=%x, axes=[-1], gamma=%g, epsilon=1e-5)
        %y = add(x=%n, y=%beta)       ->    %y = layer_norm(x=%x, axes=[-1], gamma=%g, beta=%beta, epsilon=1e-5)"""
    return _affine("beta")(b, m)


#: the normalization (layer_norm_{mul,square,pow}_{rsqrt,sqrt}), then gamma and beta
RULES = [*_make_rules(), layer_norm_gamma, layer_norm_beta]
