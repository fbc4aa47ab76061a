"""Helpers shared by the lowering families: operands in a common layout, axes, scalars."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ....ir.core import Op, Value
from ..emitter import GraphEmitter, LoweringError, Operand, Perm


def out(op: Op, i: int = 0) -> Value:
    return op.outputs[i]


def axis_of(axis: int, rank: int) -> int:
    """A possibly negative IR axis as WebNN's unsigned one."""
    a = int(axis)
    if not -rank <= a < max(rank, 1):
        raise LoweringError(f"axis {a} is out of range for rank {rank}")
    return a % max(rank, 1)


def physical_axis(o: Operand, axis: int) -> int:
    """Where the IR axis ``axis`` (non-negative) is in ``o``'s layout."""
    return axis if o.perm is None else o.perm.index(axis)


def physical_shape(shape: Sequence[int], perm: Perm | None) -> tuple[int, ...]:
    return tuple(shape) if perm is None else tuple(shape[p] for p in perm)


def common_layout(e: GraphEmitter, values: Sequence[Value]) -> tuple[list[Operand], Perm | None]:
    """Operands for an elementwise op over ``values`` (numpy broadcasting) in one layout: the
    layout of the first full-rank operand that is not in the IR's own, when every other operand
    is a constant (transposed at conversion time) or already there; else the IR's own layout."""
    rank = max(len(e.shape(v)) for v in values)
    bound = [e.any(v) for v in values]
    perm = next((o.perm for o in bound if o.perm is not None and o.rank == rank), None)
    if perm is not None:
        ops: list[Operand] = []
        for v, o in zip(values, bound):
            if o.perm == perm:
                ops.append(o)
                continue
            const = e.value_of(v) if not e.is_bound(v) else None
            if const is not None:
                arr = const.reshape((1,) * (rank - const.ndim) + const.shape)
                c = e.constant(np.transpose(arr, perm), e.dtype_of(v))
                ops.append(Operand(c.js, c.shape, c.dtype, perm))
            elif len(e.shape(v)) == rank:
                ops.append(e.get(v, perm))
            else:
                break
        else:
            return ops, perm
    return [e.get(v) for v in values], None


def broadcast_shape(*shapes: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(d) for d in np.broadcast_shapes(*[tuple(s) for s in shapes]))


def scalar_like(e: GraphEmitter, value: float | int, like: Operand) -> Operand:
    return e.scalar(value, like.dtype)


def int_list(v: object) -> list[int]:
    return [int(x) for x in np.asarray(v).reshape(-1)]


def float_scalar(v: object) -> float:
    arr = np.asarray(v)
    if arr.size != 1:
        raise LoweringError(f"a scalar parameter was expected, got shape {list(arr.shape)}")
    return float(arr.reshape(()))


def reshape(e: GraphEmitter, x: Operand, shape: Sequence[int]) -> Operand:
    shape = [int(d) for d in shape]
    if tuple(shape) == x.shape:
        return x
    return e.emit("reshape", x, list(shape), shape=shape, dtype=x.dtype)


def cast(e: GraphEmitter, x: Operand, dtype: str) -> Operand:
    if x.dtype == dtype:
        return x
    return e.emit("cast", x, dtype, shape=x.shape, dtype=dtype, perm=x.perm)
