"""softplus from ``log(1 + exp(x))``.

    %e = exp(x=%x)
    %a = add(x=%e, y=1.0)
    %y = log(x=%a)                ->    %y = softplus(x=%x)      (add in either operand order)

log's own epsilon (``log(a + epsilon)``, default 1e-45) must be absent or too small to change
``1 + e^x`` (below half an ulp of 1 in x's dtype); otherwise the rule refuses.

Not exact, and beyond rounding at the ends of the range: the decomposition overflows where e^x
does (x > 88.72 in fp32, 11.09 in fp16: +inf) and loses e^x entirely where ``1 + e^x`` rounds to 1
(x < -16.6 in fp32: 0); softplus gives the true values there (x, and e^x, a value below 6e-8).
In between the two differ by a few ulps. Where the decomposition gives +inf the fused op gives a
finite result: the rule counts that as an intermediate overflow, not a result to keep.
"""

from __future__ import annotations

import numpy as np

from ...ir.builder import Builder
from ..rewrite import Match, const, op, optional, rule, var
from ._params import scalar


def _small_epsilon(m: Match) -> str | None:
    if m["eps"] is None:
        return None
    arr = np.asarray(m.value("eps"))
    eps = scalar(arr)
    if eps is None:
        return "log's epsilon is not a scalar"
    half_ulp = float(np.finfo(arr.dtype).eps) / 2 if arr.dtype.kind == "f" else 0.0
    if abs(eps) >= half_ulp:
        return f"log's epsilon {eps!r} changes 1 + exp(x) (it is not below {half_ulp!r})"
    return None


@rule(op.log(x=op.add(x=op.exp(x=var("x")), y=1.0), epsilon=optional(const("eps"))), check=_small_epsilon, exact=False)
def softplus(b: Builder, m: Match):
    """``log(1 + exp(x)) -> softplus(x)``.

        %e = exp(x=%x)
        %a = add(x=1.0, y=%e)
        %y = log(x=%a)                ->    %y = softplus(x=%x)"""
    return b.softplus(x=m["x"])


RULES = [softplus]
