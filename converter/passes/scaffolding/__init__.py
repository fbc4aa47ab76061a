"""``remove_scaffolding``: undo what the NeuralNetwork frontend adds for rank-5 layers.

NeuralNetwork layers live in rank 5 ([Seq, Batch, C, H, W]); the frontend computes each layer in
the rank its MIL op needs and lifts the result back (``expand_dims``, or ``reshape`` inserting 1s),
then squeezes or reshapes it down for the next layer. A fresh conversion has none of this. Two
rules remove it where the shapes allow:

- `reshape_like_chain`: reshape/squeeze/expand_dims of reshape/squeeze/expand_dims -> one op or
  none (canonicalize owns reshape-of-reshape and the plain squeeze/expand_dims pair on a
  single-output op's result);
- `lower_unit_axes_region`: the ops between unit-axis insertions and a reshape back are computed
  at the low rank (region.py; which ops and why: table.py).

Both are exact (the same elements in the same order; no arithmetic changes).
"""

from __future__ import annotations

from ..rewrite import RewritePass
from .rules import RULES, lower_unit_axes_region, reshape_like_chain

__all__ = ["RULES", "RemoveScaffolding", "lower_unit_axes_region", "reshape_like_chain"]


class RemoveScaffolding(RewritePass):
    name = "remove_scaffolding"

    def __init__(self) -> None:
        super().__init__("remove_scaffolding", RULES)
