"""Counting what a program holds: its ops by type, and its constant parameters by dtype.

Op counts follow issue 8's definition: every op other than a constant, nested blocks included
(coremltools' reading of the same ML program gives the same histogram: tests/optimize/test_sources.py).
Parameters are the constant tensors the program computes with: each ``const`` value, and each
compile-time decompressed value (the outermost ``constexpr_*`` op of a chain); the constants a
``constexpr_*`` op decompresses are counted once, as stored, not again as parameters.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from .core import Op, Program, Value
from .types import TensorType, is_static_shape

#: Op types that are constants (coremltools' internal ``_const_symbolic`` is written as ``const``).
CONST_OP_TYPES = frozenset({"const", "_const_symbolic"})


def op_histogram(program: Program, *, consts: bool = False) -> Counter[str]:
    """{op type: count} over every function and nested block of ``program``."""
    return Counter(op.type for op in program.walk() if consts or op.type not in CONST_OP_TYPES)


def op_count(program: Program) -> int:
    """Ops other than constants, nested blocks included."""
    return sum(op_histogram(program).values())


@dataclass
class DtypeBytes:
    """Totals for one dtype."""

    tensors: int = 0
    elements: int = 0
    bytes: int = 0


@dataclass
class ParameterCensus:
    """The program's constant tensors, as stored and as computed with.

    ``stored``: every constant (``const`` value) by its dtype, bytes as the file holds them
    (sub-byte dtypes packed). ``decompressed``: every parameter (a ``const`` value not only feeding
    ``constexpr_*`` ops, or the result of a ``constexpr_*`` chain) by the dtype the model computes
    with. Equal totals mean nothing is compressed.
    """

    stored: dict[str, DtypeBytes] = field(default_factory=dict)
    decompressed: dict[str, DtypeBytes] = field(default_factory=dict)
    compressed_tensors: int = 0  # parameters made by constexpr_* ops

    @property
    def parameters(self) -> int:
        """Elements of every parameter, decompressed."""
        return sum(d.elements for d in self.decompressed.values())

    @property
    def stored_bytes(self) -> int:
        return sum(d.bytes for d in self.stored.values())

    @property
    def decompressed_bytes(self) -> int:
        return sum(d.bytes for d in self.decompressed.values())


def _is_constexpr(op: Op) -> bool:
    return op.type.startswith("constexpr_")


def _size(v: Value) -> tuple[str, int, int] | None:
    """(dtype, elements, bytes) of a static tensor value; None for strings and unknown shapes."""
    t = v.type
    if not isinstance(t, TensorType) or t.shape is None or not is_static_shape(t.shape):
        return None
    if t.dtype.name == "string":
        return None
    n = math.prod(int(d) for d in t.shape)
    return t.dtype.name, n, (n * t.dtype.bits + 7) // 8


def _only_feeds_constexpr(v: Value) -> bool:
    users = [u.user for u in v.uses]
    return bool(users) and all(isinstance(u, Op) and _is_constexpr(u) for u in users)


def _add(table: dict[str, DtypeBytes], size: tuple[str, int, int]) -> None:
    dtype, n, nbytes = size
    row = table.setdefault(dtype, DtypeBytes())
    row.tensors += 1
    row.elements += n
    row.bytes += nbytes


def parameter_census(program: Program) -> ParameterCensus:
    """Count ``program``'s constants (see `ParameterCensus`); one pass over the ops, no data read."""
    census = ParameterCensus()
    for op in program.walk():
        if op.type in CONST_OP_TYPES:
            for v in op.outputs:
                size = _size(v)
                if size is None:
                    continue
                _add(census.stored, size)
                if not _only_feeds_constexpr(v):
                    _add(census.decompressed, size)
        elif _is_constexpr(op):
            for v in op.outputs:
                size = _size(v)
                if size is not None and not _only_feeds_constexpr(v):
                    _add(census.decompressed, size)
                    census.compressed_tensors += 1
    census.stored = dict(sorted(census.stored.items()))
    census.decompressed = dict(sorted(census.decompressed.items()))
    return census

