"""Elementwise ops: binary ops with numpy broadcasting (the ``*Broadcastable`` and comparison
layers of specification version 4), and unary functions.

A binary op with a scalar constant operand is one input of a layer that takes the scalar as a
parameter where one exists and the result is exact (``add``/``multiply`` with ``alpha``,
comparisons with ``alpha``, ``pow`` as unary POWER, ``maximum`` as unary THRESHOLD), so no
``loadConstantND`` layer is needed.

Blobs are fp32 at run time whatever the IR dtype: int32 arithmetic is exact while values stay
within 2^24 (no wrap on overflow), and int32 results of real-valued layers (``real_div``,
``exp2``) are truncated as the IR kernels do (`cast.truncate_to_int`). ``floor_div`` and ``mod``
map to floorDivBroadcastable / modBroadcastable, whose formulas the proto does not give; the NN
frontend reads them as the IR's floor division and floor modulo (the divisor's sign).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ....ir.core import Op
from ....ir.types import DType, TensorType
from ..emitter import NetworkEmitter
from ._common import single, x_blob
from .cast import truncate_to_int
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


def _int_result(op: Op) -> DType | None:
    """The integer dtype of ``op``'s result, or None (a float or bool result)."""
    t = op.outputs[0].type
    return t.dtype if isinstance(t, TensorType) and t.dtype.is_int else None


def _scalar_const(e: NetworkEmitter, op: Op, key: str, other: str) -> float | None:
    """The value of input ``key`` when it is a one-element constant that broadcasting against input
    ``other`` leaves out of the result's shape (so the layer's one input has the result's shape)."""
    val = e.const(op.inputs.get(key))
    if val is None:
        return None
    arr = np.asarray(val)
    other_type = op.inputs[other].type
    other_rank = len(other_type.shape) if isinstance(other_type, TensorType) and other_type.shape is not None else -1
    if arr.size != 1 or arr.ndim > other_rank or arr.dtype.kind not in "fiub":
        return None
    return float(arr.reshape(()))


def _exact_reciprocal(y: float) -> bool:
    """Whether x / y == x * (1 / y) for every x (y a power of two, 1 / y a normal fp32)."""
    if y == 0 or not math.isfinite(y):
        return False
    mantissa, exponent = math.frexp(abs(y))
    return mantissa == 0.5 and -126 <= 1 - exponent <= 127


def _binary(e: NetworkEmitter, op: Op) -> None:
    x, y = op.inputs["x"], op.inputs["y"]
    sx, sy = _scalar_const(e, op, "x", "y"), _scalar_const(e, op, "y", "x")
    t = op.type
    int_dtype = _int_result(op)
    if t == "real_div" and int_dtype is not None:
        # the real quotient truncated toward zero (IR real_div on int32), never through 1/y
        quotient = e.fresh(f"{op.name}_quotient")
        e.layer("divideBroadcastable", f"{op.name}_quotient", [e.blob(x), e.blob(y)], [quotient])
        truncate_to_int(e, quotient, int_dtype, op.name, e.define(op.outputs[0]))
        return
    if sy is not None and sx is None:
        if t in ("add", "sub"):  # x - y is x + (-y) exactly
            single(e, op, "add", [e.blob(x)]).alpha = sy if t == "add" else -sy
            return
        if t == "mul" or (t == "real_div" and _exact_reciprocal(sy)):
            single(e, op, "multiply", [e.blob(x)]).alpha = sy if t == "mul" else 1.0 / sy
            return
        if t == "pow":  # x^alpha
            _unary_params(e, op, "POWER").alpha = sy
            return
        if t == "maximum":  # max(x, alpha)
            _unary_params(e, op, "THRESHOLD").alpha = sy
            return
    if sx is not None and sy is None:
        if t in ("add", "mul"):
            single(e, op, "add" if t == "add" else "multiply", [e.blob(y)]).alpha = sx
            return
        if t == "maximum":
            _unary_params(e, op, "THRESHOLD", [e.blob(y)]).alpha = sx
            return
    if t in _COMPARE and (sx is None) != (sy is None):
        kind = _COMPARE[t][0] if sy is not None else _COMPARE[t][1]
        single(e, op, kind, [e.blob(x if sy is not None else y)]).alpha = sy if sy is not None else sx
        return
    single(e, op, _BROADCASTABLE[t], [e.blob(x), e.blob(y)])


_BINARY_NOTES = {
    "real_div": "divideBroadcastable (multiply when 1/y is exact); int32: the quotient truncated toward zero "
                "(7 more layers)",
    "floor_div": "floorDivBroadcastable, read as floor(x / y) (the proto gives no formula); int32 x // 0 is 0 in "
                 "the IR, inf here",
    "mod": "modBroadcastable, read as x - floor(x / y) * y (the proto gives no sign rule); int32 x % 0 is 0 in the "
           "IR, NaN here",
    "pow": "powBroadcastable; a scalar exponent: unary POWER",
    "maximum": "maxBroadcastable; a scalar: unary THRESHOLD",
}
for _t in _BROADCASTABLE:
    lowering(_t, note=_BINARY_NOTES.get(_t, ""))(_binary)


_UNARY_LAYERS = {
    "ceil": "ceil", "floor": "floor", "round": "round", "sign": "sign", "exp2": "exp2", "sin": "sin", "cos": "cos",
    "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh", "atanh": "atanh",
    "erf": "erf", "logical_not": "logicalNot",
}


@lowering(*(t for t in _UNARY_LAYERS if t not in ("round", "exp2")))
@lowering("round", note="round layer: the proto gives no tie rule (the IR rounds ties to even)")
@lowering("exp2", note="exp2 layer; int32: the power truncated toward zero (7 more layers)")
def _unary_layer(e: NetworkEmitter, op: Op) -> None:
    int_dtype = _int_result(op)
    if op.type == "exp2" and int_dtype is not None:
        # int32 exp2: the real power truncated and saturated as cast does (2^-1 -> 0)
        power = e.fresh(f"{op.name}_real")
        e.layer("exp2", f"{op.name}_real", [x_blob(e, op)], [power])
        truncate_to_int(e, power, int_dtype, op.name, e.define(op.outputs[0]))
        return
    single(e, op, _UNARY_LAYERS[op.type])


def _unary_params(e: NetworkEmitter, op: Op, function: str, inputs: list[str] | None = None) -> Any:
    """A ``unary`` layer computing ``function`` of x (scale 1, shift 0); its parameters."""
    from ....formats.proto import NeuralNetwork_pb2

    params = single(e, op, "unary", inputs)
    params.scale = 1.0  # f(scale * x + shift): proto3 would otherwise write scale 0
    params.type = NeuralNetwork_pb2.UnaryFunctionLayerParams.Operation.Value(function)
    return params


_UNARY_FUNCTION = {"abs": "ABS", "sqrt": "SQRT", "rsqrt": "RSQRT", "inverse": "INVERSE", "log": "LOG", "exp": "EXP",
                   "threshold": "THRESHOLD", "square": "POWER"}


@lowering(*(t for t in _UNARY_FUNCTION if t != "log"))
@lowering("log", note="unary LOG with epsilon as its shift: log(x + epsilon)")
def _unary_function(e: NetworkEmitter, op: Op) -> None:
    """UnaryFunctionLayerParams: f(scale * x + shift) with ``epsilon`` for RSQRT (1/sqrt(x + eps))
    and INVERSE (1/(x + eps)), ``alpha`` for POWER (x^alpha) and THRESHOLD (max(x, alpha)). The
    proto's LOG is ``log x`` without epsilon: MIL's ``log(x + epsilon)`` puts epsilon in ``shift``
    (and writes epsilon 0, so a runtime that also added epsilon would compute the same)."""
    params = _unary_params(e, op, _UNARY_FUNCTION[op.type])
    if op.type in ("rsqrt", "inverse"):
        params.epsilon = float(e.const_param(op, "epsilon"))
    elif op.type == "log":
        params.shift = float(e.const_param(op, "epsilon"))
        params.epsilon = 0.0
    elif op.type == "threshold":
        params.alpha = float(e.const_param(op, "alpha"))
    elif op.type == "square":
        params.alpha = 2.0


@lowering("clip", note="clip layer: min(max(x, minVal), maxVal)")
def _clip(e: NetworkEmitter, op: Op) -> None:
    params = single(e, op, "clip")
    params.minVal = float(e.const_param(op, "alpha"))
    params.maxVal = float(e.const_param(op, "beta"))
