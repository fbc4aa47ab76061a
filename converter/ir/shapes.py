"""Shape arithmetic shared by op type inference, aware of symbolic dimensions."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .types import Dim, DimExpr, fresh_symbol, is_static_dim


class ShapeError(ValueError):
    """Shapes that cannot work together (raised inside infer(); reported with the op's name)."""


def broadcast_shapes(*shapes: Sequence[Dim]) -> tuple:
    """Numpy broadcasting over possibly-symbolic shapes.

    A symbolic dim against 1 keeps the symbolic dim; against a static size > 1 gives that size (the
    dim must equal it at run time); equal symbolic dims stay; a symbolic dim that cannot be 1 (its
    lower bound is at least 2) wins over the others (they must equal it or be 1); otherwise two
    different symbolic dims give a fresh symbol.
    """
    if shapes and all(s == shapes[0] for s in shapes) and all(type(d) is int for d in shapes[0]):
        return tuple(shapes[0])  # equal static shapes (the common case)
    rank = max((len(s) for s in shapes), default=0)
    out: list[Dim] = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        statics = {int(d) for d in dims if is_static_dim(d) and int(d) != 1}
        symbolic: list[Any] = []
        for d in dims:
            if isinstance(d, DimExpr) and d not in symbolic:
                symbolic.append(d)
        if len(statics) > 1:
            raise ShapeError(f"shapes {[tuple(s) for s in shapes]} cannot be broadcast (axis {i - rank})")
        if statics:
            out.append(statics.pop())
        elif len(symbolic) == 1:
            out.append(symbolic[0])
        elif symbolic:
            above_one = [d for d in symbolic if (d.bounds()[0] or 0) >= 2]
            out.append(above_one[0] if above_one else fresh_symbol())
        else:
            out.append(1)
    return tuple(out)


def normalize_axis(axis: int, rank: int, *, what: str = "axis") -> int:
    axis = int(axis)
    if not -rank <= axis < rank:
        raise ShapeError(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def normalize_axes(axes: Iterable[int], rank: int, *, what: str = "axes") -> list[int]:
    out = [normalize_axis(a, rank, what=what) for a in axes]
    if len(set(out)) != len(out):
        raise ShapeError(f"{what} {list(axes)} repeat an axis")
    return out


def dim_op(fn, *dims: Dim) -> Dim:
    """Apply an integer function to dims. With symbolic dims the function runs on them (``+ - *``
    and ``//`` by a positive int build expressions, see `symexpr`); anything else it does (floats,
    comparisons) gives a fresh symbol."""
    if all(is_static_dim(d) for d in dims):
        return int(fn(*(int(d) for d in dims)))
    try:
        out = fn(*dims)
    except TypeError:
        return fresh_symbol()
    if isinstance(out, DimExpr) or is_static_dim(out):
        return out if isinstance(out, DimExpr) else int(out)
    return fresh_symbol()


def same_dim(a: Dim, b: Dim) -> bool:
    if is_static_dim(a) and is_static_dim(b):
        return int(a) == int(b)
    return a == b


def never_positive(d: Dim) -> bool:
    """Whether a size cannot be positive: a static size <= 0, or an expression whose bounds say so."""
    if is_static_dim(d):
        return int(d) <= 0
    hi = d.bounds()[1]
    return hi is not None and hi <= 0


def dim_sum(dims: Sequence[Dim]) -> Dim:
    total: Any = 0
    for d in dims:
        total = total + d
    return total


def dim_prod(dims: Sequence[Dim]) -> Dim:
    total: Any = 1
    for d in dims:
        total = total * d
    return total
