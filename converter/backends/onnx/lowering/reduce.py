"""Reductions (reduce_*), arg-reductions, cumsum, topk and argsort.

``axes`` None reduces every axis; an empty ``axes`` reduces none, which MIL defines as the
reduction's elementwise part (reduce_l1_norm -> Abs, reduce_sum_square -> x * x, ...), written as
that part (ONNX's noop_with_empty_axes would return x unchanged). Index results are ONNX int64
cast to the op's int32 / uint16. Ties: ONNX ArgMax/TopK take the lowest index, as the IR kernels.
"""

from __future__ import annotations

import numpy as np

from ....ir.core import Op
from ..emitter import OnnxEmitter, onnx_type
from ._common import bool_param, index_output, int_param, reduce_node
from .registry import lowering

_REDUCE = {"reduce_sum": "ReduceSum", "reduce_prod": "ReduceProd", "reduce_mean": "ReduceMean",
           "reduce_max": "ReduceMax", "reduce_min": "ReduceMin", "reduce_l1_norm": "ReduceL1",
           "reduce_l2_norm": "ReduceL2", "reduce_sum_square": "ReduceSumSquare", "reduce_log_sum": "ReduceLogSum",
           "reduce_log_sum_exp": "ReduceLogSumExp"}


def _elementwise_part(e: OnnxEmitter, op: Op, x: str) -> None:
    """The reduction of single elements."""
    out = [e.out(op)]
    if op.type in ("reduce_l1_norm", "reduce_l2_norm"):
        e.node("Abs", [x], out)
    elif op.type == "reduce_sum_square":
        e.node("Mul", [x, x], out)
    elif op.type == "reduce_log_sum":
        e.node("Log", [x], out)
    else:
        e.node("Identity", [x], out)


def _lower_reduce(e: OnnxEmitter, op: Op) -> None:
    x = e.input(op)
    axes = None
    if "axes" in op.inputs:
        raw = e.const_param(op, "axes")
        axes = None if raw is None else [int(a) for a in np.asarray(raw).reshape(-1)]
    if axes is not None and not axes:
        _elementwise_part(e, op, x)
        return
    keep = bool_param(e, op, "keep_dims")
    dt = e.dtype(op.inputs["x"])
    if dt.is_int and op.type in _REAL_VALUED:
        r = reduce_node(e, _REDUCE[op.type], e.cast(x, "fp64"), axes, keep)
        _truncate(e, r, dt, e.out(op))
        return
    reduce_node(e, _REDUCE[op.type], x, axes, keep, [e.out(op)])


#: reductions whose value is real for integer inputs: MIL computes them in float64 and truncates
_REAL_VALUED = frozenset({"reduce_mean", "reduce_l2_norm", "reduce_log_sum", "reduce_log_sum_exp"})


def _truncate(e: OnnxEmitter, r: str, dt, out: str) -> None:  # noqa: ANN001 - DType
    """A float64 result toward zero into integer ``dt``, saturating; NaN gives the lowest value
    (the IR kernel's rule for these reductions)."""
    lo, hi = dt.value_range()
    low = e.scalar(float(lo), "fp64")
    r = e.node("Where", [e.node("IsNaN", [r]), low, r])
    clipped = e.node("Clip", [r, low, e.scalar(float(hi), "fp64")])
    e.node("Cast", [clipped], [out], to=onnx_type(dt))


for _t, _onnx in _REDUCE.items():
    lowering(_t, note=_onnx)(_lower_reduce)


def _lower_arg(e: OnnxEmitter, op: Op) -> None:
    onnx_op = "ArgMax" if op.type == "reduce_argmax" else "ArgMin"
    idx = e.node(onnx_op, [e.input(op)], axis=int_param(e, op, "axis"),
                 keepdims=int(bool_param(e, op, "keep_dims")), select_last_index=0)
    index_output(e, op, 0, idx)


for _t in ("reduce_argmax", "reduce_argmin"):
    lowering(_t, note="ArgMax/ArgMin (first index on ties), Cast to the index dtype")(_lower_arg)


@lowering("cumsum", note="CumSum")
def _cumsum(e: OnnxEmitter, op: Op) -> None:
    axis = e.constant(np.asarray(int_param(e, op, "axis"), np.int64))  # a 0-D tensor
    e.node("CumSum", [e.input(op), axis], [e.out(op)],
           exclusive=int(bool_param(e, op, "exclusive")), reverse=int(bool_param(e, op, "reverse")))


def _axis_size(e: OnnxEmitter, x: str, xv, axis: int) -> str:  # noqa: ANN001 - Value
    """The size of ``axis`` of ``x`` as a [1] int64 tensor (a constant when static)."""
    d = e.tensor_type(xv).shape[axis]
    if isinstance(d, int):
        return e.int64s([d])
    return e.node("Gather", [e.node("Shape", [x]), e.int64s([axis])])


@lowering("topk", note="TopK (largest = not ascending, sorted), indices cast to the index dtype")
def _topk(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    x = e.input(op)
    axis = int_param(e, op, "axis") % e.rank(xv)
    k = int_param(e, op, "k")
    kk = _axis_size(e, x, xv, axis) if k == -1 else e.int64s([k])
    values, indices = e.node("TopK", [x, kk], [e.out(op), e.fresh("topk_indices")], axis=axis,
                             largest=int(not bool_param(e, op, "ascending")), sorted=1)
    if len(op.outputs) > 1:
        index_output(e, op, 1, indices)


@lowering("argsort", kind="decomposed", note="the indices of TopK over the whole axis")
def _argsort(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    x = e.input(op)
    axis = int_param(e, op, "axis") % e.rank(xv)
    _, indices = e.node("TopK", [x, _axis_size(e, x, xv, axis)], 2, axis=axis,
                        largest=int(not bool_param(e, op, "ascending")), sorted=1)
    index_output(e, op, 0, indices)
