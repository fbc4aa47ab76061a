"""Helpers shared by the lowering families: parameters as Python values, inputs in a given dtype."""

from __future__ import annotations

from typing import Any

import numpy as np

from ....errors import LoweringError
from ....ir.core import Op, Value
from ....ir.types import DType, dtype, is_static_dim
from ..emitter import OnnxEmitter, onnx_type


def int_list(e: OnnxEmitter, op: Op, key: str) -> list[int]:
    """A compile-time integer list parameter (or its default)."""
    return [int(v) for v in np.asarray(e.const_param(op, key)).reshape(-1)]


def int_param(e: OnnxEmitter, op: Op, key: str) -> int:
    return int(np.asarray(e.const_param(op, key)).reshape(-1)[0])


def bool_param(e: OnnxEmitter, op: Op, key: str) -> bool:
    return bool(np.asarray(e.const_param(op, key)).reshape(-1)[0])


def str_param(e: OnnxEmitter, op: Op, key: str) -> str:
    return str(np.asarray(e.const_param(op, key)).reshape(-1)[0])


def float_param(e: OnnxEmitter, op: Op, key: str) -> float:
    return float(np.asarray(e.const_param(op, key)).reshape(-1)[0])


def input_as(e: OnnxEmitter, op: Op, key: str, to: DType | str) -> str:
    """``op``'s input ``key`` in dtype ``to``: a constant converted at conversion time, else a Cast
    node (none when it already has that dtype)."""
    to = dtype(to)
    v = op.inputs[key]
    if not isinstance(v, Value):
        raise LoweringError(f"input '{key}' is a tuple")
    if e.dtype(v) == to:
        return e.name(v)
    if v.is_const:
        return e.constant(np.asarray(v.const_val).astype(to.storage), onnx_type(to))
    return e.cast(e.name(v), to)


def const_array(e: OnnxEmitter, op: Op, key: str) -> np.ndarray | None:
    """The compile-time value of ``op``'s input ``key`` (None when known only at run time)."""
    v = op.inputs.get(key)
    return None if not isinstance(v, Value) else (None if (c := e.const(v)) is None else np.asarray(c))


def static_shape(e: OnnxEmitter, v: Value, what: str) -> tuple[int, ...]:
    """``v``'s shape, which this lowering needs static."""
    shape = e.tensor_type(v).shape
    if shape is None or not all(is_static_dim(d) for d in shape):
        raise LoweringError(f"{what} needs a static shape here, got {e.tensor_type(v)}")
    return tuple(int(d) for d in shape)


def axes_input(e: OnnxEmitter, axes: Any) -> str:
    """A rank-1 int64 constant of axes (the ``axes`` input of Reduce*/Squeeze/Unsqueeze)."""
    return e.int64s([int(a) for a in np.asarray(axes).reshape(-1)])


def to_int64(e: OnnxEmitter, op: Op, key: str) -> str:
    """An integer input as int64 (what ONNX's shape and index inputs take)."""
    return input_as(e, op, key, "int64")


def reduce_node(e: OnnxEmitter, onnx_op: str, x: str, axes: list[int] | None, keepdims: bool,
                outputs: Any = 1) -> str:
    """A Reduce* node over ``axes`` (None: every axis). ONNX moved ``axes`` from an attribute to
    an input in opset 18 (ReduceSum in 13)."""
    keep = int(bool(keepdims))
    if axes is None:
        return e.node(onnx_op, [x], outputs, keepdims=keep)
    if onnx_op == "ReduceSum" or e.opset >= 18:
        return e.node(onnx_op, [x, e.int64s(axes)], outputs, keepdims=keep)
    return e.node(onnx_op, [x], outputs, keepdims=keep, axes=[int(a) for a in axes])


def index_output(e: OnnxEmitter, op: Op, index: int, name: str) -> None:
    """An int64 index tensor ``name`` as ``op``'s result ``index`` (int32 or uint16 in MIL)."""
    e.node("Cast", [name], [e.out(op, index)], to=onnx_type(e.dtype(op.outputs[index])))


def finish_fp32(e: OnnxEmitter, op: Op, y: str, dt: DType | None = None) -> None:
    """Bind ``y``, computed in fp32, as ``op``'s result in dtype ``dt`` (default: the result's own
    dtype): an Identity, or a Cast to another dtype (integers truncate toward zero)."""
    dt = e.dtype(op.outputs[0]) if dt is None else dt
    if dt.name == "fp32":
        e.node("Identity", [y], [e.out(op)])
    else:
        e.node("Cast", [y], [e.out(op)], to=onnx_type(dt))
