"""Elementwise ops: binary ops with numpy broadcasting (the ``*Broadcastable`` and comparison
layers of specification version 4), and unary functions.

A binary op with a scalar constant operand is one input of a layer that takes the scalar as a
parameter where one exists (``add``/``multiply`` with ``alpha``; comparisons with ``alpha``), so no
``loadConstantND`` layer is needed.
"""

from __future__ import annotations

import numpy as np

from ....ir.core import Op
from ..emitter import NetworkEmitter
from ._common import single
from .registry import lowering

_BROADCASTABLE = {
    "add": "addBroadcastable", "sub": "subtractBroadcastable", "mul": "multiplyBroadcastable",
    "real_div": "divideBroadcastable", "floor_div": "floorDivBroadcastable", "mod": "modBroadcastable",
    "pow": "powBroadcastable", "maximum": "maxBroadcastable", "minimum": "minBroadcastable",
    "equal": "equal", "not_equal": "notEqual", "less": "lessThan", "less_equal": "lessEqual",
    "greater": "greaterThan", "greater_equal": "greaterEqual", "logical_and": "logicalAnd",
    "logical_or": "logicalOr", "logical_xor": "logicalXor",
}
#: comparisons with a scalar: the layer's ``alpha`` is the right-hand side; the mirrored comparison
#: when the scalar is on the left
_COMPARE = {"equal": ("equal", "equal"), "not_equal": ("notEqual", "notEqual"), "less": ("lessThan", "greaterThan"),
            "less_equal": ("lessEqual", "greaterEqual"), "greater": ("greaterThan", "lessThan"),
            "greater_equal": ("greaterEqual", "lessEqual")}


def _scalar_const(e: NetworkEmitter, op: Op, key: str) -> float | None:
    val = e.const(op.inputs.get(key))
    if val is None:
        return None
    arr = np.asarray(val)
    out_rank = len(op.outputs[0].type.shape or ())  # type: ignore[union-attr]
    if arr.size != 1 or arr.ndim > out_rank or arr.dtype.kind not in "fiub":
        return None
    return float(arr.reshape(()))


def _binary(e: NetworkEmitter, op: Op) -> None:
    x, y = op.inputs["x"], op.inputs["y"]
    sx, sy = _scalar_const(e, op, "x"), _scalar_const(e, op, "y")
    t = op.type
    if sy is not None and t in ("add", "sub", "mul", "real_div") and sx is None:
        if t in ("add", "sub"):
            single(e, op, "add", [e.blob(x)]).alpha = sy if t == "add" else -sy
        elif t == "mul" or sy != 0:
            single(e, op, "multiply", [e.blob(x)]).alpha = sy if t == "mul" else 1.0 / sy
        else:
            single(e, op, _BROADCASTABLE[t], [e.blob(x), e.blob(y)])
        return
    if sx is not None and t in ("add", "mul") and sy is None:
        single(e, op, "add" if t == "add" else "multiply", [e.blob(y)]).alpha = sx
        return
    if t in _COMPARE and (sx is None) != (sy is None):
        kind = _COMPARE[t][0] if sy is not None else _COMPARE[t][1]
        single(e, op, kind, [e.blob(x if sy is not None else y)]).alpha = sy if sy is not None else sx
        return
    single(e, op, _BROADCASTABLE[t], [e.blob(x), e.blob(y)])


for _t in _BROADCASTABLE:
    lowering(_t)(_binary)


_UNARY_LAYERS = {
    "ceil": "ceil", "floor": "floor", "round": "round", "sign": "sign", "exp2": "exp2", "sin": "sin", "cos": "cos",
    "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh", "atanh": "atanh",
    "erf": "erf", "logical_not": "logicalNot",
}


@lowering(*_UNARY_LAYERS)
def _unary_layer(e: NetworkEmitter, op: Op) -> None:
    single(e, op, _UNARY_LAYERS[op.type])


_UNARY_FUNCTION = {"abs": "ABS", "sqrt": "SQRT", "rsqrt": "RSQRT", "inverse": "INVERSE", "log": "LOG", "exp": "EXP",
                   "threshold": "THRESHOLD", "square": "POWER"}


@lowering(*_UNARY_FUNCTION)
def _unary_function(e: NetworkEmitter, op: Op) -> None:
    """UnaryFunctionLayerParams: f(x) with ``epsilon`` for RSQRT (1/sqrt(x + eps)), INVERSE
    (1/(x + eps)) and LOG (log(x + eps)), ``alpha`` for POWER (x^alpha) and THRESHOLD (max(x, alpha))."""
    from ....formats.proto import NeuralNetwork_pb2

    params = single(e, op, "unary")
    params.scale = 1.0  # f(scale * x + shift): proto3 would otherwise write scale 0
    params.type = NeuralNetwork_pb2.UnaryFunctionLayerParams.Operation.Value(_UNARY_FUNCTION[op.type])
    if op.type in ("rsqrt", "inverse", "log"):
        params.epsilon = float(e.const_param(op, "epsilon"))
    elif op.type == "threshold":
        params.alpha = float(e.const_param(op, "alpha"))
    elif op.type == "square":
        params.alpha = 2.0
