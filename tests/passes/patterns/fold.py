"""Constant-folding patterns (exact): constant subexpressions, shape arithmetic over a value's own
shape, a select with a constant condition, a cond with a constant predicate."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from converter.ir.builder import Builder
from converter.ir.core import Value
from converter.ir.types import is_static_dim

from . import Sprinkle

_FACTORS = st.sampled_from([1.5, -0.75, 3.0, 0.3125, -2.5])


def _constant_subexpression(b: Builder, x: Value, draw) -> Value:
    """``x + (c1 * c2 - c3)``: the mul and sub fold into one constant."""
    c1, c2, c3 = (np.float32(draw(_FACTORS)) for _ in range(3))
    return b.add(x=x, y=b.sub(x=b.mul(x=b.const(c1), y=b.const(c2)), y=b.const(c3)))


def _reshape_to_own_shape(b: Builder, x: Value, draw) -> Value | None:
    """``reshape(x, concat(shape(x)[:k], [-1]))`` then back to ``shape(x)``: the shape arithmetic
    folds (x's shape must be static: with symbols the result's type would not be x's)."""
    shape = x.type.shape
    if not shape or not all(is_static_dim(d) for d in shape):
        return None
    r = len(shape)
    k = draw(st.integers(0, r - 1))
    s = b.shape(x=x)
    head = b.slice_by_index(x=s, begin=np.array([0], np.int32), end=np.array([k], np.int32))
    flat = b.reshape(x=x, shape=b.concat(values=[head, np.array([-1], np.int32)], axis=0))
    return b.reshape(x=flat, shape=b.shape(x=x))


def _split_sizes_computed(b: Builder, x: Value, draw) -> Value | None:
    """torch's ``x.split(...)`` as coremltools' EMPTY pipeline writes it: the split sizes computed
    from constants (``tile`` of a ``floor_div``, or ``floor_div`` and ``sub``), the pieces
    concatenated back. Needs a static last dim of at least 2."""
    shape = x.type.shape
    if not shape or not is_static_dim(shape[-1]) or int(shape[-1]) < 2:
        return None
    n = b.const(np.array([int(shape[-1])], np.int32))
    half = b.floor_div(x=n, y=np.int32(2))
    if int(shape[-1]) % 2 == 0 and draw(st.booleans()):
        sizes = b.tile(x=half, reps=np.array([2], np.int32))
    else:
        sizes = b.concat(values=[half, b.sub(x=n, y=half)], axis=0)
    parts = b.split(x=x, split_sizes=sizes, axis=-1)
    return b.concat(values=list(parts), axis=-1)


def _select_constant(b: Builder, x: Value, draw) -> Value:
    """``select(c, x, 2x)`` with a constant scalar condition (true or false)."""
    keep = draw(st.booleans())
    other = b.mul(x=x, y=np.float32(-1.25))
    a, c = (x, other) if keep else (other, x)
    return b.select(cond=b.const(np.bool_(keep)), a=a, b=c)


def _cond_constant(b: Builder, x: Value, draw) -> Value:
    """``cond(const)`` whose branches compute different things from x."""
    pred = draw(st.booleans())
    (y,) = b.cond(b.const(np.bool_(pred)), lambda t: [t.mul(x=x, y=np.float32(0.5))],
                  lambda f: [f.sub(x=x, y=np.float32(0.25))])
    return y


SPRINKLES = [
    Sprinkle("constant subexpression", _constant_subexpression, fires="fold_constant_op"),
    Sprinkle("reshape by its own shape", _reshape_to_own_shape, fires="fold_static_shape"),
    Sprinkle("split sizes computed from constants", _split_sizes_computed, fires="fold_constant_op"),
    Sprinkle("select with a constant condition", _select_constant, fires="select_constant_condition"),
    Sprinkle("cond with a constant predicate", _cond_constant, fires="cond_constant_predicate"),
]
