"""dead_code on control flow: dead loop-carried variables of while_loop and unused outputs of cond
are removed with the ops only they needed (outputs bit-identical); near misses are kept, each for
the reason its test names; nested loops; and the migrated GRU model, whose two loops each carry a
``cast(bool -> fp32)`` that canonicalization leaves dead, still matches torch after optimize.

The programs are written in the IR text form; `assert_rewrites` checks the IR after the pass (up to
names), verifies it and compares outputs bit for bit on random inputs. A near miss is a program
the pass must leave exactly as it is (`_assert_kept`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import converter
from converter.ir.builder import new_program
from converter.ir.clone import clone_program
from converter.ir.core import Op, Program
from converter.ir.interpreter import run
from converter.ir.runtime import StateCell
from converter.ir.text import parse_program
from converter.ir.types import StateType, tensor
from converter.ir.verify import verify
from converter.passes.dce import DeadCodeElimination

from ..nn_models.shared import TORCH, feeds_for, max_abs_error, torch_record
from .helpers import assert_rewrites, canonical_text

HEAD = "program\nfunc main<iOS17>"
DCE = DeadCodeElimination()


def _assert_kept(text: str) -> None:
    """dead_code leaves ``text`` as it is (and says it changed nothing)."""
    prog = parse_program(text)
    verify(prog)
    before = canonical_text(prog)
    result = DeadCodeElimination().run(prog)
    assert not result.modified, result.stats
    assert canonical_text(prog) == before


def _same_outputs(before: str, after: Program, feeds: list[dict[str, Any]]) -> None:
    for f in feeds:
        want, got = run(parse_program(before), f), run(after, f)
        assert list(got) == list(want)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)


# -- while_loop ------------------------------------------------------------------------------------

LOOP_WITH_DEAD_VAR = f"""{HEAD}(%x: tensor<fp32, [2]>) {{
  %i0: tensor<int32, []> = const() [val=dense<int32, []>(0)]
  %d0: tensor<fp32, [2]> = const() [val=dense<fp32, [2]>(0.5, -1.25)]
  %i: tensor<int32, []>, %y: tensor<fp32, [2]>, %d: tensor<fp32, [2]> = while_loop(loop_vars=(%i0, %x, %d0)) {{
    block(%ci: tensor<int32, []>, %cy: tensor<fp32, [2]>, %cd: tensor<fp32, [2]>) {{
      %three: tensor<int32, []> = const() [val=dense<int32, []>(3)]
      %go: tensor<bool, []> = less(x=%ci, y=%three)
    }} -> (%go)
    block(%bi: tensor<int32, []>, %by: tensor<fp32, [2]>, %bd: tensor<fp32, [2]>) {{
      %one: tensor<int32, []> = const() [val=dense<int32, []>(1)]
      %ni: tensor<int32, []> = add(x=%bi, y=%one)
      %k: tensor<fp32, []> = const() [val=dense<fp32, []>(1.5)]
      %ny: tensor<fp32, [2]> = mul(x=%by, y=%k)
      %t: tensor<fp32, [2]> = mul(x=%bd, y=%k)
      %e: tensor<fp32, [2]> = exp(x=%t)
      %nd: tensor<fp32, [2]> = add(x=%e, y=%by)
    }} -> (%ni, %ny, %nd)
  }}
}} -> (%y)"""


def test_a_dead_loop_variable_goes_with_its_update_chain() -> None:
    """``d`` is unused after the loop and read only by its own update (mul, exp, add: all go; the
    update also reads ``y``, which stays: reading a live variable does not make ``d`` live). The
    counter ``i`` is unused after the loop too, but the condition reads it: kept."""
    prog = assert_rewrites(LOOP_WITH_DEAD_VAR, DCE, f"""{HEAD}(%x: tensor<fp32, [2]>) {{
  %i0: tensor<int32, []> = const() [val=dense<int32, []>(0)]
  %i: tensor<int32, []>, %y: tensor<fp32, [2]> = while_loop(loop_vars=(%i0, %x)) {{
    block(%ci: tensor<int32, []>, %cy: tensor<fp32, [2]>) {{
      %three: tensor<int32, []> = const() [val=dense<int32, []>(3)]
      %go: tensor<bool, []> = less(x=%ci, y=%three)
    }} -> (%go)
    block(%bi: tensor<int32, []>, %by: tensor<fp32, [2]>) {{
      %one: tensor<int32, []> = const() [val=dense<int32, []>(1)]
      %ni: tensor<int32, []> = add(x=%bi, y=%one)
      %k: tensor<fp32, []> = const() [val=dense<fp32, []>(1.5)]
      %ny: tensor<fp32, [2]> = mul(x=%by, y=%k)
    }} -> (%ni, %ny)
  }}
}} -> (%y)""")
    assert not DeadCodeElimination().run(prog).modified  # nothing left to do


def test_stats_count_variables_and_ops() -> None:
    prog = parse_program(LOOP_WITH_DEAD_VAR)
    assert DeadCodeElimination().run(prog).stats == {"removed": 4, "loop_vars": 1}  # d0, t, e, nd


def test_a_loop_variable_passed_through_unread_is_removed() -> None:
    """The body returns ``n`` unchanged (the NeuralNetwork frontend carries every blob this way)."""
    assert_rewrites(f"""{HEAD}(%x: tensor<fp32, [2]>, %n: tensor<fp32, []>) {{
  %i, %y, %m = while_loop(loop_vars=(%x, %x, %n)) {{
    block(%ci: tensor<fp32, [2]>, %cy: tensor<fp32, [2]>, %cn: tensor<fp32, []>) {{
      %s: tensor<fp32, []> = reduce_sum(x=%ci)
      %lim: tensor<fp32, []> = const() [val=dense<fp32, []>(40.0)]
      %go: tensor<bool, []> = less(x=%s, y=%lim)
    }} -> (%go)
    block(%bi: tensor<fp32, [2]>, %by: tensor<fp32, [2]>, %bn: tensor<fp32, []>) {{
      %a: tensor<fp32, [2]> = abs(x=%bi)
      %one: tensor<fp32, []> = const() [val=dense<fp32, []>(1.0)]
      %ni: tensor<fp32, [2]> = add(x=%a, y=%one)
      %ny: tensor<fp32, [2]> = sub(x=%by, y=%ni)
    }} -> (%ni, %ny, %bn)
  }}
}} -> (%y)""".replace("%i, %y, %m = while_loop",
                      "%i: tensor<fp32, [2]>, %y: tensor<fp32, [2]>, %m: tensor<fp32, []> = while_loop"),
        DCE, f"""{HEAD}(%x: tensor<fp32, [2]>, %n: tensor<fp32, []>) {{
  %i: tensor<fp32, [2]>, %y: tensor<fp32, [2]> = while_loop(loop_vars=(%x, %x)) {{
    block(%ci: tensor<fp32, [2]>, %cy: tensor<fp32, [2]>) {{
      %s: tensor<fp32, []> = reduce_sum(x=%ci)
      %lim: tensor<fp32, []> = const() [val=dense<fp32, []>(40.0)]
      %go: tensor<bool, []> = less(x=%s, y=%lim)
    }} -> (%go)
    block(%bi: tensor<fp32, [2]>, %by: tensor<fp32, [2]>) {{
      %a: tensor<fp32, [2]> = abs(x=%bi)
      %one: tensor<fp32, []> = const() [val=dense<fp32, []>(1.0)]
      %ni: tensor<fp32, [2]> = add(x=%a, y=%one)
      %ny: tensor<fp32, [2]> = sub(x=%by, y=%ni)
    }} -> (%ni, %ny)
  }}
}} -> (%y)""")


def test_near_miss_a_variable_only_the_condition_reads_is_kept() -> None:
    """``i``'s output is unused and the body reads it only to compute its next value, but the
    condition reads it: the number of iterations depends on it."""
    _assert_kept(f"""{HEAD}(%x: tensor<fp32, [2]>) {{
  %i0: tensor<int32, []> = const() [val=dense<int32, []>(1)]
  %i: tensor<int32, []>, %y: tensor<fp32, [2]> = while_loop(loop_vars=(%i0, %x)) {{
    block(%ci: tensor<int32, []>, %cy: tensor<fp32, [2]>) {{
      %lim: tensor<int32, []> = const() [val=dense<int32, []>(20)]
      %go: tensor<bool, []> = less(x=%ci, y=%lim)
    }} -> (%go)
    block(%bi: tensor<int32, []>, %by: tensor<fp32, [2]>) {{
      %three: tensor<int32, []> = const() [val=dense<int32, []>(3)]
      %ni: tensor<int32, []> = mul(x=%bi, y=%three)
      %k: tensor<fp32, []> = const() [val=dense<fp32, []>(0.75)]
      %ny: tensor<fp32, [2]> = mul(x=%by, y=%k)
    }} -> (%ni, %ny)
  }}
}} -> (%y)""")


def test_near_miss_a_variable_another_variables_update_reads_is_kept() -> None:
    """``a``'s output is unused, but ``y``'s update (live: ``y`` is the result) reads it."""
    _assert_kept(f"""{HEAD}(%x: tensor<fp32, [2]>) {{
  %i0: tensor<int32, []> = const() [val=dense<int32, []>(0)]
  %a0: tensor<fp32, [2]> = const() [val=dense<fp32, [2]>(0.25, -2.0)]
  %i: tensor<int32, []>, %y: tensor<fp32, [2]>, %a: tensor<fp32, [2]> = while_loop(loop_vars=(%i0, %x, %a0)) {{
    block(%ci: tensor<int32, []>, %cy: tensor<fp32, [2]>, %ca: tensor<fp32, [2]>) {{
      %three: tensor<int32, []> = const() [val=dense<int32, []>(3)]
      %go: tensor<bool, []> = less(x=%ci, y=%three)
    }} -> (%go)
    block(%bi: tensor<int32, []>, %by: tensor<fp32, [2]>, %ba: tensor<fp32, [2]>) {{
      %one: tensor<int32, []> = const() [val=dense<int32, []>(1)]
      %ni: tensor<int32, []> = add(x=%bi, y=%one)
      %k: tensor<fp32, []> = const() [val=dense<fp32, []>(1.5)]
      %na: tensor<fp32, [2]> = mul(x=%ba, y=%k)
      %ny: tensor<fp32, [2]> = add(x=%by, y=%ba)
    }} -> (%ni, %ny, %na)
  }}
}} -> (%y)""")


def test_near_miss_a_variable_swapped_into_a_live_one_is_kept() -> None:
    """The body returns ``(b, a)``: ``b``'s output is unused, but its value becomes ``a``'s next
    value, and ``a`` is the result."""
    _assert_kept(f"""{HEAD}(%x: tensor<fp32, [2]>, %z: tensor<fp32, [2]>) {{
  %i0: tensor<int32, []> = const() [val=dense<int32, []>(0)]
  %i: tensor<int32, []>, %a: tensor<fp32, [2]>, %b: tensor<fp32, [2]> = while_loop(loop_vars=(%i0, %x, %z)) {{
    block(%ci: tensor<int32, []>, %ca: tensor<fp32, [2]>, %cb: tensor<fp32, [2]>) {{
      %three: tensor<int32, []> = const() [val=dense<int32, []>(3)]
      %go: tensor<bool, []> = less(x=%ci, y=%three)
    }} -> (%go)
    block(%bi: tensor<int32, []>, %ba: tensor<fp32, [2]>, %bb: tensor<fp32, [2]>) {{
      %one: tensor<int32, []> = const() [val=dense<int32, []>(1)]
      %ni: tensor<int32, []> = add(x=%bi, y=%one)
    }} -> (%ni, %bb, %ba)
  }}
}} -> (%a)""")


def test_near_miss_a_variable_an_op_with_effects_reads_is_kept() -> None:
    """Inside the loop a state update (an op with effects: it must run whether or not its result
    is used) reads ``s``: kept. ``d`` is dead and goes; ``i`` (read by the condition) stays. No
    output of the loop is used, yet the loop stays for the update's sake."""
    def body(b: Any, x: Any, st: Any) -> list[Any]:
        zero = b.const(np.int32(0))
        d0 = b.const(np.array([3.0, -0.5], np.float32))

        def cond(c: Any, i: Any, s: Any, d: Any) -> Any:
            return c.less(x=i, y=np.int32(4))

        def step(c: Any, i: Any, s: Any, d: Any) -> list[Any]:
            ns = c.mul(x=s, y=np.float32(1.25), name="ns")
            c.coreml_update_state(state=st, value=ns, name="update")
            return [c.add(x=i, y=np.int32(1)), ns, c.sin(x=d, name="nd")]

        b.while_loop([zero, x, d0], cond, step, name="loop")
        return [b.relu(x=x, name="r")]

    prog = new_program({"x": tensor("fp32", [2]), "st": StateType(tensor("fp32", [2]))}, body, opset="iOS18")
    x = np.array([0.5, -2.0], np.float32)
    want_cell, got_cell = StateCell(np.zeros(2, np.float32)), StateCell(np.zeros(2, np.float32))
    want = run(prog, {"x": x, "st": want_cell})
    result = DeadCodeElimination().run(prog)
    assert result.stats == {"removed": 2, "loop_vars": 1}  # nd and d0
    verify(prog)
    (loop,) = [op for op in prog.walk() if op.type == "while_loop"]
    assert [v.name for v in loop.inputs["loop_vars"]] == [loop.inputs["loop_vars"][0].name, "x"]
    assert "update" in {op.name for op in loop.blocks[1].ops}
    got = run(prog, {"x": x, "st": got_cell})
    np.testing.assert_array_equal(got["r"], want["r"])
    np.testing.assert_array_equal(got_cell.value, want_cell.value)  # the effect: 0.5 * 1.25**4, -2 * ...


def test_a_loop_with_no_used_output_stays_with_what_its_condition_reads() -> None:
    """No output of the loop is used and it holds no op with effects, but whether it ends is
    observable (tests/hostile: a model's endless loop must still hit the iteration bound): it
    stays, with the counter its condition reads; ``y`` and ``d`` go."""
    assert_rewrites(LOOP_WITH_DEAD_VAR.rsplit("-> (%y)", 1)[0] + "-> (%x)", DCE, f"""{HEAD}(%x: tensor<fp32, [2]>) {{
  %i0: tensor<int32, []> = const() [val=dense<int32, []>(0)]
  %i: tensor<int32, []> = while_loop(loop_vars=(%i0)) {{
    block(%ci: tensor<int32, []>) {{
      %three: tensor<int32, []> = const() [val=dense<int32, []>(3)]
      %go: tensor<bool, []> = less(x=%ci, y=%three)
    }} -> (%go)
    block(%bi: tensor<int32, []>) {{
      %one: tensor<int32, []> = const() [val=dense<int32, []>(1)]
      %ni: tensor<int32, []> = add(x=%bi, y=%one)
    }} -> (%ni)
  }}
}} -> (%x)""")


def test_a_loop_whose_condition_reads_no_variable_keeps_its_first() -> None:
    """The condition reads only a function input (and is always false, so the random inputs
    end): no variable is live, but MIL has no empty ``loop_vars``, so the first stays (with its
    update); the second goes."""
    assert_rewrites(f"""{HEAD}(%x: tensor<fp32, [2]>, %p: tensor<bool, []>) {{
  %a: tensor<fp32, [2]>, %b: tensor<fp32, [2]> = while_loop(loop_vars=(%x, %x)) {{
    block(%ca: tensor<fp32, [2]>, %cb: tensor<fp32, [2]>) {{
      %no: tensor<bool, []> = const() [val=dense<bool, []>(false)]
      %f: tensor<bool, []> = logical_and(x=%p, y=%no)
    }} -> (%f)
    block(%ba: tensor<fp32, [2]>, %bb: tensor<fp32, [2]>) {{
      %na: tensor<fp32, [2]> = sin(x=%ba)
      %nb: tensor<fp32, [2]> = cos(x=%bb)
    }} -> (%na, %nb)
  }}
}} -> (%x)""", DCE, f"""{HEAD}(%x: tensor<fp32, [2]>, %p: tensor<bool, []>) {{
  %a: tensor<fp32, [2]> = while_loop(loop_vars=(%x)) {{
    block(%ca: tensor<fp32, [2]>) {{
      %no: tensor<bool, []> = const() [val=dense<bool, []>(false)]
      %f: tensor<bool, []> = logical_and(x=%p, y=%no)
    }} -> (%f)
    block(%ba: tensor<fp32, [2]>) {{
      %na: tensor<fp32, [2]> = sin(x=%ba)
    }} -> (%na)
  }}
}} -> (%x)""")


def test_nested_loops_dead_variables_on_both_levels() -> None:
    """The outer variable ``d`` is updated by the inner loop's variable ``e`` (initialized from
    ``d``); neither result is used: the inner variable goes first, which leaves the outer one
    read by nothing, and it goes too. The inner counter's output is unused but its condition
    reads it (kept); the inner ``w`` feeds the outer ``y`` (kept)."""
    before = f"""{HEAD}(%x: tensor<fp32, [2]>) {{
  %i0: tensor<int32, []> = const() [val=dense<int32, []>(0)]
  %d0: tensor<fp32, [2]> = const() [val=dense<fp32, [2]>(0.5, 1.75)]
  %i: tensor<int32, []>, %y: tensor<fp32, [2]>, %d: tensor<fp32, [2]> = while_loop(loop_vars=(%i0, %x, %d0)) {{
    block(%ci: tensor<int32, []>, %cy: tensor<fp32, [2]>, %cd: tensor<fp32, [2]>) {{
      %two: tensor<int32, []> = const() [val=dense<int32, []>(2)]
      %go: tensor<bool, []> = less(x=%ci, y=%two)
    }} -> (%go)
    block(%bi: tensor<int32, []>, %by: tensor<fp32, [2]>, %bd: tensor<fp32, [2]>) {{
      %one: tensor<int32, []> = const() [val=dense<int32, []>(1)]
      %ni: tensor<int32, []> = add(x=%bi, y=%one)
      %j: tensor<int32, []>, %w: tensor<fp32, [2]>, %e: tensor<fp32, [2]> = while_loop(loop_vars=(%bi, %by, %bd)) {{
        block(%cj: tensor<int32, []>, %cw: tensor<fp32, [2]>, %ce: tensor<fp32, [2]>) {{
          %three: tensor<int32, []> = const() [val=dense<int32, []>(3)]
          %go2: tensor<bool, []> = less(x=%cj, y=%three)
        }} -> (%go2)
        block(%bj: tensor<int32, []>, %bw: tensor<fp32, [2]>, %be: tensor<fp32, [2]>) {{
          %one2: tensor<int32, []> = const() [val=dense<int32, []>(1)]
          %nj: tensor<int32, []> = add(x=%bj, y=%one2)
          %k: tensor<fp32, []> = const() [val=dense<fp32, []>(0.5)]
          %nw: tensor<fp32, [2]> = mul(x=%bw, y=%k)
          %ne: tensor<fp32, [2]> = cos(x=%be)
        }} -> (%nj, %nw, %ne)
      }}
      %ny: tensor<fp32, [2]> = add(x=%w, y=%by)
    }} -> (%ni, %ny, %e)
  }}
}} -> (%y)"""
    prog = assert_rewrites(before, DCE, f"""{HEAD}(%x: tensor<fp32, [2]>) {{
  %i0: tensor<int32, []> = const() [val=dense<int32, []>(0)]
  %i: tensor<int32, []>, %y: tensor<fp32, [2]> = while_loop(loop_vars=(%i0, %x)) {{
    block(%ci: tensor<int32, []>, %cy: tensor<fp32, [2]>) {{
      %two: tensor<int32, []> = const() [val=dense<int32, []>(2)]
      %go: tensor<bool, []> = less(x=%ci, y=%two)
    }} -> (%go)
    block(%bi: tensor<int32, []>, %by: tensor<fp32, [2]>) {{
      %one: tensor<int32, []> = const() [val=dense<int32, []>(1)]
      %ni: tensor<int32, []> = add(x=%bi, y=%one)
      %j: tensor<int32, []>, %w: tensor<fp32, [2]> = while_loop(loop_vars=(%bi, %by)) {{
        block(%cj: tensor<int32, []>, %cw: tensor<fp32, [2]>) {{
          %three: tensor<int32, []> = const() [val=dense<int32, []>(3)]
          %go2: tensor<bool, []> = less(x=%cj, y=%three)
        }} -> (%go2)
        block(%bj: tensor<int32, []>, %bw: tensor<fp32, [2]>) {{
          %one2: tensor<int32, []> = const() [val=dense<int32, []>(1)]
          %nj: tensor<int32, []> = add(x=%bj, y=%one2)
          %k: tensor<fp32, []> = const() [val=dense<fp32, []>(0.5)]
          %nw: tensor<fp32, [2]> = mul(x=%bw, y=%k)
        }} -> (%nj, %nw)
      }}
      %ny: tensor<fp32, [2]> = add(x=%w, y=%by)
    }} -> (%ni, %ny)
  }}
}} -> (%y)""")
    _same_outputs(before, prog, [{"x": np.array([1e30, -3.5], np.float32)}])


# -- cond ------------------------------------------------------------------------------------------

COND_TWO_OUTPUTS = f"""{HEAD}(%x: tensor<fp32, [2]>, %p: tensor<bool, []>) {{
  %a: tensor<fp32, [2]>, %b: tensor<fp32, [2]> = cond(pred=%p) {{
    block() {{
      %e: tensor<fp32, [2]> = exp(x=%x)
      %s: tensor<fp32, [2]> = sin(x=%e)
    }} -> (%e, %s)
    block() {{
      %c: tensor<fp32, [2]> = cos(x=%x)
    }} -> (%x, %c)
  }}
}} -> (%a)"""

BOTH_PREDS = [{"x": np.array([0.3, -1.5], np.float32), "p": np.bool_(v)} for v in (True, False)]


def test_an_unused_cond_output_is_dropped_from_both_branches() -> None:
    prog = assert_rewrites(COND_TWO_OUTPUTS, DCE, f"""{HEAD}(%x: tensor<fp32, [2]>, %p: tensor<bool, []>) {{
  %a: tensor<fp32, [2]> = cond(pred=%p) {{
    block() {{
      %e: tensor<fp32, [2]> = exp(x=%x)
    }} -> (%e)
    block() {{
    }} -> (%x)
  }}
}} -> (%a)""")
    _same_outputs(COND_TWO_OUTPUTS, prog, BOTH_PREDS)


def test_near_miss_a_cond_output_read_later_is_kept() -> None:
    """Both outputs are read (``b`` through an op, not as a function output)."""
    _assert_kept(COND_TWO_OUTPUTS.replace("} -> (%a)", "  %r: tensor<fp32, [2]> = add(x=%a, y=%b)\n} -> (%r)"))


def test_a_cond_with_no_used_output_and_no_effects_is_removed() -> None:
    prog = parse_program(COND_TWO_OUTPUTS.rsplit("-> (%a)", 1)[0] + "-> (%x)")
    assert DeadCodeElimination().run(prog).stats == {"removed": 4}  # cond, exp, sin, cos
    verify(prog)
    assert [op.type for op in prog.walk()] == []


def test_a_cond_with_effects_keeps_one_output() -> None:
    """No output is used, but a branch holds a random op (not pure: never removed): the cond
    stays, with its first output (MIL has no empty signature to give it)."""
    text = f"""{HEAD}(%x: tensor<fp32, [2]>, %p: tensor<bool, []>) {{
  %a: tensor<fp32, [2]>, %b: tensor<fp32, [2]> = cond(pred=%p) {{
    block() {{
      %s: tensor<int32, [1]> = const() [val=dense<int32, [1]>(2)]
      %n: tensor<fp32, [2]> = random_uniform(shape=%s) [rng_key=0]
      %e: tensor<fp32, [2]> = exp(x=%x)
    }} -> (%n, %e)
    block() {{
      %c: tensor<fp32, [2]> = cos(x=%x)
    }} -> (%c, %c)
  }}
}} -> (%x)"""
    prog = parse_program(text)
    assert DeadCodeElimination().run(prog).stats == {"removed": 1, "cond_outputs": 1}  # exp
    verify(prog)
    (op,) = [op for op in prog.walk() if op.type == "cond"]
    assert len(op.outputs) == 1 and [v.name for v in op.blocks[0].outputs] == ["n"]


def test_a_cond_inside_a_loop_body_lets_a_variable_die() -> None:
    """The loop variable ``d`` is read inside the body only by a cond branch's second result, which
    nobody uses: the cond output goes first, then ``d`` is read by nothing and goes too."""
    before = f"""{HEAD}(%x: tensor<fp32, [2]>, %p: tensor<bool, []>) {{
  %i0: tensor<int32, []> = const() [val=dense<int32, []>(0)]
  %i: tensor<int32, []>, %y: tensor<fp32, [2]>, %d: tensor<fp32, [2]> = while_loop(loop_vars=(%i0, %x, %x)) {{
    block(%ci: tensor<int32, []>, %cy: tensor<fp32, [2]>, %cd: tensor<fp32, [2]>) {{
      %three: tensor<int32, []> = const() [val=dense<int32, []>(3)]
      %go: tensor<bool, []> = less(x=%ci, y=%three)
    }} -> (%go)
    block(%bi: tensor<int32, []>, %by: tensor<fp32, [2]>, %bd: tensor<fp32, [2]>) {{
      %one: tensor<int32, []> = const() [val=dense<int32, []>(1)]
      %ni: tensor<int32, []> = add(x=%bi, y=%one)
      %u: tensor<fp32, [2]>, %v: tensor<fp32, [2]> = cond(pred=%p) {{
        block() {{
          %t: tensor<fp32, [2]> = tanh(x=%by)
        }} -> (%t, %bd)
        block() {{
          %s: tensor<fp32, [2]> = sin(x=%by)
        }} -> (%s, %s)
      }}
    }} -> (%ni, %u, %v)
  }}
}} -> (%y)"""
    prog = assert_rewrites(before, DCE, f"""{HEAD}(%x: tensor<fp32, [2]>, %p: tensor<bool, []>) {{
  %i0: tensor<int32, []> = const() [val=dense<int32, []>(0)]
  %i: tensor<int32, []>, %y: tensor<fp32, [2]> = while_loop(loop_vars=(%i0, %x)) {{
    block(%ci: tensor<int32, []>, %cy: tensor<fp32, [2]>) {{
      %three: tensor<int32, []> = const() [val=dense<int32, []>(3)]
      %go: tensor<bool, []> = less(x=%ci, y=%three)
    }} -> (%go)
    block(%bi: tensor<int32, []>, %by: tensor<fp32, [2]>) {{
      %one: tensor<int32, []> = const() [val=dense<int32, []>(1)]
      %ni: tensor<int32, []> = add(x=%bi, y=%one)
      %u: tensor<fp32, [2]> = cond(pred=%p) {{
        block() {{
          %t: tensor<fp32, [2]> = tanh(x=%by)
        }} -> (%t)
        block() {{
          %s: tensor<fp32, [2]> = sin(x=%by)
        }} -> (%s)
      }}
    }} -> (%ni, %u)
  }}
}} -> (%y)""")
    _same_outputs(before, prog, BOTH_PREDS)


def test_linear_on_a_long_chain_of_dead_loop_variables() -> None:
    """Variable k's update reads variable k - 1 (a chain of 300): none is read by anything else,
    so all die in one run (the marking is a worklist: no rescan per variable)."""
    n = 300

    def body(b: Any, x: Any) -> list[Any]:
        def cond(c: Any, i: Any, *rest: Any) -> Any:
            return c.less(x=i, y=np.int32(2))

        def step(c: Any, i: Any, *vs: Any) -> list[Any]:
            return [c.add(x=i, y=np.int32(1)), vs[0]] + [c.add(x=vs[k], y=vs[k - 1]) for k in range(1, len(vs))]

        i, *outs = b.while_loop([b.const(np.int32(0))] + [x] * n, cond, step, name="loop")
        return [i]

    prog = new_program({"x": tensor("fp32", [2])}, body)
    result = DeadCodeElimination().run(prog)
    assert result.stats["loop_vars"] == n
    verify(prog)
    (loop,) = [op for op in prog.walk() if op.type == "while_loop"]
    assert len(loop.inputs["loop_vars"]) == 1 and [op.type for op in loop.blocks[1].ops] == ["const", "add"]


# -- the migrated GRU ------------------------------------------------------------------------------

GRU = TORCH / "gru_bidirectional_nn.mlmodel"


def _loop_var_readers(loop: Op, i: int) -> int:
    """How many uses variable ``i`` of ``loop`` has: its output, its cond and body block inputs."""
    cond, body = loop.blocks
    return len(loop.outputs[i].uses) + len(cond.inputs[i].uses) + len(body.inputs[i].uses)


@pytest.mark.skipif(not GRU.exists(), reason="shared models not available")
def test_gru_loses_its_dead_loop_carried_casts_and_still_matches_torch(recwarn: pytest.WarningsRecorder) -> None:
    """The NeuralNetwork GRU's two loops each carry a ``cast(bool -> fp32)`` of the continue flag
    (NN loops carry every blob), read again only to compute the next condition, and a loop
    invariant passed through unread. The frontend's own dead_code run drops both variables at
    load (the cast itself stays while ``abs(cast(b)) > 0`` reads it); once canonicalization
    rewrites that to ``b``, the cast is unused and goes (85 -> 65 ops with today's rules; 67 with
    the old dead_code, which kept the variables and so the casts).

    Oracle: torch's outputs (tolerance as tests/nn_models/test_torch.py); the optimized program
    is also bit-identical to the program as loaded (only exact rules fire on it)."""
    name, record = torch_record(GRU)
    prog = converter.load(GRU)
    for loop in [op for op in prog.walk() if op.type == "while_loop"]:
        assert len(loop.outputs) == 3  # the continue flag, the counter, the output sequence
        assert all(_loop_var_readers(loop, i) for i in range(3))
    feeds = feeds_for(GRU, prog)
    want = converter.run(prog, feeds)
    optimized, _ = clone_program(prog)
    converter.optimize(optimized, verify=True)
    loops = [op for op in optimized.walk() if op.type == "while_loop"]
    assert len(loops) == 2
    for loop in loops:
        casts = [op for op in loop.blocks[1].ops if op.type == "cast"]
        assert casts and all(op.inputs["x"].type.dtype.name != "bool" for op in casts), casts
    got = converter.run(optimized, feeds)
    assert list(got) == list(want)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    with np.load(TORCH / f"{name}.torch_outputs.npz") as data:
        refs = [data[f"output_{i}"] for i in range(len(data.files))]
    for out_name, ref in zip(record["outputs"], refs):
        err = max_abs_error(np.asarray(got[out_name]).reshape(ref.shape), ref)
        assert err <= 1e-4 * max(1.0, float(np.max(np.abs(ref)))), f"{out_name}: {err:.3g} from torch"


def test_uses_held_by_ops_removed_elsewhere_do_not_keep_a_value_alive() -> None:
    """A pass that detaches an op without releasing its uses leaves them in its inputs' use-lists
    (the verifier refuses that; this is about robustness without it): dead_code releases them
    instead of failing, and removes the producer they kept "used"."""
    def body(b: Any, x: Any) -> list[Any]:
        e = b.exp(x=x, name="e")
        b.sin(x=e, name="gone")
        return [b.relu(x=x, name="r")]

    prog = new_program({"x": tensor("fp32", [2])}, body)
    block = prog.main.block
    block.ops = [op for op in block.ops if op.name != "gone"]  # detached, its use of e kept
    assert DeadCodeElimination().run(prog).stats == {"removed": 1}
    verify(prog)
    assert [op.name for op in block.ops] == ["r"]
