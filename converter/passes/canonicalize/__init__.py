"""Canonicalization: ops that do nothing are removed, chains of the same op become one, and
transposes move to where they cancel.

Each rule is a worked example of the rewrite engine (``converter/passes/rewrite``): a pattern, a
check that names why it refuses, a replacement, and the IR before and after in its docstring. The
engine itself refuses any replacement whose type differs from what it replaces (a broadcasting
``add`` of a zero that widens ``x`` is kept), and keeps function outputs' names. One module per
topic: identities (identity, slices of everything, concat of one, tile by ones, pad by zeros,
split into one), casts (same dtype, exact chains), reshapes (same shape, chains, squeeze /
expand_dims pairs), transposes (identity, pairs, sinking below elementwise ops), arithmetic
(neutral constants, exact division by constants, bool round trips, linear_activation merges).

Every rule is exact: outputs are bit-identical (only ``add_zero`` may turn a ``-0.0`` into
``+0.0``). Selects with a constant condition and constant folding belong to ``fold_constants``.
"""

from __future__ import annotations

from ..rewrite import RewritePass
from .arithmetic import RULES as ARITHMETIC
from .arithmetic import (
    abs_of_bool_cast,
    add_zero,
    div_one,
    div_to_mul,
    greater_of_bool_cast,
    linear_activation_add,
    linear_activation_mul,
    mul_one,
    sub_zero,
)
from .casts import RULES as CASTS
from .casts import cast_chain, cast_same_dtype
from .identities import RULES as IDENTITIES
from .identities import (
    concat_one,
    identity_op,
    pad_zeros,
    slice_by_index_everything,
    slice_by_size_everything,
    split_one,
    tile_ones,
)
from .reshapes import RULES as RESHAPES
from .reshapes import expand_dims_squeeze, reshape_chain, reshape_same_shape, squeeze_expand_dims
from .transposes import RULES as TRANSPOSES
from .transposes import (
    sink_transpose_binary,
    sink_transpose_const_x,
    sink_transpose_const_y,
    sink_transpose_unary,
    transpose_identity,
    transpose_pair,
)

RULES = [*IDENTITIES, *ARITHMETIC, *CASTS, *RESHAPES, *TRANSPOSES]


class Canonicalize(RewritePass):
    """The canonicalization rules as one pass."""

    name = "canonicalize"

    def __init__(self) -> None:
        super().__init__("canonicalize", RULES)


__all__ = [
    "RULES",
    "Canonicalize",
    "abs_of_bool_cast",
    "add_zero",
    "cast_chain",
    "cast_same_dtype",
    "concat_one",
    "div_one",
    "div_to_mul",
    "expand_dims_squeeze",
    "greater_of_bool_cast",
    "identity_op",
    "linear_activation_add",
    "linear_activation_mul",
    "mul_one",
    "pad_zeros",
    "reshape_chain",
    "reshape_same_shape",
    "sink_transpose_binary",
    "sink_transpose_const_x",
    "sink_transpose_const_y",
    "sink_transpose_unary",
    "slice_by_index_everything",
    "slice_by_size_everything",
    "split_one",
    "squeeze_expand_dims",
    "sub_zero",
    "tile_ones",
    "transpose_identity",
    "transpose_pair",
]
