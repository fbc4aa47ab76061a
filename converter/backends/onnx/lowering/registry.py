"""The lowering table: IR op type -> a function writing ONNX nodes through the emitter.

A family module registers each lowering with `lowering`::

    @lowering("gelu", kind="direct", note="Gelu", min_opset=20)
    def _gelu(e: OnnxEmitter, op: Op) -> None: ...

    @lowering("gelu", kind="decomposed", note="Erf/Tanh/Sigmoid formula")   # below opset 20
    def _gelu_formula(e: OnnxEmitter, op: Op) -> None: ...

- ``kind``: ``direct`` (one ONNX node, parameters converted at conversion time) or ``decomposed``
  (several nodes);
- ``min_opset``: the lowest default-domain opset the lowering needs (ONNX op ``since_version``).
  An op type may have several lowerings with different ``min_opset``; the one with the highest
  ``min_opset`` not above the target opset is used (`select`).

A lowering reads IR values with ``e.input(op, key)`` / ``e.const_param(op, key)``, writes nodes with
``e.node(...)`` and binds each IR result with ``e.out(op, i)`` as a node output name (see
converter/backends/onnx/emitter.py). It raises `converter.errors.LoweringError` when a parameter
has no ONNX form; the backend collects every op's reason into one `UnsupportedError`.

`unsupported(reason, *op_types)` records why an IR op has no ONNX form at all (shown by
``converter ops``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ....ir.core import Op
from ...lowering_table import lowering_entry

if TYPE_CHECKING:
    from ..emitter import OnnxEmitter

LowerFn = Callable[["OnnxEmitter", Op], None]

#: the opsets the backend writes (default-domain opset numbers)
MIN_OPSET, MAX_OPSET = 17, 21
DEFAULT_OPSET = MAX_OPSET


@dataclass(frozen=True)
class Lowering:
    op_type: str
    kind: str  # "direct" | "decomposed"
    fn: LowerFn
    note: str = ""
    min_opset: int = MIN_OPSET


#: op type -> its lowerings, highest ``min_opset`` first
LOWERINGS: dict[str, list[Lowering]] = {}

#: IR op types with no ONNX form, and why (ops handled by the backend itself, such as ``const``, are absent)
UNSUPPORTED: dict[str, str] = {}


def lowering(*op_types: str, kind: str = "direct", note: str = "", min_opset: int = MIN_OPSET
             ) -> Callable[[LowerFn], LowerFn]:
    """Register the decorated function as the lowering of ``op_types`` from ``min_opset`` on."""
    if kind not in ("direct", "decomposed"):
        raise ValueError(f"lowering kind must be direct or decomposed, got {kind!r}")

    def register(fn: LowerFn) -> LowerFn:
        for t in op_types:
            existing = LOWERINGS.setdefault(t, [])
            if any(low.min_opset == min_opset for low in existing):
                raise ValueError(f"two ONNX lowerings for {t} from opset {min_opset}")
            existing.append(Lowering(t, kind, fn, note, min_opset))
            existing.sort(key=lambda low: -low.min_opset)
        return fn
    return register


def unsupported(reason: str, *op_types: str) -> None:
    for t in op_types:
        UNSUPPORTED[t] = reason


def select(op_type: str, opset: int) -> Lowering | None:
    """The lowering of ``op_type`` for the target ``opset`` (None: none registered for it)."""
    for low in LOWERINGS.get(op_type, ()):
        if low.min_opset <= opset:
            return low
    return None


def onnx_entry(op_type: str) -> dict[str, str]:
    """The ``onnx`` entry of `converter ops --json` for ``op_type``: how the default opset writes it;
    ``min_opset`` when that lowering needs more than the lowest opset, and ``below_opset_N`` with the
    form used below it (or the reason there is none)."""
    from . import load_all

    load_all()
    if op_type == "const":
        return {"status": "direct", "note": "initializer"}
    chosen = select(op_type, DEFAULT_OPSET)
    table = {op_type: chosen} if chosen is not None else {}
    entry: dict = lowering_entry(table, UNSUPPORTED, op_type, "no ONNX lowering yet")
    if chosen is not None and chosen.min_opset > MIN_OPSET:
        entry["min_opset"] = str(chosen.min_opset)
        lower = select(op_type, chosen.min_opset - 1)
        below = f"below_opset_{chosen.min_opset}"
        if lower is None:
            entry[below] = "unsupported"
        else:
            entry[below] = lower.kind + (f": {lower.note}" if lower.note else "")
    return entry
