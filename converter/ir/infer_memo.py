"""A memo of type inference, for programs that repeat the same op over and over.

A 100k-op program spends a third of its load time inferring output types that are the same for
thousands of ops (every block of a chain has the same convolution over the same shape). An op's
inferred types are a function of its input types and of the parameter *values* inference reads
(through ``InferArgs.value``); ``OpDef.infer_op`` records those reads, and a later op with equal
input types and equal values of the same parameters gets the remembered types. Sound by
determinism: the same types and the same values read lead ``infer`` down the same path. Inference
that looks elsewhere (the op itself: attributes, blocks; large constant values), or whose result
has a symbolic dim, is never remembered.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .types import TensorType

# A parameter value larger than this is not fingerprinted (inference reading a large constant's
# values, not just its type, is rare; hashing it would cost more than inferring).
MAX_FINGERPRINT_BYTES = 512
# Bound on the memo: cleared when it holds this many keys (programs repeat few distinct ops).
MAX_KEYS = 4096
# Different read values under one key (a conv with 3 different paddings): kept up to this many.
MAX_VARIANTS = 8

UNUSABLE = object()  # the fingerprint of a value the memo cannot compare cheaply

Entry = tuple[tuple[tuple[str, Any], ...], tuple]  # ((name, fingerprint), ...), output types
_MEMO: dict[tuple, list[Entry]] = {}


def fingerprint(value: Any) -> Any:
    """A hashable stand-in equal for equal values (type included: 1, 1.0 and True differ), or
    `UNUSABLE`."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return (type(value), value)
    if isinstance(value, np.ndarray):
        if value.nbytes > MAX_FINGERPRINT_BYTES or value.dtype.kind == "O":
            return UNUSABLE
        return ("a", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, np.generic):
        if value.dtype.kind == "O":
            return UNUSABLE
        return ("s", value.dtype.str, value.tobytes())
    if isinstance(value, (tuple, list)):  # a list: an expression default such as [1, 1]
        parts = tuple(fingerprint(v) for v in value)
        return UNUSABLE if any(p is UNUSABLE for p in parts) else (type(value), parts)
    return UNUSABLE


def all_static(types: list) -> bool:
    """Whether every type is a tensor of known static shape. Only such results are remembered: a
    symbolic dim may be a fresh symbol of this op's own (``fresh_symbol`` is called from helpers
    the recording cannot see), which another op must not share."""
    for t in types:
        shape = getattr(t, "shape", None)
        if shape is None or not isinstance(t, TensorType) or not all(type(d) is int for d in shape):
            return False
    return True


def key(opdef: Any, inputs: dict[str, Any]) -> tuple | None:
    """The memo key of an op: its definition and its inputs' names and types (None when a type
    cannot be hashed)."""
    parts: list[Any] = [opdef]
    for name, arg in inputs.items():
        parts.append(name)
        parts.append(tuple(v.type for v in arg) if isinstance(arg, tuple) else arg.type)
    k = tuple(parts)
    try:
        hash(k)
    except TypeError:
        return None
    return k


def variants(k: tuple) -> list[Entry]:
    """The remembered results under key ``k``: each with the parameter values it was read from."""
    return _MEMO.get(k, ())  # type: ignore[return-value]


def seen(k: tuple) -> bool:
    """Whether an op of this key passed ``check_inputs`` and was inferred before."""
    return k in _MEMO


def remember(k: tuple, reads: tuple[tuple[str, Any], ...], types: list | None) -> None:
    """Note an op of key ``k`` as checked and inferred, and its result when it may be reused
    (``types`` given and all static)."""
    if len(_MEMO) >= MAX_KEYS:
        _MEMO.clear()
    entries = _MEMO.setdefault(k, [])
    if types is not None and len(entries) < MAX_VARIANTS and all_static(types):
        entries.append((reads, tuple(types)))


def clear() -> None:
    _MEMO.clear()
