"""Normalizations: batch_norm, instance_norm, layer_norm, l2_norm, local_response_norm.

Absent gamma / beta are ones / zeros. layer_norm over trailing axes is ONNX LayerNormalization;
over other axes it is the formula (ReduceMean of x and of the squared deviation, population
variance, epsilon inside the square root). local_response_norm is ONNX LRN for rank 4 and an odd
size; otherwise the formula, because MIL's channel window [c - size//2, c + (size-1)//2] is the
mirror image of ONNX's for even sizes and MIL's channel axis is -3 at any rank.
"""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....ir.core import Op
from ....ir.types import is_static_dim
from ..emitter import OnnxEmitter
from ._common import float_param, input_as, int_list, int_param, reduce_node
from .registry import lowering


def _param_or(e: OnnxEmitter, op: Op, key: str, fill: float, size) -> str:  # noqa: ANN001 - Dim
    """``op``'s parameter ``key`` in x's dtype, or ``fill`` repeated ``size`` times when absent."""
    dt = e.dtype(op.inputs["x"])
    if key in op.inputs:
        return input_as(e, op, key, dt)
    if not is_static_dim(size):
        raise LoweringError(f"no '{key}' and a symbolic channel count")
    return e.constant(np.full(int(size), fill, dt.storage))


@lowering("batch_norm", note="BatchNormalization (inference)")
def _batch_norm(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    dt = e.dtype(xv)
    c = e.tensor_type(op.inputs["mean"]).shape[0]
    inputs = [e.input(op), _param_or(e, op, "gamma", 1.0, c), _param_or(e, op, "beta", 0.0, c),
              input_as(e, op, "mean", dt), input_as(e, op, "variance", dt)]
    e.node("BatchNormalization", inputs, [e.out(op)], epsilon=float_param(e, op, "epsilon"))


@lowering("instance_norm", note="InstanceNormalization")
def _instance_norm(e: OnnxEmitter, op: Op) -> None:
    c = e.tensor_type(op.inputs["x"]).shape[1]
    inputs = [e.input(op), _param_or(e, op, "gamma", 1.0, c), _param_or(e, op, "beta", 0.0, c)]
    e.node("InstanceNormalization", inputs, [e.out(op)], epsilon=float_param(e, op, "epsilon"))


@lowering("layer_norm", note="LayerNormalization over trailing axes; else ReduceMean/Sub/Mul/Sqrt/Div")
def _layer_norm(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    rank = e.rank(xv)
    dt = e.dtype(xv)
    axes = sorted(a % rank for a in int_list(e, op, "axes")) if "axes" in op.inputs else list(range(rank))
    eps = float_param(e, op, "epsilon")
    shape = e.tensor_type(xv).shape
    normalized = [shape[a] for a in axes]
    if axes and axes == list(range(axes[0], rank)):
        if "gamma" in op.inputs:
            gamma = input_as(e, op, "gamma", dt)
        elif all(is_static_dim(d) for d in normalized):
            gamma = e.constant(np.ones([int(d) for d in normalized], dt.storage))
        else:
            gamma = None
        if gamma is not None:
            beta = input_as(e, op, "beta", dt) if "beta" in op.inputs else None
            e.node("LayerNormalization", [e.input(op), gamma, beta], [e.out(op)], axis=axes[0], epsilon=eps)
            return
    x = e.input(op)
    if not axes:  # each element is its own group: (x - x) / sqrt(0 + eps) = 0, then beta
        y = e.node("Mul", [x, e.scalar(0.0, xv)])
    else:
        centered = e.node("Sub", [x, reduce_node(e, "ReduceMean", x, axes, True)])
        var = reduce_node(e, "ReduceMean", e.node("Mul", [centered, centered]), axes, True)
        y = e.node("Div", [centered, e.node("Sqrt", [e.node("Add", [var, e.scalar(eps, xv)])])])
    for key, combine in (("gamma", "Mul"), ("beta", "Add")):
        if key in op.inputs:
            y = e.node(combine, [y, _broadcastable(e, input_as(e, op, key, dt), axes, rank)])
    e.node("Identity", [y], [e.out(op)])


def _broadcastable(e: OnnxEmitter, p: str, axes: list[int], rank: int) -> str:
    """A parameter of shape x.shape[axes] unsqueezed to rank ``rank`` (size 1 off the axes)."""
    missing = [i for i in range(rank) if i not in axes]
    if not missing:
        return p
    return e.node("Unsqueeze", [p, e.int64s(missing)])


@lowering("l2_norm", kind="decomposed", note="x / Sqrt(ReduceSumSquare(x, last 3 axes) + epsilon)")
def _l2_norm(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    x = e.input(op)
    rank = e.rank(xv)
    ss = reduce_node(e, "ReduceSumSquare", x, [rank - 3, rank - 2, rank - 1], True)
    denom = e.node("Sqrt", [e.node("Add", [ss, e.scalar(float_param(e, op, "epsilon"), xv)])])
    e.node("Div", [x, denom], [e.out(op)])


@lowering("local_response_norm", note="LRN for rank 4 and an odd size; else the formula (window sums of Slices)")
def _lrn(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    size = int_param(e, op, "size")
    alpha, beta, k = (float_param(e, op, n) for n in ("alpha", "beta", "k"))
    rank = e.rank(xv)
    x = e.input(op)
    if rank == 4 and size % 2 == 1:
        e.node("LRN", [x], [e.out(op)], size=size, alpha=alpha, beta=beta, bias=k)
        return
    sq = e.node("Mul", [x, x])
    before, after = size // 2, (size - 1) // 2
    pads = [0] * rank * 2
    pads[rank - 3], pads[2 * rank - 3] = before, after
    padded = e.node("Pad", [sq, e.int64s(pads)], mode="constant")
    big = np.iinfo(np.int64).max
    total = None
    for i in range(size):  # channel c sums padded[c + i] for i in [0, size): the window of c
        end = i - (size - 1)
        part = e.node("Slice", [padded, e.int64s([i]), e.int64s([end if end < 0 else big]), e.int64s([rank - 3])])
        total = part if total is None else e.node("Add", [total, part])
    scaled = e.node("Add", [e.scalar(k, xv), e.node("Mul", [total, e.scalar(alpha / size, xv)])])
    e.node("Div", [x, e.node("Pow", [scaled, e.scalar(beta, xv)])], [e.out(op)])
