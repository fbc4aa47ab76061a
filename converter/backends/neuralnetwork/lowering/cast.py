"""``cast`` and ``identity``: NeuralNetwork blobs are fp32 whatever the IR dtype, so most
conversions need no layer; those that change values (to an integer type, to bool) are decomposed.

`truncate_to_int` is also what integer results of real-valued layers (``real_div`` and ``exp2`` on
int32) go through, so they agree with the IR kernels (ir/ops/elementwise_unary.py ``convert``).
"""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....ir.core import Op, Value
from ....ir.types import DType, TensorType
from ..emitter import NetworkEmitter
from ._common import x_blob
from .registry import lowering


def truncate_to_int(e: NetworkEmitter, src: str, to: DType, name: str, out: str) -> None:
    """Write into blob ``out`` the values of blob ``src`` converted as MIL cast converts a float to
    integer type ``to``: truncation toward zero, saturation to ``to``'s range (infinities
    included), NaN to 0. Seven layers; comparisons are false for NaN, which is how NaN becomes 0:

        c = clip(x, lo, hi); pos = x > 0; neg = x < 0
        out = where(neg, ceil(c), floor(where(pos, c, pos)))   # where(pos, c, pos) is c or 0
    """
    lo, hi = to.value_range()
    clipped = e.fresh(f"{name}_saturated")
    clip = e.layer("clip", f"{name}_saturated", [src], [clipped])
    clip.minVal, clip.maxVal = float(lo), float(hi)
    pos, neg = e.fresh(f"{name}_positive"), e.fresh(f"{name}_negative")
    e.layer("greaterThan", f"{name}_positive", [src], [pos]).alpha = 0.0
    e.layer("lessThan", f"{name}_negative", [src], [neg]).alpha = 0.0
    kept = e.fresh(f"{name}_positive_part")
    e.layer("whereBroadcastable", f"{name}_positive_part", [pos, clipped, pos], [kept])
    down, up = e.fresh(f"{name}_floor"), e.fresh(f"{name}_ceil")
    e.layer("floor", f"{name}_floor", [kept], [down])
    e.layer("ceil", f"{name}_ceil", [clipped], [up])
    e.layer("whereBroadcastable", name, [neg, up, down], [out])


def _wrap_to_int(e: NetworkEmitter, src: str, to: DType, name: str, out: str) -> None:
    """Integer to a narrower integer type: two's-complement wrap, ``(x - lo) mod 2^bits + lo``
    (modBroadcastable with the IR's floor-mod reading, see the module note of ``mod``)."""
    lo, _ = to.value_range()
    cur = src
    if lo:
        cur = e.fresh(f"{name}_offset")
        e.layer("add", f"{name}_offset", [src], [cur]).alpha = float(-lo)
    modulus = e.load_constant(None, np.float32([1 << to.bits]), f"{name}_modulus")
    wrapped = out if not lo else e.fresh(f"{name}_wrapped")
    e.layer("modBroadcastable", f"{name}_wrapped" if lo else name, [cur, modulus], [wrapped])
    if lo:
        e.layer("add", name, [wrapped], [out]).alpha = float(lo)


def _fits_int32(to: DType) -> bool:
    lo, hi = to.value_range()
    return lo <= -(2**31) and 2**31 - 1 <= hi


def _fits(src: DType, to: DType) -> bool:
    """Whether every value of integer (or bool) type ``src`` is a value of integer type ``to``."""
    if src.kind == "bool":
        return True
    slo, shi = src.value_range()
    tlo, thi = to.value_range()
    return tlo <= slo and shi <= thi


#: op inputs that the NeuralNetwork layers lowering them read as float blobs truncated toward zero
#: (how the NeuralNetwork frontend reads a gather's or scatter's indices: a cast to int32)
_INDEX_INPUTS = frozenset({("gather", "indices"), ("gather_along_axis", "indices"), ("gather_nd", "indices"),
                           ("scatter", "indices"), ("scatter_along_axis", "indices"), ("scatter_nd", "indices")})


#: ops that move values without changing them: indices may pass through them on their way
_SHAPE_ONLY = frozenset({"expand_dims", "squeeze", "reshape"})


def read_only_as_indices(v: Value, depth: int = 4) -> bool:
    """Whether every reader of ``v`` takes it as gather/scatter indices, directly or through ops that
    only reshape it."""
    uses = list(v.uses)
    if not uses:
        return False
    for u in uses:
        if not isinstance(u.user, Op):
            return False
        if (u.user.type, u.key) in _INDEX_INPUTS:
            continue
        if not (depth and u.user.type in _SHAPE_ONLY and u.key == "x"
                and read_only_as_indices(u.user.outputs[0], depth - 1)):
            return False
    return True


def _dtype(v: Value) -> DType:
    if not isinstance(v.type, TensorType):
        raise LoweringError(f"'{v.name}' is a {v.type}, not a tensor")
    return v.type.dtype


@lowering("cast", kind="decomposed",
          note="no layer for fp16/fp32 and widening integer casts (blobs are fp32: a cast to fp16 does not "
               "round); to an integer type: truncation toward zero with saturation and NaN to 0 (clip, "
               "comparisons, where, floor, ceil); integer narrowing: wrap with modBroadcastable; to bool: "
               "notEqual(alpha=0)")
def _cast(e: NetworkEmitter, op: Op) -> None:
    src, to = _dtype(op.inputs["x"]), _dtype(op.outputs[0])
    x = x_blob(e, op)
    if to.kind == "bool":
        if src.kind == "bool":
            e.bind(op.outputs[0], x)
        else:
            e.layer("notEqual", op.name, [x], [e.define(op.outputs[0])]).alpha = 0.0
    elif to.is_float or (to.is_int and not src.is_float and _fits(src, to)):
        e.bind(op.outputs[0], x)
    elif to.is_int and src.is_float and _fits_int32(to) and read_only_as_indices(op.outputs[0]):
        e.bind(op.outputs[0], x)  # the gather/scatter layers truncate their float indices themselves
    elif to.is_int and src.is_float:
        truncate_to_int(e, x, to, op.name, e.define(op.outputs[0]))
    elif to.is_int and src.is_int:
        _wrap_to_int(e, x, to, op.name, e.define(op.outputs[0]))
    else:
        raise LoweringError(f"cast from {src} to {to} has no NeuralNetwork form")


@lowering("identity", note="no layer: the result is the input's blob")
def _identity(e: NetworkEmitter, op: Op) -> None:
    e.bind(op.outputs[0], x_blob(e, op))
