"""Arithmetic identities (converter/passes/canonicalize/arithmetic.py): each rule fires (outputs
bit-identical on random inputs, the IR after written by hand) and refuses its near misses with the
reason. Exactness claims are also checked against numpy's fp32 arithmetic on edge values."""

from __future__ import annotations

import itertools

import numpy as np

from converter.ir.interpreter import run
from converter.ir.text import parse_program
from converter.passes.canonicalize import (
    Canonicalize,
    abs_of_bool_cast,
    div_one,
    div_to_mul,
    greater_of_bool_cast,
    linear_activation_add,
    linear_activation_mul,
    sub_zero,
)
from converter.passes.rewrite import apply_rules

from .helpers import assert_refuses, assert_rewrites

HEAD = "program\nfunc main<iOS17>"
X = "%x: tensor<fp32, [2, 3]>"


def _prog(inputs: str, body: str, outputs: str) -> str:
    return f"{HEAD}({inputs}) {{\n{body}\n}} -> ({outputs})"


def _f(name: str, *vals: float, shape: str | None = None) -> str:
    shape = shape if shape is not None else ("[]" if len(vals) == 1 else f"[{len(vals)}]")
    return f"%{name}: tensor<fp32, {shape}> = const() [val=dense<fp32, {shape}>({', '.join(map(repr, vals))})]"


RELU = _prog(X, "%y: tensor<fp32, [2, 3]> = relu(x=%x)", "%y")


def _binary_then_relu(op: str, const: str) -> str:
    return _prog(X, f"""{const}
      %s: tensor<fp32, [2, 3]> = {op}(x=%x, y=%c)
      %y: tensor<fp32, [2, 3]> = relu(x=%s)""", "%y")


def test_sub_zero_fires_and_refuses_a_negative_zero() -> None:
    assert_rewrites(_binary_then_relu("sub", _f("c", 0.0, 0.0, 0.0)), sub_zero, RELU)
    assert_refuses(_binary_then_relu("sub", _f("c", -0.0)), sub_zero, "x - (-0.0) turns -0.0 into +0.0")
    assert_refuses(_binary_then_relu("sub", _f("c", 0.0, 0.5, 0.0)), sub_zero, "is [0.0, 0.5, 0.0], not 0")


def test_div_one_fires_and_refuses_another_divisor() -> None:
    assert_rewrites(_binary_then_relu("real_div", _f("c", 1.0)), div_one, RELU)
    assert_refuses(_binary_then_relu("real_div", _f("c", 2.0)), div_one, "is 2.0, not 1")


def test_div_to_mul_fires_for_powers_of_two() -> None:
    assert_rewrites(_binary_then_relu("real_div", _f("c", 4.0, -0.5, 0.125)), div_to_mul, _prog(X, f"""
      {_f("r", 0.25, -2.0, 8.0)}
      %s: tensor<fp32, [2, 3]> = mul(x=%x, y=%r)
      %y: tensor<fp32, [2, 3]> = relu(x=%s)""", "%y"))


def test_div_to_mul_refuses_inexact_reciprocals_and_integer_division() -> None:
    assert_refuses(_binary_then_relu("real_div", _f("c", 4.0, 3.0, 0.5)), div_to_mul,
                   "1/3.0 is not exact in fp32: x * (1/c) would round differently from x / c")
    assert_refuses(_binary_then_relu("real_div", _f("c", 2.0 ** -130)), div_to_mul, "is not exact")  # 2^130 overflows
    assert_refuses(_prog("%x: tensor<int32, [2]>", """
      %c: tensor<int32, []> = const() [val=dense<int32, []>(2)]
      %y: tensor<int32, [2]> = real_div(x=%x, y=%c)""", "%y"), div_to_mul, "integer division truncates")


def _edge_fp32() -> np.ndarray:
    rng = np.random.default_rng(7)
    tiny = np.array([1e-45, -1e-45, 1.2e-38, 3e-39, 0.0, -0.0, np.inf, -np.inf, np.nan, 3.4e38, -3.4e38], np.float32)
    return np.concatenate([tiny, rng.standard_normal(4000).astype(np.float32) * 10.0 ** rng.integers(-30, 30, 4000)
                           .astype(np.float32)]).astype(np.float32)


def test_the_division_rule_is_exact_for_powers_of_two_and_not_for_three_in_numpy() -> None:
    # the claim behind div_to_mul's check, in numpy's own fp32 arithmetic: x / 2^k == x * 2^-k bit
    # for bit (subnormals included), while x / 3 and x * fl(1/3) differ in the last bit for many x
    x = _edge_fp32()
    with np.errstate(all="ignore"):
        for c in (4.0, -0.5, 2.0 ** -20, 2.0 ** 100):
            c32 = np.float32(c)
            np.testing.assert_array_equal((x / c32).view(np.int32), (x * (np.float32(1) / c32)).view(np.int32))
        differ = np.count_nonzero(x / np.float32(3) != x * (np.float32(1) / np.float32(3)))
    assert differ > 100


def _bool_prog(threshold: float, abs_op: bool = True) -> str:
    inner = "%a: tensor<fp32, []> = abs(x=%s)" if abs_op else ""
    return _prog("%u: tensor<fp32, [1]>, %v: tensor<fp32, [1]>", f"""
      %b: tensor<bool, [1]> = less(x=%u, y=%v)
      %d: tensor<string, []> = const() [val=dense<string, []>("fp32")]
      %c: tensor<fp32, [1]> = cast(x=%b, dtype=%d)
      %shape: tensor<int32, [0]> = const() [val=dense<int32, [0]>()]
      %s: tensor<fp32, []> = reshape(x=%c, shape=%shape)
      {inner}
      {_f("t", threshold)}
      %y: tensor<bool, []> = greater(x=%{"a" if abs_op else "s"}, y=%t)""", "%y, %c")


def test_a_neuralnetwork_loop_condition_on_a_bool_is_the_bool() -> None:
    # greater(abs(reshape(cast(b, fp32), [])), 1e-6): what our NN frontend makes of a loop condition
    assert_rewrites(_bool_prog(1e-6), Canonicalize(), _prog("%u: tensor<fp32, [1]>, %v: tensor<fp32, [1]>", """
      %b: tensor<bool, [1]> = less(x=%u, y=%v)
      %d: tensor<string, []> = const() [val=dense<string, []>("fp32")]
      %c: tensor<fp32, [1]> = cast(x=%b, dtype=%d)
      %shape: tensor<int32, [0]> = const() [val=dense<int32, [0]>()]
      %y: tensor<bool, []> = reshape(x=%b, shape=%shape)""", "%y, %c"))


def test_abs_of_bool_cast_fires_and_refuses_a_cast_of_numbers() -> None:
    assert_rewrites(_prog("%b: tensor<bool, [3]>", """
      %d: tensor<string, []> = const() [val=dense<string, []>("int32")]
      %c: tensor<int32, [3]> = cast(x=%b, dtype=%d)
      %a: tensor<int32, [3]> = abs(x=%c)
      %y: tensor<int32, [3]> = mul(x=%a, y=%a)""", "%y"), abs_of_bool_cast, _prog("%b: tensor<bool, [3]>", """
      %d: tensor<string, []> = const() [val=dense<string, []>("int32")]
      %c: tensor<int32, [3]> = cast(x=%b, dtype=%d)
      %y: tensor<int32, [3]> = mul(x=%c, y=%c)""", "%y"))
    assert_refuses(_prog("%x: tensor<fp16, [3]>", """
      %d: tensor<string, []> = const() [val=dense<string, []>("fp32")]
      %c: tensor<fp32, [3]> = cast(x=%x, dtype=%d)
      %y: tensor<fp32, [3]> = abs(x=%c)""", "%y"), abs_of_bool_cast, "'c' is not a cast of a bool")


def test_greater_of_bool_cast_refuses_a_threshold_of_one() -> None:
    assert_refuses(_bool_prog(1.0, abs_op=False), greater_of_bool_cast, "the threshold 1.0 is not one value in [0, 1)")


def test_greater_of_bool_cast_refuses_to_copy_a_reshape_read_elsewhere() -> None:
    text = _bool_prog(0.5, abs_op=False).replace("-> (%y, %c)", "-> (%y, %s)")
    assert_refuses(text, greater_of_bool_cast, "reshape 's' is read elsewhere")


def _la(alpha: float, beta: float, op: str, c: str) -> str:
    return _prog(X, f"""{_f("al", alpha)}
      {_f("be", beta)}
      %n: tensor<fp32, [2, 3]> = linear_activation(x=%x, alpha=%al, beta=%be)
      {c}
      %y: tensor<fp32, [2, 3]> = {op}(x=%n, y=%c)""", "%y")


def _la_after(alpha: str, beta: str) -> str:
    return _prog(X, f"""{alpha}
      {beta}
      %y: tensor<fp32, [2, 3]> = linear_activation(x=%x, alpha=%al, beta=%be)""", "%y")


def test_linear_activation_add_merges_the_gru_update_gate() -> None:
    # coremltools' NN GRU: 1 - z written as linear_activation(z, -1, 0) + 1
    before = _la(-1.0, 0.0, "add", _f("c", 1.0, shape="[1]"))
    prog = assert_rewrites(before, linear_activation_add, _la_after(_f("al", -1.0), _f("be", 1.0)))
    x = np.array([[0.1, -2.5, 3e-8], [7.0, 1.0, -0.0]], np.float32)
    np.testing.assert_array_equal(run(prog, {"x": x})["y"], np.float32(1) - x)  # numpy's fp32 1 - x


def test_linear_activation_sub_merges_into_minus_c() -> None:
    assert_rewrites(_la(1.0, 0.0, "sub", _f("c", 0.375)), linear_activation_add,
                    _la_after(_f("al", 1.0), _f("be", -0.375)))


def test_linear_activation_add_refuses_a_rounded_linear_activation() -> None:
    assert_refuses(_la(1.5, 0.25, "add", _f("c", 0.75)), linear_activation_add,
                   "linear_activation(alpha=1.5, beta=0.25) rounds alpha*x + beta before the add")
    assert_refuses(_la(-1.0, 0.0, "add", _f("c", 0.5, 1.0, 2.0, shape="[3]")), linear_activation_add,
                   "'c' is not one value")


def test_linear_activation_mul_by_minus_one_negates_both_parameters() -> None:
    prog = assert_rewrites(_la(1.5, 0.25, "mul", _f("c", -1.0)), linear_activation_mul,
                           _la_after(_f("al", -1.5), _f("be", -0.25)))
    x = np.array([[0.1, -2.5, 3e-8], [7.0, 1.0, 1e30]], np.float32)
    want = -(np.float32(1.5) * x.astype(np.float64) + 0.25).astype(np.float32)
    np.testing.assert_array_equal(run(prog, {"x": x})["y"], want)


def test_linear_activation_mul_scales_a_negation() -> None:
    assert_rewrites(_la(-1.0, 0.0, "mul", _f("c", 2.5)), linear_activation_mul,
                    _la_after(_f("al", -2.5), _f("be", 0.0)))


def test_linear_activation_mul_refuses_a_rounded_linear_activation() -> None:
    assert_refuses(_la(1.5, 0.25, "mul", _f("c", 2.0)), linear_activation_mul,
                   "linear_activation(alpha=1.5, beta=0.25) rounds alpha*x + beta before the mul")


def test_parse_of_the_loop_condition_program_runs() -> None:
    # the bool program is valid on its own (guards the text of the tests above)
    out = run(parse_program(_bool_prog(1e-6)), {"u": np.array([1.0], np.float32), "v": np.array([2.0], np.float32)})
    assert bool(out["y"]) is True


EDGES = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3.4e38, -3.4e38, 0.1],
                 np.float32).reshape(2, 6)


def _la_edge_prog(alpha: float, beta: float, op: str, c: float) -> str:
    return _prog("%x: tensor<fp32, [2, 6]>", f"""{_f("al", alpha)}
      {_f("be", beta)}
      %n: tensor<fp32, [2, 6]> = linear_activation(x=%x, alpha=%al, beta=%be)
      {_f("c", c)}
      %y: tensor<fp32, [2, 6]> = {op}(x=%n, y=%c)""", "%y")


def test_linear_activation_merges_agree_on_infinities_nans_overflow_and_subnormals() -> None:
    # every combination either is refused or computes the same values (zeros' signs aside, see
    # the module docstring) on edge inputs, not only on random_feeds' normal ones
    fired = 0
    for alpha, beta, op, c in itertools.product([1.0, -1.0, 1.5, -0.75], [0.0, -0.0, 0.25], ["add", "sub", "mul"],
                                                [2.5, -2.5, 0.0, -1.0, 1e30, 1e-30]):
        prog = parse_program(_la_edge_prog(alpha, beta, op, c))
        want = run(prog, {"x": EDGES})["y"]
        if not apply_rules(prog, [linear_activation_add, linear_activation_mul]).total:
            continue
        fired += 1
        np.testing.assert_array_equal(run(prog, {"x": EDGES})["y"], want, err_msg=f"{alpha} {beta} {op} {c}")
    # add/sub fire for alpha = +-1, beta = +-0 (2 x 2 x 6 constants x 2 ops = 48); mul for those
    # (2 x 2 x 6 = 24) and, with k = -1, for the other 8 (alpha, beta) pairs
    assert fired == 48 + 24 + 8
