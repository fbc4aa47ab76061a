"""Canonicalization patterns (all exact: the rules they are for never change a result bit).

Each writes, after a random fp32 value, ops that canonicalize removes or merges: no-ops (identity,
a transpose by the identity, slices of everything, a concat of one, tile by ones, pad by zeros,
split into one, squeeze/expand_dims round trips, sub 0, div 1), chains (casts, transposes sunk
through unary, binary and constant operands to their inverse), exact division by a power of two,
the NeuralNetwork bool loop-condition chain and linear_activation merges.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from converter.ir.builder import Builder
from converter.ir.core import Value
from converter.ir.types import is_static_dim

from . import Sprinkle


def _rank(x: Value) -> int | None:
    shape = x.type.shape
    return None if shape is None else len(shape)


def _static(x: Value) -> bool:
    return x.type.shape is not None and all(is_static_dim(d) for d in x.type.shape)


def _cast_same(b: Builder, x: Value, draw) -> Value:
    return b.cast(x=x, dtype="fp32")


def _identity(b: Builder, x: Value, draw) -> Value:
    return b.identity(x=x)


def _transpose_identity(b: Builder, x: Value, draw) -> Value | None:
    r = _rank(x)
    return None if not r else b.transpose(x=x, perm=np.arange(r, dtype=np.int32))


def _inverse(perm: list[int]) -> np.ndarray:
    inv = np.zeros(len(perm), np.int32)
    inv[np.asarray(perm)] = np.arange(len(perm))
    return inv


def _perm(x: Value, draw) -> list[int] | None:
    r = _rank(x)
    return None if not r else list(draw(st.permutations(range(r))))


def _transpose_through_unary(b: Builder, x: Value, draw) -> Value | None:
    perm = _perm(x, draw)
    if perm is None:
        return None
    t = b.transpose(x=x, perm=np.asarray(perm, np.int32))
    for name in draw(st.lists(st.sampled_from(["relu", "abs", "tanh", "sigmoid"]), min_size=1, max_size=3)):
        t = getattr(b, name)(x=t)
    return b.transpose(x=t, perm=_inverse(perm))


def _transpose_through_binary(b: Builder, x: Value, draw) -> Value | None:
    perm = _perm(x, draw)
    if perm is None:
        return None
    p = np.asarray(perm, np.int32)
    left = b.transpose(x=x, perm=p)
    right = b.transpose(x=b.relu(x=x), perm=p)
    op = draw(st.sampled_from(["add", "mul", "maximum", "sub"]))
    return b.transpose(x=getattr(b, op)(x=left, y=right), perm=_inverse(perm))


def _transpose_through_const(b: Builder, x: Value, draw) -> Value | None:
    perm = _perm(x, draw)
    if perm is None or not _static(x):
        return None
    t = b.transpose(x=x, perm=np.asarray(perm, np.int32))
    last = int(t.type.shape[-1])
    c = np.linspace(-1.5, 2.25, last, dtype=np.float32)
    s = b.sub(x=t, y=c) if draw(st.booleans()) else b.sub(x=c, y=t)
    return b.transpose(x=s, perm=_inverse(perm))


def _slice_everything(b: Builder, x: Value, draw) -> Value | None:
    r = _rank(x)
    if not r:
        return None
    if draw(st.booleans()):
        return b.slice_by_index(x=x, begin=[0] * r, end=[0] * r, end_mask=[True] * r)
    return b.slice_by_size(x=x, begin=[0] * r, size=[-1] * r)


def _unit_dims_round_trip(b: Builder, x: Value, draw) -> Value | None:
    r = _rank(x)
    if r is None:
        return None
    axis = [draw(st.integers(0, r))]
    if draw(st.booleans()):
        return b.squeeze(x=b.expand_dims(x=x, axes=axis), axes=axis)  # expand_dims_squeeze: x
    unit = b.relu(x=b.expand_dims(x=x, axes=axis))  # a value with a unit dim
    again = b.expand_dims(x=b.squeeze(x=unit, axes=axis), axes=axis)  # squeeze_expand_dims: unit
    return b.squeeze(x=again, axes=axis)


def _one_piece(b: Builder, x: Value, draw) -> Value | None:
    r = _rank(x)
    if not r or not _static(x):
        return None
    kind = draw(st.sampled_from(["concat", "tile", "pad", "split"]))
    if kind == "concat":
        return b.concat(values=(x,), axis=r - 1)
    if kind == "tile":
        return b.tile(x=x, reps=[1] * r)
    if kind == "pad":
        return b.pad(x=x, pad=np.zeros(2, np.int32), mode="constant")
    return b.split(x=x, num_splits=1, axis=0)


def _cast_chain(b: Builder, x: Value, draw) -> Value:
    half = b.cast(x=x, dtype="fp16")  # lossy: kept
    back = b.cast(x=b.cast(x=half, dtype="fp32"), dtype="fp16")  # fp16 -> fp32 -> fp16: half itself
    return b.cast(x=back, dtype="fp32")


def _neutral_constants(b: Builder, x: Value, draw) -> Value:
    y = b.sub(x=x, y=np.float32(0.0))
    y = b.real_div(x=y, y=np.float32(1.0))
    return b.real_div(x=y, y=np.float32(draw(st.sampled_from([0.25, -2.0, 3.0]))))


def _bool_loop_condition(b: Builder, x: Value, draw) -> Value:
    flag = b.greater(x=x, y=np.float32(0.5))
    as_number = b.abs(x=b.cast(x=flag, dtype="fp32"))
    return b.cast(x=b.greater(x=as_number, y=np.float32(1e-6)), dtype="fp32")


def _linear_activation_merge(b: Builder, x: Value, draw) -> Value:
    if draw(st.booleans()):
        n = b.linear_activation(x=x, alpha=np.float32(-1.0), beta=np.float32(0.0))
        return b.add(x=n, y=np.float32(1.0))
    n = b.linear_activation(x=x, alpha=np.float32(1.5), beta=np.float32(0.25))
    return b.mul(x=n, y=np.float32(-1.0))


SPRINKLES = [
    Sprinkle("cast to its own dtype", _cast_same, fires="cast_same_dtype"),
    Sprinkle("identity op", _identity, fires="identity_op"),
    Sprinkle("transpose by the identity", _transpose_identity, fires="transpose_identity"),
    Sprinkle("transpose, unary ops, inverse transpose", _transpose_through_unary, fires="sink_transpose_unary"),
    Sprinkle("binary op of two transposes, inverse transpose", _transpose_through_binary,
             fires="sink_transpose_binary"),
    Sprinkle("binary op of a transpose and a constant, inverse transpose", _transpose_through_const,
             fires="sink_transpose_const_y"),
    Sprinkle("slice of everything", _slice_everything, fires="slice_by_index_everything"),
    Sprinkle("expand_dims/squeeze round trips", _unit_dims_round_trip, fires="expand_dims_squeeze"),
    Sprinkle("concat/tile/pad/split that keep x", _one_piece, fires="concat_one"),
    Sprinkle("cast chain back to fp16", _cast_chain, fires="cast_chain"),
    Sprinkle("sub 0, div 1, div by a constant", _neutral_constants, fires="div_to_mul"),
    Sprinkle("bool loop condition through fp32 and abs", _bool_loop_condition, fires="greater_of_bool_cast"),
    Sprinkle("linear_activation then add/mul", _linear_activation_merge, fires="linear_activation_add"),
]
