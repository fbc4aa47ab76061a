"""Activations through the ONNX backend, run by onnxruntime, against the formulas of the MIL
documentation written here (every parameter pinned with a distinct value), and against our
interpreter on the same program."""

from __future__ import annotations

import math

import numpy as np
import pytest

from .helpers import assert_close, only, op_types, program, run_both

X = np.array([[[-3.0, -1.25, -0.5, 0.0], [0.5, 0.75, 1.5, 4.0], [-0.2, 0.3, 2.2, -6.0]]], np.float32)  # [1, 3, 4]


erf = np.vectorize(math.erf)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


x64 = X.astype(np.float64)
CASES = {
    "relu": ({}, np.maximum(x64, 0)),
    "relu6": ({}, np.minimum(np.maximum(x64, 0), 6)),
    "sigmoid": ({}, sigmoid(x64)),
    "tanh": ({}, np.tanh(x64)),
    "softplus": ({}, np.log1p(np.exp(x64))),
    "softsign": ({}, x64 / (1 + np.abs(x64))),
    "silu": ({}, x64 * sigmoid(x64)),
    "leaky_relu": ({"alpha": 0.13}, np.where(x64 >= 0, x64, 0.13 * x64)),
    "elu": ({"alpha": 1.7}, np.where(x64 > 0, x64, 1.7 * (np.exp(x64) - 1))),
    "sigmoid_hard": ({"alpha": 0.3, "beta": 0.45}, np.clip(0.3 * x64 + 0.45, 0, 1)),
    # MIL keeps x == alpha (x >= alpha); ONNX ThresholdedRelu would zero the 0.5 and the 0.75 here
    "thresholded_relu": ({"alpha": 0.5}, np.where(x64 >= 0.5, x64, 0.0)),
    "clamped_relu": ({"alpha": 0.2, "beta": 0.9}, np.minimum(np.where(x64 >= 0, x64, 0.2 * x64), 0.9)),
    "linear_activation": ({"alpha": 1.5, "beta": -0.25}, 1.5 * x64 - 0.25),
    "scaled_tanh": ({"alpha": 2.5, "beta": 0.4}, 2.5 * np.tanh(0.4 * x64)),
}


@pytest.mark.parametrize("op", sorted(CASES))
def test_activation_matches_formula_and_interpreter(op: str) -> None:
    params, want = CASES[op]
    prog = program({"x": X}, lambda b, x: getattr(b, op)(x=x, **params))
    got, interp = run_both(prog, {"x": X})
    assert_close(only(got), want, 1e-6)
    assert_close(only(got), only(interp), 1e-6)


def test_thresholded_relu_keeps_x_equal_to_alpha() -> None:
    """The one place MIL's thresholded_relu differs from ONNX's: x == alpha is kept."""
    x = np.array([0.5, 0.49, 0.51, -1.0], np.float32)
    prog = program({"x": x}, lambda b, x: b.thresholded_relu(x=x, alpha=0.5))
    got, _ = run_both(prog, {"x": x})
    np.testing.assert_array_equal(only(got), np.array([0.5, 0.0, 0.51, 0.0], np.float32))


def test_clamped_relu_with_negative_beta() -> None:
    """beta < 0: every output is at most beta, negative inputs included (min after the leak)."""
    prog = program({"x": X}, lambda b, x: b.clamped_relu(x=x, alpha=0.2, beta=-0.3))
    got, interp = run_both(prog, {"x": X})
    assert_close(only(got), np.minimum(np.where(x64 >= 0, x64, 0.2 * x64), -0.3), 1e-6)
    assert_close(only(got), only(interp), 1e-6)


GELU = {
    "EXACT": 0.5 * x64 * (1 + erf(x64 / math.sqrt(2))),
    "TANH_APPROXIMATION": 0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64**3))),
    "SIGMOID_APPROXIMATION": x64 * sigmoid(1.702 * x64),
}


@pytest.mark.parametrize("opset", [17, 20, 21])
@pytest.mark.parametrize("mode", sorted(GELU))
def test_gelu_modes(mode: str, opset: int) -> None:
    prog = program({"x": X}, lambda b, x: b.gelu(x=x, mode=mode))
    got, interp = run_both(prog, {"x": X}, opset=opset)
    assert_close(only(got), GELU[mode], 1e-6)
    assert_close(only(got), only(interp), 1e-6)
    uses_gelu_op = "Gelu" in op_types(prog, opset)
    assert uses_gelu_op == (opset >= 20 and mode != "SIGMOID_APPROXIMATION")


@pytest.mark.parametrize("rank", [3, 4, 5])
def test_prelu_per_channel(rank: int) -> None:
    shape = (2, 3, 4, 2, 2)[:rank]
    x = np.linspace(-2.0, 1.5, int(np.prod(shape)), dtype=np.float32).reshape(shape)
    alpha = np.array([0.1, 0.25, -0.6], np.float32)
    prog = program({"x": x}, lambda b, x: b.prelu(x=x, alpha=alpha))
    got, interp = run_both(prog, {"x": x})
    a = alpha.reshape((1, 3) + (1,) * (rank - 2)).astype(np.float64)
    assert_close(only(got), np.where(x > 0, x, a * x), 1e-6)
    assert_close(only(got), only(interp), 1e-6)


def test_softplus_parametric_per_channel() -> None:
    x = np.linspace(-3.0, 2.0, 2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5)
    alpha = np.array([0.5, 1.5, 2.5], np.float32)
    beta = np.array([1.2, 0.7, 3.0], np.float32)
    prog = program({"x": x}, lambda b, x: b.softplus_parametric(x=x, alpha=alpha, beta=beta))
    got, interp = run_both(prog, {"x": x})
    a, bb = alpha.reshape(1, 3, 1).astype(np.float64), beta.reshape(1, 3, 1).astype(np.float64)
    assert_close(only(got), a * np.log1p(np.exp(bb * x)), 1e-6)
    assert_close(only(got), only(interp), 1e-6)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_axis(axis: int) -> None:
    x = np.linspace(-2.0, 3.0, 24, dtype=np.float32).reshape(2, 3, 4) ** 2
    prog = program({"x": x}, lambda b, x: b.softmax(x=x, axis=axis))
    got, interp = run_both(prog, {"x": x})
    e = np.exp(x.astype(np.float64) - x.max(axis=axis, keepdims=True))
    assert_close(only(got), e / e.sum(axis=axis, keepdims=True), 1e-6)
    assert_close(only(got), only(interp), 1e-6)


def test_fp16_activation_keeps_fp16() -> None:
    x = X.astype(np.float16)
    prog = program({"x": x}, lambda b, x: b.leaky_relu(x=x, alpha=0.13))
    got, interp = run_both(prog, {"x": x})
    assert only(got).dtype == np.float16
    assert_close(only(got), np.where(x64 >= 0, x64, 0.13 * x64), 1e-3)
