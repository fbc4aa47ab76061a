"""What an op mapping sees: the builder, the IR value and WebNN dtype of every operand, helpers.

WebNN and the IR (MIL) disagree about dtypes in two ways, handled here once for every mapping:

- WebNN has int64, uint32 and uint64; Core ML programs have no 64-bit or unsigned 32-bit integer
  tensors. Such operands are held as int32 in the IR (constants after a range check, graph inputs
  and outputs declared int32): exact for every value in the int32 range.
- MIL ops accept fewer dtypes than WebNN (most int ops take int32 only, logical ops bool).
  `Ctx.operand` widens an operand to a dtype the IR op takes; `fit` converts a result back to the
  dtype WebNN gives it (bool comparisons become uint8 0/1, int8 arithmetic is wrapped back).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import UnsupportedError
from ...ir.builder import Builder
from ...ir.core import Value
from .graph import Graph, Operator

#: WebNN data type -> the IR dtype that holds it.
IR_DTYPE = {"float32": "fp32", "float16": "fp16", "int32": "int32", "int8": "int8", "uint8": "uint8",
            "int64": "int32", "uint32": "int32", "uint64": "int32"}


@dataclass
class Ctx:
    """State of one graph's conversion (``op`` is the operator being mapped, for messages)."""

    b: Builder
    graph: Graph
    values: dict[str, Value] = field(default_factory=dict)
    dtypes: dict[str, str] = field(default_factory=dict)  # operand id -> WebNN data type
    op: Operator | None = None

    # -- operands ------------------------------------------------------------------------------

    def wdtype(self, oid: str) -> str:
        return self.dtypes[oid]

    def value(self, oid: str) -> Value:
        return self.values[oid]

    def shape(self, oid_or_value: str | Value) -> tuple[int, ...]:
        v = self.values[oid_or_value] if isinstance(oid_or_value, str) else oid_or_value
        return tuple(int(d) for d in v.type.shape)

    def operand(self, oid: str, allowed: Sequence[str] = ("fp32", "fp16", "int32")) -> Value:
        """The operand as an IR value of a dtype in ``allowed`` (widened by a cast when needed)."""
        return self.widen(self.values[oid], allowed)

    def widen(self, v: Value, allowed: Sequence[str] = ("fp32", "fp16", "int32")) -> Value:
        dt = v.type.dtype.name
        if dt in allowed:
            return v
        for target in (("int32", "fp32") if dt in ("int8", "uint8", "bool") else ("fp32",)):
            if target in allowed:
                return self.b.cast(x=v, dtype=target)
        raise self.unsupported(f"a {dt} operand where the IR op takes {', '.join(allowed)}")

    def fit(self, v: Value, wdtype: str) -> Value:
        """``v`` as the IR dtype that holds WebNN ``wdtype``."""
        want = IR_DTYPE[wdtype]
        if v.type.dtype.name == want:
            return v
        return self.b.cast(x=v, dtype=want)

    def as_bool(self, oid: str) -> Value:
        """A WebNN uint8 truth value (non-zero is true) as an IR bool."""
        return self.b.cast(x=self.values[oid], dtype="bool")

    def const(self, val: Any, like: Value | str | None = None) -> Value:
        """A constant in the dtype of ``like`` (an operand id or value), else as given."""
        if like is not None:
            ref = self.values[like] if isinstance(like, str) else like
            return self.b.const(np.asarray(val, dtype=ref.type.dtype.storage))
        return self.b.const(val)

    # -- errors --------------------------------------------------------------------------------

    def unsupported(self, message: str) -> UnsupportedError:
        op = self.op
        return UnsupportedError(message, file=self.graph.path, op=op.where if op else None,
                                op_type=op.method if op else None)


def normalize_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis
