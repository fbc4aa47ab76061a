"""Indexing layers: slices (slice, sliceStatic, sliceDynamic, sliceBySize), gathers and scatters,
reverse/reverseSeq, whereNonZero, oneHot, band parts, topK, argMax/argMin/argSort, cumSum and
the NonMaximumSuppression layer.

Indices arrive as fp32 tensors (NeuralNetwork tensors are float at run time) and are cast to
int32 for the gather-like ops; index results (topK indices, argMax, argSort, whereNonZero, NMS
indices and counts) are int32 in MIL and cast back to fp32, as Core ML returns them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ....formats.proto import NeuralNetwork_pb2 as nn
from ....ir.core import Value
from ....ir.ops.tensor_transform import slice_len
from ....ir.types import is_static_dim
from ..context import LayerContext
from ..registry import lowers
from .shape import (
    IntArg,
    as_int32,
    as_scalar,
    const_ints,
    const_value,
    is_static,
    need_rank,
    norm_axis,
    shape_vector,
    to_fp32,
    vector_length,
)

_SCATTER_MODES = {
    nn.SCATTER_UPDATE: "update",
    nn.SCATTER_ADD: "add",
    nn.SCATTER_SUB: "sub",
    nn.SCATTER_MUL: "mul",
    nn.SCATTER_DIV: "div",
    nn.SCATTER_MAX: "max",
    nn.SCATTER_MIN: "min",
}


def _const_input(ctx: LayerContext, i: int, what: str) -> list[int] | None:
    """The values of optional input ``i`` when present: it must be a compile-time constant,
    because the MIL op takes this parameter as a const."""
    if len(ctx.inputs) <= i:
        return None
    vals = const_ints(ctx, ctx.input(i), what)
    if vals is None:
        raise ctx.unsupported(f"input {i + 1} ({what}) must be a compile-time constant: the MIL op takes it as a "
                              f"const, and '{ctx.input(i).name}' is computed at run time")
    return vals


# ---------------------------------------------------------------------------------------------
# slices


def _slice(ctx: LayerContext, x: Value, begin: IntArg, end: IntArg, strides: list[int], begin_mask: list[bool],
           end_mask: list[bool], squeeze: list[bool]) -> Value:
    """slice_by_index with the NeuralNetwork reading of squeezeMasks: a squeezed dim takes the
    single element at its begin id, whatever its other masks say. No dim left gives shape [1]."""
    r = ctx.rank(x)
    if any(squeeze):
        begin_mask = [m and not s for m, s in zip(begin_mask, squeeze)]
        end_mask = [m or s for m, s in zip(end_mask, squeeze)]
        strides = [1 if s else t for t, s in zip(strides, squeeze)]
    whole = all(squeeze) and r > 0
    y = ctx.b.slice_by_index(x=x, begin=begin, end=end, stride=strides, begin_mask=begin_mask, end_mask=end_mask,
                             squeeze_mask=squeeze, name=f"{ctx.name}_scalar" if whole else ctx.name)
    return ctx.b.reshape(x=y, shape=[1], name=ctx.name) if whole else y


def _check_lengths(ctx: LayerContext, rank: int, **fields: Sequence[Any]) -> None:
    for name, vals in fields.items():
        if len(vals) != rank:
            raise ctx.fail(f"{name} has {len(vals)} entries for a rank-{rank} input", field=name)


@lowers("slice")
def slice_(ctx: LayerContext) -> Value:
    """x[startIndex:endIndex:stride] along C, H or W (numpy semantics: negative indices count
    from the end, endIndex is exclusive, -1 stops before the last element)."""
    p = ctx.params
    x = ctx.input()
    ax = {nn.SliceLayerParams.CHANNEL_AXIS: -3, nn.SliceLayerParams.HEIGHT_AXIS: -2,
          nn.SliceLayerParams.WIDTH_AXIS: -1}.get(p.axis)
    if ax is None:
        raise ctx.fail(f"unknown axis {p.axis}", field="axis")
    shape = need_rank(ctx, x, -ax, f" to slice axis {ax}")
    r = len(shape)
    stride = int(p.stride)
    if stride < 1:
        raise ctx.fail(f"stride must be positive, got {stride}", field="stride")
    start, stop = int(p.startIndex), int(p.endIndex)
    d = shape[ax]
    if is_static_dim(d) and slice_len(int(d), start, stop, stride) == 0:
        raise ctx.fail(f"[{start}:{stop}:{stride}] of a dim of size {d} is empty", field="endIndex")
    i = r + ax
    begin, end, strides = [0] * r, [0] * r, [1] * r
    begin[i], end[i], strides[i] = start, stop, stride
    unmasked = [k != i for k in range(r)]
    return ctx.b.slice_by_index(x=x, begin=begin, end=end, stride=strides, begin_mask=unmasked, end_mask=unmasked,
                                name=ctx.name)


@lowers("sliceStatic")
def slice_static(ctx: LayerContext) -> Value:
    """numpy-style strided slice; a mask drops its bound, squeezeMasks takes one element."""
    p = ctx.params
    x = ctx.input()
    r = ctx.rank(x)
    squeeze = [bool(s) for s in p.squeezeMasks] or [False] * r  # added in spec 5: absent = none
    _check_lengths(ctx, r, beginIds=p.beginIds, endIds=p.endIds, strides=p.strides, beginMasks=p.beginMasks,
                   endMasks=p.endMasks, squeezeMasks=squeeze)
    return _slice(ctx, x, _int32_ids(p.beginIds), _int32_ids(p.endIds), [int(s) for s in _int32_ids(p.strides)],
                  [bool(m) for m in p.beginMasks], [bool(m) for m in p.endMasks], squeeze)


def _int32_ids(values: Sequence[int]) -> np.ndarray:
    """Slice bounds or strides as int32, clamped: any 64-bit value is valid (INT64_MAX as an end id
    means "to the end"), and clamping keeps that meaning for every axis a tensor can have."""
    return np.array([min(max(int(v), -(2**31)), 2**31 - 1) for v in values], np.int32)


@lowers("sliceDynamic")
def slice_dynamic(ctx: LayerContext) -> Value:
    """sliceStatic with begin ids from input 2; inputs 3-7, when present, replace endIds,
    strides, beginMasks, endMasks and squeezeMasks (a replaced field is ignored)."""
    ctx.expect_inputs(2, 7)
    p = ctx.params
    x = ctx.input()
    r = ctx.rank(x)
    begin = as_int32(ctx, ctx.input(1), "begin")
    end = as_int32(ctx, ctx.input(2), "end") if len(ctx.inputs) > 2 else _int32_ids(p.endIds)
    strides = _const_input(ctx, 3, "strides")
    begin_mask = _const_input(ctx, 4, "beginMasks")
    end_mask = _const_input(ctx, 5, "endMasks")
    squeeze = _const_input(ctx, 6, "squeezeMasks")
    strides = [int(s) for s in _int32_ids(p.strides)] if strides is None else strides
    begin_mask = [bool(m) for m in p.beginMasks] if begin_mask is None else [bool(m) for m in begin_mask]
    end_mask = [bool(m) for m in p.endMasks] if end_mask is None else [bool(m) for m in end_mask]
    if squeeze is None:
        squeeze = [bool(s) for s in p.squeezeMasks] or [False] * r
    _check_lengths(ctx, r, strides=strides, beginMasks=begin_mask, endMasks=end_mask, squeezeMasks=squeeze)
    for what, v in (("begin ids (input 2)", begin), ("endIds" if len(ctx.inputs) < 3 else "end ids (input 3)", end)):
        if vector_length(ctx, v, what) != r:
            raise ctx.fail(f"{what} must hold {r} values (the input rank)")
    return _slice(ctx, x, begin, end, strides, begin_mask, end_mask, [bool(s) for s in squeeze])


@lowers("sliceBySize")
def slice_by_size(ctx: LayerContext) -> Value:
    """x[..., begin:begin + size, ...] along ``axis``, begin from the second input."""
    ctx.expect_inputs(2)
    p, b, n = ctx.params, ctx.b, ctx.name
    x = ctx.input()
    r = ctx.rank(x)
    axis = norm_axis(ctx, int(p.axis), r)
    size = int(p.size)
    if size < 1:
        raise ctx.fail(f"size must be >= 1, got {size}", field="size")
    start = as_scalar(ctx, ctx.input(1), "begin", "int32")
    if isinstance(start, np.generic):
        begin: IntArg = np.asarray([int(start) if k == axis else 0 for k in range(r)], np.int32)
    else:
        begin = b.concat(values=(np.zeros(axis, np.int32), b.expand_dims(x=start, axes=[0], name=f"{n}_begin_1"),
                                 np.zeros(r - axis - 1, np.int32)), axis=0, name=f"{n}_begin")
    # static sizes for the other dims (not -1): with a run-time begin they then stay static
    sizes = np.asarray([size if k == axis else (int(d) if is_static_dim(d) else -1)
                        for k, d in enumerate(ctx.shape(x))], np.int32)
    return b.slice_by_size(x=x, begin=begin, size=sizes, name=n)


# ---------------------------------------------------------------------------------------------
# gathers and scatters


def _scatter_mode(ctx: LayerContext) -> str:
    mode = _SCATTER_MODES.get(ctx.params.mode)
    if mode is None:
        raise ctx.fail(f"unknown scatter mode {ctx.params.mode}", field="mode")
    return mode


@lowers("gather")
def gather(ctx: LayerContext) -> Value:
    """numpy.take(data, indices, axis): rank(data) - 1 + rank(indices); negative indices count
    from the end."""
    ctx.expect_inputs(2)
    x = ctx.input(0)
    axis = norm_axis(ctx, int(ctx.params.axis), ctx.rank(x))
    return ctx.b.gather(x=x, indices=as_int32(ctx, ctx.input(1), "indices"), axis=axis, name=ctx.name)


@lowers("scatter")
def scatter(ctx: LayerContext) -> Value:
    """output = container; output[..., indices[i...], ...] (mode)= updates[..., i..., ...] along
    ``axis``, one update after another in row-major order. Indices of rank > 1 are flattened
    (with the matching dims of updates): the same updates in the same order."""
    ctx.expect_inputs(3)
    b, n = ctx.b, ctx.name
    data, updates = ctx.input(0), ctx.input(2)
    shape = ctx.shape(data)
    r = len(shape)
    axis = norm_axis(ctx, int(ctx.params.axis), r)
    indices = as_int32(ctx, ctx.input(1), "indices")
    k = np.ndim(indices) if isinstance(indices, np.ndarray) else ctx.rank(indices)
    if k == 0:
        raise ctx.fail("indices must have rank >= 1")
    if ctx.rank(updates) != r - 1 + k:
        raise ctx.fail(f"updates has rank {ctx.rank(updates)}, expected rank(container) - 1 + rank(indices) = "
                       f"{r - 1 + k}")
    if k > 1:
        indices = indices.reshape(-1) if isinstance(indices, np.ndarray) else b.reshape(
            x=indices, shape=[-1], name=f"{n}_indices_flat")
        if is_static(shape):
            flat: IntArg = np.asarray([int(d) for d in shape[:axis]] + [-1] + [int(d) for d in shape[axis + 1:]],
                                      np.int32)
        else:
            s = shape_vector(ctx, data, "container")
            flat = b.concat(values=(b.slice_by_size(x=s, begin=[0], size=[axis], name=f"{n}_lead"), np.array([-1], np.int32),
                                    b.slice_by_size(x=s, begin=[axis + 1], size=[-1], name=f"{n}_trail")),
                            axis=0, name=f"{n}_updates_shape")
        updates = b.reshape(x=updates, shape=flat, name=f"{n}_updates_flat")
    return b.scatter(data=data, indices=indices, updates=updates, axis=axis, mode=_scatter_mode(ctx), name=n)


@lowers("gatherND")
def gather_nd(ctx: LayerContext) -> Value:
    """output[i, ..., j, :] = params[indices[i, ..., j, :], :]: shape indices.shape[:-1] +
    params.shape[indices.shape[-1]:]."""
    ctx.expect_inputs(2)
    return ctx.b.gather_nd(x=ctx.input(0), indices=as_int32(ctx, ctx.input(1), "indices"), name=ctx.name)


@lowers("scatterND")
def scatter_nd(ctx: LayerContext) -> Value:
    ctx.expect_inputs(3)
    return ctx.b.scatter_nd(data=ctx.input(0), indices=as_int32(ctx, ctx.input(1), "indices"), updates=ctx.input(2),
                            mode=_scatter_mode(ctx), name=ctx.name)


@lowers("gatherAlongAxis")
def gather_along_axis(ctx: LayerContext) -> Value:
    """numpy.take_along_axis."""
    ctx.expect_inputs(2)
    x = ctx.input(0)
    axis = norm_axis(ctx, int(ctx.params.axis), ctx.rank(x))
    return ctx.b.gather_along_axis(x=x, indices=as_int32(ctx, ctx.input(1), "indices"), axis=axis, name=ctx.name)


@lowers("scatterAlongAxis")
def scatter_along_axis(ctx: LayerContext) -> Value:
    """numpy.put_along_axis with an accumulation mode."""
    ctx.expect_inputs(3)
    x = ctx.input(0)
    axis = norm_axis(ctx, int(ctx.params.axis), ctx.rank(x))
    return ctx.b.scatter_along_axis(data=x, indices=as_int32(ctx, ctx.input(1), "indices"), updates=ctx.input(2),
                                    axis=axis, mode=_scatter_mode(ctx), name=ctx.name)


# ---------------------------------------------------------------------------------------------
# reversal, non-zero, one-hot, band parts


@lowers("reverse")
def reverse(ctx: LayerContext) -> Value:
    """numpy.flip along the dims whose reverseDim entry is true (one entry per dim)."""
    x = ctx.input()
    flags = [bool(f) for f in ctx.params.reverseDim]
    _check_lengths(ctx, ctx.rank(x), reverseDim=flags)
    axes = [i for i, f in enumerate(flags) if f]
    if not axes:
        return ctx.b.identity(x=x, name=ctx.name)
    return ctx.b.reverse(x=x, axes=axes, name=ctx.name)


@lowers("reverseSeq")
def reverse_seq(ctx: LayerContext) -> Value:
    """For each b along batchAxis, reverse the first seq_lengths[b] elements along sequenceAxis."""
    ctx.expect_inputs(2)
    p = ctx.params
    x = ctx.input(0)
    r = ctx.rank(x)
    batch = norm_axis(ctx, int(p.batchAxis), r, "batchAxis")
    seq = norm_axis(ctx, int(p.sequenceAxis), r, "sequenceAxis")
    if batch == seq:
        raise ctx.fail(f"batchAxis and sequenceAxis are both {batch}", field="sequenceAxis")
    lengths = as_int32(ctx, ctx.input(1), "lengths")
    return ctx.b.reverse_sequence(x=x, lengths=lengths, seq_axis=seq, batch_axis=batch, name=ctx.name)


@lowers("whereNonZero")
def where_non_zero(ctx: LayerContext) -> Value:
    """[N, rank] indices of the non-zero elements in row-major order."""
    idx = ctx.b.non_zero(x=ctx.input(), name=f"{ctx.name}_int")
    return to_fp32(ctx, idx, ctx.name)


@lowers("oneHot")
def one_hot(ctx: LayerContext) -> Value:
    """onValue where the vector position equals the index, offValue elsewhere (an index outside
    [0, size) gives all offValue); the vector dim sits at ``axis`` of the output. A second input
    replaces oneHotVectorSize."""
    ctx.expect_inputs(1, 2)
    p = ctx.params
    indices = ctx.input(0)
    if len(ctx.inputs) == 2:
        size = as_scalar(ctx, ctx.input(1), "size", "int32")
    else:
        size = int(p.oneHotVectorSize)
        if size < 1:
            raise ctx.fail("oneHotVectorSize must be >= 1", field="oneHotVectorSize")
        size = np.int32(size)
    axis = norm_axis(ctx, int(p.axis), ctx.rank(indices), extra=1)
    return ctx.b.one_hot(indices=as_int32(ctx, indices, "indices"), one_hot_vector_size=size, axis=axis,
                         on_value=np.float32(p.onValue), off_value=np.float32(p.offValue), name=ctx.name)


@lowers("matrixBandPart")
def matrix_band_part(ctx: LayerContext) -> Value:
    """Keep numLower sub- and numUpper super-diagonals of each inner matrix (negative = all)."""
    x = ctx.input()
    need_rank(ctx, x, 2)
    p = ctx.params
    return ctx.b.band_part(x=x, lower=np.int32(p.numLower), upper=np.int32(p.numUpper), name=ctx.name)


def _triangle(ctx: LayerContext, k: int, upper: bool) -> Value:
    """Zero the inner-matrix elements (row m, column n) outside n - m >= k (upper) or
    n - m <= k (lower): band_part when the kept side includes the main diagonal's far side,
    else a select with a position mask."""
    b, n = ctx.b, ctx.name
    x = ctx.input()
    shape = need_rank(ctx, x, 2)
    if upper and k <= 0:
        return b.band_part(x=x, lower=np.int32(-k), upper=np.int32(-1), name=n)
    if not upper and k >= 0:
        return b.band_part(x=x, lower=np.int32(-1), upper=np.int32(k), name=n)
    rows, cols = shape[-2:]
    if is_static_dim(rows) and is_static_dim(cols):
        ones = np.ones((int(rows), int(cols)), bool)
        keep: Any = np.triu(ones, k) if upper else np.tril(ones, k)
    else:
        s = b.shape(x=x, name=f"{n}_shape")
        r = len(shape)
        m = b.range_1d(end=b.gather(x=s, indices=np.int32(r - 2), axis=0, name=f"{n}_rows"), start=np.int32(0),
                       step=np.int32(1), name=f"{n}_row_ids")
        c = b.range_1d(end=b.gather(x=s, indices=np.int32(r - 1), axis=0, name=f"{n}_cols"), start=np.int32(0),
                       step=np.int32(1), name=f"{n}_col_ids")
        diff = b.sub(x=b.expand_dims(x=c, axes=[0], name=f"{n}_col_row"), y=b.expand_dims(x=m, axes=[1], name=f"{n}_row_col"),
                     name=f"{n}_offset")
        keep = (b.greater_equal if upper else b.less_equal)(x=diff, y=np.int32(k), name=f"{n}_keep")
    return b.select(cond=keep, a=x, b=np.float32(0), name=n)


@lowers("upperTriangular")
def upper_triangular(ctx: LayerContext) -> Value:
    """numpy.triu(x, k): zero below diagonal k (k > 0 above the main diagonal)."""
    return _triangle(ctx, int(ctx.params.k), upper=True)


@lowers("lowerTriangular")
def lower_triangular(ctx: LayerContext) -> Value:
    """numpy.tril(x, k): zero above diagonal k (k < 0 below the main diagonal)."""
    return _triangle(ctx, int(ctx.params.k), upper=False)


# ---------------------------------------------------------------------------------------------
# sorting and arg-reductions


@lowers("topK")
def top_k(ctx: LayerContext) -> Sequence[Value]:
    """The K largest (smallest with useBottomK) values along ``axis`` and their indices, sorted;
    ties keep index order. A second input replaces K: a run-time K takes the first K entries of a
    full argsort (MIL topk needs a const k)."""
    ctx.expect_inputs(1, 2)
    ctx.expect_outputs(2)
    p, b, n = ctx.params, ctx.b, ctx.name
    x = ctx.input()
    shape = ctx.shape(x)
    r = len(shape)
    axis = norm_axis(ctx, int(p.axis), r)
    bottom = bool(p.useBottomK)
    k_vals = const_ints(ctx, ctx.input(1), "K") if len(ctx.inputs) == 2 else [int(p.K)]
    if k_vals is not None:
        k = k_vals[0] if len(k_vals) == 1 else -1
        if k < 1 or (is_static_dim(shape[axis]) and k > int(shape[axis])):
            raise ctx.fail(f"K = {k_vals} must be one value in [1, {shape[axis]}] (the size of axis {axis})",
                           field="K")
        values, idx = b.topk(x=x, k=np.int32(k), axis=axis, ascending=bottom, name=n)
    else:
        k_run = as_scalar(ctx, ctx.input(1), "k", "int32")
        order = b.argsort(x=x, axis=axis, ascending=bottom, name=f"{n}_order")
        # order[..., :k, ...]: the other dims are end-masked, so they keep their sizes
        end = b.concat(values=(np.zeros(axis, np.int32), b.expand_dims(x=k_run, axes=[0], name=f"{n}_k_1"),
                               np.zeros(r - axis - 1, np.int32)), axis=0, name=f"{n}_end")
        idx = b.slice_by_index(x=order, begin=np.zeros(r, np.int32), end=end, end_mask=[i != axis for i in range(r)],
                               name=f"{n}_topk_indices")
        values = b.gather_along_axis(x=x, indices=idx, axis=axis, name=f"{n}_values")
    return [values, to_fp32(ctx, idx, f"{n}_indices")]


def _arg_reduce(ctx: LayerContext, op: str) -> Value:
    """Index of the extreme value along ``axis`` (first on ties); removeDim drops the axis
    unless the input is rank 1."""
    x = ctx.input()
    r = ctx.rank(x)
    axis = norm_axis(ctx, int(ctx.params.axis), r)
    keep = not ctx.params.removeDim or r == 1
    idx = getattr(ctx.b, op)(x=x, axis=axis, keep_dims=keep, name=f"{ctx.name}_int")
    return to_fp32(ctx, idx, ctx.name)


@lowers("argMax")
def arg_max(ctx: LayerContext) -> Value:
    return _arg_reduce(ctx, "reduce_argmax")


@lowers("argMin")
def arg_min(ctx: LayerContext) -> Value:
    return _arg_reduce(ctx, "reduce_argmin")


@lowers("argSort")
def arg_sort(ctx: LayerContext) -> Value:
    """Indices sorting ``axis`` ascending (descending with ``descending``); ties keep index
    order. The spec asks for 0 <= axis < rank; a negative axis counts from the end."""
    x = ctx.input()
    axis = norm_axis(ctx, int(ctx.params.axis), ctx.rank(x))
    idx = ctx.b.argsort(x=x, axis=axis, ascending=not ctx.params.descending, name=f"{ctx.name}_int")
    return to_fp32(ctx, idx, ctx.name)


@lowers("cumSum")
def cum_sum(ctx: LayerContext) -> Value:
    """Cumulative sum along ``axis`` (a second input replaces it); excludeFinalSum shifts by one
    (starts at 0), reverse sums from the end. A run-time axis selects among the cumulative sums
    along every axis (MIL cumsum needs a const axis)."""
    ctx.expect_inputs(1, 2)
    p, b, n = ctx.params, ctx.b, ctx.name
    x = ctx.input()
    r = len(need_rank(ctx, x, 1))
    flags = {"exclusive": bool(p.excludeFinalSum), "reverse": bool(p.reverse)}
    axis_vals = const_ints(ctx, ctx.input(1), "axis") if len(ctx.inputs) == 2 else [int(p.axis)]
    if axis_vals is not None:
        if len(axis_vals) != 1:
            raise ctx.fail(f"axis input holds {len(axis_vals)} values, must hold one")
        return b.cumsum(x=x, axis=norm_axis(ctx, axis_vals[0], r), name=n, **flags)
    axis = as_scalar(ctx, ctx.input(1), "axis", "int32")
    axis = b.mod(x=b.add(x=axis, y=np.int32(r), name=f"{n}_axis_shift"), y=np.int32(r), name=f"{n}_axis")
    out = b.cumsum(x=x, axis=r - 1, name=f"{n}_along_{r - 1}", **flags)
    for a in reversed(range(r - 1)):
        along = b.cumsum(x=x, axis=a, name=f"{n}_along_{a}", **flags)
        out = b.select(cond=b.equal(x=axis, y=np.int32(a), name=f"{n}_is_{a}"), a=along, b=out,
                       name=n if a == 0 else f"{n}_upto_{a}")
    return out


# ---------------------------------------------------------------------------------------------
# non-maximum suppression


def _const_float(ctx: LayerContext, i: int, what: str, default: float) -> float:
    """Optional input ``i`` (one value, a compile-time constant) or the field's value."""
    if len(ctx.inputs) <= i:
        return float(default)
    c = const_value(ctx.input(i))
    if c is None or c.size != 1:
        raise ctx.unsupported(f"input {i + 1} ({what}) must be a one-value compile-time constant: the MIL op takes "
                              f"it as a const, and '{ctx.input(i).name}' is computed at run time")
    return float(c.reshape(()))


@lowers("NonMaximumSuppression")
def non_maximum_suppression(ctx: LayerContext) -> Sequence[Value]:
    """Greedy NMS per batch over center-size boxes [B, N, 4] with scores [B, N, C]: outputs boxes,
    scores, indices (padded with -1) and per-batch counts. Inputs 3-5 replace iouThreshold,
    scoreThreshold and maxBoxes; MIL takes them as consts, so they must be constant."""
    ctx.expect_inputs(2, 5)
    ctx.expect_outputs(4)
    p = ctx.params
    boxes, scores = ctx.input(0), ctx.input(1)
    for v, what in ((boxes, "boxes"), (scores, "scores")):
        if ctx.rank(v) != 3:
            raise ctx.fail(f"{what} must have rank 3, '{v.name}' has rank {ctx.rank(v)}")
    iou = _const_float(ctx, 2, "iouThreshold", p.iouThreshold)
    thr = _const_float(ctx, 3, "scoreThreshold", p.scoreThreshold)
    max_boxes = _const_input(ctx, 4, "maxBoxes")
    count = int(p.maxBoxes) if max_boxes is None else (max_boxes[0] if len(max_boxes) == 1 else -1)
    if count < 1:
        raise ctx.fail(f"maxBoxes must be one value >= 1, got {max_boxes or count}", field="maxBoxes")
    n = ctx.name
    out_boxes, out_scores, idx, counts = ctx.b.non_maximum_suppression(
        boxes=boxes, scores=scores, iou_threshold=np.float32(iou), score_threshold=np.float32(thr),
        max_boxes=np.int32(count), per_class_suppression=bool(p.perClassSuppression), name=n)
    return [out_boxes, out_scores, to_fp32(ctx, idx, f"{n}_indices"), to_fp32(ctx, counts, f"{n}_count")]
