"""Compile-time parameters of an IR op as Python values (for the families of this package that
read strings, flags and integer lists)."""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....ir.consteval import compile_time_value, constant_value, evaluate_op
from ....ir.core import Op, Value
from ....ir.types import is_static_dim
from ..emitter import OnnxEmitter


def str_param(e: OnnxEmitter, op: Op, key: str) -> str:
    return str(np.asarray(e.const_param(op, key)).reshape(-1)[0])


def bool_param(e: OnnxEmitter, op: Op, key: str) -> bool:
    return bool(np.asarray(e.const_param(op, key)).reshape(-1)[0])


def int_param(e: OnnxEmitter, op: Op, key: str) -> int:
    return int(np.asarray(e.const_param(op, key)).reshape(-1)[0])


def float_param(e: OnnxEmitter, op: Op, key: str) -> float:
    return float(np.asarray(e.const_param(op, key)).reshape(-1)[0])


def int_list(e: OnnxEmitter, op: Op, key: str) -> list[int]:
    return [int(v) for v in np.asarray(e.const_param(op, key)).reshape(-1)]


def array_param(e: OnnxEmitter, op: Op, key: str) -> np.ndarray | None:
    """A compile-time tensor input (None when the op has no such input)."""
    if not isinstance(op.inputs.get(key), Value):
        return None
    return np.asarray(e.const_param(op, key))


def static_shape(e: OnnxEmitter, v: Value, what: str) -> tuple[int, ...]:
    """``v``'s shape, which the lowering needs static."""
    shape = e.tensor_type(v).shape
    if shape is None or not all(is_static_dim(d) for d in shape):
        raise LoweringError(f"{what} needs a static shape here, got {e.tensor_type(v)}")
    return tuple(int(d) for d in shape)


def known_value(v: Value) -> np.ndarray | None:
    """``v``'s value at conversion time, whatever its size: a constant, a constexpr op's result
    (decompressed by its kernel), or a short chain of pure ops (`compile_time_value`); None when
    it is known only at run time."""
    val = constant_value(v)
    if val is not None:
        return np.asarray(val)
    p = v.producer
    if p is not None and p.opdef is not None and "constexpr" in p.opdef.traits:
        return np.asarray(materialize(p)[p.outputs.index(v)])
    val = compile_time_value(v)
    return None if val is None else np.asarray(val)


def materialize(op: Op) -> list:
    """The results of constexpr ``op`` computed by its IR kernel (its inputs known at conversion time)."""
    inputs = {}
    for v in op.input_values():
        val = known_value(v)
        if val is None:
            raise LoweringError(f"'{v.name}' must be known at conversion time")
        inputs[v] = constant_value(v) if constant_value(v) is not None else val
    return evaluate_op(op, inputs)
