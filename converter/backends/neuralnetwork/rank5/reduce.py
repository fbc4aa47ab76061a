"""Rank-5 lowerings of reductions and argmax along C, H, W (global pooling for max/mean over H
and W)."""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....formats.proto import NeuralNetwork_pb2 as nn
from ....ir.core import Op
from .layout import (
    Rank5Emitter,
    channel_layout,
    static_shape,
    vector_layout,
)
from .lowering import input_value, rank5

_REDUCE = {"reduce_sum": "SUM", "reduce_mean": "AVG", "reduce_prod": "PROD", "reduce_sum_square": "SUMSQUARE",
           "reduce_l1_norm": "L1", "reduce_l2_norm": "L2", "reduce_max": "MAX", "reduce_min": "MIN"}
_REDUCE_AXES = {frozenset("CHW"): "CHW", frozenset("HW"): "HW", frozenset("C"): "C", frozenset("H"): "H",
                frozenset("W"): "W"}


@rank5(*_REDUCE)
def _reduce(e: Rank5Emitter, op: Op) -> None:
    """Reductions over C, H, W of [.., C, H, W] (or C of a vector): ``pooling`` with globalPooling
    for max/mean over H and W, the ``reduce`` layer otherwise. The layer keeps reduced axes as 1,
    which is the same blob as MIL's keep_dims=False result."""
    x = input_value(op)
    shape = static_shape(x)
    rank = len(shape)
    axes_v = e.const_param(op, "axes")
    axes = list(range(rank)) if axes_v is None else [int(a) % rank for a in np.asarray(axes_v).reshape(-1)]
    if rank >= 3:
        layout = channel_layout(x, -3, op.type)
        names = {rank - 3: "C", rank - 2: "H", rank - 1: "W"}
    else:
        layout = vector_layout(x, f"{op.type} input")
        names = {rank - 1: "C"}
    picked = {names[a] for a in axes if a in names}
    if any(a not in names and shape[a] != 1 for a in axes) or not picked:
        raise LoweringError(f"{op.type} over axes {axes} of shape {shape}: legacy reductions cover C, H and W")
    out_layout = tuple(1 if n in picked else d for n, d in zip("CHW", layout))
    blob = e.get(x, layout)
    out = e.put(op.outputs[0], out_layout)
    if picked == {"H", "W"} and op.type in ("reduce_max", "reduce_mean"):
        params = e.layer("pooling", op.name, [blob], [out])
        params.type = nn.PoolingLayerParams.MAX if op.type == "reduce_max" else nn.PoolingLayerParams.AVERAGE
        params.globalPooling = True
        params.valid.SetInParent()
        return
    params = e.layer("reduce", op.name, [blob], [out])
    params.mode = nn.ReduceLayerParams.ReduceOperation.Value(_REDUCE[op.type])
    params.axis = nn.ReduceLayerParams.ReduceAxis.Value(_REDUCE_AXES[frozenset(picked)])


@rank5("reduce_argmax")
def _argmax(e: Rank5Emitter, op: Op) -> None:
    """``reduce`` ARGMAX along C, H or W: the index of the first maximum, as a float."""
    x = input_value(op)
    shape = static_shape(x)
    rank = len(shape)
    layout = channel_layout(x, -3, op.type) if rank >= 3 else vector_layout(x, f"{op.type} input")
    axis = int(np.asarray(e.const_param(op, "axis")).reshape(())) % rank
    names = {rank - 3: "C", rank - 2: "H", rank - 1: "W"} if rank >= 3 else {rank - 1: "C"}
    if axis not in names:
        raise LoweringError(f"{op.type} along axis {axis} of shape {shape}: legacy ARGMAX covers C, H or W")
    out_layout = tuple(1 if n == names[axis] else d for n, d in zip("CHW", layout))
    params = e.layer("reduce", op.name, [e.get(x, layout)], [e.put(op.outputs[0], out_layout)])
    params.mode = nn.ReduceLayerParams.ARGMAX
    params.axis = nn.ReduceLayerParams.ReduceAxis.Value(names[axis])
