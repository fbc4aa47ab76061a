"""The rewrite engine: rules (pattern + check with a reason + replacement) applied by a worklist.

Guide for rule writers (complete examples: converter/passes/canonicalize/; tests:
tests/passes/test_canonicalize*.py)::

    from converter.passes.rewrite import op, var, const, optional, ABSENT, rule, Refuse, RewritePass

    def _per_channel(m):                       # check: None accepts, a string is the reason to refuse
        return None if m.value("c").size == m.value("w").shape[0] else "not one value per channel"

    @rule(op.add(x=op.conv("conv", x=var("x"), weight=const("w"), bias=ABSENT), y=const("c")),
          check=_per_channel)
    def fuse_conv_bias(b, m):                   # b: a Builder inserting before the root (the add)
        '''conv + add(per-channel constant) -> conv with a bias.   (IR before/after here)'''
        params = {k: v for k, v in m.inputs("conv").items() if k not in ("x", "weight")}
        return b.conv(x=m["x"], weight=m["w"], bias=m.value("c").reshape(-1), **params)

    FUSIONS = RewritePass("fuse", [fuse_conv_bias, ...])     # then list it in passes/pipelines.py

Patterns (pattern.py): ``op.TYPE(name?, **inputs)`` matches a value computed by that op (inputs not
named are free; ``.multi_use()`` lets a non-root op have uses outside the match; ``.where(pred)``;
``.output(i)``), ``op.any_of("conv", "conv_transpose")(...)``, ``var(name)`` any value, ``const(name,
equals=, where=)`` a constant (``m.value(name)`` is its array), a literal (``y=0``, ``dtype="fp32"``,
``shape=[1, -1]``) a constant equal to it, ``optional(p)``, ``ABSENT``, ``[p, q]`` (holding patterns) a tuple input.
A repeated name means the same value; commutative ops (add, mul, maximum, ...) match in either
order. In the match ``m``: ``m[name]`` the Value, ``m.value(name)``, ``m.op(name)``,
``m.inputs(name)``, ``m.root``. The replacement returns the value(s) standing for the root's
outputs (a new value takes the root's name; ops left unused are removed); it may ``raise
Refuse(reason)``. The engine refuses replacements of another type (dtype, rank, static sizes).

Tests (tests/passes/helpers.py), one per rule, both directions, in the IR text form::

    assert_rewrites(BEFORE_TEXT, fuse_conv_bias, AFTER_TEXT)        # fires; outputs compared too
    assert_refuses(NEAR_MISS_TEXT, fuse_conv_bias, "not one value per channel")

Debugging: ``explain(program, "op_name", rules)`` (``converter optimize MODEL --explain OP``) says
for each rule rooted at that op why it fires or not.
"""

from __future__ import annotations

from .driver import RewritePass, Rewriter, RewriteStats, apply_rules, type_mismatch
from .explain import Explanation, explain, explain_op, find_ops, format_explanations
from .match import Match, Outcome, match_rule
from .pattern import ABSENT, OpPattern, Pattern, const, op, optional, var
from .rule import Refuse, Rule, rule

__all__ = [
    "ABSENT",
    "Explanation",
    "Match",
    "OpPattern",
    "Outcome",
    "Pattern",
    "Refuse",
    "RewritePass",
    "RewriteStats",
    "Rewriter",
    "Rule",
    "apply_rules",
    "const",
    "explain",
    "explain_op",
    "find_ops",
    "format_explanations",
    "match_rule",
    "op",
    "optional",
    "rule",
    "type_mismatch",
    "var",
]
