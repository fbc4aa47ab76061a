"""Each canonicalization rule fires where it should (the IR after written out by hand) and refuses
its near misses with the reason (the pattern every rule test follows: see tests/passes/helpers.py).

Every rewrite here is an identity of arithmetic or of shapes (x + 0 = x, x * 1 = x, a cast to the
dtype x has, a reshape to the shape x has, reshape(reshape(x, a), b) = reshape(x, b)); the helper
also runs both programs on random inputs and requires bit-identical outputs.
"""

from __future__ import annotations

from converter.passes.canonicalize import (
    Canonicalize,
    add_zero,
    cast_same_dtype,
    mul_one,
    reshape_chain,
    reshape_same_shape,
)

from .helpers import assert_refuses, assert_rewrites

HEAD = "program\nfunc main<iOS17>"


def test_add_zero_fires_in_either_operand_order() -> None:
    assert_rewrites(f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
      %z: tensor<fp32, []> = const() [val=dense<fp32, []>(0.0)]
      %a: tensor<fp32, [2, 3]> = add(x=%z, y=%x)
      %b: tensor<fp32, [2, 3]> = add(x=%a, y=%z)
      %y: tensor<fp32, [2, 3]> = relu(x=%b)
    }} -> (%y)""", add_zero, f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
      %y: tensor<fp32, [2, 3]> = relu(x=%x)
    }} -> (%y)""")


def test_add_zero_refuses_a_zero_that_broadcasts_x_to_a_larger_type() -> None:
    # x + zeros([2, 3]) with x: [3] is a [2, 3] tensor: x cannot stand for it
    assert_refuses(f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %z: tensor<fp32, [2, 3]> = const() [val=dense<fp32, [2, 3]>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)]
      %y: tensor<fp32, [2, 3]> = add(x=%x, y=%z)
    }} -> (%y)""", add_zero, "has type tensor<fp32, [3]>, not tensor<fp32, [2, 3]>")


def test_add_zero_refuses_a_constant_that_is_not_zero() -> None:
    assert_refuses(f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %z: tensor<fp32, [3]> = const() [val=dense<fp32, [3]>(0.0, 1.0, 0.0)]
      %y: tensor<fp32, [3]> = add(x=%x, y=%z)
    }} -> (%y)""", add_zero, "is [0.0, 1.0, 0.0], not 0")


def test_add_zero_refuses_to_rename_a_function_output_to_an_input() -> None:
    assert_refuses(f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %z: tensor<fp32, []> = const() [val=dense<fp32, []>(0.0)]
      %y: tensor<fp32, [3]> = add(x=%x, y=%z)
    }} -> (%y)""", add_zero, "'y' is a function output and 'x' is an input")


def test_add_zero_at_a_function_output_renames_the_value_it_keeps() -> None:
    # the output keeps its name 'y': relu's result takes it
    assert_rewrites(f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %r: tensor<fp32, [3]> = relu(x=%x)
      %z: tensor<fp32, []> = const() [val=dense<fp32, []>(0.0)]
      %y: tensor<fp32, [3]> = add(x=%r, y=%z)
    }} -> (%y)""", add_zero, f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %y: tensor<fp32, [3]> = relu(x=%x)
    }} -> (%y)""")


def test_mul_one_fires_and_refuses_other_constants() -> None:
    assert_rewrites(f"""{HEAD}(%x: tensor<int32, [4]>) {{
      %one: tensor<int32, [4]> = const() [val=dense<int32, [4]>(1, 1, 1, 1)]
      %m: tensor<int32, [4]> = mul(x=%one, y=%x)
      %y: tensor<int32, [4]> = abs(x=%m)
    }} -> (%y)""", mul_one, f"""{HEAD}(%x: tensor<int32, [4]>) {{
      %y: tensor<int32, [4]> = abs(x=%x)
    }} -> (%y)""")
    assert_refuses(f"""{HEAD}(%x: tensor<fp32, [4]>) {{
      %two: tensor<fp32, []> = const() [val=dense<fp32, []>(2.0)]
      %m: tensor<fp32, [4]> = mul(x=%x, y=%two)
      %y: tensor<fp32, [4]> = abs(x=%m)
    }} -> (%y)""", mul_one, "is 2.0, not 1")


def test_cast_same_dtype_fires_and_refuses_a_real_cast() -> None:
    assert_rewrites(f"""{HEAD}(%x: tensor<fp16, [2]>) {{
      %d: tensor<string, []> = const() [val=dense<string, []>("fp16")]
      %c: tensor<fp16, [2]> = cast(x=%x, dtype=%d)
      %y: tensor<fp16, [2]> = exp(x=%c)
    }} -> (%y)""", cast_same_dtype, f"""{HEAD}(%x: tensor<fp16, [2]>) {{
      %y: tensor<fp16, [2]> = exp(x=%x)
    }} -> (%y)""")
    assert_refuses(f"""{HEAD}(%x: tensor<fp16, [2]>) {{
      %d: tensor<string, []> = const() [val=dense<string, []>("fp32")]
      %c: tensor<fp32, [2]> = cast(x=%x, dtype=%d)
      %y: tensor<fp32, [2]> = exp(x=%c)
    }} -> (%y)""", cast_same_dtype, "casts fp16 to fp32")


def test_reshape_same_shape_fires_with_symbols_and_refuses_a_real_reshape() -> None:
    assert_rewrites("""program
    symbols { n: [1, 8] }
    func main<iOS17>(%x: tensor<fp32, [n, 3]>) {
      %s: tensor<int32, [2]> = const() [val=dense<int32, [2]>(-1, 3)]
      %r: tensor<fp32, [n, 3]> = reshape(x=%x, shape=%s)
      %y: tensor<fp32, [n, 3]> = relu(x=%r)
    } -> (%y)""", reshape_same_shape, """program
    symbols { n: [1, 8] }
    func main<iOS17>(%x: tensor<fp32, [n, 3]>) {
      %y: tensor<fp32, [n, 3]> = relu(x=%x)
    } -> (%y)""")
    assert_refuses(f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
      %s: tensor<int32, [2]> = const() [val=dense<int32, [2]>(3, 2)]
      %r: tensor<fp32, [3, 2]> = reshape(x=%x, shape=%s)
      %y: tensor<fp32, [3, 2]> = relu(x=%r)
    }} -> (%y)""", reshape_same_shape, "reshapes [2, 3] to [3, 2]")


def test_reshape_chain_fires_and_keeps_an_inner_reshape_read_elsewhere() -> None:
    assert_rewrites(f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
      %s1: tensor<int32, [1]> = const() [val=dense<int32, [1]>(6)]
      %t: tensor<fp32, [6]> = reshape(x=%x, shape=%s1)
      %s2: tensor<int32, [2]> = const() [val=dense<int32, [2]>(3, -1)]
      %y: tensor<fp32, [3, 2]> = reshape(x=%t, shape=%s2)
      %u: tensor<fp32, [6]> = exp(x=%t)
    }} -> (%y, %u)""", reshape_chain, f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
      %s1: tensor<int32, [1]> = const() [val=dense<int32, [1]>(6)]
      %t: tensor<fp32, [6]> = reshape(x=%x, shape=%s1)
      %s2: tensor<int32, [2]> = const() [val=dense<int32, [2]>(3, -1)]
      %y: tensor<fp32, [3, 2]> = reshape(x=%x, shape=%s2)
      %u: tensor<fp32, [6]> = exp(x=%t)
    }} -> (%y, %u)""")


def test_reshape_chain_refuses_a_shape_that_copies_input_dims() -> None:
    # reshape's 0 copies a dim of its own input: [1, 6] with shape [0, -1] stays [1, 6]; x [2, 3]
    # with the same shape would stay [2, 3]
    assert_refuses("""program
    func main<iOS15>(%x: tensor<fp32, [2, 3]>) {
      %s1: tensor<int32, [2]> = const() [val=dense<int32, [2]>(1, 6)]
      %t: tensor<fp32, [1, 6]> = reshape(x=%x, shape=%s1)
      %s2: tensor<int32, [2]> = const() [val=dense<int32, [2]>(0, -1)]
      %y: tensor<fp32, [1, 6]> = reshape(x=%t, shape=%s2)
    } -> (%y)""", reshape_chain, "has 0s, which copy dims of the input")


def test_the_pass_reaches_a_fixed_point_through_rules_enabling_each_other() -> None:
    # mul_one exposes a reshape chain, whose result is a reshape to the same shape
    assert_rewrites(f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
      %s1: tensor<int32, [1]> = const() [val=dense<int32, [1]>(6)]
      %t: tensor<fp32, [6]> = reshape(x=%x, shape=%s1)
      %one: tensor<fp32, []> = const() [val=dense<fp32, []>(1.0)]
      %m: tensor<fp32, [6]> = mul(x=%t, y=%one)
      %s2: tensor<int32, [2]> = const() [val=dense<int32, [2]>(2, 3)]
      %r: tensor<fp32, [2, 3]> = reshape(x=%m, shape=%s2)
      %y: tensor<fp32, [2, 3]> = sigmoid(x=%r)
    }} -> (%y)""", Canonicalize(), f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
      %y: tensor<fp32, [2, 3]> = sigmoid(x=%x)
    }} -> (%y)""")
