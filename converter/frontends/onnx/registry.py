"""The table ONNX op type -> IR mapping, filled by the ``ops_<family>`` modules.

A mapping is registered for a range of *schema versions* (the ``since_version`` of the op's schema
at the model's opset, e.g. Softmax 1/11/13): ``@onnx_op("Softmax", versions=(13, 13))``. A node is
converted only when a mapping covers its schema version, so a model of a newer opset is accepted
exactly when the op's definition there is one we implement, and refused (naming op and version)
when ONNX changed it. The upper bound is the newest schema version whose semantics were checked
against the mapping; raise it only after reading the newer definition.

A mapping is ``fn(ctx, node) -> list[Value | numpy array | None]``: per ONNX output, an IR value,
or a numpy array when the output is known at conversion time (kept in its ONNX dtype, int64
included, and made an IR ``const`` only when a tensor operand needs it: shape arithmetic stays
exact), or None for an optional output the mapping cannot give (refused only if the graph uses
it). The driver casts each IR result to the dtype holding the output's ONNX type (context.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ...ir.core import Value
from .context import Ctx, Node

MapFn = Callable[[Ctx, Node], Sequence[Value | np.ndarray | None]]


@dataclass(frozen=True)
class Mapping:
    op_type: str
    first: int  # lowest schema since_version handled
    last: int  # highest schema since_version handled (checked against the mapping)
    fn: MapFn
    family: str


MAPPINGS: dict[str, list[Mapping]] = {}


def onnx_op(*op_types: str, versions: tuple[int, int]) -> Callable[[MapFn], MapFn]:
    """Register ``fn`` for the default-domain ``op_types`` at schema versions ``versions`` (inclusive)."""
    first, last = versions

    def register(fn: MapFn) -> MapFn:
        family = fn.__module__.rsplit(".", 1)[-1].removeprefix("ops_")
        for t in op_types:
            ranges = MAPPINGS.setdefault(t, [])
            assert all(m.last < first or m.first > last for m in ranges), f"overlapping versions for {t}"
            ranges.append(Mapping(t, first, last, fn, family))
        return fn

    return register


def find_mapping(op_type: str, version: int) -> Mapping | str:
    """The mapping for ``op_type`` at schema ``version``, or why there is none."""
    ranges = MAPPINGS.get(op_type)
    if not ranges:
        return "no mapping to the IR"
    for m in ranges:
        if m.first <= version <= m.last:
            return m
    have = ", ".join(f"{m.first}-{m.last}" if m.first != m.last else str(m.first) for m in sorted(ranges,
                                                                                              key=lambda m: m.first))
    return f"version {version} of the op is not supported (supported schema versions: {have})"


def supported_ops() -> dict[str, list[tuple[int, int]]]:
    """op type -> the schema version ranges mapped (for reports and ``converter ops``)."""
    return {t: sorted((m.first, m.last) for m in ms) for t, ms in sorted(MAPPINGS.items())}
