"""Activations as ``activation`` layers (ActivationParams), plus the ND ``tanh``-free forms."""

from __future__ import annotations

from ....ir.core import Op
from ..emitter import NetworkEmitter
from ._common import scalar, single
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
