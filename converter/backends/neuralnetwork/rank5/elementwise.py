"""Rank-5 lowerings of activations, unary functions and binary elementwise ops (any layout,
kept; sequences and flexible sizes where the layer does not need the sizes)."""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....formats.proto import NeuralNetwork_pb2 as nn
from ....ir.core import Op, Value
from ..lowering._common import scalar
from .layout import (
    Rank5Emitter,
    dims,
    is_static,
    natural_layout,
    shape_text,
    spatial_layout,
    static_shape,
)
from .lowering import float_tensor, input_value, rank5

# activations and unary functions: any layout, kept


def _unary_layer(e: Rank5Emitter, op: Op, kind: str):
    x = input_value(op)
    float_tensor(x)
    blob = e.get(x)
    return e.layer(kind, op.name, [blob], [e.put(op.outputs[0], e.layouts[x], e.seq(x))])


_PLAIN = {"relu": "ReLU", "tanh": "tanh", "sigmoid": "sigmoid", "softsign": "softsign", "softplus": "softplus"}
_ALPHA = {"leaky_relu": "leakyReLU", "elu": "ELU", "thresholded_relu": "thresholdedReLU"}
_ALPHA_BETA = {"linear_activation": "linear", "scaled_tanh": "scaledTanh", "sigmoid_hard": "sigmoidHard"}


@rank5(*_PLAIN, *_ALPHA, *_ALPHA_BETA, per_step=True)
def _activation(e: Rank5Emitter, op: Op) -> None:
    params = _unary_layer(e, op, "activation")
    t = op.type
    if t in _PLAIN:
        getattr(params, _PLAIN[t]).SetInParent()
    elif t in _ALPHA:
        getattr(params, _ALPHA[t]).alpha = scalar(e.const_param(op, "alpha"), "alpha")
    else:
        msg = getattr(params, _ALPHA_BETA[t])
        msg.alpha = scalar(e.const_param(op, "alpha"), "alpha")
        msg.beta = scalar(e.const_param(op, "beta"), "beta")


@rank5("prelu")
def _prelu(e: Rank5Emitter, op: Op) -> None:
    x = input_value(op)
    layout = spatial_layout(x, "prelu input", flexible=True)
    alpha = np.asarray(e.const_array(input_value(op, "alpha"), "prelu alpha")).reshape(-1)
    if alpha.size not in (1, layout[0]):
        raise LoweringError(f"prelu alpha has {alpha.size} values for {layout[0]} channels")
    params = e.layer("activation", op.name, [e.get(x, layout)], [e.put(op.outputs[0], layout)])
    e.weights(params.PReLU.alpha, alpha)


@rank5("clip", "relu6", per_step=True)
def _clip(e: Rank5Emitter, op: Op) -> None:
    """min(max(x, lo), hi) without the ``clip`` layer (version 4): ``unary`` THRESHOLD computes
    ``max(scale * x + shift, alpha)``, so max(x, lo), then max(-y, -hi) = -min(y, hi), then * -1."""
    lo, hi = (0.0, 6.0) if op.type == "relu6" else (scalar(e.const_param(op, k), k) for k in ("alpha", "beta"))
    x = input_value(op)
    float_tensor(x)
    layout = e.layout(x)
    low, neg = e.fresh(f"{op.name}_low"), e.fresh(f"{op.name}_neg_high")
    for name, src, dst, scale, alpha in ((f"{op.name}_low", e.get(x), low, 1.0, lo),
                                         (f"{op.name}_neg_high", low, neg, -1.0, -hi)):
        params = e.layer("unary", name, [src], [dst])
        params.type = nn.UnaryFunctionLayerParams.THRESHOLD
        params.scale, params.alpha = scale, alpha
    e.layer("multiply", op.name, [neg], [e.put(op.outputs[0], layout, e.seq(x))]).alpha = -1.0


@rank5("silu", per_step=True)
def _silu(e: Rank5Emitter, op: Op) -> None:
    """x * sigmoid(x): an activation and a multiply."""
    x = input_value(op)
    float_tensor(x)
    blob, layout = e.get(x), e.layout(x)
    sig = e.fresh(f"{op.name}_sigmoid")
    e.layer("activation", f"{op.name}_sigmoid", [blob], [sig]).sigmoid.SetInParent()
    e.layer("multiply", op.name, [blob, sig], [e.put(op.outputs[0], layout, e.seq(x))])


_UNARY = {"abs": "ABS", "sqrt": "SQRT", "rsqrt": "RSQRT", "inverse": "INVERSE", "log": "LOG", "exp": "EXP",
          "threshold": "THRESHOLD", "square": "POWER"}


@rank5(*_UNARY, per_step=True)
def _unary_function(e: Rank5Emitter, op: Op) -> None:
    """UnaryFunctionLayerParams ``f(scale * x + shift)``: scale 1 always (proto3's default is 0);
    epsilon for RSQRT, INVERSE and LOG, alpha for THRESHOLD (max(x, alpha)) and POWER."""
    params = _unary_layer(e, op, "unary")
    params.scale = 1.0
    params.type = nn.UnaryFunctionLayerParams.Operation.Value(_UNARY[op.type])
    if op.type in ("rsqrt", "inverse", "log"):
        params.epsilon = float(e.const_param(op, "epsilon"))
    elif op.type == "threshold":
        params.alpha = float(e.const_param(op, "alpha"))
    elif op.type == "square":
        params.alpha = 2.0


# ---------------------------------------------------------------------------------------------
# binary elementwise


def _affine_with_constant(e: Rank5Emitter, op: Op) -> bool:
    """add/sub/mul/real_div of a run-time value and a constant as ``a * x + b`` layers: ``add`` or
    ``multiply`` with alpha for a scalar, else ``bias`` / ``scale`` with a parameter of shape [C]
    (per channel), [1, H, W] or [C, H, W] in the blob's layout. False when neither side is constant."""
    x, y = input_value(op), input_value(op, "y")
    cx, cy = e.const(x), e.const(y)
    if (cx is None) == (cy is None):
        return False
    var, const = (x, np.asarray(cy)) if cy is not None else (y, np.asarray(cx))
    seq = e.seq(var)
    out_shape = dims(op.outputs[0])[1:] if seq is not None else dims(op.outputs[0])
    if dims(var) != dims(op.outputs[0]):
        raise LoweringError(f"the constant broadcasts '{var.name}' from {shape_text(dims(var))} to "
                            f"{shape_text(dims(op.outputs[0]))}: "
                            f"legacy layers cannot enlarge a blob")
    if seq is not None:  # one value per step: the constant may not vary along Seq
        if const.ndim > len(out_shape):
            if const.ndim > len(out_shape) + 1 or const.shape[0] != 1:
                raise LoweringError(f"a constant of shape {list(const.shape)} varies along the sequence axis")
            const = const.reshape(const.shape[1:])
    if not is_static(out_shape):  # flexible H, W: a scalar constant only (add / multiply alpha)
        if const.size != 1:
            raise LoweringError(f"a constant of shape {list(const.shape)} on flexible sizes {shape_text(out_shape)} (only a "
                                f"scalar is written without the sizes)")
        out_shape = [1] * len(out_shape)
    full = np.broadcast_to(const.astype(np.float64), out_shape)
    ones, zeros = np.ones(out_shape), np.zeros(out_shape)
    t, const_first = op.type, cx is not None
    if t == "add":
        a, b = ones, full
    elif t == "mul":
        a, b = full, zeros
    elif t == "sub":
        a, b = (-ones, full) if const_first else (ones, -full)
    elif t == "real_div" and not const_first:
        if np.any(full == 0):
            raise LoweringError("division by a constant holding 0")
        a, b = 1.0 / full, zeros
    else:
        raise LoweringError(f"{t} with a constant first operand has no legacy layer")
    float_tensor(var)
    layout = e.layout(var)
    blob = e.get(var)
    out = e.put(op.outputs[0], layout, seq)
    shape = layout if is_static(layout) else (1, 1, 1)
    a, b = a.reshape(shape), b.reshape(shape)
    if np.all(a == 1) and np.all(b == b.flat[0]):
        e.layer("add", op.name, [blob], [out]).alpha = float(b.flat[0])
    elif np.all(b == 0) and np.all(a == a.flat[0]):
        e.layer("multiply", op.name, [blob], [out]).alpha = float(a.flat[0])
    elif np.all(a == 1):
        params = e.layer("bias", op.name, [blob], [out])
        shape, data = _compact(b)
        params.shape.extend(shape)
        e.weights(params.bias, data)
    else:
        params = e.layer("scale", op.name, [blob], [out])
        shape, data = _compact(a)
        params.shapeScale.extend(shape)
        e.weights(params.scale, data)
        if np.any(b != 0):
            params.hasBias = True
            shape, data = _compact(b)
            params.shapeBias.extend(shape)
            e.weights(params.bias, data)
    return True


def _compact(p: np.ndarray) -> tuple[list[int], np.ndarray]:
    """A [C, H, W] parameter in the smallest form the bias/scale layers broadcast: [1], [C],
    [1, H, W] or [C, H, W]."""
    c, h, w = p.shape
    p32 = p.astype(np.float32)
    if np.all(p32 == p32.flat[0]):
        return [1], p32.reshape(-1)[:1]
    if np.all(p32 == p32[:, :1, :1]):
        return [c], p32[:, 0, 0]
    if np.all(p32 == p32[:1]):
        return [1, h, w], p32[:1].reshape(-1)
    return [c, h, w], p32.reshape(-1)


_TWO_BLOBS = {"add": "add", "mul": "multiply", "maximum": "max", "minimum": "min"}


@rank5("add", "sub", "mul", "real_div", "maximum", "minimum", per_step=True)
def _binary(e: Rank5Emitter, op: Op) -> None:
    if op.type in ("add", "sub", "mul", "real_div") and _affine_with_constant(e, op):
        return
    x, y = input_value(op), input_value(op, "y")
    sx, sy = dims(x), dims(y)
    if e.seq(x) is not None or e.seq(y) is not None:
        if e.seq(x) != e.seq(y) or sx != sy:
            raise LoweringError(f"operands of shapes {shape_text(sx)} and {shape_text(sy)}: legacy "
                                f"layers combine two sequences of equal shapes only")
    elif sx != sy:
        if op.type in ("add", "mul"):
            _broadcast(e, op, x, y)
            return
        raise LoweringError(f"operands of shapes {sx} and {sy}: legacy {op.type} layers need equal shapes")
    if op.type == "real_div":
        raise LoweringError("division of two run-time values (legacy layers have no exact divide)")
    float_tensor(x)
    layout = e.layout(x)
    bx, by = e.get(x), e.get(y, layout)
    if op.type == "sub":
        neg = e.fresh(f"{op.name}_neg")
        e.layer("multiply", f"{op.name}_neg", [by], [neg]).alpha = -1.0
        by = neg
    kind = "add" if op.type == "sub" else _TWO_BLOBS[op.type]
    e.layer(kind, op.name, [bx, by], [e.put(op.outputs[0], layout, e.seq(x))])


def _broadcast(e: Rank5Emitter, op: Op, x: Value, y: Value) -> None:
    """add / multiply of a [C, H, W] blob and one of shape [C], [1, H, W] or [1] (the legacy
    layers' broadcasting: the output has the first input's shape), e.g. a squeeze-excitation
    block's per-channel gate."""
    out = static_shape(op.outputs[0])
    big, small = (x, y) if static_shape(x) == out else (y, x)
    layout = natural_layout(out)
    if static_shape(big) != out or layout is None:
        raise LoweringError(f"operands of shapes {static_shape(x)} and {static_shape(y)}: legacy layers "
                            f"broadcast [C], [1, H, W] or [1] onto [C, H, W] only")
    shape = static_shape(small)
    padded = [1] * (len(out) - len(shape)) + shape
    tail = tuple(([1, 1] + padded)[-3:]) if len(out) >= 3 else (padded[-1], 1, 1)
    forms = {layout, (layout[0], 1, 1), (1, layout[1], layout[2]), (1, 1, 1)}
    if len(padded) != len(out) or any(d != 1 for d in padded[:-3]) or tail not in forms:
        raise LoweringError(f"operands of shapes {static_shape(x)} and {static_shape(y)}: legacy layers "
                            f"broadcast [C], [1, H, W] or [1] onto [C, H, W] only")
    float_tensor(big)
    blobs = [e.get(big, layout), e.get(small, tail)]  # type: ignore[arg-type]
    e.layer(_TWO_BLOBS[op.type], op.name, blobs, [e.put(op.outputs[0], layout)])
