"""Why a rule did or did not fire at an op: the debugging aid behind ``converter optimize --explain``.

For an op (found by its name or the name of one of its results), every rule rooted at the op's type
is tried: it would fire (the replacement is built on the side, type-checked, and discarded), it
is a near miss (the pattern matched but the use check, the rule's check, the replacement or the type
check refused; the reason says which), or it does not match (the first pattern element that
failed, e.g. ``input 'y' of add 'a1': 'b' is not a constant``). The program is not changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...errors import ConverterError
from ...ir.builder import NameScope
from ...ir.core import Block, Op, Program
from .driver import _discard, build_replacement
from .match import match_rule
from .rule import Rule


@dataclass(frozen=True)
class Explanation:
    rule: str
    op: Op
    verdict: str  # "fires", "near miss", "no match", or "error" (the rule itself raised)
    reason: str  # empty when it fires

    @property
    def fires(self) -> bool:
        return self.verdict == "fires"

    def __str__(self) -> str:
        head = f"{self.rule}: {self.verdict}"
        return head if self.fires else f"{head}: {self.reason}"


def find_ops(program: Program, name: str) -> list[Op]:
    """The ops named ``name``, or else the ops with a result named ``name`` (every function)."""
    ops = list(program.walk())
    named = [op for op in ops if op.name == name]
    return named or [op for op in ops if any(v.name == name for v in op.outputs)]


def explain_op(op: Op, rules: Sequence[Rule]) -> list[Explanation]:
    """One explanation per rule of ``rules`` rooted at ``op``'s type, in order."""
    out = []
    fn = op.function
    names = NameScope(v.name for v in fn.values()) if fn is not None else NameScope()
    for r in rules:
        if op.type not in r.root_types:
            continue
        try:
            outcome = match_rule(r, op)
            if outcome.match is None:
                out.append(Explanation(r.name, op, "near miss" if outcome.near_miss else "no match", outcome.reason))
                continue
            assert fn is not None
            built = build_replacement(r, outcome.match, fn, names)
        except Exception as e:  # noqa: BLE001 - a rule's bug is what one explains ops to find
            out.append(Explanation(r.name, op, "error", f"the rule raised {type(e).__name__}: {e}"))
            continue
        if isinstance(built, str):
            out.append(Explanation(r.name, op, "near miss", built))
            continue
        trial = Block()
        trial.ops = built[0]
        _discard(trial)
        out.append(Explanation(r.name, op, "fires", ""))
    return out


def explain(program: Program, op_name: str, rules: Sequence[Rule]) -> list[Explanation]:
    """`explain_op` for the op named ``op_name`` (`ConverterError` if there is none)."""
    ops = find_ops(program, op_name)
    if not ops:
        raise ConverterError(f"no op named '{op_name}' (nor an op with a result of that name)", op=op_name)
    return [e for op in ops for e in explain_op(op, rules)]


def format_explanations(op_name: str, explanations: list[Explanation], where: str = "") -> str:
    """Lines for the command line: the op, then one line per rule."""
    if not explanations:
        return f"no rule of these passes is rooted at the type of op '{op_name}'{where}"
    lines = []
    current: Op | None = None
    for e in explanations:
        if e.op is not current:
            current = e.op
            lines.append(f"{e.op.type} '{e.op.name}'{where}:")
        lines.append(f"  {e}")
    return "\n".join(lines)
