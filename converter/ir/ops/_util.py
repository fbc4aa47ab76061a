"""Helpers shared by op definitions (type construction and common inference patterns)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..opdef import InferArgs
from ..types import DType, TensorType, Type


def same_as(a: InferArgs, name: str = "x") -> list[Type]:
    """Output type equal to an input's type (unary elementwise ops)."""
    return [a.tensor_type(name)]


def as_int_list(v: Any) -> list[int]:
    if type(v) is list and all(type(x) is int for x in v):
        return list(v)  # already one (a default such as [1, 1])
    return [int(x) for x in np.asarray(v).reshape(-1)]


def to_dtype(arr: Any, dt: DType) -> np.ndarray:
    """Cast a kernel result to the storage dtype of ``dt`` (for ops computing in a wider type)."""
    return np.asarray(arr).astype(dt.storage, copy=False)


def tensor_out(dt: DType, shape: tuple | None) -> TensorType:
    return TensorType(dt, shape)
