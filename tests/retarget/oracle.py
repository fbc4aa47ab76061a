"""coremltools as the oracle for compressed weights: the dense value its OWN op definitions
(``materialized_val_inference`` / ``decompress`` of the iOS16 and iOS18 constexpr ops) compute
from a package we wrote, read by its MIL loader (which re-runs its type inference on every op)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tests.mil.helpers import CoremltoolsLoader


def _ops(block: Any):
    for op in block.operations:
        yield op
        for b in op.blocks:
            yield from _ops(b)


def _value(var: Any) -> np.ndarray:
    """A coremltools var's compile-time value, evaluating constexpr producers with their own code."""
    op = var.op
    if op.op_type == "const" or not op.op_type.startswith("constexpr_"):
        return var.val
    if op.op_type == "constexpr_lut_to_dense" and op.lut.val is None:
        # coremltools' iOS18 lut op reads lut.val only: give it the value of a quantized lut
        axis = None if op.vector_axis is None else op.vector_axis.val
        return type(op).decompress(op.indices.val, _value(op.lut), axis)
    if op.op_type == "constexpr_cast" and op.source_val.val is None:
        # likewise its cast reads source_val.val only (np.float32 of it, as there)
        return np.float32(_value(op.source_val))
    got = op.materialized_val_inference()
    if isinstance(got, tuple):
        return got[list(op.outputs).index(var)]
    return got


def dense_weights(loader: CoremltoolsLoader, package: Path) -> dict[str, np.ndarray]:
    """Op name -> dense value, for every constexpr op whose result an ordinary op (or nothing) reads,
    as coremltools computes it from ``package``."""
    from coremltools.converters.mil.mil import types

    prog = loader.load(package)
    out = {}
    for fn in prog.functions.values():
        for op in _ops(fn):
            if not op.op_type.startswith("constexpr_"):
                continue
            readers = [c for v in op.outputs for c in v.child_ops]
            if readers and all(c.op_type.startswith("constexpr_") for c in readers):
                continue
            var = op.outputs[-1]
            # coremltools' iOS18 blockwise_shift_scale returns fp32 for an fp32 offset with fp16 scales,
            # where its own type inference (and the program) says fp16: compare in the declared dtype
            out[op.name] = np.asarray(_value(var)).astype(types.nptype_from_builtin(var.dtype))
    return out


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def assert_same_weights(want: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> None:
    assert sorted(want) == sorted(got), (sorted(want), sorted(got))
    for name in want:
        assert same_bits(want[name], got[name]), (
            f"{name}: {want[name].dtype}{list(want[name].shape)} vs {got[name].dtype}{list(got[name].shape)}, "
            f"{int(np.sum(want[name] != got[name])) if want[name].shape == got[name].shape else 'shape'} differ")
