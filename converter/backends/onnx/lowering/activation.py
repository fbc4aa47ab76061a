"""Activations (converter/ir/ops/activation.py) and softmax.

Where ONNX's op differs from MIL's formula the op is decomposed:

- ``thresholded_relu``: MIL keeps x == alpha (``x >= alpha``), ONNX ``ThresholdedRelu`` zeroes it
  (``x > alpha``): ``Where(x < alpha, 0, x)``;
- ``clamped_relu``: ``Min(LeakyRelu(x, alpha), beta)``;
- ``scaled_tanh``/``linear_activation``/``silu``/``softplus_parametric``: the formula (ONNX has
  no such op in opsets 17-21);
- ``gelu``: ONNX ``Gelu`` from opset 20 (EXACT: approximate="none", TANH_APPROXIMATION: "tanh");
  below 20, and for SIGMOID_APPROXIMATION, the formula;
- ``prelu``/``softplus_parametric``: the per-channel parameters (axis 1) as [C, 1, ..., 1].
"""

from __future__ import annotations

import math

import numpy as np

from ....ir.core import Op
from ..emitter import OnnxEmitter
from .registry import lowering


def _scalar(e: OnnxEmitter, op: Op, key: str) -> float:
    return float(np.asarray(e.const_param(op, key)).reshape(()))


def _const(e: OnnxEmitter, op: Op, value: float) -> str:
    """A scalar constant of x's dtype."""
    return e.scalar(value, op.inputs["x"])


_PLAIN = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "softplus": "Softplus", "softsign": "Softsign"}


def _lower_plain(e: OnnxEmitter, op: Op) -> None:
    e.node(_PLAIN[op.type], [e.input(op)], [e.out(op)])


for _t in _PLAIN:
    if _t != "tanh":  # tanh is registered with the elementwise math
        lowering(_t)(_lower_plain)


@lowering("relu6", note="Clip(x, 0, 6)")
def _relu6(e: OnnxEmitter, op: Op) -> None:
    e.node("Clip", [e.input(op), _const(e, op, 0.0), _const(e, op, 6.0)], [e.out(op)])


@lowering("leaky_relu", note="LeakyRelu")
def _leaky_relu(e: OnnxEmitter, op: Op) -> None:
    e.node("LeakyRelu", [e.input(op)], [e.out(op)], alpha=_scalar(e, op, "alpha"))


@lowering("elu", note="Elu")
def _elu(e: OnnxEmitter, op: Op) -> None:
    e.node("Elu", [e.input(op)], [e.out(op)], alpha=_scalar(e, op, "alpha"))


@lowering("sigmoid_hard", note="HardSigmoid (the same alpha and beta)")
def _sigmoid_hard(e: OnnxEmitter, op: Op) -> None:
    e.node("HardSigmoid", [e.input(op)], [e.out(op)], alpha=_scalar(e, op, "alpha"), beta=_scalar(e, op, "beta"))


@lowering("thresholded_relu", kind="decomposed", note="Where(x < alpha, 0, x): MIL keeps x == alpha, ONNX "
                                                      "ThresholdedRelu does not")
def _thresholded_relu(e: OnnxEmitter, op: Op) -> None:
    x = e.input(op)
    below = e.node("Less", [x, _const(e, op, _scalar(e, op, "alpha"))])
    e.node("Where", [below, _const(e, op, 0.0), x], [e.out(op)])


@lowering("clamped_relu", kind="decomposed", note="Min(LeakyRelu(x, alpha), beta)")
def _clamped_relu(e: OnnxEmitter, op: Op) -> None:
    leaky = e.node("LeakyRelu", [e.input(op)], alpha=_scalar(e, op, "alpha"))
    e.node("Min", [leaky, _const(e, op, _scalar(e, op, "beta"))], [e.out(op)])


@lowering("linear_activation", kind="decomposed", note="Add(Mul(x, alpha), beta)")
def _linear_activation(e: OnnxEmitter, op: Op) -> None:
    scaled = e.node("Mul", [e.input(op), _const(e, op, _scalar(e, op, "alpha"))])
    e.node("Add", [scaled, _const(e, op, _scalar(e, op, "beta"))], [e.out(op)])


@lowering("scaled_tanh", kind="decomposed", note="Mul(Tanh(Mul(x, beta)), alpha)")
def _scaled_tanh(e: OnnxEmitter, op: Op) -> None:
    inner = e.node("Tanh", [e.node("Mul", [e.input(op), _const(e, op, _scalar(e, op, "beta"))])])
    e.node("Mul", [inner, _const(e, op, _scalar(e, op, "alpha"))], [e.out(op)])


@lowering("silu", kind="decomposed", note="Mul(x, Sigmoid(x))")
def _silu(e: OnnxEmitter, op: Op) -> None:
    x = e.input(op)
    e.node("Mul", [x, e.node("Sigmoid", [x])], [e.out(op)])


def _mode(e: OnnxEmitter, op: Op) -> str:
    return str(np.asarray(e.const_param(op, "mode")).reshape(()).item())


@lowering("gelu", note="Gelu (EXACT: approximate none, TANH_APPROXIMATION: tanh); SIGMOID_APPROXIMATION: "
                       "Mul(x, Sigmoid(1.702 x))", min_opset=20)
def _gelu(e: OnnxEmitter, op: Op) -> None:
    mode = _mode(e, op)
    if mode == "SIGMOID_APPROXIMATION":
        _gelu_formula(e, op)
        return
    e.node("Gelu", [e.input(op)], [e.out(op)], approximate="tanh" if mode == "TANH_APPROXIMATION" else "none")


@lowering("gelu", kind="decomposed", note="the formula of each mode (Erf, Tanh or Sigmoid)")
def _gelu_formula(e: OnnxEmitter, op: Op) -> None:
    x = e.input(op)
    mode = _mode(e, op)
    if mode == "SIGMOID_APPROXIMATION":
        e.node("Mul", [x, e.node("Sigmoid", [e.node("Mul", [x, _const(e, op, 1.702)])])], [e.out(op)])
        return
    if mode == "TANH_APPROXIMATION":
        cube = e.node("Mul", [e.node("Mul", [x, x]), x])
        inner = e.node("Add", [x, e.node("Mul", [cube, _const(e, op, 0.044715)])])
        t = e.node("Tanh", [e.node("Mul", [inner, _const(e, op, math.sqrt(2.0 / math.pi))])])
    else:
        t = e.node("Erf", [e.node("Mul", [x, _const(e, op, 1.0 / math.sqrt(2.0))])])
    half_x = e.node("Mul", [x, _const(e, op, 0.5)])
    e.node("Mul", [half_x, e.node("Add", [t, _const(e, op, 1.0)])], [e.out(op)])


def _per_channel(e: OnnxEmitter, op: Op, key: str) -> str:
    """A per-channel parameter (length C) as a [C, 1, ..., 1] constant of x's dtype (broadcasting on axis 1)."""
    xv = op.inputs["x"]
    arr = np.asarray(e.const_param(op, key)).reshape((-1,) + (1,) * (e.rank(xv) - 2))
    return e.constant(arr.astype(e.dtype(xv).storage))


@lowering("prelu", note="PRelu with slope [C, 1, ..., 1]")
def _prelu(e: OnnxEmitter, op: Op) -> None:
    e.node("PRelu", [e.input(op), _per_channel(e, op, "alpha")], [e.out(op)])


@lowering("softplus_parametric", kind="decomposed", note="Mul(Softplus(Mul(x, beta)), alpha), per channel")
def _softplus_parametric(e: OnnxEmitter, op: Op) -> None:
    inner = e.node("Softplus", [e.node("Mul", [e.input(op), _per_channel(e, op, "beta")])])
    e.node("Mul", [inner, _per_channel(e, op, "alpha")], [e.out(op)])


@lowering("softmax", note="Softmax(axis)")
def _softmax(e: OnnxEmitter, op: Op) -> None:
    e.node("Softmax", [e.input(op)], [e.out(op)], axis=int(np.asarray(e.const_param(op, "axis")).reshape(())))
