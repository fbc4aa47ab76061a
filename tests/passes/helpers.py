"""Test helpers for rewrite rules and passes: a rule fires (and gives the IR expected), or refuses
with a reason. Programs are written in the IR text form (converter/ir/text.py).

    assert_rewrites(BEFORE, add_zero, AFTER)             # a Rule, a list of rules, or a Pass
    assert_refuses(NEAR_MISS, add_zero, "not 0")         # unchanged, and explain() gives the reason

The programs are compared up to names: values other than function inputs and outputs are
renumbered in order of definition and op names are dropped (`canonical_text`), so the expected
text may name its values freely, but must list ops in the order the pass leaves them (a
replacement stands where its root stood). Both programs are verified, and the rewritten one must
compute, on random inputs, what the original computed (bit for bit unless ``rtol``/``atol``).
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from converter.check import random_feeds
from converter.ir.clone import clone_program
from converter.ir.core import Program
from converter.ir.interpreter import run
from converter.ir.text import parse_program, print_program
from converter.ir.verify import verify
from converter.passes.base import Pass
from converter.passes.rewrite import Rule, apply_rules, explain_op

RuleOrPass = Rule | Sequence[Rule] | Pass

#: set CONVERTER_RULE_EVIDENCE=FILE to have every assert_rewrites / assert_refuses append, one JSON
#: line each, the rules it saw fire or refuse (tests/passes/test_rule_evidence.py reads them)
_EVIDENCE_FILE = os.environ.get("CONVERTER_RULE_EVIDENCE")


def _record(kind: str, rules: Iterable[str]) -> None:
    if _EVIDENCE_FILE:
        with open(_EVIDENCE_FILE, "a", encoding="utf-8") as f:
            f.write(json.dumps({"kind": kind, "rules": sorted(set(rules))}) + "\n")


def canonical_text(prog: Program) -> str:
    """``prog`` printed with values renumbered (except function inputs/outputs) and op names dropped."""
    copy, _ = clone_program(prog)
    for fn in copy.functions.values():
        keep = {id(v) for v in fn.inputs} | {id(v) for v in fn.outputs}
        n = 0
        for v in fn.values():
            if id(v) not in keep:
                v.name = f"v{n}"
                n += 1
        for op in fn.walk():
            op.name = op.outputs[0].name if op.outputs else op.type
    return print_program(copy)


def _apply(prog: Program, what: RuleOrPass) -> dict[str, Any]:
    if isinstance(what, Pass):
        return dict(what.run(prog).stats)
    rules = [what] if isinstance(what, Rule) else list(what)
    return apply_rules(prog, rules).as_dict()


def _rules(what: RuleOrPass) -> list[Rule]:
    if isinstance(what, Rule):
        return [what]
    if isinstance(what, Pass):
        return list(getattr(what, "rules", []))
    return list(what)


def _outputs(prog: Program, feeds: dict[str, Any]) -> dict[str, Any]:
    return run(prog, feeds)


def _compare(got: dict[str, Any], want: dict[str, Any], rtol: float, atol: float) -> None:
    assert list(got) == list(want), f"outputs {list(got)}, expected {list(want)}"
    for k in want:
        g, w = np.asarray(got[k]), np.asarray(want[k])
        assert g.shape == w.shape and g.dtype == w.dtype, f"{k}: {g.dtype}{g.shape}, expected {w.dtype}{w.shape}"
        if rtol == 0 and atol == 0:
            np.testing.assert_array_equal(g, w, err_msg=k)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=k)


def assert_rewrites(before: str, what: RuleOrPass, after: str, *, rtol: float = 0.0, atol: float = 0.0,
                    seed: int = 0) -> Program:
    """``what`` turns ``before`` into ``after`` (up to names, see the module docstring), the result
    verifies, and computes what ``before`` computed. Returns the rewritten program."""
    prog, expected = parse_program(before), parse_program(after)
    verify(prog)
    verify(expected)
    feeds = random_feeds(prog.main, seed=seed)
    want = _outputs(prog, feeds)
    original = canonical_text(prog)
    stats = _apply(prog, what)
    verify(prog)
    got_text, want_text = canonical_text(prog), canonical_text(expected)
    if got_text != want_text:
        hints = "\n".join(str(e) for op in parse_program(before).walk() for e in explain_op(op, _rules(what)))
        diff = "\n".join(difflib.unified_diff(want_text.splitlines(), got_text.splitlines(), "expected", "got",
                                              lineterm=""))
        unchanged = " (the program is unchanged)" if got_text == original else ""
        raise AssertionError(f"rewrite result differs{unchanged}:\n{diff}\nstats: {stats}\nexplain:\n{hints}")
    _compare(_outputs(prog, feeds), want, rtol, atol)
    _record("fires", (name for name, n in dict(stats.get("rewrites", {})).items() if n))
    return prog


def assert_refuses(text: str, what: RuleOrPass, reason: str) -> None:
    """``what`` leaves ``text`` unchanged, and for some op one of its rules explains a refusal
    containing ``reason``."""
    prog = parse_program(text)
    verify(prog)
    found = [e for op in prog.walk() for e in explain_op(op, _rules(what))]
    original = canonical_text(prog)
    stats = _apply(prog, what)
    assert canonical_text(prog) == original, f"the program was rewritten ({stats}):\n{print_program(prog)}"
    reasons = [e.reason for e in found if not e.fires]
    assert any(reason in r for r in reasons), f"no refusal mentions {reason!r}; explanations: " + \
        "; ".join(str(e) for e in found)
    _record("refuses", (e.rule for e in found if not e.fires and reason in e.reason))
