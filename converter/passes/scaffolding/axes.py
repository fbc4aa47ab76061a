"""Unit axes: the frames of the rank-5 scaffolding and reshapes between shapes that differ by them.

The NeuralNetwork frontend computes many layers in rank 5 ([Seq, Batch, C, H, W]) around ops that
work in a lower rank: ``expand_dims`` (or a ``reshape`` that only inserts 1s) lifts a value into
rank 5, and a ``squeeze`` or ``reshape`` brings the result back. A *frame* says how a high-rank
value relates to its low-rank counterpart: the low value is the high one with the size-1 axes
``axes`` removed (``squeeze(high, axes)``; the elements are the same, in the same order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...ir.builder import Builder
from ...ir.core import Value
from ...ir.types import TensorType, is_static_dim


@dataclass(frozen=True)
class Frame:
    """A value of rank ``rank`` whose axes ``axes`` (sorted, in [0, rank)) are statically 1 and
    stand for its low-rank counterpart with those axes removed."""

    rank: int
    axes: tuple[int, ...]

    @property
    def low_rank(self) -> int:
        return self.rank - len(self.axes)

    def low_axis(self, axis: int) -> int:
        """The low-rank index of high axis ``axis`` (which is not one of ``axes``)."""
        return axis - sum(1 for a in self.axes if a < axis)

    def normalize(self, axis: int) -> int:
        """``axis`` of the high rank in [0, rank) (ValueError when out of range)."""
        a = int(axis)
        if not -self.rank <= a < self.rank:
            raise ValueError(f"axis {a} is out of range for rank {self.rank}")
        return a + self.rank if a < 0 else a

    def __str__(self) -> str:
        return f"rank {self.rank} with unit axes {list(self.axes)}"


def shape_of(v: Value) -> tuple | None:
    t = v.type
    return t.shape if isinstance(t, TensorType) else None


def same_dim(a: object, b: object) -> bool:
    if is_static_dim(a) and is_static_dim(b):
        return int(a) == int(b)  # type: ignore[call-overload]
    return not is_static_dim(a) and not is_static_dim(b) and a == b


def is_one(d: object) -> bool:
    return is_static_dim(d) and int(d) == 1  # type: ignore[call-overload]


def inserted_unit_axes(low: Sequence, high: Sequence) -> tuple[int, ...] | None:
    """The axes of ``high`` that are size-1 dims inserted into ``low`` (None if ``high`` is not
    ``low`` with 1s inserted). Greedy: a 1 of ``low`` matches the first 1 of ``high`` it can, so
    the inserted axes are the later ones (any choice describes the same reshape)."""
    if len(high) < len(low):
        return None
    out: list[int] = []
    i = 0
    for j, d in enumerate(high):
        if i < len(low) and same_dim(low[i], d):
            i += 1
        elif is_one(d):
            out.append(j)
        else:
            return None
    return tuple(out) if i == len(low) else None


def unit_insertion(v: Value) -> tuple[Value, Frame] | None:
    """(low value, frame of ``v``) when ``v`` is computed by an op that only inserts size-1 axes:
    ``expand_dims``, or a ``reshape`` whose output shape is its input's with 1s inserted."""
    op = v.producer
    if op is None or op.type not in ("expand_dims", "reshape") or len(op.outputs) != 1:
        return None
    x = op.inputs.get("x")
    if not isinstance(x, Value):
        return None
    low, high = shape_of(x), shape_of(v)
    if low is None or high is None or len(high) <= len(low):
        return None
    if op.type == "expand_dims":
        axes_arg = op.inputs.get("axes")
        if not isinstance(axes_arg, Value) or not axes_arg.is_const:
            return None
        axes = tuple(sorted(int(a) + len(high) if int(a) < 0 else int(a)
                            for a in np.asarray(axes_arg.const_val).reshape(-1)))
        return x, Frame(len(high), axes)
    found = inserted_unit_axes(low, high)
    return None if found is None else (x, Frame(len(high), found))


def same_low(shape: Sequence, found: Frame, frame: Frame) -> bool:
    """Whether a value of ``shape`` seen in frame ``found`` has the same low value in ``frame``:
    the same rank, 1s on ``frame``'s axes, and the same low shape (only where unit axes sit
    differs, so the low tensors are the same)."""
    if found == frame:
        return True
    if len(shape) != frame.rank or found.rank != frame.rank or not all(is_one(shape[a]) for a in frame.axes):
        return False
    a, c = low_shape(shape, found), low_shape(shape, frame)
    return len(a) == len(c) and all(same_dim(p, q) for p, q in zip(a, c))


def low_shape(shape: Sequence, frame: Frame) -> tuple:
    return tuple(d for i, d in enumerate(shape) if i not in frame.axes)


def reshape_to(b: Builder, v: Value, target: Sequence) -> Value | str:
    """``v`` reshaped to ``target`` (v itself when it has that shape) with the cheapest op:
    ``squeeze``/``expand_dims`` when only 1s differ, else a ``reshape`` to a static shape (or with
    one -1 for a single symbolic dim). A string says why it cannot (two symbolic dims differ)."""
    src = shape_of(v)
    if src is None:
        return f"'{v.name}' has no known shape"
    target = tuple(target)
    if len(src) == len(target) and all(same_dim(a, c) for a, c in zip(src, target)):
        return v
    if len(target) < len(src):
        removed = inserted_unit_axes(target, src)
        if removed is not None:
            return b.squeeze(x=v, axes=np.array(removed, dtype=np.int32))
    else:
        added = inserted_unit_axes(src, target)
        if added is not None:
            return b.expand_dims(x=v, axes=np.array(added, dtype=np.int32))
    symbolic = [i for i, d in enumerate(target) if not is_static_dim(d)]
    if len(symbolic) > 1:
        return f"the shape [{', '.join(map(str, target))}] has more than one symbolic dim"
    shape = [-1 if i in symbolic else int(d) for i, d in enumerate(target)]
    return b.reshape(x=v, shape=np.array(shape, dtype=np.int32))
