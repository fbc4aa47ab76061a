"""Elementwise lowerings (binary, unary, clip, cast, identity) of the NeuralNetwork backend.

Each program is written as a .mlmodel, read back by the NeuralNetwork frontend and run; the oracle
is a numpy formula written here from the op's definition (MIL semantics: the IR kernels' docstrings
in converter/ir/ops). The layer kinds are pinned too, so a lowering that silently takes another
path (a loadConstantND more, a missing scalar form) fails.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.nn_backend.helpers import assert_close, layer_kinds, program, run_nn

f32 = np.float32
X = np.array([[-2.5, -1.0, -0.5, 0.0], [0.5, 1.0, 2.0, 3.5], [-3.0, 0.25, 4.0, -0.75]], f32)  # (3, 4)
Y = np.array([1.5, -2.0, 0.75, -0.5], f32)  # (4,): broadcast over the rows of X
COPY = Counter({"activation": 1})  # the linear layer copying a value into an output feature named otherwise


def _run(tmp_path: Path, feeds: dict, body, opset: str = "iOS15") -> tuple[dict, Counter]:
    path = tmp_path / "m.mlmodel"
    got = run_nn(program(feeds, body, opset=opset), feeds, path)
    return got, layer_kinds(path)


# ---------------------------------------------------------------------------------------------
# binary ops on two tensors (broadcasting)

ARITHMETIC = {
    "add": (lambda x, y: x + y, "addBroadcastable"),
    "sub": (lambda x, y: x - y, "subtractBroadcastable"),
    "mul": (lambda x, y: x * y, "multiplyBroadcastable"),
    "real_div": (lambda x, y: x / y, "divideBroadcastable"),
    "floor_div": (lambda x, y: np.floor(x / y), "floorDivBroadcastable"),
    "mod": (lambda x, y: x - np.floor(x / y) * y, "modBroadcastable"),  # the divisor's sign
    "maximum": (lambda x, y: np.where(x > y, x, y), "maxBroadcastable"),
    "minimum": (lambda x, y: np.where(x < y, x, y), "minBroadcastable"),
}


@pytest.mark.parametrize("op", sorted(ARITHMETIC))
def test_binary_arithmetic_broadcasts(tmp_path: Path, op: str) -> None:
    formula, kind = ARITHMETIC[op]
    got, kinds = _run(tmp_path, {"x": X, "y": Y}, lambda b, x, y: getattr(b, op)(x=x, y=y, name="out"))
    assert_close(got["out"], formula(X.astype(np.float64), Y.astype(np.float64)))
    assert kinds == Counter({kind: 1})


def test_pow_of_two_tensors(tmp_path: Path) -> None:
    base = np.abs(X) + f32(0.5)  # positive: a real power
    got, kinds = _run(tmp_path, {"x": base, "y": Y}, lambda b, x, y: b.pow(x=x, y=y, name="out"))
    assert_close(got["out"], np.exp(Y.astype(np.float64) * np.log(base.astype(np.float64))))
    assert kinds == Counter({"powBroadcastable": 1})


COMPARISONS = {
    "equal": (lambda x, y: x == y, "equal"), "not_equal": (lambda x, y: x != y, "notEqual"),
    "less": (lambda x, y: x < y, "lessThan"), "less_equal": (lambda x, y: x <= y, "lessEqual"),
    "greater": (lambda x, y: x > y, "greaterThan"), "greater_equal": (lambda x, y: x >= y, "greaterEqual"),
}
# rows of XC equal to, above and below YC in places, so < and <= (> and >=) differ
XC = np.array([[1.5, -2.0, 0.0, 1.0], [2.0, -3.0, 0.75, -0.5]], f32)
YC = np.array([1.5, -2.5, 0.75, -0.5], f32)


@pytest.mark.parametrize("op", sorted(COMPARISONS))
def test_comparison_of_two_tensors_is_one_or_zero(tmp_path: Path, op: str) -> None:
    formula, kind = COMPARISONS[op]

    def body(b, x, y):
        return b.cast(x=getattr(b, op)(x=x, y=y), dtype="fp32", name="out")

    got, kinds = _run(tmp_path, {"x": XC, "y": YC}, body)
    np.testing.assert_array_equal(got["out"], formula(XC, YC).astype(f32))
    assert kinds == Counter({kind: 1}) + COPY


@pytest.mark.parametrize("op, formula, kind", [
    ("logical_and", np.logical_and, "logicalAnd"), ("logical_or", np.logical_or, "logicalOr"),
    ("logical_xor", np.logical_xor, "logicalXor"),
])
def test_logical_binary(tmp_path: Path, op: str, formula, kind: str) -> None:
    def body(b, x, y):
        px, py = b.greater(x=x, y=f32(0)), b.greater(x=y, y=f32(0))
        return b.cast(x=getattr(b, op)(x=px, y=py), dtype="fp32", name="out")

    got, kinds = _run(tmp_path, {"x": XC, "y": YC}, body)
    np.testing.assert_array_equal(got["out"], formula(XC > 0, YC > 0).astype(f32))
    assert kinds == Counter({kind: 1, "greaterThan": 2}) + COPY


def test_logical_not(tmp_path: Path) -> None:
    def body(b, x):
        return b.cast(x=b.logical_not(x=b.greater(x=x, y=f32(0))), dtype="fp32", name="out")

    got, kinds = _run(tmp_path, {"x": X}, body)
    np.testing.assert_array_equal(got["out"], (X <= 0).astype(f32))
    assert kinds == Counter({"logicalNot": 1, "greaterThan": 1}) + COPY


# ---------------------------------------------------------------------------------------------
# binary ops with a scalar constant: the layer's parameter instead of a constant blob

SCALAR_FORMS = [
    # (op, scalar on the left?, scalar, formula, layer kinds)
    ("add", False, 2.5, lambda x: x + 2.5, {"add": 1}),
    ("add", True, 2.5, lambda x: 2.5 + x, {"add": 1}),
    ("sub", False, 2.5, lambda x: x - 2.5, {"add": 1}),
    ("sub", True, 2.5, lambda x: 2.5 - x, {"subtractBroadcastable": 1, "loadConstantND": 1}),
    ("mul", False, -3.0, lambda x: x * -3.0, {"multiply": 1}),
    ("mul", True, -3.0, lambda x: -3.0 * x, {"multiply": 1}),
    ("real_div", False, 4.0, lambda x: x / 4.0, {"multiply": 1}),  # 1/4 exact: x * 0.25 == x / 4
    ("real_div", False, 3.0, lambda x: x / 3.0, {"divideBroadcastable": 1, "loadConstantND": 1}),
    ("real_div", True, 3.0, lambda x: 3.0 / x, {"divideBroadcastable": 1, "loadConstantND": 1}),
    ("pow", False, 3.0, lambda x: x**3, {"unary": 1}),
    ("maximum", False, 0.5, lambda x: np.maximum(x, 0.5), {"unary": 1}),
    ("maximum", True, -0.75, lambda x: np.maximum(x, -0.75), {"unary": 1}),
    ("minimum", False, 0.5, lambda x: np.minimum(x, 0.5), {"minBroadcastable": 1, "loadConstantND": 1}),
    ("floor_div", False, -2.0, lambda x: np.floor(x / -2.0), {"floorDivBroadcastable": 1, "loadConstantND": 1}),
    ("mod", False, -2.0, lambda x: x - np.floor(x / -2.0) * -2.0, {"modBroadcastable": 1, "loadConstantND": 1}),
]


@pytest.mark.parametrize("op, left, s, formula, kinds", SCALAR_FORMS,
                         ids=[f"{op}-{'left' if left else 'right'}-{s}" for op, left, s, *_ in SCALAR_FORMS])
def test_binary_with_a_scalar_constant(tmp_path: Path, op: str, left: bool, s: float, formula, kinds: dict) -> None:
    x_in = np.where(X == 0, f32(1.25), X) if op == "real_div" and left else X  # 3 / 0 would be inf

    def body(b, x):
        args = {"x": f32(s), "y": x} if left else {"x": x, "y": f32(s)}
        return getattr(b, op)(**args, name="out")

    got, got_kinds = _run(tmp_path, {"x": x_in}, body)
    assert_close(got["out"], formula(x_in.astype(np.float64)))
    assert got_kinds == Counter(kinds)


@pytest.mark.parametrize("op", sorted(COMPARISONS))
@pytest.mark.parametrize("left", [False, True], ids=["scalar-right", "scalar-left"])
def test_comparison_with_a_scalar_is_one_layer_with_alpha(tmp_path: Path, op: str, left: bool) -> None:
    """x op 0.5 is the layer with alpha 0.5; 0.5 op x the mirrored layer (0.5 < x is x > 0.5)."""
    formula, _ = COMPARISONS[op]
    x_in = np.array([[-1.0, 0.5, 0.25, 2.0]], f32)  # equal to the scalar in one place

    def body(b, x):
        args = {"x": f32(0.5), "y": x} if left else {"x": x, "y": f32(0.5)}
        return b.cast(x=getattr(b, op)(**args), dtype="fp32", name="out")

    got, kinds = _run(tmp_path, {"x": x_in}, body)
    want = formula(f32(0.5), x_in) if left else formula(x_in, f32(0.5))
    np.testing.assert_array_equal(got["out"], want.astype(f32))
    assert sum(kinds.values()) == 2 and "loadConstantND" not in kinds


def test_a_one_element_constant_that_adds_axes_is_not_a_scalar_parameter(tmp_path: Path) -> None:
    """x [4] + c [1, 1] has shape [1, 4]: a one-input add (alpha) would keep x's shape [4], which the
    softmax over axis 0 that follows shows (all ones over [1, 4]; over [4], a distribution)."""
    x_in = np.array([1.0, -2.0, 3.0, 0.5], f32)

    def body(b, x):
        return b.softmax(x=b.add(x=x, y=np.full((1, 1), 2.0, f32)), axis=0, name="out")

    got, kinds = _run(tmp_path, {"x": x_in}, body)
    assert_close(got["out"], np.ones((1, 4)))
    assert kinds == Counter({"addBroadcastable": 1, "loadConstantND": 1, "softmaxND": 1})


# ---------------------------------------------------------------------------------------------
# int32 arithmetic: fp32 blobs, integer results where the IR has them

XI = np.array([[-7, -6, -1, 0], [1, 5, 7, 9]], np.int32)
YI = np.array([2, -2, 3, -4], np.int32)


def test_int32_real_div_truncates_toward_zero(tmp_path: Path) -> None:
    """IR real_div on int32 is the real quotient truncated (-7 / 2 = -3); read through an fp32 cast so
    the model's int32 output conversion cannot hide an untruncated blob."""
    def body(b, x, y):
        return [b.cast(x=b.real_div(x=x, y=y), dtype="fp32", name="out"),
                b.cast(x=b.real_div(x=x, y=np.int32(4)), dtype="fp32", name="by4")]

    got, kinds = _run(tmp_path, {"x": XI, "y": YI}, body)
    np.testing.assert_array_equal(got["out"], np.trunc(XI / YI).astype(f32))
    np.testing.assert_array_equal(got["by4"], np.trunc(XI / 4).astype(f32))
    assert kinds["divideBroadcastable"] == 2 and kinds["floor"] == 2 and kinds["ceil"] == 2


def test_int32_exp2_truncates(tmp_path: Path) -> None:
    xi = np.array([[-2, -1, 0, 3, 10]], np.int32)
    got, kinds = _run(tmp_path, {"x": xi}, lambda b, x: b.cast(x=b.exp2(x=x), dtype="fp32", name="out"))
    np.testing.assert_array_equal(got["out"], np.array([[0, 0, 1, 8, 1024]], f32))
    assert kinds["exp2"] == 1 and kinds["whereBroadcastable"] == 2


def test_int32_floor_div_and_mod(tmp_path: Path) -> None:
    def body(b, x, y):
        return [b.floor_div(x=x, y=y, name="q"), b.mod(x=x, y=y, name="r")]

    got, kinds = _run(tmp_path, {"x": XI, "y": YI}, body)
    np.testing.assert_array_equal(got["q"], np.floor(XI / YI).astype(np.int32))
    np.testing.assert_array_equal(got["r"], (XI - np.floor(XI / YI) * YI).astype(np.int32))
    assert kinds == Counter({"floorDivBroadcastable": 1, "modBroadcastable": 1})


# ---------------------------------------------------------------------------------------------
# unary ops

U = np.array([[-2.5, -1.5, -0.5, -0.0], [0.0, 0.5, 1.5, 2.5], [-1.7, 0.3, 2.2, -0.2]], f32)  # ties for round
UNIT = np.array([[-0.9, -0.5, 0.0, 0.25], [0.5, 0.75, 0.95, -0.1]], f32)  # inside (-1, 1)
POSITIVE = np.array([[0.0, 0.25, 1.0, 4.0], [9.0, 0.5, 2.0, 1e-3]], f32)

UNARY = {
    # op: (input, formula, layer kind)
    "abs": (U, np.abs, "unary"), "exp": (U, np.exp, "unary"), "sqrt": (POSITIVE, np.sqrt, "unary"),
    "square": (U, lambda x: x * x, "unary"),
    "ceil": (U, np.ceil, "ceil"), "floor": (U, np.floor, "floor"),
    "round": (U, lambda x: np.round(x), "round"),  # ties to even: -2.5 -> -2, 0.5 -> 0, 1.5 -> 2
    "sign": (U, np.sign, "sign"), "exp2": (U, lambda x: 2.0**x, "exp2"),
    "sin": (U, np.sin, "sin"), "cos": (U, np.cos, "cos"), "tan": (UNIT, np.tan, "tan"),
    "asin": (UNIT, np.arcsin, "asin"), "acos": (UNIT, np.arccos, "acos"), "atan": (U, np.arctan, "atan"),
    "sinh": (U, np.sinh, "sinh"), "cosh": (U, np.cosh, "cosh"), "atanh": (UNIT, np.arctanh, "atanh"),
    "tanh": (U, np.tanh, "activation"),
    "erf": (U, np.vectorize(math.erf), "erf"),
}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(tmp_path: Path, op: str) -> None:
    x_in, formula, kind = UNARY[op]
    got, kinds = _run(tmp_path, {"x": x_in}, lambda b, x: getattr(b, op)(x=x, name="out"))
    assert_close(got["out"], formula(x_in.astype(np.float64)))
    assert kinds == Counter({kind: 1})


@pytest.mark.parametrize("op, eps, formula", [
    ("inverse", 0.5, lambda x: 1.0 / (x + 0.5)),
    ("rsqrt", 0.25, lambda x: 1.0 / np.sqrt(x + 0.25)),
    ("log", 0.5, lambda x: np.log(x + 0.5)),
    # the default epsilons, in fp32: log(0 + 1e-45) is log of the smallest denormal, not -inf
    ("inverse", None, lambda x: 1.0 / (x + np.float64(f32(1e-4)))),
    ("rsqrt", None, lambda x: 1.0 / np.sqrt(x + np.float64(f32(1e-12)))),
    ("log", None, lambda x: np.log(x + np.float64(f32(1e-45)))),
])
def test_epsilon_guarded_unary(tmp_path: Path, op: str, eps: float | None, formula) -> None:
    """POSITIVE holds 0, where the epsilon decides the value; unary LOG has no epsilon in the proto
    (it is written as the layer's shift)."""
    def body(b, x):
        kw = {} if eps is None else {"epsilon": f32(eps)}
        return getattr(b, op)(x=x, **kw, name="out")

    got, kinds = _run(tmp_path, {"x": POSITIVE}, body)
    assert_close(got["out"], formula(POSITIVE.astype(np.float64)), 1e-5)
    assert kinds == Counter({"unary": 1})


def test_threshold_and_clip(tmp_path: Path) -> None:
    x_in = np.array([[-0.5, -0.4, -0.39, 0.0, 0.69, 0.7, 0.71, 1.0]], f32)  # at and near the bounds

    def body(b, x):
        return [b.clip(x=x, alpha=f32(-0.4), beta=f32(0.7), name="clip"),
                b.threshold(x=x, alpha=f32(0.25), name="thr")]

    got, kinds = _run(tmp_path, {"x": x_in}, body)
    x64 = x_in.astype(np.float64)
    assert_close(got["clip"], np.minimum(np.maximum(x64, np.float64(f32(-0.4))), np.float64(f32(0.7))))
    assert_close(got["thr"], np.maximum(x64, np.float64(f32(0.25))))
    assert kinds == Counter({"clip": 1, "unary": 1})


def test_clip_with_bounds_crossed_gives_the_upper_bound(tmp_path: Path) -> None:
    """iOS15 clip accepts alpha > beta: min(max(x, 0.5), -0.5) is -0.5 everywhere."""
    got, kinds = _run(tmp_path, {"x": U}, lambda b, x: b.clip(x=x, alpha=f32(0.5), beta=f32(-0.5), name="out"))
    assert_close(got["out"], np.full(U.shape, -0.5))
    assert kinds == Counter({"clip": 1})


# ---------------------------------------------------------------------------------------------
# cast and identity

# chosen values, then 2000 random fp32 bit patterns (every exponent: denormals, huge values, NaNs, infinities)
CAST_X = np.concatenate([
    np.array([-2.7, -0.5, 0.0, 0.5, 2.7, 3e9, -np.inf, np.inf, np.nan, 254.9, -200.0, 300.0, 65535.5, -32768.9], f32),
    np.random.default_rng(7).integers(0, 1 << 32, 2000, dtype=np.uint64).astype(np.uint32).view(f32),
]).reshape(1, -1)


@pytest.mark.parametrize("dtype, opset", [("int32", "iOS15"), ("int8", "iOS17"), ("uint8", "iOS17"),
                                          ("int16", "iOS17"), ("uint16", "iOS17")])
def test_cast_float_to_int_truncates_saturates_and_maps_nan_to_zero(tmp_path: Path, dtype: str, opset: str) -> None:
    info = np.iinfo(dtype)
    with np.errstate(invalid="ignore"):  # signalling NaNs among the random patterns
        t = np.trunc(np.nan_to_num(CAST_X.astype(np.float64), nan=0.0, posinf=np.inf, neginf=-np.inf))
    want = np.clip(t, info.min, info.max).astype(f32)

    def body(b, x):
        return b.cast(x=b.cast(x=x, dtype=dtype), dtype="fp32", name="out")

    got, kinds = _run(tmp_path, {"x": CAST_X}, body, opset=opset)
    np.testing.assert_array_equal(got["out"], want)
    assert kinds == Counter({"clip": 1, "greaterThan": 1, "lessThan": 1, "whereBroadcastable": 2, "floor": 1,
                             "ceil": 1}) + COPY


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16"])
def test_cast_int32_to_a_narrower_int_wraps(tmp_path: Path, dtype: str) -> None:
    xi = np.array([[-40000, -129, -128, -1, 0, 5, 127, 200, 255, 256, 300, 40000]], np.int32)
    bits = np.iinfo(dtype).bits
    lo = int(np.iinfo(dtype).min)
    want = ((xi.astype(np.int64) - lo) % (1 << bits) + lo).astype(f32)  # two's complement
    got, kinds = _run(tmp_path, {"x": xi}, lambda b, x: b.cast(x=b.cast(x=x, dtype=dtype), dtype="fp32", name="out"),
                      opset="iOS17")
    np.testing.assert_array_equal(got["out"], want)
    assert kinds["modBroadcastable"] == 1 and kinds["add"] == (2 if lo else 0)


def test_cast_to_bool_is_not_equal_to_zero(tmp_path: Path) -> None:
    x_in = np.array([[np.nan, 0.0, -0.0, 2.0, -1e-30]], f32)
    got, kinds = _run(tmp_path, {"x": x_in}, lambda b, x: b.cast(x=b.cast(x=x, dtype="bool"), dtype="fp32", name="out"))
    np.testing.assert_array_equal(got["out"], np.array([[1, 0, 0, 1, 1]], f32))
    assert kinds == Counter({"notEqual": 1}) + COPY


def test_casts_that_keep_values_have_no_layer(tmp_path: Path) -> None:
    """fp32 -> fp16 -> fp32 and int32 -> fp32 are the same fp32 blob (values chosen exact in fp16:
    the fp16 rounding of a cast is not reproduced, blobs are fp32)."""
    x_in = np.array([[-1.5, 0.25, 3.0]], f32)
    xi = np.array([[-3, 0, 7]], np.int32)

    def body(b, x, i):
        h = b.relu(x=b.cast(x=x, dtype="fp16"))
        return [b.cast(x=h, dtype="fp32", name="out"), b.cast(x=i, dtype="fp32", name="as_float"),
                b.cast(x=b.cast(x=i, dtype="int32"), dtype="fp32", name="same")]

    got, kinds = _run(tmp_path, {"x": x_in, "i": xi}, body)
    np.testing.assert_array_equal(got["out"], np.maximum(x_in, 0))
    np.testing.assert_array_equal(got["as_float"], xi.astype(f32))
    np.testing.assert_array_equal(got["same"], xi.astype(f32))
    # relu, and three copies into the outputs: relu's blob into "out" (named after the fp16 value), and i
    # into "as_float" and "same"
    assert kinds == Counter({"activation": 1 + 3})


def test_identity_of_an_input_is_the_input(tmp_path: Path) -> None:
    """The identity ops that survive preparation (an input passed to an output): no layer of its own,
    the output gets the copy every output holding another blob gets."""
    got, kinds = _run(tmp_path, {"x": X}, lambda b, x: b.identity(x=x, name="out"))
    np.testing.assert_array_equal(got["out"], X)
    assert kinds == COPY


# ---------------------------------------------------------------------------------------------
# converter ops --json

ELEMENTWISE_OPS = sorted(set(ARITHMETIC) | set(COMPARISONS) | set(UNARY) | {
    "pow", "logical_and", "logical_or", "logical_xor", "logical_not", "inverse", "log", "rsqrt", "threshold",
    "clip", "cast", "identity"})
ACTIVATION_OPS = ["clamped_relu", "elu", "gelu", "leaky_relu", "linear_activation", "prelu", "relu", "relu6",
                  "scaled_tanh", "sigmoid", "sigmoid_hard", "silu", "softmax", "softplus", "softplus_parametric",
                  "softsign", "thresholded_relu"]


def test_ops_json_lists_a_neuralnetwork_lowering_for_each_elementwise_and_activation_op() -> None:
    from cli import main

    result = CliRunner().invoke(main, ["ops", "--json"])
    assert result.exit_code == 0, result.output
    entries = {row["op"]: row["neuralnetwork"] for row in json.loads(result.output)}
    status = {op: entries[op]["status"] for op in ELEMENTWISE_OPS + ACTIVATION_OPS}
    assert {op for op, s in status.items() if s not in ("direct", "decomposed")} == set()
    assert status["cast"] == status["silu"] == "decomposed"
