"""softsign from ``x / (1 + |x|)``.

    %a = abs(x=%x)
    %d = add(x=%a, y=1.0)
    %y = real_div(x=%x, y=%d)     ->    %y = softsign(x=%x)      (add in either operand order)

Not exact: softsign rounds once, the decomposition twice (1 + |x|, then the quotient): results
differ by about an ulp. Infinite x gives NaN both ways (inf / inf).
"""

from __future__ import annotations

from ...ir.builder import Builder
from ..rewrite import Match, op, rule, var


@rule(op.real_div(x=var("x"), y=op.add(x=op.abs(x=var("x")), y=1.0)), exact=False)
def softsign(b: Builder, m: Match):
    """``x / (1 + |x|) -> softsign(x)``.

        %a = abs(x=%x)
        %d = add(x=1.0, y=%a)
        %y = real_div(x=%x, y=%d)     ->    %y = softsign(x=%x)"""
    return b.softsign(x=m["x"])


RULES = [softsign]
