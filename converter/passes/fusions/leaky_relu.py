"""leaky_relu (and prelu, for a per-channel slope) from max and select forms.

    %n = mul(x=%x, y=0.2)
    %y = maximum(x=%x, y=%n)                ->    %y = leaky_relu(x=%x, alpha=0.2)    (0 < alpha < 1)

    %c = greater(x=%x, y=0.0)                # or greater_equal
    %n = mul(x=%x, y=0.2)
    %y = select(cond=%c, a=%x, b=%n)        ->    %y = leaky_relu(x=%x, alpha=0.2)    (any alpha)
    (and select(less(x, 0) or less_equal(x, 0), a=alpha*x, b=x))

With a slope constant that varies along axis 1 only (one value per channel of an [N, C, ...] x of
rank 3 to 5) the result is ``prelu(x, alpha=[C])`` instead (`negative_slope`).

``max(x, a x)`` is the leaky relu only for 0 < a < 1 (a >= 1 gives ``a x`` for positive x), so
other slopes are refused there; the select forms are the definition for any slope. Exact up to
the sign of a zero result (leaky_relu(-0.0) is -0.0, ``select(x > 0, ...)`` gives ``a * -0.0``):
both compute ``x`` or ``a * x`` elementwise, each rounded once.
"""

from __future__ import annotations

import numpy as np

from ...ir.builder import Builder
from ...ir.core import Value
from ..rewrite import Match, Refuse, Rule, const, op, rule, var
from ._params import aligned, rank_of, static_shape, storage, varying_axes


def slope_of(x: Value, alpha: np.ndarray) -> tuple[str, np.ndarray] | str:
    """("leaky_relu", scalar) or ("prelu", [C]) for a slope constant multiplying x, or why neither."""
    a = np.asarray(alpha)
    if a.size == 0:
        return "the slope is empty"
    flat = a.reshape(-1)
    if np.all(flat == flat[0]) and (a.ndim <= (rank_of(x) or 0) or a.size == 1):
        return "leaky_relu", np.asarray(flat[0])
    rank = rank_of(x)
    if rank is None:
        return "x's rank is unknown"
    al = aligned(a, rank)
    if al is None:
        return f"the slope has rank {a.ndim}, more than x's {rank}"
    axes = varying_axes(al)
    if axes != [1]:
        return f"the slope varies along axes {axes}: neither one value nor one per channel (axis 1)"
    if not 3 <= rank <= 5:
        return f"a per-channel slope needs x of rank 3 to 5 (prelu), x has rank {rank}"
    shape = static_shape(x)
    if shape is None or shape[1] != al.shape[1]:
        return f"the slope has {al.shape[1]} values, x's axis 1 is not that size"
    return "prelu", al.reshape(-1)


def negative_slope(b: Builder, x: Value, alpha: np.ndarray) -> Value:
    """``leaky_relu(x, alpha)`` or ``prelu(x, alpha)`` (see `slope_of`); raises Refuse otherwise."""
    kind = slope_of(x, alpha)
    if isinstance(kind, str):
        raise Refuse(kind)
    name, a = kind
    a = np.asarray(a, dtype=storage(x))
    return b.leaky_relu(x=x, alpha=a) if name == "leaky_relu" else b.prelu(x=x, alpha=a)


def _slope_below_one(m: Match) -> str | None:
    a = np.asarray(m.value("alpha"))
    if a.size == 0 or not (np.all(a > 0) and np.all(a < 1)):
        shown = a.reshape(-1)[:4].tolist()
        return f"max(x, alpha * x) is a leaky relu only for 0 < alpha < 1, alpha is {shown}"
    return None


@rule(op.maximum(x=var("x"), y=op.mul(x=var("x"), y=const("alpha"))), check=_slope_below_one)
def leaky_relu_from_max(b: Builder, m: Match):
    """``max(x, alpha * x) -> leaky_relu(x, alpha)`` for 0 < alpha < 1 (prelu per channel).

        %n = mul(x=%x, y=0.2)
        %y = maximum(x=%n, y=%x)      ->    %y = leaky_relu(x=%x, alpha=0.2)"""
    return negative_slope(b, m["x"], m.value("alpha"))


def _select_rule(cond: str, x_first: bool) -> Rule:
    slope = op.mul(x=var("x"), y=const("alpha"))
    test = getattr(op, cond)(x=var("x"), y=0.0)
    pattern = op.select(cond=test, a=var("x"), b=slope) if x_first else op.select(cond=test, a=slope, b=var("x"))

    def replace(b: Builder, m: Match):
        return negative_slope(b, m["x"], m.value("alpha"))

    replace.__doc__ = f"""``select({cond}(x, 0), {'x, alpha * x' if x_first else 'alpha * x, x'}) -> leaky_relu(x, alpha)``
    (prelu for a per-channel alpha); exact up to the sign of a zero."""
    return rule(pattern, name=f"leaky_relu_from_select_{cond}")(replace)


RULES = [
    leaky_relu_from_max,
    _select_rule("greater", True),
    _select_rule("greater_equal", True),
    _select_rule("less", False),
    _select_rule("less_equal", False),
]
