"""Quantization: dequantize/quantize (iOS17) decomposed into float arithmetic (the IR's formulas,
converter/ir/ops/quant.py), conv_quantized with its weight dequantized at conversion time, and the
constexpr weight ops as the constants they expand to."""

from __future__ import annotations

import numpy as np

from ....ir.consteval import evaluate_op
from ....ir.core import Op
from ....ir.opdef import EvalArgs
from ....ir.ops.quant import _axis_param
from ..emitter import GraphEmitter, LoweringError, Operand
from ._common import axis_of, cast, out
from .nn import lower_conv
from .registry import lowering


def _param(e: GraphEmitter, op: Op, key: str, rank: int, axis: int, dtype: str) -> Operand | None:
    if key not in op.inputs:
        return None
    value = e.value_of(op.inputs[key])
    if value is None:
        raise LoweringError(f"'{key}' must be known at conversion time")
    return e.constant(_axis_param(value, rank, axis), dtype)


def _axis(e: GraphEmitter, op: Op, rank: int) -> int:
    a = e.param(op, "axis")
    return 0 if a is None else axis_of(int(np.asarray(a).reshape(-1)[0]), rank)


@lowering("dequantize", kind="decomposed", note="(cast(input, float32) - zero_point) * scale")
def _dequantize(e: GraphEmitter, op: Op) -> None:
    x = cast(e, e.get(op.inputs["input"]), "float32")
    axis = _axis(e, op, x.rank)
    zp = _param(e, op, "zero_point", x.rank, axis, "float32")
    if zp is not None:
        x = e.emit("sub", x, zp, shape=x.shape, dtype="float32")
    y = e.emit("mul", x, _param(e, op, "scale", x.rank, axis, "float32"), shape=x.shape, dtype="float32")
    e.bind(out(op), cast(e, y, e.dtype_of(out(op))))


@lowering("quantize", kind="decomposed",
          note="clamp(roundEven(input / scale) + zero_point) (NaN -> zero_point), cast to int8/uint8")
def _quantize(e: GraphEmitter, op: Op) -> None:
    x = cast(e, e.get(op.inputs["input"]), "float32")
    axis = _axis(e, op, x.rank)
    q = e.emit("div", x, _param(e, op, "scale", x.rank, axis, "float32"), shape=x.shape, dtype="float32")
    q = e.emit("roundEven", q, shape=x.shape, dtype="float32")
    zp = _param(e, op, "zero_point", x.rank, axis, "float32")
    if zp is None:
        zp = e.scalar(0.0, "float32")
    q = e.emit("add", q, zp, shape=x.shape, dtype="float32")
    nan = e.emit("notEqual", q, q, shape=x.shape, dtype="uint8")
    q = e.emit("where", nan, zp, q, shape=x.shape, dtype="float32")
    lo, hi = out(op).type.dtype.value_range()  # type: ignore[union-attr]
    q = e.emit("clamp", q, shape=x.shape, dtype="float32", minValue=float(lo), maxValue=float(hi))
    e.bind(out(op), cast(e, q, e.dtype_of(out(op))))


@lowering("conv_quantized", kind="decomposed", note="conv2d with the weight dequantized (w * scale + bias) at "
                                                    "conversion time")
def _conv_quantized(e: GraphEmitter, op: Op) -> None:
    env = {}
    for key in ("weight", "quant_scale", "quant_bias"):
        value = e.value_of(op.inputs[key])
        if value is None:
            raise LoweringError(f"'{key}' must be known at conversion time")
        env[op.inputs[key]] = value
    weight = op.opdef.weight(EvalArgs(op.opdef, op, env, None))
    lower_conv(e, op, weight)


def _expanded(e: GraphEmitter, op: Op) -> None:
    env = {}
    for key, v in op.inputs.items():
        value = e.value_of(v)
        if value is None:
            raise LoweringError(f"'{key}' must be known at conversion time")
        env[v] = value
    for v, value in zip(op.outputs, evaluate_op(op, env)):
        e.bind(v, e.constant(np.asarray(value), e.dtype_of(v)))


for _t in ("constexpr_affine_dequantize", "constexpr_blockwise_shift_scale", "constexpr_cast",
           "constexpr_lut_to_dense", "constexpr_lut_to_sparse", "constexpr_sparse_blockwise_shift_scale",
           "constexpr_sparse_to_dense", "_const_symbolic"):
    lowering(_t, note="a constant: expanded at conversion time (the webnn pipeline folds it before lowering)")(
        _expanded)
