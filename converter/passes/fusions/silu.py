"""silu (swish) from ``x * sigmoid(x)``.

    %s = sigmoid(x=%x)
    %y = mul(x=%x, y=%s)          ->    %y = silu(x=%x)       (either operand order)

Not exact: silu rounds once, the decomposition twice (sigmoid, then the product): results differ
by about an ulp; where sigmoid(x) is subnormal (x below about -87 in fp32) the decomposition's
product keeps only the subnormal's few bits, an absolute difference below 1e-36. coremltools'
``fuse_activation_silu`` does the same rewrite (it runs even in its EMPTY pipeline).
"""

from __future__ import annotations

from ...ir.builder import Builder
from ..rewrite import Match, op, rule, var


@rule(op.mul(x=var("x"), y=op.sigmoid(x=var("x"))), exact=False)
def silu(b: Builder, m: Match):
    """``x * sigmoid(x) -> silu(x)``.

        %s = sigmoid(x=%x)
        %y = mul(x=%s, y=%x)          ->    %y = silu(x=%x)"""
    return b.silu(x=m["x"])


RULES = [silu]
