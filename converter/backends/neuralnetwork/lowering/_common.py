"""Helpers shared by the lowering families."""

from __future__ import annotations

from typing import Any

import numpy as np

from ....errors import LoweringError
from ....ir.core import Op, Value
from ..emitter import NetworkEmitter


def x_blob(e: NetworkEmitter, op: Op, key: str = "x") -> str:
    v = op.inputs.get(key)
    if not isinstance(v, Value):
        raise LoweringError(f"input '{key}' is missing")
    return e.blob(v)


def single(e: NetworkEmitter, op: Op, kind: str, inputs: list[str] | None = None) -> Any:
    """One layer of ``kind`` from ``x`` (or ``inputs``) to the op's only result; its parameters."""
    return e.layer(kind, op.name, inputs if inputs is not None else [x_blob(e, op)], [e.define(op.outputs[0])])


def scalar(v: Any, what: str) -> float:
    arr = np.asarray(v)
    if arr.size != 1:
        raise LoweringError(f"{what} must be a scalar, got shape {list(arr.shape)}")
    return float(arr.reshape(()))
