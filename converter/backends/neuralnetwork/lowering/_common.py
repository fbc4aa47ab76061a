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


#: integers of at most this magnitude are exact in fp32, the type of every blob at run time
FP32_EXACT_INT = 2**24


def allows(e: NetworkEmitter, version: int) -> bool:
    """Whether a layer or parameter of specification ``version`` may be used where an earlier
    version has a longer form: yes unless the user capped the version (--target / --spec-version)
    below it. Without a cap the shorter form wins (the model's version follows its layers)."""
    cap = e.state.version_cap
    return cap is None or cap >= version


def exact_float(value: Any, what: str) -> float:
    """A scalar written to a float field or blob: an integer beyond 2**24 has no exact fp32 form
    (a LoweringError rather than a silently different value)."""
    arr = np.asarray(value)
    if arr.size != 1:
        raise LoweringError(f"{what} must be a scalar, got shape {list(arr.shape)}")
    if arr.dtype.kind in "iu" and abs(int(arr.reshape(()))) > FP32_EXACT_INT:
        raise LoweringError(f"{what} {int(arr.reshape(()))} is not exact in fp32 (NeuralNetwork blobs are fp32; "
                            f"integers are exact up to 2**24)")
    return float(arr.reshape(()))
