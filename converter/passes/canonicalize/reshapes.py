"""Shape-only ops that cancel: a reshape to the shape its input has, reshape chains, and
squeeze / expand_dims pairs (in both orders) that remove and re-insert the same unit dims. All
exact: only the shape changes, never an element."""

from __future__ import annotations

import numpy as np

from ...ir.builder import Builder
from ...ir.core import Op
from ...ir.shapes import ShapeError, normalize_axes
from ...ir.types import TensorType, is_static_dim
from ..rewrite import Match, Refuse, const, op, rule, var
from ._common import const_param, known_shape, shape_text, tensor_type


def _same_shape(m: Match) -> str | None:
    x, out = tensor_type(m["x"]), m.root.outputs[0].type
    if x is None or x.shape is None or not isinstance(out, TensorType) or out.shape is None:
        return "a shape is unknown"
    if x.shape != out.shape:  # equal symbols are the same size: Symbol identity is its name
        return f"reshapes {shape_text(x.shape)} to {shape_text(out.shape)}"
    return None


@rule(op.reshape(x=var("x")), check=_same_shape)
def reshape_same_shape(b: Builder, m: Match):
    """A reshape to the shape its input already has (static sizes, or the same symbols).

        %y: tensor<fp32, [2, 3]> = reshape(x=%x: tensor<fp32, [2, 3]>, shape=[2, -1])    ->    %x"""
    return m["x"]


def _no_copied_dims(m: Match) -> str | None:
    shape = np.asarray(m.value("shape")).reshape(-1)
    if (shape == 0).any():
        return f"shape {shape.tolist()} has 0s, which copy dims of the input it reshapes"
    return None


@rule(op.reshape(x=op.reshape("inner", x=var("x")).multi_use(), shape=const("shape")), check=_no_copied_dims)
def reshape_chain(b: Builder, m: Match):
    """Two reshapes in a row: the outer one alone (it only depends on the element count, unless its
    shape copies input dims with 0s). The inner one stays while something else reads it
    (``multi_use``: a reshape read twice costs nothing more).

        %t = reshape(x=%x, shape=[6])
        %y = reshape(x=%t, shape=[3, 2])     ->    %y = reshape(x=%x, shape=[3, 2])"""
    return b.reshape(x=m["x"], shape=m["shape"])


def squeezed_axes(squeeze: Op, shape: tuple) -> list[int]:
    """The axes ``squeeze`` removes from an input of ``shape``: those requested (all when ``axes``
    is absent) whose size is statically 1 (the op's own rule, see ops/tensor_transform.py)."""
    axes = const_param(squeeze, "axes")
    try:
        wanted = range(len(shape)) if axes is None else normalize_axes([int(a) for a in axes.reshape(-1)], len(shape))
    except ShapeError as e:
        raise Refuse(str(e)) from None
    return sorted(i for i in wanted if is_static_dim(shape[i]) and int(shape[i]) == 1)


def inserted_axes(expand: Op, out_rank: int) -> list[int]:
    """The output axes at which ``expand_dims`` puts its unit dims."""
    axes = [int(a) for a in const_param(expand, "axes").reshape(-1)]
    try:
        return sorted(normalize_axes(axes, out_rank))
    except ShapeError as e:
        raise Refuse(str(e)) from None


def _reinserts_squeezed(m: Match) -> str | None:
    shape, out = known_shape(m["x"]), known_shape(m.root.outputs[0])
    if shape is None or out is None:
        return "a shape is unknown"
    removed, put_back = squeezed_axes(m.op("squeeze"), shape), inserted_axes(m.root, len(out))
    if removed != put_back:
        return f"squeeze removes axes {removed}, expand_dims inserts {put_back}"
    return None


@rule(op.expand_dims(x=op.squeeze("squeeze", x=var("x")).multi_use()), check=_reinserts_squeezed)
def squeeze_expand_dims(b: Builder, m: Match):
    """expand_dims putting back exactly the unit dims a squeeze removed.

        %t: tensor<fp32, [3, 4]> = squeeze(x=%x: tensor<fp32, [1, 3, 1, 4]>, axes=[0, 2])
        %y: tensor<fp32, [1, 3, 1, 4]> = expand_dims(x=%t, axes=[0, 2])    ->    %x"""
    return m["x"]


def _squeezes_inserted(m: Match) -> str | None:
    mid = known_shape(m.op("expand").outputs[0])
    if mid is None:
        return "a shape is unknown"
    put, removed = inserted_axes(m.op("expand"), len(mid)), squeezed_axes(m.root, mid)
    if removed != put:
        return f"expand_dims inserts axes {put}, squeeze removes {removed}"
    return None


@rule(op.squeeze(x=op.expand_dims("expand", x=var("x")).multi_use()), check=_squeezes_inserted)
def expand_dims_squeeze(b: Builder, m: Match):
    """squeeze removing exactly the unit dims an expand_dims inserted (a squeeze without axes
    also removes x's own unit dims: then it is no inverse, and refused).

        %t: tensor<fp32, [3, 1, 4, 1]> = expand_dims(x=%x: tensor<fp32, [3, 4]>, axes=[1, -1])
        %y: tensor<fp32, [3, 4]> = squeeze(x=%t, axes=[3, 1])    ->    %x"""
    return m["x"]


RULES = [reshape_same_shape, reshape_chain, squeeze_expand_dims, expand_dims_squeeze]
