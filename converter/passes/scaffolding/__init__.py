"""``remove_scaffolding``: undo what the NeuralNetwork frontend adds for rank-5 layers.

NeuralNetwork layers live in rank 5 ([Seq, Batch, C, H, W]); the frontend computes each layer in
the rank its MIL op needs and lifts the result back (``expand_dims``, or ``reshape`` inserting 1s),
then squeezes or reshapes it down for the next layer. A fresh conversion has none of this. Two
rules remove it where the shapes allow:

- `sink_unit_axes`: an op that does not care about unit axes (table.py: which ops, why, and how
  their axis arguments change) is computed below the insertion of those axes (sink.py: when);
- `reshape_like_chain`: reshape/squeeze/expand_dims of reshape/squeeze/expand_dims -> one op or
  none, which cancels the sunk insertion against the reshape back (reshape-of-reshape is
  canonicalize's reshape_chain).

Both are exact (the same elements in the same order; no arithmetic changes).
"""

from __future__ import annotations

from ..rewrite import RewritePass
from .rules import RULES, reshape_like_chain, sink_unit_axes

__all__ = ["RULES", "RemoveScaffolding", "reshape_like_chain", "sink_unit_axes"]


class RemoveScaffolding(RewritePass):
    name = "remove_scaffolding"

    def __init__(self) -> None:
        super().__init__("remove_scaffolding", RULES)
