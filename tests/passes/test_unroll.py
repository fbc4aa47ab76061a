"""Flattening control flow (converter/passes/unroll.py): loops with a trip count known at conversion
time unrolled, conds with a run-time predicate as both branches and select, lists with known
indices as values; data-dependent loops, effects and oversized unrollings refused with the reason.

Oracles: numpy formulas of each loop written here (an RNN-style recurrence with gather/scatter-add,
a running sum through TensorArray lists, a parity-dependent update), independent of our kernels;
and, as a round-trip check, the interpreter on the program before and after the pass (bit for bit:
unrolling and select change no arithmetic).
"""

from __future__ import annotations

import numpy as np
import pytest

import converter
from converter.errors import UnsupportedError
from converter.ir.clone import clone_program
from converter.ir.core import Program
from converter.ir.interpreter import run
from converter.ir.text import parse_program
from converter.ir.verify import verify
from converter.passes.unroll import UnrollControlFlow

HEAD = "program\nfunc main<iOS17>"

#: h = tanh(0.5 h + xs[i]); buf[i] += h, for i < 5 (torch's GRU loop shape: gather and scatter-add on i)
RNN = f"""{HEAD}(%xs: tensor<fp32, [5, 3]>) {{
  %n: tensor<int32, []> = const() [val=dense<int32, []>(5)]
  %zero: tensor<int32, []> = const() [val=dense<int32, []>(0)]
  %h0: tensor<fp32, [3]> = const() [val=dense<fp32, [3]>(0.0, 0.0, 0.0)]
  %buf0: tensor<fp32, [5, 3]> = const() [val=dense<fp32, [5, 3]>({", ".join(["0.5"] * 15)})]
  %i_f: tensor<int32, []>, %h_f: tensor<fp32, [3]>, %buf_f: tensor<fp32, [5, 3]> = while_loop(loop_vars=(%zero, %h0, %buf0)) @rnn {{
    block(%ci: tensor<int32, []>, %ch: tensor<fp32, [3]>, %cb: tensor<fp32, [5, 3]>) {{
      %more: tensor<bool, []> = less(x=%ci, y=%n)
    }} -> (%more)
    block(%bi: tensor<int32, []>, %bh: tensor<fp32, [3]>, %bb: tensor<fp32, [5, 3]>) {{
      %axis0: tensor<int32, []> = const() [val=dense<int32, []>(0)]
      %xi: tensor<fp32, [3]> = gather(x=%xs, indices=%bi, axis=%axis0)
      %half: tensor<fp32, []> = const() [val=dense<fp32, []>(0.5)]
      %m: tensor<fp32, [3]> = mul(x=%bh, y=%half)
      %s: tensor<fp32, [3]> = add(x=%m, y=%xi)
      %h: tensor<fp32, [3]> = tanh(x=%s)
      %one: tensor<int32, []> = const() [val=dense<int32, []>(1)]
      %next: tensor<int32, []> = add(x=%bi, y=%one)
      %row_shape: tensor<int32, [2]> = const() [val=dense<int32, [2]>(1, 3)]
      %row: tensor<fp32, [1, 3]> = reshape(x=%h, shape=%row_shape)
      %one_shape: tensor<int32, [1]> = const() [val=dense<int32, [1]>(1)]
      %idx: tensor<int32, [1]> = reshape(x=%bi, shape=%one_shape)
      %mode: tensor<string, []> = const() [val=dense<string, []>("add")]
      %b2: tensor<fp32, [5, 3]> = scatter(data=%bb, indices=%idx, updates=%row, axis=%axis0, mode=%mode)
    }} -> (%next, %h, %b2)
  }}
}} -> (%h_f, %buf_f)"""


def rnn_formula(xs: np.ndarray) -> dict[str, np.ndarray]:
    h = np.zeros(3)
    buf = np.full((5, 3), 0.5)
    for i in range(5):
        h = np.tanh(0.5 * h + xs[i])
        buf[i] += h
    return {"h_f": h, "buf_f": buf}


#: a running sum through TensorArray lists (TensorFlow's while loops as coremltools writes them)
LISTS = f"""{HEAD}(%xs: tensor<fp32, [4, 2]>) {{
  %n: tensor<int32, []> = const() [val=dense<int32, []>(4)]
  %zero: tensor<int32, []> = const() [val=dense<int32, []>(0)]
  %one: tensor<int32, []> = const() [val=dense<int32, []>(1)]
  %no: tensor<bool, []> = const() [val=dense<bool, []>(false)]
  %dt: tensor<string, []> = const() [val=dense<string, []>("fp32")]
  %e0: tensor<string, []> = const() [val=dense<string, []>("batch")]
  %e1: tensor<int32, []> = const() [val=dense<int32, []>(2)]
  %idx: tensor<int32, [4]> = const() [val=dense<int32, [4]>(0, 1, 2, 3)]
  %rows0: list<tensor<fp32, [2]>, 4, fixed> = make_list(init_length=%n, dynamic_length=%no, elem_shape=(%e1), dtype=%dt)
  %rows: list<tensor<fp32, [2]>, 4, fixed> = list_scatter(ls=%rows0, indices=%idx, value=%xs)
  %outs0: list<tensor<fp32, [batch]>, 4, fixed> = make_list(init_length=%n, dynamic_length=%no, elem_shape=(%e0), dtype=%dt)
  %acc0: tensor<fp32, [2]> = const() [val=dense<fp32, [2]>(0.0, 0.0)]
  %i_f: tensor<int32, []>, %outs_f: list<tensor<fp32, [batch]>, 4, fixed>, %acc_f: tensor<fp32, [2]> = while_loop(loop_vars=(%zero, %outs0, %acc0)) @running_sum {{
    block(%ci: tensor<int32, []>, %cl: list<tensor<fp32, [batch]>, 4, fixed>, %ca: tensor<fp32, [2]>) {{
      %more: tensor<bool, []> = less(x=%ci, y=%n)
    }} -> (%more)
    block(%bi: tensor<int32, []>, %bl: list<tensor<fp32, [batch]>, 4, fixed>, %ba: tensor<fp32, [2]>) {{
      %xi: tensor<fp32, [2]> = list_read(ls=%rows, index=%bi)
      %a: tensor<fp32, [2]> = add(x=%ba, y=%xi)
      %l2: list<tensor<fp32, [batch]>, 4, fixed> = list_write(ls=%bl, index=%bi, value=%a)
      %next: tensor<int32, []> = add(x=%bi, y=%one)
    }} -> (%next, %l2, %a)
  }}
  %all: tensor<fp32, [4, batch]> = list_gather(ls=%outs_f, indices=%idx)
  %len: tensor<int32, []> = list_length(ls=%outs_f)
  %scale: tensor<fp32, []> = cast(x=%len, dtype=%dt)
  %cumsum: tensor<fp32, [4, batch]> = mul(x=%all, y=%scale)
}} -> (%cumsum, %acc_f)"""


#: acc = acc + x on even steps, acc * x on odd ones (a cond whose predicate is known per iteration)
PARITY = f"""{HEAD}(%x: tensor<fp32, [3]>) {{
  %n: tensor<int32, []> = const() [val=dense<int32, []>(5)]
  %zero: tensor<int32, []> = const() [val=dense<int32, []>(0)]
  %i_f: tensor<int32, []>, %acc: tensor<fp32, [3]> = while_loop(loop_vars=(%zero, %x)) @parity {{
    block(%ci: tensor<int32, []>, %ca: tensor<fp32, [3]>) {{
      %more: tensor<bool, []> = less(x=%ci, y=%n)
    }} -> (%more)
    block(%bi: tensor<int32, []>, %ba: tensor<fp32, [3]>) {{
      %two: tensor<int32, []> = const() [val=dense<int32, []>(2)]
      %r: tensor<int32, []> = mod(x=%bi, y=%two)
      %even: tensor<bool, []> = equal(x=%r, y=%zero)
      %upd: tensor<fp32, [3]> = cond(pred=%even) @step {{
        block() {{
          %p: tensor<fp32, [3]> = add(x=%ba, y=%x)
        }} -> (%p)
        block() {{
          %q: tensor<fp32, [3]> = mul(x=%ba, y=%x)
        }} -> (%q)
      }}
      %one: tensor<int32, []> = const() [val=dense<int32, []>(1)]
      %next: tensor<int32, []> = add(x=%bi, y=%one)
    }} -> (%next, %upd)
  }}
}} -> (%acc)"""


def parity_formula(x: np.ndarray) -> np.ndarray:
    acc = x.astype(np.float64)
    for i in range(5):
        acc = acc + x if i % 2 == 0 else acc * x
    return acc


#: y = 2x + exp(x) when s > 0, else tanh(x) - 1: a cond on a run-time predicate
BRANCH = f"""{HEAD}(%x: tensor<fp32, [3]>, %s: tensor<fp32, [1]>) {{
  %zero: tensor<fp32, []> = const() [val=dense<fp32, []>(0.0)]
  %pred: tensor<bool, [1]> = greater(x=%s, y=%zero)
  %y: tensor<fp32, [3]> = cond(pred=%pred) @branch {{
    block() {{
      %two: tensor<fp32, []> = const() [val=dense<fp32, []>(2.0)]
      %d: tensor<fp32, [3]> = mul(x=%x, y=%two)
      %e: tensor<fp32, [3]> = exp(x=%x)
      %t: tensor<fp32, [3]> = add(x=%d, y=%e)
    }} -> (%t)
    block() {{
      %th: tensor<fp32, [3]> = tanh(x=%x)
      %one: tensor<fp32, []> = const() [val=dense<fp32, []>(1.0)]
      %f: tensor<fp32, [3]> = sub(x=%th, y=%one)
    }} -> (%f)
  }}
}} -> (%y)"""


def branch_formula(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return 2 * x + np.exp(x) if s[0] > 0 else np.tanh(x) - 1


#: doubles acc while its sum is below 10: the trip count depends on the input
DATA_DEPENDENT = f"""{HEAD}(%x: tensor<fp32, [3]>) {{
  %limit: tensor<fp32, []> = const() [val=dense<fp32, []>(10.0)]
  %axes: tensor<int32, [1]> = const() [val=dense<int32, [1]>(0)]
  %acc: tensor<fp32, [3]> = while_loop(loop_vars=(%x)) @doubling {{
    block(%ca: tensor<fp32, [3]>) {{
      %total: tensor<fp32, []> = reduce_sum(x=%ca, axes=%axes)
      %more: tensor<bool, []> = less(x=%total, y=%limit)
    }} -> (%more)
    block(%ba: tensor<fp32, [3]>) {{
      %two: tensor<fp32, []> = const() [val=dense<fp32, []>(2.0)]
      %d: tensor<fp32, [3]> = mul(x=%ba, y=%two)
    }} -> (%d)
  }}
}} -> (%acc)"""


def counted_loop(iterations: int, body_ops: int) -> str:
    """acc = ((acc + 1) + 1) ... (``body_ops`` adds) per iteration, ``iterations`` times."""
    adds = "\n".join(f"      %a{k + 1}: tensor<fp32, [3]> = add(x=%a{k}, y=%c1)" for k in range(body_ops))
    return f"""{HEAD}(%x: tensor<fp32, [3]>) {{
  %n: tensor<int32, []> = const() [val=dense<int32, []>({iterations})]
  %zero: tensor<int32, []> = const() [val=dense<int32, []>(0)]
  %c1: tensor<fp32, []> = const() [val=dense<fp32, []>(1.0)]
  %i_f: tensor<int32, []>, %acc: tensor<fp32, [3]> = while_loop(loop_vars=(%zero, %x)) @counted {{
    block(%ci: tensor<int32, []>, %ca: tensor<fp32, [3]>) {{
      %more: tensor<bool, []> = less(x=%ci, y=%n)
    }} -> (%more)
    block(%bi: tensor<int32, []>, %a0: tensor<fp32, [3]>) {{
{adds}
      %one: tensor<int32, []> = const() [val=dense<int32, []>(1)]
      %next: tensor<int32, []> = add(x=%bi, y=%one)
    }} -> (%next, %a{body_ops})
  }}
}} -> (%acc)"""


def _flattened(text: str, **options: object) -> tuple[Program, Program, UnrollControlFlow]:
    before = parse_program(text)
    verify(before)
    after = clone_program(before)[0]
    unroll = UnrollControlFlow(**options)  # type: ignore[arg-type]
    unroll.run(after)
    verify(after)
    return before, after, unroll


def _types(prog: Program) -> list[str]:
    return [op.type for op in prog.main.walk()]


def _same_outputs(before: Program, after: Program, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    want = run(before, feeds)
    got = run(after, feeds)
    assert want.keys() == got.keys()
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    return got


def test_a_counted_loop_with_gather_and_scatter_add_unrolls_to_its_formula() -> None:
    before, after, unroll = _flattened(RNN)
    assert not unroll.refused
    types = _types(after)
    assert "while_loop" not in types and types.count("tanh") == 5 and types.count("scatter") == 5
    # every iteration's counter is a constant: the gathers and scatters index with constants
    for op in after.main.walk():
        if op.type in ("gather", "scatter"):
            assert op.inputs["indices"].is_const
    xs = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)
    got = _same_outputs(before, after, {"xs": xs})
    for k, v in rnn_formula(xs).items():
        np.testing.assert_allclose(got[k], v, rtol=1e-6, atol=1e-6)


def test_lists_with_known_indices_become_values() -> None:
    before, after, unroll = _flattened(LISTS)
    assert not unroll.refused
    assert not {"while_loop", "make_list", "list_read", "list_write", "list_gather", "list_scatter",
                "list_length"} & set(_types(after))
    # the list element's symbolic size took the written values' static one
    assert after.main.outputs[0].type.shape == (4, 2)
    xs = np.random.default_rng(2).standard_normal((4, 2)).astype(np.float32)
    got = _same_outputs(before, after, {"xs": xs})
    np.testing.assert_allclose(got["cumsum"], 4 * np.cumsum(xs.astype(np.float64), axis=0), rtol=1e-6)
    np.testing.assert_allclose(got["acc_f"], xs.astype(np.float64).sum(axis=0), rtol=1e-6)


def test_a_cond_whose_predicate_is_known_per_iteration_is_inlined() -> None:
    before, after, _ = _flattened(PARITY)
    types = _types(after)
    assert "cond" not in types and "select" not in types
    assert types.count("add") == 3 and types.count("mul") == 2  # steps 0, 2, 4 add; 1, 3 multiply
    x = np.array([0.5, -1.25, 2.0], np.float32)
    got = _same_outputs(before, after, {"x": x})
    np.testing.assert_allclose(got["acc"], parity_formula(x), rtol=1e-6)


@pytest.mark.parametrize("s", [1.5, -0.5])
def test_a_cond_on_a_run_time_predicate_selects_between_both_branches(s: float) -> None:
    before, after, unroll = _flattened(BRANCH)
    assert not unroll.refused
    types = _types(after)
    assert "cond" not in types and types.count("select") == 1
    assert after.main.outputs[0].name == "y"
    x = np.array([0.25, -1.0, 1.5], np.float32)
    feeds = {"x": x, "s": np.array([s], np.float32)}
    got = _same_outputs(before, after, feeds)
    np.testing.assert_allclose(got["y"], branch_formula(x, feeds["s"]), rtol=1e-6)


def test_without_select_branches_a_run_time_cond_stays() -> None:
    _, after, unroll = _flattened(BRANCH, select_branches=False)
    assert "cond" in _types(after) and not unroll.refused


def test_a_data_dependent_loop_is_refused_naming_the_variable_its_condition_reads() -> None:
    before, after, unroll = _flattened(DATA_DEPENDENT)
    assert _types(after) == _types(before)  # what was copied before the refusal is gone again
    (op, why), = unroll.refused.items()
    assert op.name == "doubling"
    assert "condition is not known at conversion time (it reads loop variable 0 ('x'), computed at run time)" in why
    with pytest.raises(UnsupportedError, match=r"while_loop 'doubling': its condition is not known"):
        UnrollControlFlow(strict=True).run(parse_program(DATA_DEPENDENT))


def test_the_unrolled_size_is_capped() -> None:
    _, after, unroll = _flattened(counted_loop(30, 3), max_ops=50)
    (op, why), = unroll.refused.items()
    assert op.name == "counted" and "flattening makes more than 50 ops (converter.limits.MAX_UNROLLED_OPS)" in why
    assert "while_loop" in _types(after)
    _, after, unroll = _flattened(counted_loop(30, 3), max_ops=200)
    assert not unroll.refused and _types(after).count("add") == 90


def test_the_default_cap_refuses_a_webnn_conversion(tmp_path: object) -> None:
    prog = parse_program(counted_loop(30, 400))  # 12,000 adds unrolled
    with pytest.raises(UnsupportedError, match=r"while_loop 'counted': flattening makes more than 10000 ops"):
        converter.convert(prog, to="webnn", out=f"{tmp_path}/out")


def test_a_loop_that_does_not_run_returns_its_initial_values() -> None:
    before, after, _ = _flattened(counted_loop(0, 2))
    assert "while_loop" not in _types(after)
    assert after.main.outputs[0].name == "acc"  # the input is returned through an identity
    x = np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_array_equal(_same_outputs(before, after, {"x": x})["acc"], x)


def test_a_branch_with_effects_or_shapes_depending_on_the_predicate_is_refused() -> None:
    random_branch = BRANCH.replace(
        "%th: tensor<fp32, [3]> = tanh(x=%x)",
        "%shp: tensor<int32, [1]> = const() [val=dense<int32, [1]>(3)]\n"
        "      %th: tensor<fp32, [3]> = random_uniform(shape=%shp) [rng_key=dense<int32, []>(7)]")
    _, _, unroll = _flattened(random_branch)
    (why,) = unroll.refused.values()
    assert "its else branch has effects (random_uniform 'th')" in why
    shapes = BRANCH.replace("%f: tensor<fp32, [3]> = sub(x=%th, y=%one)",
                            "%ax: tensor<int32, []> = const() [val=dense<int32, []>(0)]\n"
                            "      %f: tensor<fp32, [6]> = concat(values=(%th, %th), axis=%ax)").replace(
        "%y: tensor<fp32, [3]> = cond", "%y: tensor<fp32, [s0]> = cond")
    _, _, unroll = _flattened(shapes)
    (why,) = unroll.refused.values()
    assert "branches give output 0 different or unknown shapes" in why


def test_a_loop_drawing_random_values_is_not_unrolled() -> None:
    text = counted_loop(3, 1).replace(
        "%a1: tensor<fp32, [3]> = add(x=%a0, y=%c1)",
        "%shp: tensor<int32, [1]> = const() [val=dense<int32, [1]>(3)]\n"
        "      %r: tensor<fp32, [3]> = random_uniform(shape=%shp) [rng_key=dense<int32, []>(7)]\n"
        "      %a1: tensor<fp32, [3]> = add(x=%a0, y=%r)")
    _, _, unroll = _flattened(text)
    (why,) = unroll.refused.values()
    assert "it draws random values (random_uniform 'r')" in why
