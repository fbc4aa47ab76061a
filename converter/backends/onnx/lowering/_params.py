"""Values known at conversion time whatever their size: constants, constexpr results decompressed
by their IR kernel, short chains of pure ops (for lowerings that write weights themselves: quant,
recurrent). Scalar parameters as Python values are in `_common`."""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....ir.consteval import compile_time_value, constant_value, evaluate_op
from ....ir.core import Op, Value


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
