"""The lowering table: IR op type -> a function writing MLGraphBuilder calls.

Each lowering is registered with how it maps (``direct``: one builder call, arguments converted
at conversion time; ``decomposed``: several calls) and, where an IR op has no WebNN form at all,
`UNSUPPORTED` says why. `converter ops --json` shows both (`webnn_entry`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ....ir.core import Op
from ...lowering_table import lowering_entry
from ..emitter import GraphEmitter

LowerFn = Callable[[GraphEmitter, Op], None]


@dataclass(frozen=True)
class Lowering:
    op_type: str
    kind: str  # "direct" | "decomposed"
    fn: LowerFn
    note: str = ""


LOWERINGS: dict[str, Lowering] = {}

#: IR op types with no WebNN form, and why (ops handled before lowering, such as ``const``, are absent)
UNSUPPORTED: dict[str, str] = {}


def lowering(*op_types: str, kind: str = "direct", note: str = "") -> Callable[[LowerFn], LowerFn]:
    def register(fn: LowerFn) -> LowerFn:
        for t in op_types:
            if t in LOWERINGS:
                raise ValueError(f"two WebNN lowerings for {t}")
            LOWERINGS[t] = Lowering(t, kind, fn, note)
        return fn
    return register


def unsupported(reason: str, *op_types: str) -> None:
    for t in op_types:
        UNSUPPORTED[t] = reason


def webnn_entry(op_type: str) -> dict[str, str]:
    """The ``webnn`` entry of `converter ops --json` for ``op_type``."""
    from . import load_all

    load_all()
    if op_type == "const":
        return {"status": "direct", "how": "builder.constant (model.bin)"}
    if op_type == "classify":
        return {"status": "decomposed", "note": "no graph op: the graph outputs the probabilities and model.js "
                                                "maps them to the labels"}
    return lowering_entry(LOWERINGS, UNSUPPORTED, op_type, "no WebNN lowering yet")
