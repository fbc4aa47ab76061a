"""Shape arithmetic shared by op type inference, aware of symbolic dimensions."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .types import Dim, Symbol, fresh_symbol, is_static_dim


class ShapeError(ValueError):
    """Shapes that cannot work together (raised inside infer(); reported with the op's name)."""


def broadcast_shapes(*shapes: Sequence[Dim]) -> tuple:
    """Numpy broadcasting over possibly-symbolic shapes.

    A symbolic dim against 1 keeps the symbol; against a static size > 1 gives that size (the
    symbol must equal it at run time); two different symbols give a fresh symbol.
    """
    rank = max((len(s) for s in shapes), default=0)
    out: list[Dim] = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        statics = {int(d) for d in dims if is_static_dim(d) and int(d) != 1}
        symbols = [d for d in dims if isinstance(d, Symbol)]
        if len(statics) > 1:
            raise ShapeError(f"shapes {[tuple(s) for s in shapes]} cannot be broadcast (axis {i - rank})")
        if statics:
            out.append(statics.pop())
        elif symbols:
            names = {s.name for s in symbols}
            out.append(symbols[0] if len(names) == 1 else fresh_symbol())
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
    """Apply an integer function to dims; a fresh symbol if any dim is symbolic."""
    if all(is_static_dim(d) for d in dims):
        return int(fn(*(int(d) for d in dims)))
    return fresh_symbol()


def same_dim(a: Dim, b: Dim) -> bool:
    if is_static_dim(a) and is_static_dim(b):
        return int(a) == int(b)
    return a == b
