"""Helpers shared by the canonicalization rules: reading types and constant parameters."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.core import Op, Value
from ...ir.types import TensorType, is_static_dim
from ..rewrite import Match, Refuse


def tensor_type(v: Value) -> TensorType | None:
    t = v.type
    return t if isinstance(t, TensorType) else None


def known_shape(v: Value) -> tuple | None:
    """The shape of ``v`` when it is a tensor of known rank, else None."""
    t = tensor_type(v)
    return None if t is None else t.shape


def shape_text(shape: tuple | list) -> str:
    return f"[{', '.join(map(str, shape))}]"


def const_param(op: Op, key: str) -> np.ndarray | None:
    """The array of ``op``'s input ``key`` (None when absent); `Refuse` when it is not a constant."""
    v = op.inputs.get(key)
    if v is None:
        return None
    if isinstance(v, tuple) or not v.is_const:
        raise Refuse(f"'{key}' of {op.type} '{op.name}' is not a constant")
    return np.asarray(v.const_val)


def static_size(d: Any) -> int | None:
    return int(d) if is_static_dim(d) else None


def splat(arr: Any) -> Any | None:
    """The one value every element of ``arr`` holds (a numpy scalar), or None if they differ."""
    a = np.asarray(arr)
    if a.size == 0:
        return None
    first = a.reshape(-1)[0]
    if a.size > 1 and not bool(np.all(a == first)):
        return None
    return first


def same_type_as_root(m: Match, v: Value) -> str | None:
    """Why ``v`` cannot stand for the root's only output type-wise (for precise near-miss reasons)."""
    out, t = tensor_type(m.root.outputs[0]), tensor_type(v)
    if out is None or t is None:
        return None
    if out.dtype != t.dtype:
        return f"the result is {out.dtype.name}, '{v.name}' is {t.dtype.name}"
    if out.shape is not None and t.shape is not None and len(out.shape) != len(t.shape):
        return f"the result has rank {len(out.shape)}, '{v.name}' has rank {len(t.shape)}"
    return None


def float_dtype(v: Value) -> bool:
    t = tensor_type(v)
    return t is not None and t.dtype.is_float
