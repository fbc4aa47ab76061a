"""slice_by_index as the legacy ``slice`` layer (specification version 1): one axis of C, H or W
of a value in its natural layout, static bounds, a positive stride.

The layer takes ``[startIndex, endIndex)`` with a stride; a negative endIndex counts from the end
(-1 is N - 1, so it cannot say "to the end"): the bounds are written as absolute indices. A
squeeze_mask drops the axis in the IR result, which is the same blob (its size is 1).
"""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....formats.proto import NeuralNetwork_pb2 as nn
from ....ir.core import Op
from .layout import Rank5Emitter, blob_axes, natural_layout, op_value, static_shape
from .lowering import rank5

_AXES = {1: nn.SliceLayerParams.CHANNEL_AXIS, 2: nn.SliceLayerParams.HEIGHT_AXIS, 3: nn.SliceLayerParams.WIDTH_AXIS}


def _flags(e: Rank5Emitter, op: Op, key: str, rank: int) -> list[bool]:
    v = e.const_param(op, key)
    return [False] * rank if v is None else [bool(b) for b in np.asarray(v).reshape(-1)]


@rank5("slice_by_index")
def _slice_by_index(e: Rank5Emitter, op: Op) -> None:
    x = op_value(op, "x")
    if x is None:
        raise LoweringError("input 'x' is missing")
    shape = static_shape(x)
    rank = len(shape)
    layout = natural_layout(shape)
    if layout is None:
        raise LoweringError(f"slice of shape {shape}: leading axes > 1 have no rank-5 layout")
    begin, end = (e.const(op_value(op, k)) for k in ("begin", "end"))
    if begin is None or end is None:
        raise LoweringError("slice bounds computed at run time (the legacy slice layer takes constants)")
    begin, end = [int(b) for b in np.asarray(begin).reshape(-1)], [int(b) for b in np.asarray(end).reshape(-1)]
    stride_v = e.const(op_value(op, "stride"))
    stride = [1] * rank if stride_v is None else [int(s) for s in np.asarray(stride_v).reshape(-1)]
    begin_mask, end_mask = _flags(e, op, "begin_mask", rank), _flags(e, op, "end_mask", rank)
    squeeze = _flags(e, op, "squeeze_mask", rank)
    cut = []
    for a, n in enumerate(shape):
        lo, hi, st = slice(None if begin_mask[a] else begin[a], None if end_mask[a] else end[a],
                           stride[a]).indices(n)
        if squeeze[a]:
            hi = lo + 1
        if (lo, hi, st) != (0, n, 1):
            cut.append((a, lo, hi, st))
    out = op.outputs[0]
    if not cut:
        e.alias(out, x)
        return
    axes = blob_axes(shape, False)
    if len(cut) > 1 or cut[0][0] not in axes or cut[0][3] < 1:
        raise LoweringError(f"slice of axes {[c[0] for c in cut]} of shape {shape} (the legacy slice layer cuts "
                            f"one of C, H, W with a positive stride)")
    a, lo, hi, st = cut[0]
    size = len(range(lo, hi, st))
    out_layout = list(layout)
    out_layout[axes[a] - 1] = size
    params = e.layer("slice", op.name, [e.get(x, layout)], [e.put(out, tuple(out_layout))])
    params.startIndex, params.endIndex, params.stride = lo, hi, st
    params.axis = _AXES[axes[a]]
