"""Activations: WebNN's own where it has them, else decomposed into its elementwise ops."""

from __future__ import annotations

import math

import numpy as np

from ....ir.core import Op
from ..emitter import GraphEmitter, LoweringError, Operand
from ._common import axis_of, float_scalar, out, physical_axis
from .elementwise import unary
from .registry import lowering


def _p(e: GraphEmitter, op: Op, key: str) -> float:
    return float_scalar(e.const_param(op, key))


def _same(e: GraphEmitter, method: str, *args: object, like: Operand, **options: object) -> Operand:
    return e.emit(method, *args, shape=like.shape, dtype=like.dtype, perm=like.perm, **options)


@lowering("leaky_relu")
def _leaky_relu(e: GraphEmitter, op: Op) -> None:
    unary(e, op, "leakyRelu", alpha=_p(e, op, "alpha"))


@lowering("elu")
def _elu(e: GraphEmitter, op: Op) -> None:
    unary(e, op, "elu", alpha=_p(e, op, "alpha"))


@lowering("relu6", note="clamp(x, 0, 6)")
def _relu6(e: GraphEmitter, op: Op) -> None:
    unary(e, op, "clamp", minValue=0.0, maxValue=6.0)


@lowering("sigmoid_hard", note="hardSigmoid(alpha, beta)")
def _hard_sigmoid(e: GraphEmitter, op: Op) -> None:
    unary(e, op, "hardSigmoid", alpha=_p(e, op, "alpha"), beta=_p(e, op, "beta"))


@lowering("linear_activation", note="linear(alpha, beta)")
def _linear_activation(e: GraphEmitter, op: Op) -> None:
    unary(e, op, "linear", alpha=_p(e, op, "alpha"), beta=_p(e, op, "beta"))


def _softplus_of(e: GraphEmitter, x: Operand) -> Operand:
    """softplus as relu(x) + softplus(-|x|): Chromium's softplus saturates at log(FLT_MAX) (softplus(100)
    gave 88.38); its argument here stays <= 0, where it is exact."""
    neg_abs = _same(e, "neg", _same(e, "abs", x, like=x), like=x)
    return _same(e, "add", _same(e, "relu", x, like=x), _same(e, "softplus", neg_abs, like=x), like=x)


@lowering("softplus", kind="decomposed", note="relu(x) + softplus(-|x|) (Chromium's softplus saturates near 88)")
def _softplus(e: GraphEmitter, op: Op) -> None:
    e.bind(out(op), _softplus_of(e, e.any(op.inputs["x"])))


@lowering("silu", kind="decomposed", note="mul(x, sigmoid(x))")
def _silu(e: GraphEmitter, op: Op) -> None:
    x = e.any(op.inputs["x"])
    e.bind(out(op), _same(e, "mul", x, _same(e, "sigmoid", x, like=x), like=x))


@lowering("scaled_tanh", kind="decomposed", note="alpha * tanh(beta * x)")
def _scaled_tanh(e: GraphEmitter, op: Op) -> None:
    x = e.any(op.inputs["x"])
    inner = _same(e, "linear", x, like=x, alpha=_p(e, op, "beta"), beta=0.0)
    e.bind(out(op), _same(e, "linear", _same(e, "tanh", inner, like=x), like=x, alpha=_p(e, op, "alpha"), beta=0.0))


@lowering("clamped_relu", kind="decomposed", note="min(leakyRelu(x, alpha), beta)")
def _clamped_relu(e: GraphEmitter, op: Op) -> None:
    x = e.any(op.inputs["x"])
    leaky = _same(e, "leakyRelu", x, like=x, alpha=_p(e, op, "alpha"))
    e.bind(out(op), _same(e, "min", leaky, e.scalar(_p(e, op, "beta"), x.dtype), like=x))


@lowering("thresholded_relu", kind="decomposed", note="where(x < alpha, 0, x)")
def _thresholded_relu(e: GraphEmitter, op: Op) -> None:
    x = e.any(op.inputs["x"])
    below = e.emit("lesser", x, e.scalar(_p(e, op, "alpha"), x.dtype), shape=x.shape, dtype="uint8", perm=x.perm)
    e.bind(out(op), _same(e, "where", below, e.scalar(0.0, x.dtype), x, like=x))


@lowering("gelu", kind="direct", note="gelu (EXACT); tanh and sigmoid approximations decomposed")
def _gelu(e: GraphEmitter, op: Op) -> None:
    mode = str(np.asarray(e.const_param(op, "mode")).reshape(-1)[0])
    x = e.any(op.inputs["x"])
    if mode == "EXACT":
        unary(e, op, "gelu")
        return
    if mode == "SIGMOID_APPROXIMATION":
        s = _same(e, "sigmoid", _same(e, "linear", x, like=x, alpha=1.702, beta=0.0), like=x)
        e.bind(out(op), _same(e, "mul", x, s, like=x))
        return
    # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    cube = _same(e, "mul", _same(e, "mul", x, x, like=x), x, like=x)
    inner = _same(e, "add", x, _same(e, "linear", cube, like=x, alpha=0.044715, beta=0.0), like=x)
    t = _same(e, "tanh", _same(e, "linear", inner, like=x, alpha=math.sqrt(2.0 / math.pi), beta=0.0), like=x)
    half = _same(e, "linear", t, like=x, alpha=0.5, beta=0.5)
    e.bind(out(op), _same(e, "mul", x, half, like=x))


def _channel_param(e: GraphEmitter, op: Op, key: str, x: Operand) -> Operand:
    """A per-channel (axis 1) parameter shaped to broadcast against ``x`` in its layout."""
    value = e.value_of(op.inputs[key])
    if value is None:
        raise LoweringError(f"'{key}' must be known at conversion time")
    shape = [1] * x.rank
    shape[physical_axis(x, 1)] = value.size
    return e.constant(value.reshape(shape), x.dtype)


@lowering("prelu", note="prelu with the per-channel slope shaped for the layout")
def _prelu(e: GraphEmitter, op: Op) -> None:
    x = e.any(op.inputs["x"])
    e.bind(out(op), _same(e, "prelu", x, _channel_param(e, op, "alpha", x), like=x))


@lowering("softplus_parametric", kind="decomposed", note="alpha * softplus(beta * x), per channel")
def _softplus_parametric(e: GraphEmitter, op: Op) -> None:
    x = e.any(op.inputs["x"])
    alpha, beta = _channel_param(e, op, "alpha", x), _channel_param(e, op, "beta", x)
    sp = _softplus_of(e, _same(e, "mul", x, beta, like=x))
    e.bind(out(op), _same(e, "mul", sp, alpha, like=x))


@lowering("softmax", note="softmax(x, axis) with the axis normalized and mapped to the layout")
def _softmax(e: GraphEmitter, op: Op) -> None:
    x = e.any(op.inputs["x"])
    axis = axis_of(int(float_scalar(e.const_param(op, "axis"))), x.rank)
    e.bind(out(op), e.emit("softmax", x, physical_axis(x, axis), shape=x.shape, dtype=x.dtype, perm=x.perm))
