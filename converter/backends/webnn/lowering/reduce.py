"""Reductions and arg-reductions, axes mapped to the operand's layout."""

from __future__ import annotations

import numpy as np

from ....ir.core import Op
from ..emitter import GraphEmitter, Operand, is_identity
from ._common import axis_of, cast, float_scalar, int_list, out, physical_axis, reshape
from .registry import lowering

_REDUCE = {"reduce_sum": "reduceSum", "reduce_mean": "reduceMean", "reduce_max": "reduceMax",
           "reduce_min": "reduceMin", "reduce_prod": "reduceProduct", "reduce_l1_norm": "reduceL1",
           "reduce_l2_norm": "reduceL2", "reduce_log_sum": "reduceLogSum",
           "reduce_log_sum_exp": "reduceLogSumExp", "reduce_sum_square": "reduceSumSquare"}


def _keep_dims(e: GraphEmitter, op: Op) -> bool:
    v = e.param(op, "keep_dims")
    return bool(np.asarray(False if v is None else v).reshape(-1)[0])


def _lower_reduce(e: GraphEmitter, op: Op) -> None:
    x = e.any(op.inputs["x"])
    axes_v = e.param(op, "axes")
    axes = list(range(x.rank)) if axes_v is None else sorted({axis_of(a, x.rank) for a in int_list(axes_v)})
    keep = _keep_dims(e, op)
    paxes = sorted(physical_axis(x, a) for a in axes)
    kept_shape = [1 if i in paxes else d for i, d in enumerate(x.shape)]
    shift = None
    if op.type == "reduce_log_sum_exp":  # Chromium's saturates at log(FLT_MAX): max + logSumExp(x - max)
        shift = e.emit("reduceMax", x, shape=kept_shape, dtype=x.dtype, perm=x.perm, axes=paxes, keepDimensions=True)
        x = e.emit("sub", x, shift, shape=x.shape, dtype=x.dtype, perm=x.perm)
    if keep:
        e.bind(out(op), _shifted(e, e.emit(_REDUCE[op.type], x, shape=kept_shape, dtype=x.dtype, perm=x.perm,
                                          axes=paxes, keepDimensions=True), shift))
        return
    if x.perm is None:
        shape = [d for i, d in enumerate(x.shape) if i not in paxes]
        e.bind(out(op), _shifted(e, e.emit(_REDUCE[op.type], x, shape=shape, dtype=x.dtype, axes=paxes,
                                          keepDimensions=False), shift))
        return
    # a permuted input: keep the reduced axes as 1s so the result's layout is x's, minus those axes
    kept = e.emit(_REDUCE[op.type], x, shape=kept_shape, dtype=x.dtype, axes=paxes, keepDimensions=True)
    remaining = [p for p in x.perm if p not in axes]
    rank_map = {a: i for i, a in enumerate(sorted(remaining))}
    new_perm = tuple(rank_map[p] for p in remaining)
    shape = [d for i, d in enumerate(x.shape) if i not in paxes]
    r = _shifted(e, reshape(e, kept, shape), shift)
    e.bind(out(op), Operand(r.js, r.shape, r.dtype, None if is_identity(new_perm) else new_perm))


def _shifted(e: GraphEmitter, r: Operand, shift: Operand | None) -> Operand:
    """``r`` plus the kept-dims ``shift`` (reshaped to ``r``: the reduced axes are 1s)."""
    if shift is None:
        return r
    return e.emit("add", r, reshape(e, shift, r.shape), shape=r.shape, dtype=r.dtype, perm=r.perm)


for _t in _REDUCE:
    lowering(_t, kind="decomposed" if _t == "reduce_log_sum_exp" else "direct",
             note="max + reduceLogSumExp(x - max)" if _t == "reduce_log_sum_exp" else "axes mapped to the layout")(
        _lower_reduce)


def _lower_arg(e: GraphEmitter, op: Op) -> None:
    x = e.any(op.inputs["x"])
    axis = axis_of(int(float_scalar(e.const_param(op, "axis"))), x.rank)
    keep = _keep_dims(e, op)
    method = "argMax" if op.type == "reduce_argmax" else "argMin"
    if x.perm is not None:
        x = e.get(op.inputs["x"])
    shape = list(x.shape)
    if keep:
        shape[axis] = 1
    else:
        del shape[axis]
    r = e.emit(method, x, axis, shape=shape, dtype="int32", keepDimensions=keep, outputDataType="int32")
    e.bind(out(op), cast(e, r, e.dtype_of(out(op))))


for _t in ("reduce_argmax", "reduce_argmin"):
    lowering(_t, note="argMax/argMin (int32 output; ties: the first index, as Chromium's TFLite backend)")(_lower_arg)


@lowering("cumsum", note="cumulativeSum (exclusive, reversed)")
def _cumsum(e: GraphEmitter, op: Op) -> None:
    x = e.any(op.inputs["x"])
    axis = axis_of(int(float_scalar(e.const_param(op, "axis"))), x.rank)
    exclusive = bool(np.asarray(e.param(op, "exclusive")).reshape(-1)[0])
    rev = bool(np.asarray(e.param(op, "reverse")).reshape(-1)[0])
    e.bind(out(op), e.emit("cumulativeSum", x, physical_axis(x, axis), shape=x.shape, dtype=x.dtype, perm=x.perm,
                           exclusive=exclusive, reversed=rev))
