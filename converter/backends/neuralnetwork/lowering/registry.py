"""The lowering table: IR op type -> a function appending NeuralNetwork layers.

Each lowering is registered with how it maps (``direct``: one layer; ``decomposed``: several) and,
where an IR op has no NeuralNetwork form at all, `UNSUPPORTED` says why. `converter ops --json`
shows both (`neuralnetwork_entry`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ....ir.core import Op
from ...lowering_table import lowering_entry
from ..emitter import NetworkEmitter

LowerFn = Callable[[NetworkEmitter, Op], None]
#: the ops of the same block whose layers an op's lowering makes unnecessary (it reads past them, or
#: writes their results itself): they are skipped, not lowered
AbsorbFn = Callable[[Op], list[Op]]


@dataclass(frozen=True)
class Lowering:
    op_type: str
    kind: str  # "direct" | "decomposed"
    fn: LowerFn
    note: str = ""
    absorbs: AbsorbFn | None = None


LOWERINGS: dict[str, Lowering] = {}

#: IR op types with no NeuralNetwork form, and why (ops handled before lowering, such as ``const``, are absent)
UNSUPPORTED: dict[str, str] = {}


def lowering(*op_types: str, kind: str = "direct", note: str = "",
             absorbs: AbsorbFn | None = None) -> Callable[[LowerFn], LowerFn]:
    """Register ``fn`` for ``op_types``. ``absorbs(op)`` names the ops around ``op`` that its layers
    make unnecessary: ops before it whose results only it reads and that it reads past (a rank change
    the layer does itself), or ops after it whose results it writes (it must bind their outputs)."""

    def register(fn: LowerFn) -> LowerFn:
        for t in op_types:
            if t in LOWERINGS:
                raise ValueError(f"two NeuralNetwork lowerings for {t}")
            LOWERINGS[t] = Lowering(t, kind, fn, note, absorbs)
        return fn
    return register


def unsupported(reason: str, *op_types: str) -> None:
    for t in op_types:
        UNSUPPORTED[t] = reason


def neuralnetwork_entry(op_type: str) -> dict[str, str]:
    """The ``neuralnetwork`` entry of `converter ops --json` for ``op_type``."""
    from . import load_all

    load_all()
    if op_type == "const":
        return {"status": "direct", "how": "layer parameters, or loadConstantND where a layer reads it as a tensor"}
    if op_type.startswith("constexpr_"):
        return {"status": "decomposed",
                "note": "no layer: the weight is written into the layer reading it: 8-bit linear and 1-8-bit lookup-"
                        "table weights of convolution, innerProduct/batchedMatmul, embeddingND and recurrent layers "
                        "as quantized "
                        "WeightParams, anything else expanded at conversion time"}
    if op_type == "classify":
        return {"status": "direct", "how": "NeuralNetworkClassifier (class labels and the probability blob)"}
    return lowering_entry(LOWERINGS, UNSUPPORTED, op_type, "no NeuralNetwork lowering yet")
