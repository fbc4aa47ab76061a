"""Op counts as issue 8 defines them: every op other than a constant, nested blocks included.

Ours is converter.ir.census (what ``converter inspect`` prints); the other here walks a coremltools
MIL program (``coremltools.converters.mil.Program``, e.g. from coremltools' MIL proto loader); on
the same file they must agree
(tests/optimize/test_sources.py checks it), so a count of ours and one of coremltools' can be set
side by side. Constants are ``const`` ops in both (coremltools' internal ``_const_symbolic`` is
written to files as ``const``; our MIL frontend keeps whichever it reads).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from converter.ir.census import CONST_OP_TYPES, op_count, op_histogram

__all__ = ["CONST_OP_TYPES", "ct_load", "ct_op_count", "ct_op_histogram", "op_count", "op_histogram"]


def ct_op_histogram(program: Any, *, consts: bool = False) -> Counter[str]:
    """{op type: count} over every function and nested block of a coremltools MIL program."""
    out: Counter[str] = Counter()
    stack = [fn for fn in program.functions.values()]
    while stack:
        block = stack.pop()
        for op in block.operations:
            if consts or op.op_type not in CONST_OP_TYPES:
                out[op.op_type] += 1
            stack.extend(op.blocks)
    return out


def ct_op_count(program: Any) -> int:
    """Ops other than constants (nested blocks included) of a coremltools MIL program."""
    return sum(ct_op_histogram(program).values())


def ct_load(path: Path) -> Any:
    """A .mlpackage (or bare ML program .mlmodel) read by coremltools' own MIL proto loader."""
    from tests.mil.helpers import CoremltoolsLoader

    return CoremltoolsLoader().load(path)
