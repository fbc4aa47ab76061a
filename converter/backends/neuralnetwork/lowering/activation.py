"""Activations: the ``activation`` layer's kinds (ActivationParams), the separate ``clip``,
``clampedReLU`` and ``gelu`` layers, softmax, and the per-channel ``prelu`` /
``softplus_parametric``.

The per-channel ops bind their parameters to axis 1 (MIL), the layer's PReLU and
parametricSoftplus to axis -3 (the proto): the same axis for rank-4 inputs, or for any rank when
every channel has the same value (a length-1 parameter). A rank-3 input gets a trailing unit axis
around the layer (expandDims / squeeze); other ranks are decomposed with broadcastable layers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ....ir.core import Op
from ..emitter import NetworkEmitter, rank
from ._common import allows, scalar, single, x_blob
from .registry import lowering


@lowering("relu", "tanh", "sigmoid", "softsign", "softplus")
def _plain(e: NetworkEmitter, op: Op) -> None:
    params = single(e, op, "activation")
    getattr(params, {"relu": "ReLU", "tanh": "tanh", "sigmoid": "sigmoid", "softsign": "softsign",
                     "softplus": "softplus"}[op.type]).SetInParent()


@lowering("leaky_relu", "elu", "thresholded_relu")
def _alpha(e: NetworkEmitter, op: Op) -> None:
    params = single(e, op, "activation")
    kind = {"leaky_relu": "leakyReLU", "elu": "ELU", "thresholded_relu": "thresholdedReLU"}[op.type]
    getattr(params, kind).alpha = scalar(e.const_param(op, "alpha"), "alpha")


@lowering("linear_activation", "scaled_tanh", "sigmoid_hard")
def _alpha_beta(e: NetworkEmitter, op: Op) -> None:
    """linear: alpha * x + beta; scaledTanh: alpha * tanh(beta * x); sigmoidHard:
    min(max(alpha * x + beta, 0), 1) — the MIL ops' parameters, same names, same roles."""
    params = single(e, op, "activation")
    kind = {"linear_activation": "linear", "scaled_tanh": "scaledTanh", "sigmoid_hard": "sigmoidHard"}[op.type]
    msg = getattr(params, kind)
    msg.alpha = scalar(e.const_param(op, "alpha"), "alpha")
    msg.beta = scalar(e.const_param(op, "beta"), "beta")


@lowering("relu6", note="clip layer (0, 6)")
def _relu6(e: NetworkEmitter, op: Op) -> None:
    params = single(e, op, "clip")
    params.minVal, params.maxVal = 0.0, 6.0


@lowering("clamped_relu", note="clampedReLU layer (specification version 5); under a lower --target: "
                                "leakyReLU then clip(-inf, beta), or clip(0, beta) alone when alpha = 0 <= beta")
def _clamped_relu(e: NetworkEmitter, op: Op) -> None:
    """The proto's clampedReLU is MIL's formula: min(beta, x) for x >= 0, else min(beta, alpha x).

    Under a version cap below 5 it is ``min(beta, leakyReLU_alpha(x))`` (leakyReLU: x for x >= 0,
    alpha x below): a leakyReLU activation, then a clip with ``minVal = -inf`` (the clip layer is
    ``min(max(x, minVal), maxVal)``, so the lower bound keeps every value, -inf included). With
    alpha = 0 and beta >= 0 the negative side is 0 = max(0, .): one clip(0, beta) layer."""
    alpha = scalar(e.const_param(op, "alpha"), "alpha")
    beta = scalar(e.const_param(op, "beta"), "beta")
    if allows(e, 5):
        params = single(e, op, "clampedReLU")
        params.alpha, params.beta = alpha, beta
        return
    if alpha == 0.0 and beta >= 0.0:
        clip = single(e, op, "clip")
        clip.minVal, clip.maxVal = 0.0, beta
        return
    leaky = e.fresh(f"{op.name}_leaky")
    e.layer("activation", leaky, [x_blob(e, op)], [leaky]).leakyReLU.alpha = alpha
    clip = single(e, op, "clip", [leaky])
    clip.minVal, clip.maxVal = float("-inf"), beta


@lowering("gelu", note="gelu layer, the same three modes")
def _gelu(e: NetworkEmitter, op: Op) -> None:
    from ....formats.proto import NeuralNetwork_pb2

    mode = str(np.asarray(e.const_param(op, "mode")).reshape(()).item())
    single(e, op, "gelu").mode = NeuralNetwork_pb2.GeluLayerParams.GeluMode.Value(mode)


@lowering("silu", kind="decomposed", note="x * sigmoid(x): activation sigmoid + multiply")
def _silu(e: NetworkEmitter, op: Op) -> None:
    x = x_blob(e, op)
    sig = e.fresh(f"{op.name}_sigmoid")
    e.layer("activation", f"{op.name}_sigmoid", [x], [sig]).sigmoid.SetInParent()
    single(e, op, "multiply", [x, sig])


@lowering("softmax", note="softmax layer for axis -3 of a rank >= 3 input, else softmaxND")
def _softmax(e: NetworkEmitter, op: Op) -> None:
    r = rank(op.inputs["x"])
    axis = int(scalar(e.const_param(op, "axis"), "axis"))
    axis = axis + r if axis < 0 else axis
    if r >= 3 and axis == r - 3:
        single(e, op, "softmax")
    else:
        single(e, op, "softmaxND").axis = axis - r  # negative: the same axis at any rank


# ---------------------------------------------------------------------------------------------
# Per-channel parameters (MIL axis 1, the layer's axis -3)


def _channel_params(e: NetworkEmitter, op: Op, names: tuple[str, ...]) -> list[np.ndarray]:
    """The op's per-channel parameters as fp32/fp16 vectors: length 1 when every op parameter is
    uniform (the layer then applies it to every channel at any rank)."""
    arrays = [e.const_array(op.inputs[n], n).reshape(-1) for n in names]
    if all(a.size and np.all(a == a[0]) for a in arrays):
        return [a[:1] for a in arrays]
    return arrays


Fill = Callable[[NetworkEmitter, Any, list[np.ndarray]], None]
Decompose = Callable[[NetworkEmitter, Op, list[np.ndarray], int], None]


def _per_channel(e: NetworkEmitter, op: Op, names: tuple[str, ...], fill: Fill, decompose: Decompose) -> None:
    """One activation layer (its parameters written by ``fill``) where axis 1 can be its axis -3;
    ``decompose`` otherwise."""
    params = _channel_params(e, op, names)
    r = rank(op.inputs["x"])
    if r == 4 or all(p.size == 1 for p in params):
        fill(e, single(e, op, "activation"), params)
    elif r == 3:  # [N, C, L] -> [N, C, L, 1]: axis 1 is axis -3
        wide, act = e.fresh(f"{op.name}_nchw"), e.fresh(f"{op.name}_act")
        e.layer("expandDims", f"{op.name}_nchw", [x_blob(e, op)], [wide]).axes.append(-1)
        fill(e, e.layer("activation", f"{op.name}_act", [wide], [act]), params)
        e.layer("squeeze", op.name, [act], [e.define(op.outputs[0])]).axes.append(-1)
    else:
        decompose(e, op, params, r)


def _per_channel_const(e: NetworkEmitter, op: Op, p: np.ndarray, r: int, what: str) -> str:
    """A [C, 1, ..., 1] constant broadcasting along axis 1 of a rank-``r`` tensor."""
    return e.load_constant(None, p.reshape((-1,) + (1,) * (r - 2)), f"{op.name}_{what}")


def _prelu_layer(e: NetworkEmitter, params: Any, p: list[np.ndarray]) -> None:
    e.weights(params.PReLU.alpha, p[0])


def _prelu_decomposed(e: NetworkEmitter, op: Op, p: list[np.ndarray], r: int) -> None:
    """relu(x) + alpha[c] * min(x, 0): exact for every x (x - relu(x) would give NaN at +inf)."""
    x, n = x_blob(e, op), op.name
    pos, neg, scaled = e.fresh(f"{n}_positive"), e.fresh(f"{n}_negative"), e.fresh(f"{n}_scaled")
    e.layer("activation", f"{n}_positive", [x], [pos]).ReLU.SetInParent()
    zero = e.load_constant(None, np.zeros(1, np.float32), f"{n}_zero")
    e.layer("minBroadcastable", f"{n}_negative", [x, zero], [neg])
    alpha = _per_channel_const(e, op, p[0], r, "alpha")
    e.layer("multiplyBroadcastable", f"{n}_scaled", [neg, alpha], [scaled])
    single(e, op, "addBroadcastable", [pos, scaled])


@lowering("prelu", note="activation PReLU (rank 4 or one alpha for all channels; rank 3 with expandDims/squeeze); "
                        "rank 5: ReLU + minBroadcastable + multiplyBroadcastable + addBroadcastable")
def _prelu(e: NetworkEmitter, op: Op) -> None:
    _per_channel(e, op, ("alpha",), _prelu_layer, _prelu_decomposed)


def _softplus_layer(e: NetworkEmitter, params: Any, p: list[np.ndarray]) -> None:
    e.weights(params.parametricSoftplus.alpha, p[0])
    e.weights(params.parametricSoftplus.beta, p[1])


def _softplus_decomposed(e: NetworkEmitter, op: Op, p: list[np.ndarray], r: int) -> None:
    """alpha[c] * softplus(beta[c] * x)."""
    x, n = x_blob(e, op), op.name
    scaled, soft = e.fresh(f"{n}_beta_x"), e.fresh(f"{n}_softplus")
    beta = _per_channel_const(e, op, p[1], r, "beta")
    e.layer("multiplyBroadcastable", f"{n}_beta_x", [x, beta], [scaled])
    e.layer("activation", f"{n}_softplus", [scaled], [soft]).softplus.SetInParent()
    alpha = _per_channel_const(e, op, p[0], r, "alpha")
    single(e, op, "multiplyBroadcastable", [soft, alpha])


@lowering("softplus_parametric", note="activation parametricSoftplus (rank 4 or uniform parameters; rank 3 with "
                                      "expandDims/squeeze); other ranks: multiplyBroadcastable + softplus + "
                                      "multiplyBroadcastable")
def _softplus_parametric(e: NetworkEmitter, op: Op) -> None:
    _per_channel(e, op, ("alpha", "beta"), _softplus_layer, _softplus_decomposed)
