"""NeuralNetwork rank-5 scaffolding (exact): values lifted by unit axes around ops that do not care
about them, then taken back down, as the NeuralNetwork frontend writes them."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from converter.ir.builder import Builder
from converter.ir.core import Value
from converter.ir.types import is_static_shape

from . import Sprinkle

ELEMENTWISE = ("relu", "sigmoid", "tanh", "abs", "softsign")


def _axes(rank: int, draw) -> np.ndarray:
    """1 to 3 unit axes inserted into a value of ``rank``, at random places of the result."""
    k = draw(st.integers(1, 3))
    places = draw(st.lists(st.integers(0, rank + k - 1), min_size=k, max_size=k, unique=True))
    return np.array(sorted(places), dtype=np.int32)


def _elementwise(b: Builder, x: Value, draw) -> Value:
    rank = len(x.type.shape)
    axes = _axes(rank, draw)
    v = b.expand_dims(x=x, axes=axes)
    for name in draw(st.lists(st.sampled_from(ELEMENTWISE), min_size=1, max_size=3)):
        v = getattr(b, name)(x=v)
    if draw(st.booleans()):
        v = b.mul(x=v, y=np.float32(draw(st.sampled_from([0.5, -1.75, 3.0]))))
    return b.squeeze(x=v, axes=axes)


def _centered(b: Builder, x: Value, draw) -> Value | None:
    """x - mean(x) along one axis, computed in a rank raised by unit axes (a reshape if x's shape
    is static, as the frontend's mvn does), then reshaped back: a DAG, x read twice."""
    shape = x.type.shape
    rank = len(shape)
    if rank == 0:
        return None
    axes = _axes(rank, draw)
    if is_static_shape(shape) and draw(st.booleans()):
        high = list(shape)
        for a in axes:
            high.insert(int(a), 1)
        v = b.reshape(x=x, shape=np.array(high, dtype=np.int32))
    else:
        v = b.expand_dims(x=x, axes=axes)
    # an axis of x that is not 1: with 1s next to inserted ones, which axes are "inserted" is a
    # choice (any describes the same reshape), and a reduction over size-1 axes only is left alone
    kept = [a for a in range(rank + len(axes)) if a not in set(axes.tolist())]
    wide = [h for i, h in enumerate(kept) if not (isinstance(shape[i], int) and shape[i] == 1)]
    if not wide:
        return None
    axis = draw(st.sampled_from(wide))
    mean = b.reduce_mean(x=v, axes=np.array([axis], dtype=np.int32), keep_dims=True)
    return b.squeeze(x=b.sub(x=v, y=mean), axes=axes)


def _transposed(b: Builder, x: Value, draw) -> Value:
    """expand_dims at 0, a transpose that moves only that axis, squeeze where it went."""
    rank = len(x.type.shape)
    to = draw(st.integers(0, rank))
    perm = [a for a in range(1, rank + 1)]
    perm.insert(to, 0)
    v = b.expand_dims(x=x, axes=np.array([0], dtype=np.int32))
    v = b.transpose(x=v, perm=np.array(perm, dtype=np.int32))
    return b.squeeze(x=b.exp(x=v), axes=np.array([to], dtype=np.int32))


SPRINKLES = [
    Sprinkle("elementwise ops in a rank raised by unit axes", _elementwise, fires="sink_unit_axes"),
    Sprinkle("x - mean(x) in a rank raised by unit axes", _centered, fires="sink_unit_axes"),
    Sprinkle("transpose moving an inserted axis", _transposed, fires="sink_unit_axes"),
]
