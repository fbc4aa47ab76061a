"""``scatter`` (the axis form) with indices known at conversion time: as slices and a concat.

WebNN's scatterND/scatterElements replace values (no accumulation) and Chromium 153 takes only
constant int32 indices; the IR's scatter also accumulates (modes add, sub, mul, div, max, min).
With constant indices (e.g. a loop counter once `converter.passes.unroll` has unrolled a torch
GRU's loop) every destination is known, so the result is built directly: the untouched runs of
``data`` sliced out, and at each destination the update (mode ``update``: the last one written,
as the IR's kernel) or ``data``'s slice combined with each update in index order, all joined by
one concat along the axis. Negative indices count from the end, as in MIL."""

from __future__ import annotations

import numpy as np

from ....ir.core import Op
from ..emitter import GraphEmitter, LoweringError, Operand
from ._common import axis_of, float_scalar, out
from .registry import lowering
from .shape import _slice

#: scatter mode -> the binary builder method combining data with an update
_COMBINE = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "max": "max", "min": "min"}


def _part(e: GraphEmitter, x: Operand, axis: int, start: int, size: int) -> Operand:
    starts = [0] * x.rank
    sizes = list(x.shape)
    starts[axis], sizes[axis] = start, size
    return _slice(e, x, starts, sizes, [1] * x.rank)


@lowering("scatter", kind="decomposed", note="indices known at conversion time: slices of data and updates "
                                             "(combined in index order for the accumulating modes) and a concat")
def _scatter(e: GraphEmitter, op: Op) -> None:
    data_v = op.inputs["data"]
    shape = e.shape(data_v)
    axis = axis_of(int(float_scalar(e.const_param(op, "axis"))), len(shape))
    mode = str(np.asarray(e.param(op, "mode")).reshape(-1)[0])
    if mode != "update" and mode not in _COMBINE:
        raise LoweringError(f"scatter mode '{mode}' has no WebNN form")
    idx = e.value_of(op.inputs["indices"])
    if idx is None:
        raise LoweringError("scatter indices computed at run time have no WebNN form here (Chromium's scatter takes "
                            "constant indices only and WebNN's scatter does not accumulate)")
    n = shape[axis]
    idx = idx.reshape(-1).astype(np.int64)
    idx = np.where(idx < 0, idx + n, idx)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise LoweringError(f"a scatter index is out of range for size {n}")
    data = e.get(data_v)
    updates = e.get(op.inputs["updates"])
    if mode == "div" and data.dtype not in ("float32", "float16"):
        raise LoweringError("integer scatter with mode div has no WebNN form (WebNN's div does not truncate)")
    writes: dict[int, list[int]] = {}
    for k, t in enumerate(idx.tolist()):
        writes.setdefault(t, []).append(k)
    pieces: list[Operand] = []
    done = 0
    for t in sorted(writes):
        if t > done:
            pieces.append(_part(e, data, axis, done, t - done))
        rows = [_part(e, updates, axis, k, 1) for k in writes[t]]
        if mode == "update":
            row = rows[-1]
        else:
            row = _part(e, data, axis, t, 1)
            for r in rows:
                row = e.emit(_COMBINE[mode], row, r, shape=row.shape, dtype=row.dtype)
        pieces.append(row)
        done = t + 1
    if done < n:
        pieces.append(_part(e, data, axis, done, n - done))
    result = pieces[0] if len(pieces) == 1 else e.emit("concat", pieces, axis, shape=shape, dtype=data.dtype)
    e.bind(out(op), result)
