"""prelu (per-channel slope) from the forms exporters write when the target has no prelu op.

    %p = relu(x=%x)
    %n = minimum(x=%x, y=0.0)
    %s = mul(x=%n, y=%alpha)                 # alpha: [C, 1, 1] (or [1, C, 1, 1])
    %y = add(x=%p, y=%s)                     ->    %y = prelu(x=%x, alpha=[C])

    %p = relu(x=%x)                          # Keras' PReLU layer: relu(x) - alpha * relu(-x),
    %m = mul(x=%x, y=-1.0)                   # TF writes -x as mul(x, -1) and folds -alpha
    %r = relu(x=%m)
    %s = mul(x=%r, y=%neg_alpha)
    %y = add(x=%p, y=%s)                     ->    %y = prelu(x=%x, alpha=-neg_alpha)
    (or sub(x=%p, y=mul(x=%r, y=%alpha)))

``relu(x) + alpha * min(x, 0)`` is ONNX-simplifier's and Caffe2's decomposition of PRelu; the
Keras form is ``keras.layers.PReLU.call`` as TF graphs hold it. The select and max forms
(leaky_relu.py) also give prelu for a per-channel slope; a scalar slope here gives leaky_relu.

Exact up to the sign of a zero: for x > 0 each form is ``x + alpha * 0`` = x, for x < 0
``0 + alpha * x`` (``-alpha * -x``, negation being exact): one rounding, as prelu's.
"""

from __future__ import annotations

import numpy as np

from ...ir.builder import Builder
from ..rewrite import Match, const, op, rule, var
from .leaky_relu import negative_slope


@rule(op.add(x=op.relu(x=var("x")), y=op.mul(x=op.minimum(x=var("x"), y=0.0), y=const("alpha"))))
def prelu_from_relu_min(b: Builder, m: Match):
    """``relu(x) + alpha * min(x, 0) -> prelu(x, alpha)`` (leaky_relu for a scalar alpha).

        %p = relu(x=%x)
        %n = minimum(x=%x, y=0.0)
        %s = mul(x=%alpha, y=%n)
        %y = add(x=%p, y=%s)          ->    %y = prelu(x=%x, alpha=alpha.reshape(C))"""
    return negative_slope(b, m["x"], m.value("alpha"))


_NEG_RELU = op.relu(x=op.mul(x=var("x"), y=-1.0))


@rule(op.add(x=op.relu(x=var("x")), y=op.mul(x=_NEG_RELU, y=const("neg_alpha"))))
def prelu_keras(b: Builder, m: Match):
    """``relu(x) + (-alpha) * relu(-x) -> prelu(x, alpha)`` (Keras' PReLU).

        %p = relu(x=%x)
        %r = relu(x=mul(x=%x, y=-1.0))
        %s = mul(x=%r, y=%neg_alpha)
        %y = add(x=%p, y=%s)          ->    %y = prelu(x=%x, alpha=-neg_alpha)"""
    return negative_slope(b, m["x"], -np.asarray(m.value("neg_alpha")))


@rule(op.sub(x=op.relu(x=var("x")), y=op.mul(x=_NEG_RELU, y=const("alpha"))))
def prelu_keras_sub(b: Builder, m: Match):
    """``relu(x) - alpha * relu(-x) -> prelu(x, alpha)``.

        %p = relu(x=%x)
        %r = relu(x=mul(x=%x, y=-1.0))
        %s = mul(x=%r, y=%alpha)
        %y = sub(x=%p, y=%s)          ->    %y = prelu(x=%x, alpha=alpha)"""
    return negative_slope(b, m["x"], m.value("alpha"))


RULES = [prelu_from_relu_min, prelu_keras, prelu_keras_sub]
