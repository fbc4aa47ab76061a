"""A transpose that swaps the last two axes of a matmul operand -> matmul's transpose flag.

    %t = transpose(x=%a, perm=[0, .., r-1, r-2])
    %z = matmul(x=%t, y=%b, transpose_x=tx)       ->      %z = matmul(x=%a, y=%b, transpose_x=!tx)

(and the same for ``y`` with ``transpose_y``). Exact: matmul's flag swaps the same two axes before
the product, so the products and their sums are the same. A transpose that moves any other axis,
or whose result is also read elsewhere (it would stay, and nothing is saved), is kept.
"""

from __future__ import annotations

import numpy as np

from ...ir.builder import Builder
from ..rewrite import Match, const, op, rule, var
from ._common import flag, rebuild


def swaps_last_two(perm: np.ndarray) -> bool:
    p = [int(i) for i in np.asarray(perm).reshape(-1)]
    r = len(p)
    p = [i + r if i < 0 else i for i in p]
    return r >= 2 and p == list(range(r - 2)) + [r - 1, r - 2]


def _check(m: Match) -> str | None:
    perm = np.asarray(m.value("perm")).reshape(-1)
    if not swaps_last_two(perm):
        return f"perm {perm.tolist()} does not only swap the last two axes"
    return None


@rule(op.matmul("mm", x=op.transpose(x=var("a"), perm=const("perm"))), check=_check)
def fold_transpose_into_matmul_x(b: Builder, m: Match):
    """``matmul(transpose(a, swap last two), y) -> matmul(a, y, transpose_x=!transpose_x)`` (module docstring)."""
    return rebuild(b, m, "mm", x=m["a"], transpose_x=not flag(m.root, "transpose_x"))


@rule(op.matmul("mm", y=op.transpose(x=var("a"), perm=const("perm"))), check=_check)
def fold_transpose_into_matmul_y(b: Builder, m: Match):
    """``matmul(x, transpose(a, swap last two)) -> matmul(x, a, transpose_y=!transpose_y)`` (module docstring)."""
    return rebuild(b, m, "mm", y=m["a"], transpose_y=not flag(m.root, "transpose_y"))


RULES = [fold_transpose_into_matmul_x, fold_transpose_into_matmul_y]
