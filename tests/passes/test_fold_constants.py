"""Constant folding (converter/passes/fold_constants.py): each behaviour fires where it should (the IR
after written out by hand) and refuses its near misses with the reason.

Oracles: the folded constants in the expected IR are written from the arithmetic of the test (2 * 3
= 6, the bytes of a shape), not read from our kernels; the helpers also run both programs on
random inputs and require bit-identical outputs. On the tests/optimize sources, torch's own
outputs are the oracle after folding, and coremltools' const_elimination is the yardstick for what
must fold (op_count_baseline.md: the shape arithmetic of torch's flatten/unflatten/split).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import converter
from converter.ir.builder import new_program
from converter.ir.consteval import evaluation_refusal
from converter.ir.interpreter import run
from converter.ir.text import parse_program
from converter.ir.types import StateType, tensor
from converter.ir.verify import verify
from converter.passes.base import PassManager
from converter.passes.dce import DeadCodeElimination
from converter.passes.fold_constants import MAX_FOLD_BYTES, FoldConstants

from ..optimize.conftest import sources  # noqa: F401  (the fixture of the source programs)
from ..optimize.counting import op_histogram
from ..optimize.torch_oracle import assert_matches_torch
from .helpers import assert_refuses, assert_rewrites

HEAD = "program\nfunc main<iOS17>"
FOLD = FoldConstants()


def _const_bytes(prog: converter.Program) -> int:
    return sum(np.asarray(op.attributes["val"]).nbytes for op in prog.walk() if op.type == "const")


# -- folding through kernels ---------------------------------------------------------------------


def test_constant_subexpressions_fold_through_a_chain() -> None:
    """x + (2 * 3 - 1): the mul folds, then the sub reading it (a worklist revisit), not the add."""
    assert_rewrites(f"""{HEAD}(%x: tensor<fp32, [2]>) {{
      %two: tensor<fp32, []> = const() [val=dense<fp32, []>(2.0)]
      %three: tensor<fp32, [2]> = const() [val=dense<fp32, [2]>(3.0, -0.5)]
      %one: tensor<fp32, []> = const() [val=dense<fp32, []>(1.0)]
      %p: tensor<fp32, [2]> = mul(x=%two, y=%three)
      %q: tensor<fp32, [2]> = sub(x=%p, y=%one)
      %y: tensor<fp32, [2]> = add(x=%x, y=%q)
    }} -> (%y)""", FOLD, f"""{HEAD}(%x: tensor<fp32, [2]>) {{
      %q: tensor<fp32, [2]> = const() [val=dense<fp32, [2]>(5.0, -2.0)]
      %y: tensor<fp32, [2]> = add(x=%x, y=%q)
    }} -> (%y)""")


def test_folded_constants_keep_their_dtypes_exactly() -> None:
    """fp16 from a cast, bool from a compare, int32 from floor_div and mod, uint8 from a slice,
    int8 through a reshape: each const has the dtype the op declared (never widened)."""
    assert_rewrites(f"""{HEAD}() {{
      %f: tensor<fp32, [2]> = const() [val=dense<fp32, [2]>(1.5, 2.25)]
      %d: tensor<string, []> = const() [val=dense<string, []>("fp16")]
      %h: tensor<fp16, [2]> = cast(x=%f, dtype=%d)
      %i: tensor<int32, [2]> = const() [val=dense<int32, [2]>(7, -7)]
      %k: tensor<int32, []> = const() [val=dense<int32, []>(2)]
      %g: tensor<bool, [2]> = greater(x=%i, y=%k)
      %q: tensor<int32, [2]> = floor_div(x=%i, y=%k)
      %r: tensor<int32, [2]> = mod(x=%i, y=%k)
      %u: tensor<uint8, [3]> = const() [val=dense<uint8, [3]>(250, 3, 9)]
      %b: tensor<int32, [1]> = const() [val=dense<int32, [1]>(1)]
      %e: tensor<int32, [1]> = const() [val=dense<int32, [1]>(3)]
      %s: tensor<uint8, [2]> = slice_by_index(x=%u, begin=%b, end=%e)
      %n: tensor<int8, [4]> = const() [val=dense<int8, [4]>(-128, 127, 0, 5)]
      %sh: tensor<int32, [2]> = const() [val=dense<int32, [2]>(2, 2)]
      %m: tensor<int8, [2, 2]> = reshape(x=%n, shape=%sh)
    }} -> (%h, %g, %q, %r, %s, %m)""", FOLD, f"""{HEAD}() {{
      %h: tensor<fp16, [2]> = const() [val=dense<fp16, [2]>(1.5, 2.25)]
      %g: tensor<bool, [2]> = const() [val=dense<bool, [2]>(true, false)]
      %q: tensor<int32, [2]> = const() [val=dense<int32, [2]>(3, -4)]
      %r: tensor<int32, [2]> = const() [val=dense<int32, [2]>(1, 1)]
      %s: tensor<uint8, [2]> = const() [val=dense<uint8, [2]>(3, 9)]
      %m: tensor<int8, [2, 2]> = const() [val=dense<int8, [2, 2]>(-128, 127, 0, 5)]
    }} -> (%h, %g, %q, %r, %s, %m)""")


def test_a_multi_output_op_folds_into_one_constant_per_output() -> None:
    assert_rewrites(f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %w: tensor<fp32, [5]> = const() [val=dense<fp32, [5]>(1.0, 2.0, 3.0, 4.0, 5.0)]
      %sz: tensor<int32, [2]> = const() [val=dense<int32, [2]>(2, 3)]
      %ax: tensor<int32, []> = const() [val=dense<int32, []>(0)]
      %a: tensor<fp32, [2]>, %b: tensor<fp32, [3]> = split(x=%w, split_sizes=%sz, axis=%ax)
      %y: tensor<fp32, [3]> = mul(x=%x, y=%b)
    }} -> (%y, %a)""", FOLD, f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %a: tensor<fp32, [2]> = const() [val=dense<fp32, [2]>(1.0, 2.0)]
      %b: tensor<fp32, [3]> = const() [val=dense<fp32, [3]>(3.0, 4.0, 5.0)]
      %y: tensor<fp32, [3]> = mul(x=%x, y=%b)
    }} -> (%y, %a)""")


def test_a_kernel_that_fails_on_its_constants_is_left_for_run_time() -> None:
    assert_refuses(f"""{HEAD}(%x: tensor<fp32, [1]>) {{
      %t: tensor<fp32, [2]> = const() [val=dense<fp32, [2]>(1.0, 2.0)]
      %i: tensor<int32, [1]> = const() [val=dense<int32, [1]>(5)]
      %g: tensor<fp32, [1]> = gather(x=%t, indices=%i)
      %y: tensor<fp32, [1]> = add(x=%x, y=%g)
    }} -> (%y)""", FOLD, "its kernel fails on these constants")


def test_an_unused_op_is_left_to_dead_code() -> None:
    assert_refuses(f"""{HEAD}(%x: tensor<fp32, [2]>) {{
      %c: tensor<fp32, [2]> = const() [val=dense<fp32, [2]>(1.0, 2.0)]
      %unused: tensor<fp32, [2]> = exp(x=%c)
      %y: tensor<fp32, [2]> = relu(x=%x)
    }} -> (%y)""", FOLD, "its results are unused")


def test_a_folded_function_output_keeps_its_name() -> None:
    assert_rewrites(f"""{HEAD}(%x: tensor<fp32, [2]>) {{
      %c: tensor<fp32, [2]> = const() [val=dense<fp32, [2]>(-1.0, 2.0)]
      %out: tensor<fp32, [2]> = abs(x=%c)
      %y: tensor<fp32, [2]> = relu(x=%x)
    }} -> (%y, %out)""", FOLD, f"""{HEAD}(%x: tensor<fp32, [2]>) {{
      %out: tensor<fp32, [2]> = const() [val=dense<fp32, [2]>(1.0, 2.0)]
      %y: tensor<fp32, [2]> = relu(x=%x)
    }} -> (%y, %out)""")


# -- what never folds ----------------------------------------------------------------------------


def test_random_ops_never_fold_nor_what_reads_them() -> None:
    assert_refuses(f"""{HEAD}(%x: tensor<fp32, [2]>) {{
      %s: tensor<int32, [1]> = const() [val=dense<int32, [1]>(2)]
      %r: tensor<fp32, [2]> = random_normal(shape=%s)
      %one: tensor<fp32, []> = const() [val=dense<fp32, []>(1.0)]
      %n: tensor<fp32, [2]> = add(x=%r, y=%one)
      %y: tensor<fp32, [2]> = mul(x=%x, y=%n)
    }} -> (%y)""", FOLD, "random_normal is random: it draws new values on every run")


def test_stateful_ops_never_fold() -> None:
    """A state is a function input, so a stateful op never has only constant inputs; the trait
    alone refuses it too (consteval.evaluation_refusal, the one place the pass asks)."""
    text = """program
func main<iOS18>(%s: state<tensor<fp32, [2]>>) {
  %v: tensor<fp32, [2]> = read_state(input=%s)
  %c: tensor<fp32, [2]> = const() [val=dense<fp32, [2]>(1.0, 2.0)]
  %y: tensor<fp32, [2]> = add(x=%v, y=%c)
} -> (%y)"""
    prog = parse_program(text)
    assert isinstance(prog.main.inputs[0].type, StateType)
    read = next(op for op in prog.walk() if op.type == "read_state")
    assert evaluation_refusal(read) == "read_state reads or writes a state"
    assert not FoldConstants().run(prog).modified


def test_constexpr_weights_stay_compressed_unless_asked() -> None:
    text = """program
func main<iOS17>(%x: tensor<fp32, [2, 2]>) {
  %q: tensor<uint8, [2, 2]> = const() [val=dense<uint8, [2, 2]>(1, 2, 3, 9)]
  %z: tensor<uint8, []> = const() [val=dense<uint8, []>(1)]
  %s: tensor<fp32, []> = const() [val=dense<fp32, []>(0.5)]
  %a: tensor<int32, []> = const() [val=dense<int32, []>(0)]
  %w: tensor<fp32, [2, 2]> = constexpr_affine_dequantize(quantized_data=%q, zero_point=%z, scale=%s, axis=%a)
  %p: tensor<int32, [2]> = const() [val=dense<int32, [2]>(1, 0)]
  %t: tensor<fp32, [2, 2]> = transpose(x=%w, perm=%p)
  %y: tensor<fp32, [2, 2]> = matmul(x=%x, y=%t)
} -> (%y)"""
    assert_refuses(text, FOLD, "constexpr_affine_dequantize is a compressed weight, kept compressed")
    # asked: the weight is decompressed (0.5 * (q - 1)) and the transpose reading it folds too
    assert_rewrites(text, FoldConstants(expand_constexpr=True), """program
func main<iOS17>(%x: tensor<fp32, [2, 2]>) {
  %t: tensor<fp32, [2, 2]> = const() [val=dense<fp32, [2, 2]>(0.0, 1.0, 0.5, 4.0)]
  %y: tensor<fp32, [2, 2]> = matmul(x=%x, y=%t)
} -> (%y)""")


# -- the size cap ----------------------------------------------------------------------------------


def _fill(n: int) -> str:
    return f"""{HEAD}(%x: tensor<fp32, [{n}]>) {{
      %s: tensor<int32, [1]> = const() [val=dense<int32, [1]>({n})]
      %v: tensor<fp32, []> = const() [val=dense<fp32, []>(0.25)]
      %f: tensor<fp32, [{n}]> = fill(shape=%s, value=%v)
      %y: tensor<fp32, [{n}]> = add(x=%x, y=%f)
    }} -> (%y)"""


def test_a_fold_that_would_write_a_large_constant_into_the_model_is_refused() -> None:
    n = MAX_FOLD_BYTES // 4 + 1  # one element over the limit; the fill's inputs are 8 bytes
    assert_refuses(_fill(n), FOLD, "more than the folding limit of 64 KiB and than the 8 bytes of constants it frees")
    # the same fill one element smaller folds (and a smaller limit refuses it again)
    prog = parse_program(_fill(n - 1))
    assert FoldConstants().run(prog).modified and op_histogram(prog) == {"add": 1}
    assert_refuses(_fill(n - 1), FoldConstants(max_bytes=1024), "more than the folding limit of 1 KiB")


def _weights(rows: int, shared: bool) -> tuple[converter.Program, dict]:
    rng = np.random.default_rng(1)
    wa = rng.standard_normal((rows, 64)).astype(np.float32)
    wb = rng.standard_normal((rows, 64)).astype(np.float32)

    def body(b, x):
        a, c = b.const(wa, name="wa"), b.const(wb, name="wb")
        w = b.transpose(x=b.concat(values=[a, c], axis=0), perm=[1, 0])  # [64, 2 * rows]
        y = b.matmul(x=x, y=w)
        return [b.add(x=y, y=b.reduce_sum(x=b.matmul(x=x, y=b.transpose(x=a, perm=[1, 0])))) if shared else y]

    prog = new_program({"x": tensor("fp32", (3, 64))}, body)
    return prog, {"x": rng.standard_normal((3, 64)).astype(np.float32)}


def test_weight_preparation_larger_than_the_limit_folds_when_it_frees_its_inputs() -> None:
    """concat of two 128 KiB weights, then a transpose: each output is as large as the constants it
    frees, so both fold whatever the limit; the model's constants do not grow."""
    prog, feeds = _weights(512, shared=False)
    want, before = run(prog, feeds), _const_bytes(prog)
    PassManager([FoldConstants(), DeadCodeElimination()]).run(prog)
    verify(prog)
    assert op_histogram(prog) == {"matmul": 1} and _const_bytes(prog) <= before
    got = run(prog, feeds)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])


def test_a_large_fold_of_a_weight_still_read_elsewhere_is_refused() -> None:
    """transpose(wa) where wa is also read by the concat: folding would store wa twice."""
    prog, feeds = _weights(512, shared=True)
    want = run(prog, feeds)
    stats = FoldConstants().run(prog).stats
    assert stats["near misses"]["fold_constant_op"] >= 1
    assert "transpose" in op_histogram(prog)
    got = run(prog, feeds)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])


# -- shape of static values ------------------------------------------------------------------------


def test_the_shape_of_a_statically_shaped_value_is_a_constant() -> None:
    """torch's flatten(1) as coremltools lowers it: shape -> slice -> concat -> cast -> reshape;
    everything but the reshape folds, though relu(x) is computed at run time."""
    assert_rewrites(f"""{HEAD}(%x: tensor<fp32, [2, 3, 4]>) {{
      %r: tensor<fp32, [2, 3, 4]> = relu(x=%x)
      %s: tensor<int32, [3]> = shape(x=%r)
      %b: tensor<int32, [1]> = const() [val=dense<int32, [1]>(0)]
      %e: tensor<int32, [1]> = const() [val=dense<int32, [1]>(1)]
      %h: tensor<int32, [1]> = slice_by_index(x=%s, begin=%b, end=%e)
      %m: tensor<int32, [1]> = const() [val=dense<int32, [1]>(-1)]
      %ax: tensor<int32, []> = const() [val=dense<int32, []>(0)]
      %c: tensor<int32, [2]> = concat(values=(%h, %m), axis=%ax)
      %d: tensor<string, []> = const() [val=dense<string, []>("int32")]
      %k: tensor<int32, [2]> = cast(x=%c, dtype=%d)
      %y: tensor<fp32, [2, 12]> = reshape(x=%r, shape=%k)
    }} -> (%y)""", FOLD, f"""{HEAD}(%x: tensor<fp32, [2, 3, 4]>) {{
      %r: tensor<fp32, [2, 3, 4]> = relu(x=%x)
      %k: tensor<int32, [2]> = const() [val=dense<int32, [2]>(2, -1)]
      %y: tensor<fp32, [2, 12]> = reshape(x=%r, shape=%k)
    }} -> (%y)""")


def test_the_shape_of_a_symbolically_shaped_value_is_not() -> None:
    assert_refuses("""program
symbols { n: [1, 64] }
func main<iOS17>(%x: tensor<fp32, [n, 3]>) {
  %s: tensor<int32, [2]> = shape(x=%x)
  %y: tensor<fp32, [n, 3]> = reshape(x=%x, shape=%s)
} -> (%y)""", FOLD, "the shape of 'x' (tensor<fp32, [n, 3]>) is not static")


# -- nested blocks ---------------------------------------------------------------------------------


def test_ops_in_nested_blocks_fold_in_place() -> None:
    """In the loop body, 2 * 3 folds (a const in the body); what reads the loop variable does not."""
    assert_rewrites(f"""{HEAD}(%x: tensor<fp32, [2]>) {{
      %two: tensor<fp32, []> = const() [val=dense<fp32, []>(2.0)]
      %i0: tensor<int32, []> = const() [val=dense<int32, []>(0)]
      %i, %y = while_loop(loop_vars=(%i0, %x)) {{
        block(%ci: tensor<int32, []>, %cy: tensor<fp32, [2]>) {{
          %three: tensor<int32, []> = const() [val=dense<int32, []>(3)]
          %go: tensor<bool, []> = less(x=%ci, y=%three)
        }} -> (%go)
        block(%bi: tensor<int32, []>, %by: tensor<fp32, [2]>) {{
          %one: tensor<int32, []> = const() [val=dense<int32, []>(1)]
          %ni: tensor<int32, []> = add(x=%bi, y=%one)
          %three_f: tensor<fp32, []> = const() [val=dense<fp32, []>(3.0)]
          %six: tensor<fp32, []> = mul(x=%two, y=%three_f)
          %ny: tensor<fp32, [2]> = mul(x=%by, y=%six)
        }} -> (%ni, %ny)
      }}
    }} -> (%y)""".replace("%i, %y = while_loop", "%i: tensor<int32, []>, %y: tensor<fp32, [2]> = while_loop"),
        FOLD, f"""{HEAD}(%x: tensor<fp32, [2]>) {{
      %i0: tensor<int32, []> = const() [val=dense<int32, []>(0)]
      %i: tensor<int32, []>, %y: tensor<fp32, [2]> = while_loop(loop_vars=(%i0, %x)) {{
        block(%ci: tensor<int32, []>, %cy: tensor<fp32, [2]>) {{
          %three: tensor<int32, []> = const() [val=dense<int32, []>(3)]
          %go: tensor<bool, []> = less(x=%ci, y=%three)
        }} -> (%go)
        block(%bi: tensor<int32, []>, %by: tensor<fp32, [2]>) {{
          %one: tensor<int32, []> = const() [val=dense<int32, []>(1)]
          %ni: tensor<int32, []> = add(x=%bi, y=%one)
          %six: tensor<fp32, []> = const() [val=dense<fp32, []>(6.0)]
          %ny: tensor<fp32, [2]> = mul(x=%by, y=%six)
        }} -> (%ni, %ny)
      }}
    }} -> (%y)""")


# -- select and cond -------------------------------------------------------------------------------


def _select(cond: str, a: str = "%a", b: str = "%b", shape: str = "[2]") -> str:
    return f"""{HEAD}(%a: tensor<fp32, [2]>, %b: tensor<fp32, {shape}>) {{
      %c: tensor<bool, [2]> = const() [val=dense<bool, [2]>({cond})]
      %s: tensor<fp32, [2]> = select(cond=%c, a={a}, b={b})
      %y: tensor<fp32, [2]> = relu(x=%s)
    }} -> (%y)"""


def test_select_with_an_all_true_or_all_false_condition_is_that_branch() -> None:
    assert_rewrites(_select("true, true"), FOLD, f"""{HEAD}(%a: tensor<fp32, [2]>, %b: tensor<fp32, [2]>) {{
      %y: tensor<fp32, [2]> = relu(x=%a)
    }} -> (%y)""")
    assert_rewrites(_select("false, false"), FOLD, f"""{HEAD}(%a: tensor<fp32, [2]>, %b: tensor<fp32, [2]>) {{
      %y: tensor<fp32, [2]> = relu(x=%b)
    }} -> (%y)""")


def test_select_with_a_mixed_condition_or_a_broadcast_branch_stays() -> None:
    assert_refuses(_select("true, false"), FOLD, "the condition mixes true and false ([True, False])")
    # b would be broadcast from [1] to [2]: it cannot stand for the select's result
    assert_refuses(_select("false, false", shape="[1]"), FOLD,
                   "the replacement of 's' has type tensor<fp32, [1]>, not tensor<fp32, [2]>")


def test_select_between_a_value_and_itself_is_that_value() -> None:
    text = f"""{HEAD}(%a: tensor<fp32, [2]>, %c: tensor<bool, [2]>) {{
      %s: tensor<fp32, [2]> = select(cond=%c, a=%a, b=%a)
      %y: tensor<fp32, [2]> = relu(x=%s)
    }} -> (%y)"""
    assert_rewrites(text, FOLD, f"""{HEAD}(%a: tensor<fp32, [2]>, %c: tensor<bool, [2]>) {{
      %y: tensor<fp32, [2]> = relu(x=%a)
    }} -> (%y)""")
    assert_refuses(text.replace("b=%a", "b=%c2").replace("%c: tensor<bool, [2]>)", "%c: tensor<bool, [2]>, "
                                                         "%c2: tensor<fp32, [2]>)"), FOLD, "is not 'a'")


def _cond(pred: str) -> str:
    return f"""{HEAD}(%x: tensor<fp32, [2]>) {{
      %p: tensor<bool, []> = const() [val=dense<bool, []>({pred})]
      %r: tensor<fp32, [2]> = cond(pred=%p) {{
        block() {{
          %two: tensor<fp32, []> = const() [val=dense<fp32, []>(2.0)]
          %t: tensor<fp32, [2]> = mul(x=%x, y=%two)
        }} -> (%t)
        block() {{
          %s: tensor<int32, [1]> = const() [val=dense<int32, [1]>(2)]
          %n: tensor<fp32, [2]> = random_uniform(shape=%s) [rng_key=0]
          %f: tensor<fp32, [2]> = sub(x=%x, y=%n)
        }} -> (%f)
      }}
      %y: tensor<fp32, [2]> = relu(x=%r)
    }} -> (%y)"""


def test_cond_with_a_constant_predicate_is_its_taken_block() -> None:
    assert_rewrites(_cond("true"), FOLD, f"""{HEAD}(%x: tensor<fp32, [2]>) {{
      %two: tensor<fp32, []> = const() [val=dense<fp32, []>(2.0)]
      %t: tensor<fp32, [2]> = mul(x=%x, y=%two)
      %y: tensor<fp32, [2]> = relu(x=%t)
    }} -> (%y)""")
    # the false block holds a random op: inlined, it keeps its stream key, so it draws the same
    assert_rewrites(_cond("false"), FOLD, f"""{HEAD}(%x: tensor<fp32, [2]>) {{
      %s: tensor<int32, [1]> = const() [val=dense<int32, [1]>(2)]
      %n: tensor<fp32, [2]> = random_uniform(shape=%s) [rng_key=0]
      %f: tensor<fp32, [2]> = sub(x=%x, y=%n)
      %y: tensor<fp32, [2]> = relu(x=%f)
    }} -> (%y)""")


def test_cond_with_a_run_time_predicate_stays() -> None:
    assert_refuses(_cond("true").replace(
        "%p: tensor<bool, []> = const() [val=dense<bool, []>(true)]",
        "%z: tensor<fp32, []> = const() [val=dense<fp32, []>(0.0)]\n"
        "      %sum: tensor<fp32, []> = reduce_sum(x=%x)\n"
        "      %p: tensor<bool, []> = greater(x=%sum, y=%z)"), FOLD, "'p' is not a constant (computed by greater)")


def test_nested_conds_inline_one_level_per_constant_predicate() -> None:
    def body(b, x):
        def outer_true(t):
            (inner,) = t.cond(t.const(np.bool_(False)), lambda u: [u.exp(x=x)], lambda v: [v.sin(x=x)])
            return [t.add(x=inner, y=np.float32(1))]

        (r,) = b.cond(b.const(np.bool_(True)), outer_true, lambda f: [f.cos(x=x)])
        return [r]

    prog = new_program({"x": tensor("fp32", (3,))}, body)
    feeds = {"x": np.array([0.5, -1.0, 2.0], np.float32)}
    want = run(prog, feeds)
    stats = FoldConstants().run(prog).stats
    verify(prog)
    assert stats["rewrites"]["cond_constant_predicate"] == 2
    assert op_histogram(prog) == {"sin": 1, "add": 1}
    np.testing.assert_array_equal(run(prog, feeds)["cond_0"], want["cond_0"])


# -- the tests/optimize sources: shape arithmetic and weight preparation folded, torch still agrees


# what folding leaves of the op types the shape arithmetic / weight preparation used (the rest of
# each program is computed at run time)
FOLDED = {
    # torch's flatten(1): shape, slice_by_index x2, concat, cast(int32 -> int32)
    "cnn_bn": {"shape": 0, "slice_by_index": 0, "concat": 0, "cast": 0},
    # 3 unflattens + flatten(2) and split_sizes = tile(...) with floor_div/mod; the one cast left is
    # fp32 -> fp32 on activations (torch's x / sqrt(d)), canonicalize's cast_same_dtype
    "transformer_block": {"shape": 0, "slice_by_index": 0, "concat": 0, "tile": 0, "floor_div": 0, "mod": 0,
                          "mul": 0, "cast": 1},
    # per layer: gate split/concat of the weights and biases, bias_ih + bias_hh, zero initial states
    "lstm": {"split": 0, "concat": 0, "squeeze": 0, "add": 0},
}


@pytest.mark.parametrize("name", sorted(FOLDED))
def test_source_programs_fold_and_still_match_torch(name: str, sources, tmp_path: Path) -> None:  # noqa: F811
    """Also written and read back: coremltools' loader (its own type inference) accepts the folded
    constants, and our reading of the file still matches torch."""
    from ..mil.helpers import CoremltoolsLoader

    src = sources[name]
    prog = converter.load(src.empty)
    const_bytes = _const_bytes(prog)
    PassManager([FoldConstants(), DeadCodeElimination()], fixed_point=True, verify_each=True).run(prog)
    after = op_histogram(prog)
    assert {k: after[k] for k in FOLDED[name]} == FOLDED[name], f"{name}: left {after}"
    assert _const_bytes(prog) <= const_bytes  # folding never inflated the model
    assert_matches_torch(converter.run(prog, src.feeds()), src.torch_outputs(), f"{name} (fold_constants)")
    path = converter.save(prog, tmp_path / f"{name}.mlpackage")
    CoremltoolsLoader().load(Path(path))
    assert_matches_torch(converter.run(converter.load(path), src.feeds()), src.torch_outputs(), f"{name} (saved)")
