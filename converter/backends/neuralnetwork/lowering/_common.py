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


def same_precision(*arrays: Any) -> list[Any]:
    """The weight arrays of one layer in one precision: fp16 only when every one is fp16, else all
    fp32 (Core ML's validator rejects a layer mixing ``float16Value`` and ``floatValue`` weights,
    e.g. an fp16 weight with an fp32 bias). None entries (absent weights) stay None."""
    present = [np.asarray(a) for a in arrays if a is not None]
    fp16 = bool(present) and all(a.dtype == np.float16 for a in present)
    dt = np.float16 if fp16 else np.float32
    return [None if a is None else np.asarray(a).astype(dt, copy=False) for a in arrays]
