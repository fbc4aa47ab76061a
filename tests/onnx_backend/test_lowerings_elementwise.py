"""Elementwise math, comparisons, logic and cast through the ONNX backend, run by onnxruntime,
against numpy formulas of the MIL definitions written here, and against our interpreter. The
integer cases pin where MIL and ONNX differ (floor_div floors, ONNX Div truncates; mod takes the
divisor's sign; cast from float saturates and maps NaN to 0)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from .helpers import assert_close, only, program, run_both

A = np.array([[-2.5, -1.0, 0.0, 0.75], [1.5, 3.0, -0.25, 2.0]], np.float32)
B = np.array([0.5, -1.5, 2.0, 1.25], np.float32)  # broadcast over rows
a64, b64 = A.astype(np.float64), B.astype(np.float64)

BINARY = {
    "add": a64 + b64, "sub": a64 - b64, "mul": a64 * b64, "real_div": a64 / b64,
    "maximum": np.maximum(a64, b64), "minimum": np.minimum(a64, b64),
    "floor_div": np.floor(a64 / b64), "mod": a64 - np.floor(a64 / b64) * b64,
}
COMPARE = {"equal": a64 == b64, "not_equal": a64 != b64, "greater": a64 > b64, "greater_equal": a64 >= b64,
           "less": a64 < b64, "less_equal": a64 <= b64}


@pytest.mark.parametrize("op", sorted(BINARY))
def test_float_binary(op: str) -> None:
    prog = program({"a": A, "b": B}, lambda bb, a, b: getattr(bb, op)(x=a, y=b))
    got, interp = run_both(prog, {"a": A, "b": B})
    assert_close(only(got), BINARY[op], 1e-6)
    assert_close(only(got), only(interp), 1e-6)


@pytest.mark.parametrize("op", sorted(COMPARE))
def test_comparisons(op: str) -> None:
    a = np.array([[1.0, 2.0, 3.0, -1.0], [2.0, -1.5, 0.0, 5.0]], np.float32)
    b = np.array([2.0, -1.5, 3.0, 0.0], np.float32)  # equal values at [0, 2] and [1, 1]
    prog = program({"a": a, "b": b}, lambda bb, a, b: getattr(bb, op)(x=a, y=b))
    got, interp = run_both(prog, {"a": a, "b": b})
    want = {"equal": a == b, "not_equal": a != b, "greater": a > b, "greater_equal": a >= b, "less": a < b,
            "less_equal": a <= b}[op]
    np.testing.assert_array_equal(only(got), want)
    np.testing.assert_array_equal(only(got), only(interp))


@pytest.mark.parametrize("op", ["logical_and", "logical_or", "logical_xor"])
def test_logical(op: str) -> None:
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    prog = program({"a": a, "b": b}, lambda bb, a, b: getattr(bb, op)(x=a, y=b))
    got, _ = run_both(prog, {"a": a, "b": b})
    want = {"logical_and": [True, False, False, False], "logical_or": [True, True, True, False],
            "logical_xor": [False, True, True, False]}[op]
    np.testing.assert_array_equal(only(got), want)
    prog = program({"a": a}, lambda bb, a: bb.logical_not(x=a))
    np.testing.assert_array_equal(only(run_both(prog, {"a": a})[0]), [False, False, True, True])


# every sign combination, exact multiples and zero numerators
IX = np.array([-7, 7, -7, 7, 6, -6, 0, -1, 9, -9], np.int32)
IY = np.array([2, -2, -2, 2, 3, 3, 5, 4, -4, -4], np.int32)


def test_int_floor_div_floors() -> None:
    """MIL floor_div floors (Python //); ONNX's integer Div truncates (-7 / 2 = -3 there)."""
    prog = program({"x": IX, "y": IY}, lambda b, x, y: b.floor_div(x=x, y=y))
    got, interp = run_both(prog, {"x": IX, "y": IY})
    want = np.array([math.floor(int(a) / int(b)) for a, b in zip(IX, IY)], np.int32)
    np.testing.assert_array_equal(only(got), want)
    np.testing.assert_array_equal(only(got), only(interp))
    assert only(got).dtype == np.int32


def test_int_mod_takes_divisor_sign() -> None:
    prog = program({"x": IX, "y": IY}, lambda b, x, y: b.mod(x=x, y=y))
    got, interp = run_both(prog, {"x": IX, "y": IY})
    want = np.array([int(a) - math.floor(int(a) / int(b)) * int(b) for a, b in zip(IX, IY)], np.int32)
    np.testing.assert_array_equal(only(got), want)
    np.testing.assert_array_equal(only(got), only(interp))


def test_float_mod_takes_divisor_sign() -> None:
    x = np.array([-7.5, 7.5, -7.5, 7.5, 6.0, -6.0, 0.0, 5.25], np.float32)
    y = np.array([2.0, -2.0, -2.0, 2.0, 3.0, 3.0, 1.5, -0.5], np.float32)
    prog = program({"x": x, "y": y}, lambda b, x, y: b.mod(x=x, y=y))
    got, interp = run_both(prog, {"x": x, "y": y})
    want = [float(a) - math.floor(float(a) / float(b)) * float(b) for a, b in zip(x, y)]
    assert_close(only(got), want, 1e-6)
    assert_close(only(got), only(interp), 1e-6)


def test_int_real_div_truncates() -> None:
    """MIL real_div of int32: the real quotient converted back to int32 (toward zero)."""
    prog = program({"x": IX, "y": IY}, lambda b, x, y: b.real_div(x=x, y=y))
    got, interp = run_both(prog, {"x": IX, "y": IY})
    want = np.array([math.trunc(int(a) / int(b)) for a, b in zip(IX, IY)], np.int32)
    np.testing.assert_array_equal(only(got), want)
    np.testing.assert_array_equal(only(got), only(interp))


def test_int_arithmetic_and_pow() -> None:
    x = np.array([3, -2, 5, 0], np.int32)
    y = np.array([2, 3, 0, 4], np.int32)
    for op, want in (("pow", [9, -8, 1, 0]), ("add", [5, 1, 5, 4]), ("mul", [6, -6, 0, 0]),
                     ("maximum", [3, 3, 5, 4]), ("sub", [1, -5, 5, -4])):
        prog = program({"x": x, "y": y}, lambda b, x, y, op=op: getattr(b, op)(x=x, y=y))
        got, interp = run_both(prog, {"x": x, "y": y})
        np.testing.assert_array_equal(only(got), np.array(want, np.int32), err_msg=op)
        np.testing.assert_array_equal(only(got), only(interp), err_msg=op)


def test_float_pow() -> None:
    x = np.array([2.0, 9.0, 0.5, 3.0], np.float32)
    y = np.array([3.0, 0.5, -2.0, 0.0], np.float32)
    prog = program({"x": x, "y": y}, lambda b, x, y: b.pow(x=x, y=y))
    assert_close(only(run_both(prog, {"x": x, "y": y})[0]), [8.0, 3.0, 4.0, 1.0], 1e-6)


U = np.array([[-0.9, -0.35, 0.0, 0.2], [0.45, 0.6, -0.5, 0.85]], np.float32)
u64 = U.astype(np.float64)
UNARY = {
    "abs": np.abs(u64), "acos": np.arccos(u64), "asin": np.arcsin(u64), "atan": np.arctan(u64),
    "atanh": np.arctanh(u64), "ceil": np.ceil(u64), "cos": np.cos(u64), "cosh": np.cosh(u64),
    "erf": np.vectorize(math.erf)(u64), "exp": np.exp(u64), "exp2": 2.0**u64, "floor": np.floor(u64),
    "sign": np.sign(u64), "sin": np.sin(u64), "sinh": np.sinh(u64), "sqrt": np.sqrt(np.abs(u64)),
    "square": u64 * u64, "tan": np.tan(u64), "tanh": np.tanh(u64),
}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_float_unary(op: str) -> None:
    x = np.abs(U) if op == "sqrt" else U
    prog = program({"x": x}, lambda b, x: getattr(b, op)(x=x))
    got, interp = run_both(prog, {"x": x})
    assert_close(only(got), UNARY[op], 1e-6)
    assert_close(only(got), only(interp), 1e-6)


def test_round_half_to_even() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6], np.float32)
    prog = program({"x": x}, lambda b, x: b.round(x=x))
    got, _ = run_both(prog, {"x": x})
    np.testing.assert_array_equal(only(got), np.array([0, 2, 2, 0, -2, 2, -3], np.float32))


@pytest.mark.parametrize(("op", "eps", "formula"), [
    ("log", 0.25, lambda x: np.log(x + 0.25)),
    ("inverse", 0.5, lambda x: 1.0 / (x + 0.5)),
    ("rsqrt", 0.125, lambda x: 1.0 / np.sqrt(x + 0.125)),
])
def test_epsilon_ops(op: str, eps: float, formula) -> None:  # noqa: ANN001
    x = np.array([0.0, 0.5, 2.0, 7.5], np.float32)
    prog = program({"x": x}, lambda b, x: getattr(b, op)(x=x, epsilon=eps))
    got, interp = run_both(prog, {"x": x})
    assert_close(only(got), formula(x.astype(np.float64)), 1e-6)
    assert_close(only(got), only(interp), 1e-6)


def test_log_default_epsilon_at_zero() -> None:
    """MIL's default epsilon 1e-45 is fp32's smallest subnormal: log(0 + eps) is finite."""
    x = np.array([0.0, 1.0], np.float32)
    prog = program({"x": x}, lambda b, x: b.log(x=x))
    got, interp = run_both(prog, {"x": x})
    assert_close(only(got), [math.log(float(np.float32(1e-45))), 0.0], 1e-6)
    assert_close(only(got), only(interp), 1e-6)


def test_int_unary() -> None:
    x = np.array([-3, 0, 4, -1], np.int32)
    for op, want in (("abs", [3, 0, 4, 1]), ("sign", [-1, 0, 1, -1]), ("square", [9, 0, 16, 1])):
        prog = program({"x": x}, lambda b, x, op=op: getattr(b, op)(x=x))
        np.testing.assert_array_equal(only(run_both(prog, {"x": x})[0]), np.array(want, np.int32), err_msg=op)


def test_int_exp2_truncates_and_saturates() -> None:
    x = np.array([-2, 0, 3, 30, 31, 40], np.int32)
    prog = program({"x": x}, lambda b, x: b.exp2(x=x))
    got, interp = run_both(prog, {"x": x})
    np.testing.assert_array_equal(only(got), np.array([0, 1, 8, 2**30, 2**31 - 1, 2**31 - 1], np.int32))
    np.testing.assert_array_equal(only(got), only(interp))


def test_clip_and_threshold() -> None:
    prog = program({"x": A}, lambda b, x: b.clip(x=x, alpha=-0.5, beta=1.75))
    assert_close(only(run_both(prog, {"x": A})[0]), np.clip(a64, -0.5, 1.75), 0)
    prog = program({"x": A}, lambda b, x: b.threshold(x=x, alpha=0.3))
    np.testing.assert_array_equal(only(run_both(prog, {"x": A})[0]), np.maximum(A, np.float32(0.3)))


def test_clip_with_alpha_above_beta_is_beta() -> None:
    """iOS15 accepts alpha > beta: min(max(x, alpha), beta) is beta everywhere."""
    prog = program({"x": A}, lambda b, x: b.clip(x=x, alpha=1.0, beta=-1.0), opset="iOS15")
    got, interp = run_both(prog, {"x": A})
    np.testing.assert_array_equal(only(got), np.full(A.shape, -1.0, np.float32))
    np.testing.assert_array_equal(only(got), only(interp))


# -- cast ---------------------------------------------------------------------------------------------

F = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.7, -2.7, 2147483520.0, 2147483648.0, -2147483648.0, 0.0],
             np.float32)


def test_cast_float_to_int32_truncates_saturates_nan_to_zero() -> None:
    prog = program({"x": F}, lambda b, x: b.cast(x=x, dtype="int32"))
    got, interp = run_both(prog, {"x": F})
    big, small = 2**31 - 1, -(2**31)
    want = np.array([0, big, small, big, small, 2, -2, 2147483520, big, small, 0], np.int32)
    np.testing.assert_array_equal(only(got), want)
    np.testing.assert_array_equal(only(got), only(interp))


@pytest.mark.parametrize(("to", "lo", "hi"), [("int8", -128, 127), ("uint8", 0, 255), ("int16", -32768, 32767),
                                              ("uint16", 0, 65535)])
def test_cast_float_to_narrow_ints(to: str, lo: int, hi: int) -> None:
    x = np.array([np.nan, 1e6, -1e6, 100.9, -100.9, 7.5], np.float32)
    prog = program({"x": x}, lambda b, x: b.cast(x=x, dtype=to))
    got, interp = run_both(prog, {"x": x})
    want = np.array([0, hi, lo, min(100, hi), max(-100, lo), 7], np.dtype(to))
    np.testing.assert_array_equal(only(got), want)
    np.testing.assert_array_equal(only(got), only(interp))


def test_cast_fp16_to_int16_saturates_exactly() -> None:
    """fp16 cannot hold 32767 (it rounds to 32768): the bounds are applied in float32."""
    x = np.array([65504.0, -65504.0, 32767.0, 1234.0], np.float16)
    prog = program({"x": x}, lambda b, x: b.cast(x=x, dtype="int16"))
    got, _ = run_both(prog, {"x": x})
    np.testing.assert_array_equal(only(got), np.array([32767, -32768, 32767, 1234], np.int16))


def test_cast_other_directions() -> None:
    x = np.array([np.nan, 0.0, -0.0, 2.5], np.float32)
    prog = program({"x": x}, lambda b, x: b.cast(x=x, dtype="bool"))
    np.testing.assert_array_equal(only(run_both(prog, {"x": x})[0]), [True, False, False, True])
    i = np.array([300, -129, 5], np.int32)
    prog = program({"x": i}, lambda b, x: b.cast(x=x, dtype="uint8"))
    np.testing.assert_array_equal(only(run_both(prog, {"x": i})[0]), np.array([44, 127, 5], np.uint8))
    prog = program({"x": i}, lambda b, x: b.cast(x=x, dtype="fp16"))
    got = only(run_both(prog, {"x": i})[0])
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, np.array([300, -129, 5], np.float16))


SPECIAL = np.array([np.nan, 1.0, -1.0, np.inf, -np.inf, 0.0], np.float32)
SPECIAL_Y = np.array([0.5, np.nan, 0.0, 1.0, 2.0, -0.0], np.float32)


@pytest.mark.parametrize(("op", "params"), [
    ("maximum", None), ("minimum", None), ("floor_div", None), ("mod", None), ("clip", {"alpha": -0.5, "beta": 0.5}),
    ("threshold", {"alpha": 0.3}), ("relu", {}), ("relu6", {}), ("clamped_relu", {"alpha": 0.1, "beta": 0.5}),
    ("leaky_relu", {"alpha": 0.1}), ("sigmoid_hard", {"alpha": 0.2, "beta": 0.5}), ("thresholded_relu", {"alpha": 0.5}),
    ("elu", {"alpha": 1.0}), ("softplus", {}), ("silu", {}), ("sign", {}),
])
def test_nan_and_infinities_agree_with_the_interpreter(op: str, params: dict | None) -> None:
    """NaN stays NaN and infinities go where MIL's formulas send them (cross-runtime check)."""
    if params is None:
        prog = program({"x": SPECIAL, "y": SPECIAL_Y}, lambda b, x, y: getattr(b, op)(x=x, y=y))
        feeds = {"x": SPECIAL, "y": SPECIAL_Y}
    else:
        prog = program({"x": SPECIAL}, lambda b, x: getattr(b, op)(x=x, **params))
        feeds = {"x": SPECIAL}
    got, interp = run_both(prog, feeds)
    g, i = only(got).astype(np.float64), only(interp).astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(i))
    np.testing.assert_allclose(g[~np.isnan(g)], i[~np.isnan(i)], rtol=1e-6)
