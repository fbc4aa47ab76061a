"""Simulated rule load for the pass benchmarks: dummy rewrite rules that never fire.

The default pipeline's real rule sets (constant folding, canonicalization, conv and activation
fusions, NN scaffolding removal) come from several branches; the speed targets must hold once they
are all there. This module stands in for them in the benchmarks only (never in a pipeline users
get): ``RULE_PASSES`` rewrite passes of dummy rules rooted at the op types real models are made of,
each shaped like the real rules (a root and one to three levels of producers, constants, literals,
commutative ops, ``multi_use``), so the matcher does a real rule's work per op: it walks into the
producers and fails there, or the pattern matches and the rule's check refuses (a near miss,
recorded in the statistics as a real one is). No dummy rule ever rewrites anything.

    from rule_load import loaded_pipeline
    converter.optimize(program, loaded_pipeline())      # the default pipeline + the dummy passes
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: the dummy rewrite passes added to the default pipeline, and their rules per pass
RULE_PASSES = 4
#: a value no constant of the benchmark programs holds (a literal that never matches)
NEVER = 1234.5678

# op types a dummy rule may be rooted at (the common ones: real rules are rooted there too)
_UNARY = ["relu", "sigmoid", "tanh", "gelu", "sqrt", "rsqrt", "erf", "softmax"]
_BINARY = ["add", "mul", "sub", "real_div", "pow", "maximum", "minimum"]
_SHAPE = ["reshape", "transpose", "expand_dims", "squeeze", "cast", "slice_by_index", "concat"]
_HEAVY = ["conv", "matmul", "linear", "batch_norm", "layer_norm", "reduce_mean", "max_pool", "avg_pool"]


def _refuse(m: Any) -> str:
    return "a dummy rule of the benchmark load (never fires)"


def dummy_rules() -> list[Any]:
    """About 60 rules (15 per dummy pass), none of which ever rewrites."""
    from converter.passes.rewrite import ABSENT, Rule, const, op, optional, var

    def never(b: Any, m: Any) -> Any:  # pragma: no cover - the checks refuse first
        raise AssertionError("a dummy rule fired")

    patterns: list[Any] = []
    for t in _UNARY:
        # unary of binary of a constant (softplus/gelu-like): walks one producer, then the check refuses
        patterns.append(getattr(op, t)(x=op.any_of(*_BINARY)("inner", x=var("x"), y=const("c"))))
        # unary of a unary (pairs: relu(relu), sigmoid * x, ...): a literal that never matches
        patterns.append(getattr(op, t)(x=op.mul(x=var("x"), y=NEVER)))
    for t in _BINARY:
        # binary with a constant operand (x * 1, x + 0, div -> mul): commutative ops try both orders
        patterns.append(getattr(op, t)(x=var("x"), y=const("c")))
        # binary of a binary and a constant (mul/add chains, scale fusions)
        patterns.append(getattr(op, t)(x=op.any_of("add", "mul", "sub")("a", x=var("x"), y=const("c1")).multi_use(),
                                       y=const("c2")))
        # gelu-like deep patterns: two levels of producers, a literal deep inside
        patterns.append(getattr(op, t)(x=op.mul(x=var("x"), y=0.5),
                                       y=op.add(x=op.tanh(x=op.mul(x=var("t"), y=NEVER)), y=1.0)))
    for t in _SHAPE:
        # shape op of a shape op (pairs cancelling, chains)
        patterns.append(getattr(op, t)(x=op.any_of(*_SHAPE)("inner", x=var("x"))))
        patterns.append(getattr(op, t)().where(lambda o: o.name == ""))  # a condition on the root alone
    for t in _HEAVY:
        # conv/matmul + producer fusions: pad + conv, transpose into matmul, bn after conv
        patterns.append(getattr(op, t)(x=op.any_of("pad", "transpose", "conv")("p", x=var("x")).multi_use()))
        patterns.append(op.any_of("add", "mul", "batch_norm")(
            x=getattr(op, t)("h", x=var("x"), weight=optional(const("w")), bias=optional(const("b"))),
            y=optional(const("k"))))
    patterns.append(op.conv(x=var("x"), weight=const("w"), bias=ABSENT, pad=NEVER))
    rules = [Rule(f"dummy_{i:02d}_{p.type_text.split('/')[0]}", p, never, _refuse) for i, p in enumerate(patterns)]
    return rules


def dummy_passes() -> list[Any]:
    """The dummy rules split into `RULE_PASSES` rewrite passes."""
    from converter.passes.rewrite import RewritePass

    rules = dummy_rules()
    return [RewritePass(f"dummy_load_{k}", rules[k::RULE_PASSES]) for k in range(RULE_PASSES)]


def loaded_pipeline(base: str = "default") -> list[Any]:
    """The pipeline ``base``, with the dummy passes put before its last two passes (cse, dead_code
    in the default pipeline), as new rule passes are."""
    from converter.passes.pipelines import resolve

    passes = resolve(base)
    cut = max(0, len(passes) - 2)
    return passes[:cut] + dummy_passes() + passes[cut:]


def rule_count() -> int:
    return len(dummy_rules())
