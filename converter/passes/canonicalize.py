"""Canonicalization: ops that do nothing are removed, chains of the same op become one.

Each rule is a worked example of the rewrite engine (``converter/passes/rewrite``): a pattern, a
check that names why it refuses, a replacement, and the IR before and after in its docstring. The
engine itself refuses any replacement whose type differs from what it replaces (a broadcasting
``add`` of a zero that widens ``x`` is kept), and keeps function outputs' names.
"""

from __future__ import annotations

import numpy as np

from ..ir.builder import Builder
from ..ir.types import TensorType
from .rewrite import Match, RewritePass, const, op, rule, var


def _tensor(m: Match, name: str) -> TensorType | None:
    t = m[name].type
    return t if isinstance(t, TensorType) else None


@rule(op.add(x=var("x"), y=0))
def add_zero(b: Builder, m: Match):
    """``x + 0 -> x`` (either operand order; a zero of any shape whose broadcast leaves x's type).

        %z = const() [val=0.0]
        %y = add(x=%x, y=%z)          ->    uses of %y read %x
    Exact except for the sign of a zero: ``-0.0 + 0.0`` is ``+0.0``."""
    return m["x"]


@rule(op.mul(x=var("x"), y=1))
def mul_one(b: Builder, m: Match):
    """``x * 1 -> x`` (either operand order; a one of any shape whose broadcast leaves x's type).

        %one = const() [val=1.0]
        %y = mul(x=%one, y=%x)        ->    uses of %y read %x"""
    return m["x"]


def _same_dtype(m: Match) -> str | None:
    x, out = _tensor(m, "x"), m.root.outputs[0].type
    if x is None or not isinstance(out, TensorType):
        return "not a tensor"
    if x.dtype != out.dtype:
        return f"casts {x.dtype.name} to {out.dtype.name}"
    return None


@rule(op.cast(x=var("x")), check=_same_dtype)
def cast_same_dtype(b: Builder, m: Match):
    """A cast to the dtype its input already has.

        %y: tensor<fp32, [2]> = cast(x=%x: tensor<fp32, [2]>, dtype="fp32")    ->    %x"""
    return m["x"]


def _same_shape(m: Match) -> str | None:
    x, out = _tensor(m, "x"), m.root.outputs[0].type
    if x is None or x.shape is None or not isinstance(out, TensorType) or out.shape is None:
        return "a shape is unknown"
    if x.shape != out.shape:  # equal symbols are the same size: Symbol identity is its name
        return f"reshapes [{', '.join(map(str, x.shape))}] to [{', '.join(map(str, out.shape))}]"
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


RULES = [add_zero, mul_one, cast_same_dtype, reshape_same_shape, reshape_chain]


class Canonicalize(RewritePass):
    """The canonicalization rules as one pass."""

    name = "canonicalize"

    def __init__(self) -> None:
        super().__init__("canonicalize", RULES)
