"""Re-targeting a program to another MIL opset (iOS15..iOS18), up or down.

Each op whose definition differs between the opset it was written for and the target is rewritten
by the rule the table (``table.py``) gives for (op type, source opsets, target opsets): the
compression ops between their iOS16 and iOS18 forms, changed parameters, changed meanings (negative
gather indices, reshape's 0s, crop_resize's boxes). Ops whose signature did not change are
re-pointed at the target's definition. What cannot be expressed is refused with one line per
distinct cause (a count and a few op names); a compressed weight the target has no form for is
left for the MIL writer to store decompressed, and a note says so. Ops the target lacks altogether
are left for the backend's target check to report.

One visit per op, edits applied per block at the end: linear in the program size (plus the
numpy work on the weights that change form).
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

from ...errors import ConversionWarning, UnsupportedError
from ...ir.clone import clone_program
from ...ir.core import Op, Program
from ...ir.opdef import get_opdef, opset_index
from ..base import Pass, PassResult
from .causes import Causes
from .constexpr import inner_of_chain
from .context import Context, Refusal, is_constexpr
from .table import default_rule, find_rule

__all__ = ["Causes", "Retarget", "Retargeted", "needs_retarget", "retarget"]


def _changes(op: Op, target: str) -> bool:
    """Whether ``op``'s definition differs between its own opset and ``target``, or the table
    rewrites it (constexpr_affine_dequantize, still in iOS18, becomes its iOS18 successor)."""
    if op.opdef is None or op.opdef.opset == target:
        return False
    if find_rule(op.type, op.opdef.opset, target) is not None:
        return True
    try:
        return get_opdef(op.type, target).signature.since != op.opdef.signature.since
    except UnsupportedError:
        return True


class Retarget(Pass):
    """Rewrite ``program`` in place for ``target``. After ``run``: ``problems`` (refusals, grouped)
    and ``notes`` (grouped); the pass raises nothing itself, so the caller can report its
    problems together with its own."""

    def __init__(self, target: str) -> None:
        opset_index(target)
        self.target = target
        self.problems = Causes()
        self.notes = Causes()
        self.refused: set[Op] = set()  # left as they were; their causes are in ``problems``

    def run(self, program: Program) -> PassResult:
        ctx = Context(program, self.target)
        changed = False
        for fn in program.functions.values():
            for op in list(fn.walk()):
                changed |= self._visit(ctx, op)
            changed |= fn.opset != self.target
            fn.opset = self.target
        changed |= ctx.apply()
        self.notes.extend(ctx.notes)
        return PassResult(changed)

    def _visit(self, ctx: Context, op: Op) -> bool:
        if op.opdef is None or op.opdef.opset == self.target:
            return False
        if not _changes(op, self.target):
            ctx.repoint(op)
            return True
        if is_constexpr(op) and inner_of_chain(ctx, op):
            return False  # its constexpr readers take its value (see constexpr.operand)
        source = op.opdef.opset
        rule = find_rule(op.type, source, self.target)
        if rule is None:
            try:
                get_opdef(op.type, self.target)
            except UnsupportedError:
                if is_constexpr(op):
                    ctx.decompress(op, f"{self.target} has no {op.type}")
                    ctx.commit()
                return False  # the backend's target check reports an op the target lacks
            rule = default_rule(op.type)
        ctx.begin()
        try:
            rule.rewrite(ctx, op)
        except Refusal as r:
            ctx.rollback()
            self.problems.add(f"{op.type}: {r.cause}", op.name)
            self.refused.add(op)
            return False
        ctx.commit()
        return True


def needs_retarget(program: Program, target: str) -> bool:
    """Whether some op of ``program`` is defined differently in ``target`` (a linear scan)."""
    return any(_changes(op, target) for op in program.walk())


class Retargeted(NamedTuple):
    program: Program  # the re-targeted program (the given one when nothing changes form)
    problems: Causes  # what cannot be expressed, grouped by cause
    refused: set[Op]  # the ops those problems are about (already reported: checks skip them)


def retarget(program: Program, target: str) -> Retargeted:
    """``program`` re-targeted to ``target``: the program itself when nothing changes form, else a
    re-targeted clone (the given program is never modified). Notes are issued as
    ConversionWarnings; the problems are returned for the caller's target check to report."""
    if not needs_retarget(program, target):
        return Retargeted(program, Causes(), set())
    clone, _ = clone_program(program)
    p = Retarget(target)
    p(clone)
    for line in p.notes.lines():
        warnings.warn(ConversionWarning(line), stacklevel=3)
    return Retargeted(clone, p.problems, p.refused)
