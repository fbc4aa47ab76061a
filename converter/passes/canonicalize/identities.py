"""Ops that return their input unchanged: ``identity``, a slice of everything, a concat of one
value, a tile by ones, a pad by zeros, a split into one piece. Each is exact (the result is the
input, bit for bit); the engine also refuses any replacement whose type differs from the op's."""

from __future__ import annotations

from ...ir.builder import Builder
from ...ir.types import is_static_dim
from ..rewrite import Match, op, rule, var
from ._common import const_param, known_shape, static_size


@rule(op.identity(x=var("x")))
def identity_op(b: Builder, m: Match):
    """``identity`` is its input.

        %y = identity(x=%x)        ->    uses of %y read %x"""
    return m["x"]


def _covers_start(begin: int | None, dim) -> bool:
    """A begin bound (None: masked) that starts at the first element of a dim."""
    if begin is None or begin == 0:
        return True
    size = static_size(dim)
    return begin < 0 and size is not None and begin <= -size


def _covers_end(end: int | None, dim) -> bool:
    """An end bound (None: masked) at or beyond the last element of a dim (numpy clamps it)."""
    if end is None:
        return True
    if end < 0:
        return False
    if is_static_dim(dim):
        return end >= int(dim)
    hi = dim.bounds()[1]
    return hi is not None and end >= hi


def _slices_everything(m: Match) -> str | None:
    shape = known_shape(m["x"])
    if shape is None:
        return "the rank of x is unknown"
    root, rank = m.root, len(shape)
    begin, end = const_param(root, "begin"), const_param(root, "end")
    stride = const_param(root, "stride")
    masks = {k: const_param(root, k) for k in ("begin_mask", "end_mask", "squeeze_mask")}
    flags = {k: [False] * rank if v is None else [bool(f) for f in v.reshape(-1)] for k, v in masks.items()}
    strides = [1] * rank if stride is None else [int(s) for s in stride.reshape(-1)]
    begins = [int(v) for v in begin.reshape(-1)]
    ends = [int(v) for v in end.reshape(-1)]
    for i, d in enumerate(shape):
        if flags["squeeze_mask"][i]:
            return f"it squeezes dim {i}"
        if strides[i] != 1:
            return f"stride {strides[i]} on dim {i}"
        b = None if flags["begin_mask"][i] else begins[i]
        e = None if flags["end_mask"][i] else ends[i]
        if not _covers_start(b, d):
            return f"dim {i} (size {d}) starts at {b}"
        if not _covers_end(e, d):
            return f"dim {i} (size {d}) ends at {e}"
    return None


@rule(op.slice_by_index(x=var("x")), check=_slices_everything)
def slice_by_index_everything(b: Builder, m: Match):
    """A slice that takes every element in order (each dim: begin 0 or masked, end masked or at
    least the size, stride 1, nothing squeezed).

        %y: tensor<fp32, [2, 3]> = slice_by_index(x=%x: tensor<fp32, [2, 3]>, begin=[0, 0],
                                                  end=[0, 3], end_mask=[true, false])    ->    %x"""
    return m["x"]


def _sized_everything(m: Match) -> str | None:
    shape = known_shape(m["x"])
    if shape is None:
        return "the rank of x is unknown"
    begin, size = const_param(m.root, "begin"), const_param(m.root, "size")
    for i, (d, bi, si) in enumerate(zip(shape, begin.reshape(-1), size.reshape(-1))):
        bi, si = int(bi), int(si)
        if not _covers_start(bi, d):
            return f"dim {i} (size {d}) starts at {bi}"
        if si != -1 and (not is_static_dim(d) or si != int(d)):
            return f"dim {i} (size {d}) takes {si} elements"
    return None


@rule(op.slice_by_size(x=var("x")), check=_sized_everything)
def slice_by_size_everything(b: Builder, m: Match):
    """A slice_by_size from the start of every dim that takes all of it (size -1 or the size).

        %y: tensor<fp32, [2, 3]> = slice_by_size(x=%x: tensor<fp32, [2, 3]>, begin=[0, 0], size=[-1, 3])
            ->    %x"""
    return m["x"]


def _not_scalar(m: Match) -> str | None:
    shape = known_shape(m["x"])
    if shape is not None and len(shape) == 0:
        return "a concat of one rank-0 value is a 1-D tensor"
    return None


@rule(op.concat(values=[var("x")]), check=_not_scalar)
def concat_one(b: Builder, m: Match):
    """A concat of a single value (interleaved or not) is that value.

        %y = concat(values=(%x), axis=1)    ->    %x"""
    return m["x"]


@rule(op.tile(x=var("x"), reps=1))
def tile_ones(b: Builder, m: Match):
    """A tile repeating every dim once.

        %y = tile(x=%x, reps=[1, 1, 1])    ->    %x"""
    return m["x"]


@rule(op.pad(x=var("x"), pad=0))
def pad_zeros(b: Builder, m: Match):
    """A pad adding nothing on either side of every dim (whatever the mode and constant).

        %y = pad(x=%x, pad=[0, 0, 0, 0], mode="reflect")    ->    %x"""
    return m["x"]


def _one_piece(m: Match) -> str | None:
    n = len(m.root.outputs)
    return None if n == 1 else f"it makes {n} pieces"


@rule(op.split(x=var("x")), check=_one_piece)
def split_one(b: Builder, m: Match):
    """A split into a single piece (``num_splits=1`` or one split size) is its input.

        %y = split(x=%x, num_splits=1, axis=0)    ->    %x"""
    return m["x"]


RULES = [identity_op, slice_by_index_everything, slice_by_size_everything, concat_one, tile_ones, pad_zeros,
         split_one]
