"""The rewrite engine: each element of the pattern language, the use check, nested blocks, type
safety, function-output names, refusals and their reasons, explain, the worklist's visit count and
its cap. Rules here are small test rules; the outputs of every rewritten program are compared with
the original's on random inputs (exact identities: bit-identical) by the helpers."""

from __future__ import annotations

import numpy as np
import pytest

from converter.errors import PassError
from converter.ir.builder import new_program
from converter.ir.interpreter import run
from converter.ir.text import parse_program
from converter.ir.types import tensor
from converter.ir.verify import verify
from converter.passes.rewrite import (
    ABSENT,
    Refuse,
    RewritePass,
    Rule,
    apply_rules,
    const,
    explain,
    op,
    optional,
    rule,
    var,
)

from .helpers import assert_refuses, assert_rewrites, canonical_text

HEAD = "program\nfunc main<iOS17>"


@rule(op.sub(x=var("x"), y=0))
def sub_zero(b, m):
    return m["x"]


@rule(op.mul(x=var("a"), y=var("a")))
def square(b, m):
    return b.square(x=m["a"])


def test_non_commutative_ops_match_in_the_written_order_only() -> None:
    assert_refuses(f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %z: tensor<fp32, []> = const() [val=dense<fp32, []>(0.0)]
      %y: tensor<fp32, [3]> = sub(x=%z, y=%x)
    }} -> (%y)""", sub_zero, "input 'y' of sub 'y': 'x' is not a constant (an input)")


def test_a_repeated_name_means_the_same_value() -> None:
    assert_rewrites(f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %y: tensor<fp32, [3]> = mul(x=%x, y=%x)
    }} -> (%y)""", square, f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %y: tensor<fp32, [3]> = square(x=%x)
    }} -> (%y)""")
    assert_refuses(f"""{HEAD}(%x: tensor<fp32, [3]>, %w: tensor<fp32, [3]>) {{
      %y: tensor<fp32, [3]> = mul(x=%x, y=%w)
    }} -> (%y)""", square, "'w' is not 'a' ('x')")


def test_an_intermediate_used_outside_the_match_is_a_near_miss_unless_multi_use() -> None:
    text = f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %e: tensor<fp32, [3]> = exp(x=%x)
      %l: tensor<fp32, [3]> = log(x=%e)
      %y: tensor<fp32, [3]> = add(x=%l, y=%e)
    }} -> (%y)"""

    @rule(op.log(x=op.exp(x=var("x"))))
    def log_exp(b, m):
        return m["x"]

    assert_refuses(text, log_exp, "'e' (exp 'e') has 2 uses, 1 outside the pattern")

    @rule(op.log(x=op.exp(x=var("x")).multi_use()))
    def log_exp_shared(b, m):
        return m["x"]

    # log(exp(x)) = x only up to rounding: compared with a tolerance
    assert_rewrites(text, log_exp_shared, f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %e: tensor<fp32, [3]> = exp(x=%x)
      %y: tensor<fp32, [3]> = add(x=%x, y=%e)
    }} -> (%y)""", rtol=1e-6, atol=1e-6)


def test_uses_inside_the_match_do_not_count() -> None:
    # (x - 1) * (x - 1): the sub is used twice, both times by the matched mul
    @rule(op.mul(x=op.sub("d", x=var("x"), y=const("c")), y=op.sub("d", x=var("x"), y=const("c"))))
    def square_of_difference(b, m):
        return b.square(x=b.sub(x=m["x"], y=m["c"]))

    assert_rewrites(f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %c: tensor<fp32, []> = const() [val=dense<fp32, []>(1.0)]
      %d: tensor<fp32, [3]> = sub(x=%x, y=%c)
      %y: tensor<fp32, [3]> = mul(x=%d, y=%d)
    }} -> (%y)""", square_of_difference, f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %c: tensor<fp32, []> = const() [val=dense<fp32, []>(1.0)]
      %d: tensor<fp32, [3]> = sub(x=%x, y=%c)
      %y: tensor<fp32, [3]> = square(x=%d)
    }} -> (%y)""")


CONV = f"""{HEAD}(%x: tensor<fp32, [1, 2, 4, 4]>) {{
  %w: tensor<fp32, [3, 2, 1, 1]> = const() [val=dense<fp32, [3, 2, 1, 1]>(1.0, 2.0, 3.0, 4.0, 5.0, 6.0)]
  %c: tensor<fp32, [1, 3, 1, 1]> = const() [val=dense<fp32, [1, 3, 1, 1]>(0.5, -1.0, 2.0)]
  %conv: tensor<fp32, [1, 3, 4, 4]> = conv(x=%x, weight=%w{{bias}})
  %y: tensor<fp32, [1, 3, 4, 4]> = add(x=%c, y=%conv)
}} -> (%y)"""


def _per_channel(m):
    return None if m.value("c").size == m.value("w").shape[0] else "not one value per output channel"


@rule(op.add(x=op.conv("conv", x=var("x"), weight=const("w"), bias=ABSENT, groups=1, strides=[1, 1]),
             y=const("c")), check=_per_channel)
def fuse_conv_bias(b, m):
    """The guide's example (rewrite/__init__.py): conv + per-channel constant -> conv with a bias."""
    params = {k: v for k, v in m.inputs("conv").items() if k not in ("x", "weight")}
    return b.conv(x=m["x"], weight=m["w"], bias=m.value("c").reshape(-1), **params)


def test_the_guide_fusion_fires_with_absent_inputs_and_literal_defaults() -> None:
    # bias ABSENT; groups=1 and strides=[1, 1] match the defaults of an absent input
    assert_rewrites(CONV.replace("{bias}", ""), fuse_conv_bias, f"""{HEAD}(%x: tensor<fp32, [1, 2, 4, 4]>) {{
      %w: tensor<fp32, [3, 2, 1, 1]> = const() [val=dense<fp32, [3, 2, 1, 1]>(1.0, 2.0, 3.0, 4.0, 5.0, 6.0)]
      %b: tensor<fp32, [3]> = const() [val=dense<fp32, [3]>(0.5, -1.0, 2.0)]
      %y: tensor<fp32, [1, 3, 4, 4]> = conv(x=%x, weight=%w, bias=%b)
    }} -> (%y)""", rtol=1e-6)


def test_the_guide_fusion_refuses_a_bias_already_there_and_a_constant_of_another_size() -> None:
    with_bias = CONV.replace("{bias}", ", bias=%c3").replace(
        "  %conv:", "  %c3: tensor<fp32, [3]> = const() [val=dense<fp32, [3]>(1.0, 1.0, 1.0)]\n  %conv:")
    assert_refuses(with_bias, fuse_conv_bias, "input 'bias' of conv 'conv': bound, but the pattern wants it absent")
    scalar = CONV.replace("{bias}", "").replace(
        "%c: tensor<fp32, [1, 3, 1, 1]> = const() [val=dense<fp32, [1, 3, 1, 1]>(0.5, -1.0, 2.0)]",
        "%c: tensor<fp32, []> = const() [val=dense<fp32, []>(0.5)]")
    assert_refuses(scalar, fuse_conv_bias, "not one value per output channel")


def test_optional_inputs_bind_none_when_absent() -> None:
    seen = []

    @rule(op.conv(x=var("x"), weight=var("w"), bias=optional(const("b"))))
    def record(b, m):
        seen.append(m["b"])
        raise Refuse("only looking")

    apply_rules(parse_program(CONV.replace("{bias}", "")), [record])
    assert seen == [None]


def test_tuple_inputs_and_literals() -> None:
    @rule(op.concat(values=[var("only")], axis=0))
    def concat_of_one(b, m):
        return m["only"]

    assert_rewrites(f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %a: tensor<int32, []> = const() [val=dense<int32, []>(0)]
      %c: tensor<fp32, [3]> = concat(values=(%x), axis=%a)
      %y: tensor<fp32, [3]> = relu(x=%c)
    }} -> (%y)""", concat_of_one, f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %y: tensor<fp32, [3]> = relu(x=%x)
    }} -> (%y)""")
    assert_refuses(f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %a: tensor<int32, []> = const() [val=dense<int32, []>(0)]
      %c: tensor<fp32, [6]> = concat(values=(%x, %x), axis=%a)
    }} -> (%c)""", concat_of_one, "input 'values' of concat 'c': 2 values, the pattern has 1")


def test_a_rule_fires_inside_nested_blocks_and_never_reaches_across_them() -> None:
    def body(b, x):
        pred = b.less(x=np.float32(0), y=np.float32(1))
        e = b.exp(x=x, name="outer_exp")
        (c,) = b.cond(pred, lambda t: [t.log(x=e, name="log_in_branch")],
                      lambda f: [f.log(x=f.exp(x=x, name="inner_exp"), name="log_of_inner")])
        return [c]

    @rule(op.log(x=op.exp(x=var("x"))))
    def log_exp(b, m):
        return b.identity(x=m["x"])

    prog = new_program({"x": tensor("fp32", [3])}, body)
    x = np.array([0.5, 1.0, 2.0], np.float32)
    want = run(prog, {"x": x})["cond"]
    reasons = {str(e) for e in explain(prog, "log_in_branch", [log_exp])}
    assert reasons == {"log_exp: no match: input 'x' of log 'log_in_branch': exp 'outer_exp' is in another block "
                       "than the root"}
    stats = apply_rules(prog, [log_exp])
    verify(prog)
    assert stats.rewrites == {"log_exp": 1}
    types = [op_.type for op_ in prog.walk()]
    assert "inner_exp" not in {o.name for o in prog.walk()} and types.count("log") == 1
    assert types.count("exp") == 1  # the outer one stays
    np.testing.assert_allclose(run(prog, {"x": x})["cond"], want, rtol=1e-6)


def test_a_replacement_of_another_type_is_refused_not_applied() -> None:
    @rule(op.relu(x=var("x")))
    def relu_to_cast(b, m):
        return b.cast(x=m["x"], dtype="fp16")

    assert_refuses(f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %y: tensor<fp32, [3]> = relu(x=%x)
    }} -> (%y)""", relu_to_cast, "the replacement of 'y' has type tensor<fp16, [3]>, not tensor<fp32, [3]>")


def test_a_refusing_or_failing_replacement_leaves_nothing_behind() -> None:
    @rule(op.relu(x=var("x")))
    def refuses_late(b, m):
        b.exp(x=b.add(x=m["x"], y=1.0))
        raise Refuse("changed its mind")

    @rule(op.relu(x=var("x")))
    def fails(b, m):
        return b.matmul(x=m["x"], y=np.ones((4, 4), np.float32))  # [3] x [4, 4]: no such matmul

    text = f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %y: tensor<fp32, [3]> = relu(x=%x)
    }} -> (%y)"""
    assert_refuses(text, refuses_late, "changed its mind")
    assert_refuses(text, fails, "the replacement failed")
    prog = parse_program(text)
    stats = apply_rules(prog, [refuses_late, fails])
    verify(prog)  # no dangling uses of x from the discarded ops
    assert prog.main.inputs[0].users() == [prog.main.block.ops[0]]
    assert stats.near_misses == {"refuses_late": 1, "fails": 1}


def test_two_function_outputs_are_never_merged_into_one() -> None:
    @rule(op.identity(x=var("x")))
    def drop_identity(b, m):
        return m["x"]

    assert_refuses(f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %r: tensor<fp32, [3]> = relu(x=%x)
      %y: tensor<fp32, [3]> = identity(x=%r)
    }} -> (%r, %y)""", drop_identity, "'y' and 'r' are both function outputs")


def test_explain_names_the_first_failing_element() -> None:
    prog = parse_program(f"""{HEAD}(%x: tensor<fp32, [3]>, %b: tensor<fp32, [3]>) {{
      %a1: tensor<fp32, [3]> = add(x=%x, y=%b)
    }} -> (%a1)""")
    from converter.passes.canonicalize import RULES

    lines = [str(e) for e in explain(prog, "a1", RULES)]
    assert lines[0] == "add_zero: no match: input 'y' of add 'a1': 'b' is not a constant (an input)"


def test_each_op_is_tried_once_when_nothing_fires() -> None:
    calls = []

    @rule(op.add(x=var("x"), y=var("y")), check=lambda m: calls.append(m.root) or "never")
    def count(b, m):
        raise AssertionError("the check refuses")

    def body(b, x):
        for _ in range(500):
            x = b.add(x=x, y=x)
        return [x]

    prog = new_program({"x": tensor("fp32", [3])}, body)
    stats = apply_rules(prog, [count])
    assert len(calls) == 500 * 2  # each add once, in both operand orders (add is commutative)
    assert len(set(calls)) == 500 and stats.near_misses == {"count": 500}


def test_rule_sets_that_undo_each_other_stop_at_the_cap() -> None:
    @rule(op.mul(x=var("x"), y=2.0))
    def mul_to_add(b, m):
        return b.add(x=m["x"], y=m["x"])

    @rule(op.add(x=var("x"), y=var("x")))
    def add_to_mul(b, m):
        return b.mul(x=m["x"], y=np.float32(2.0))

    prog = parse_program(f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %two: tensor<fp32, []> = const() [val=dense<fp32, []>(2.0)]
      %y: tensor<fp32, [3]> = mul(x=%x, y=%two)
    }} -> (%y)""")
    stats = apply_rules(prog, [mul_to_add, add_to_mul], max_rewrites=50)
    verify(prog)
    assert stats.capped and stats.total == 50
    assert RewritePass("ping_pong", [mul_to_add, add_to_mul], max_rewrites=9).run(prog).stats["capped"]


def test_rule_names_are_unique_and_patterns_name_known_ops() -> None:
    with pytest.raises(ValueError, match="two rules are named 'sub_zero'"):
        RewritePass("dup", [sub_zero, sub_zero])
    with pytest.raises(AttributeError, match="unknown op type 'addd'"):
        op.addd(x=var("x"))
    with pytest.raises(TypeError, match="root of a pattern must be an op pattern"):
        Rule("bad", var("x"), lambda b, m: m["x"])  # type: ignore[arg-type]


def test_canonical_text_ignores_names_but_not_structure() -> None:
    a = parse_program(f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %foo: tensor<fp32, [3]> = relu(x=%x)
      %y: tensor<fp32, [3]> = exp(x=%foo)
    }} -> (%y)""")
    b = parse_program(f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %bar: tensor<fp32, [3]> = relu(x=%x) @other
      %y: tensor<fp32, [3]> = exp(x=%bar)
    }} -> (%y)""")
    c = parse_program(f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %bar: tensor<fp32, [3]> = exp(x=%x)
      %y: tensor<fp32, [3]> = relu(x=%bar)
    }} -> (%y)""")
    assert canonical_text(a) == canonical_text(b) != canonical_text(c)


def test_a_rule_bug_is_a_located_error_and_explain_shows_it() -> None:
    @rule(op.relu(x=var("x")))
    def typo(b, m):
        return m["y"]

    prog = parse_program(f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %r: tensor<fp32, [3]> = relu(x=%x)
    }} -> (%r)""")
    assert [str(e) for e in explain(prog, "r", [typo])] == [
        "typo: error: the rule raised KeyError: \"the pattern has no name 'y' (names: x)\""]
    with pytest.raises(PassError, match="op 'r' \\(relu\\): rule typo failed: KeyError"):
        RewritePass("typos", [typo])(prog)
