"""Indexing ops as ND layers: slices, gathers and scatters, one-hot, band parts, sorting and
arg-reductions, cumulative sums, non-zero indices and ``select``.

Indices are fp32 blobs at run time (exact below 2**24, far beyond any dim a blob can have); index
results (topK, argSort, argMax, whereNonZero) are fp32 too, which is how Core ML returns them.

Negative indices: MIL allows them up to iOS16 (counting from the end). The proto documents them
for gather, gatherAlongAxis and scatterAlongAxis; for gatherND, scatterND and scatter it says
nothing, so constant indices are made non-negative at conversion time and run-time ones get
``idx + (idx < 0) * size`` in layers first (from iOS17 a negative index is out of range in MIL,
and nothing is added).
"""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....ir.core import Op, Value
from ....ir.opdef import opset_index
from ....ir.types import is_static_dim
from ..emitter import NetworkEmitter, rank
from ._common import allows, exact_float, single
from ._embedding import absorbs as embedding_absorbs
from ._embedding import lower_embedding, plan_embedding
from .registry import lowering
from .shape import alias, axis_param, dims, inp

_SCATTER_MODES = {"update": "SCATTER_UPDATE", "add": "SCATTER_ADD", "sub": "SCATTER_SUB", "mul": "SCATTER_MUL",
                  "div": "SCATTER_DIV", "max": "SCATTER_MAX", "min": "SCATTER_MIN"}


def _ints(e: NetworkEmitter, op: Op, key: str, default: list) -> list:
    v = e.param(op, key)
    return default if v is None else np.asarray(v).reshape(-1).tolist()


# ---------------------------------------------------------------------------------------------
# slices


def _squeeze_after(e: NetworkEmitter, op: Op, sliced: str, squeeze: list[bool]) -> None:
    if all(squeeze):  # rank 0: a [1] blob
        single(e, op, "reshapeStatic", [sliced]).targetShape.append(1)
        return
    single(e, op, "squeeze", [sliced]).axes.extend(i for i, s in enumerate(squeeze) if s)


@lowering("slice_by_index", note="sliceStatic for constant bounds, sliceDynamic for run-time ones; a "
          "squeeze_mask is the iOS14 squeezeMasks, or a squeeze layer after the slice under a lower --target")
def _slice_by_index(e: NetworkEmitter, op: Op) -> None:
    x = inp(op, "x")
    r = rank(x)
    begin_v, end_v = inp(op, "begin"), inp(op, "end")
    begin, end = e.const(begin_v), e.const(end_v)
    strides = [int(s) for s in _ints(e, op, "stride", [1] * r)]
    bmask = [bool(m) for m in _ints(e, op, "begin_mask", [False] * r)]
    emask = [bool(m) for m in _ints(e, op, "end_mask", [False] * r)]
    squeeze = [bool(m) for m in _ints(e, op, "squeeze_mask", [False] * r)]
    if r == 0:
        raise LoweringError("slice of a rank-0 value")
    one_layer = not any(squeeze) or allows(e, 5)
    if begin is not None and end is not None:
        begins = [int(b) for b in np.asarray(begin).reshape(-1)]
        ends = [int(t) for t in np.asarray(end).reshape(-1)]
        for i in range(r):
            if squeeze[i]:  # one element at begin (0 when masked): the layer ignores masks on a squeezed dim
                b = 0 if bmask[i] else begins[i]
                begins[i], bmask[i], strides[i] = b, False, 1
                if not one_layer:  # [b, b + 1) (to the end when b is the last element, -1)
                    ends[i], emask[i] = b + 1, b == -1
        target = op.name if one_layer else e.fresh(f"{op.name}_sliced")
        outs = [e.define(op.outputs[0])] if one_layer else [target]
        params = e.layer("sliceStatic", target, [e.blob(x)], outs)
        params.beginIds.extend(begins)
        params.endIds.extend(ends)
        params.strides.extend(strides)
        params.beginMasks.extend(bmask)
        params.endMasks.extend(emask)
        if any(squeeze):
            if one_layer:
                params.squeezeMasks.extend(squeeze)
                e.state.need(5, "sliceStatic squeezeMasks")
            else:
                _squeeze_after(e, op, target, squeeze)
        return
    if any(squeeze) and not allows(e, 5):
        raise LoweringError("a squeeze_mask with run-time bounds needs sliceDynamic's squeezeMasks (iOS14), above "
                            "the requested version")
    if any(s and m for s, m in zip(squeeze, bmask)) and begin is None:
        raise LoweringError("a squeezed dim with a masked run-time begin takes element 0 in MIL; the layer reads the "
                            "begin id")
    if end is not None:  # the endIds field: one input fewer
        params = single(e, op, "sliceDynamic", [e.blob(x), e.blob(begin_v)])
        params.endIds.extend(int(t) for t in np.asarray(end).reshape(-1))
    else:
        params = single(e, op, "sliceDynamic", [e.blob(x), e.blob(begin_v), e.blob(end_v)])
    params.strides.extend(strides)
    params.beginMasks.extend(bmask)
    params.endMasks.extend(emask)
    if any(squeeze):
        params.squeezeMasks.extend(squeeze)
        e.state.need(5, "sliceDynamic squeezeMasks")


def _non_negative_begin(e: NetworkEmitter, op: Op, x: Value, begin: str) -> str:
    """``begin + (begin < 0) * shape(x)`` in layers: a negative run-time begin counts from the end."""
    n = op.name
    neg = e.fresh(f"{n}_begin_negative")
    e.layer("lessThan", neg, [begin], [neg]).alpha = 0.0
    shape = [int(d) for d in dims(x)] if all(is_static_dim(d) for d in dims(x)) else None
    if shape is not None:
        size = e.load_constant(None, np.asarray(shape, np.float32), f"{n}_shape")
    else:
        size = e.fresh(f"{n}_shape")
        e.layer("getShape", size, [e.blob(x)], [size])
    wrap, out = e.fresh(f"{n}_begin_wrap"), e.fresh(f"{n}_begin_ids")
    e.layer("multiplyBroadcastable", wrap, [neg, size], [wrap])
    e.layer("addBroadcastable", out, [begin, wrap], [out])
    return out


@lowering("slice_by_size", kind="decomposed", note="sliceStatic for constant begin and size; sliceBySize (iOS14) "
          "for a run-time begin along one axis; else the begin made non-negative, end = begin + size, sliceDynamic")
def _slice_by_size(e: NetworkEmitter, op: Op) -> None:
    x = inp(op, "x")
    r = rank(x)
    begin_v = inp(op, "begin")
    size = e.const(inp(op, "size"))
    if size is None:
        raise LoweringError("size must be known at conversion time")
    sizes = [int(s) for s in np.asarray(size).reshape(-1)]
    to_end = [s == -1 for s in sizes]
    begin = e.const(begin_v)
    if begin is not None:
        begins = [int(b) for b in np.asarray(begin).reshape(-1)]
        ends = [0 if m else b + s for b, s, m in zip(begins, sizes, to_end)]
        # a negative begin whose slice reaches the last element ends at 0: "to the end"
        emask = [m or (b < 0 and t == 0) for b, t, m in zip(begins, ends, to_end)]
        params = single(e, op, "sliceStatic")
        params.beginIds.extend(begins)
        params.endIds.extend(ends)
        params.strides.extend([1] * r)
        params.beginMasks.extend([False] * r)
        params.endMasks.extend(emask)
        return
    if _slice_by_size_layer(e, op, x, begin_v, sizes):
        return
    start = _non_negative_begin(e, op, x, e.blob(begin_v))
    stop = e.fresh(f"{op.name}_end_ids")
    steps = e.load_constant(None, np.asarray([0 if m else s for s, m in zip(sizes, to_end)], np.float32),
                            f"{op.name}_sizes")
    e.layer("addBroadcastable", stop, [start, steps], [stop])
    params = single(e, op, "sliceDynamic", [e.blob(x), start, stop])
    params.strides.extend([1] * r)
    params.beginMasks.extend([False] * r)
    params.endMasks.extend(to_end)


def _slice_by_size_layer(e: NetworkEmitter, op: Op, x: Value, begin_v: Value, sizes: list[int]) -> bool:
    """One ``sliceBySize`` (iOS14) when the run-time begin is zeros but one value (a ``concat`` of
    constant zeros and one run-time element, as the frontend reads that layer) and every other dim
    is taken whole; False otherwise. A negative begin counts from the end, as the frontend reads
    the layer (the proto does not say)."""
    p = begin_v.producer
    if p is None or p.type != "concat" or not allows(e, 5):
        return False
    x_dims = dims(x)
    offset, axis, start = 0, None, None
    for part in tuple(p.inputs.get("values", ())):  # type: ignore[arg-type]
        shape = dims(part)
        if len(shape) != 1 or not is_static_dim(shape[0]):
            return False
        c = e.const(part)
        if c is not None:
            if np.any(np.asarray(c) != 0):
                return False
        elif int(shape[0]) != 1 or axis is not None:
            return False
        else:
            axis, start = offset, part
        offset += int(shape[0])
    if axis is None or start is None or offset != len(x_dims) or sizes[axis] < 1:
        return False
    if any(i != axis and not (s == -1 or (is_static_dim(d) and s == int(d)))
           for i, (s, d) in enumerate(zip(sizes, x_dims))):
        return False
    params = single(e, op, "sliceBySize", [e.blob(x), e.blob(start)])
    params.size, params.axis = sizes[axis], axis
    return True


@lowering("slice_update", kind="decomposed", note="scatterND (update) at the slice's positions, computed at "
          "conversion time over the leading dims up to the last one not taken whole")
def _slice_update(e: NetworkEmitter, op: Op) -> None:
    x, update = inp(op, "x"), inp(op, "update")
    x_dims = dims(x)
    r = len(x_dims)
    begin, end = e.const(inp(op, "begin")), e.const(inp(op, "end"))
    if begin is None or end is None:
        raise LoweringError("begin and end must be known at conversion time")
    begins = [int(b) for b in np.asarray(begin).reshape(-1)]
    ends = [int(t) for t in np.asarray(end).reshape(-1)]
    strides = [int(s) for s in _ints(e, op, "stride", [1] * r)]
    bmask = [bool(m) for m in _ints(e, op, "begin_mask", [False] * r)]
    emask = [bool(m) for m in _ints(e, op, "end_mask", [False] * r)]
    squeeze = [bool(m) for m in _ints(e, op, "squeeze_mask", [False] * r)]

    def whole(i: int) -> bool:
        if squeeze[i]:
            return False
        if strides[i] == 1 and (bmask[i] or begins[i] == 0) and emask[i]:
            return True
        d = x_dims[i]
        return is_static_dim(d) and range(*slice(None if bmask[i] else begins[i], None if emask[i] else ends[i],
                                                  strides[i]).indices(int(d))) == range(int(d))

    k = max((i + 1 for i in range(r) if not whole(i)), default=0)
    if k == 0:  # the whole tensor is replaced
        alias(e, op, update)
        return
    if not all(is_static_dim(d) for d in x_dims[:k]):
        raise LoweringError(f"the sliced dims {list(range(k))} must be static (the positions are computed at "
                            f"conversion time)")
    ranges = []
    for i in range(k):
        d = int(x_dims[i])
        if squeeze[i]:
            b = 0 if bmask[i] else begins[i]
            ranges.append([b + d if b < 0 else b])
        else:
            ranges.append(list(range(*slice(None if bmask[i] else begins[i], None if emask[i] else ends[i],
                                            strides[i]).indices(d))))
    lead = [len(rg) for rg, s in zip(ranges, squeeze[:k]) if not s]
    grid = np.meshgrid(*[np.asarray(rg, np.float32) for rg in ranges], indexing="ij")
    positions = np.stack(grid, axis=-1).reshape(lead + [k])
    idx = e.load_constant(None, positions, f"{op.name}_positions")
    single(e, op, "scatterND", [e.blob(x), idx, e.blob(update)]).mode = _mode_value("update")


# ---------------------------------------------------------------------------------------------
# gathers and scatters


def _negatives_allowed(op: Op) -> bool:
    return op.opdef is not None and opset_index(op.opdef.signature.since) < opset_index("iOS17")


def _sizes_blob(e: NetworkEmitter, op: Op, x: Value, axes: list[int]) -> str:
    """The sizes of ``x``'s ``axes`` as a vector blob (constant when static, else getShape + gather)."""
    x_dims = dims(x)
    if all(is_static_dim(x_dims[a]) for a in axes):
        return e.load_constant(None, np.asarray([int(x_dims[a]) for a in axes], np.float32), f"{op.name}_sizes")
    shape = e.fresh(f"{op.name}_shape")
    e.layer("getShape", shape, [e.blob(x)], [shape])
    picked = e.fresh(f"{op.name}_sizes")
    e.layer("gather", picked, [shape, e.load_constant(None, np.asarray(axes, np.float32), f"{op.name}_axes")],
            [picked]).axis = 0
    return picked


def _indices(e: NetworkEmitter, op: Op, x: Value, key: str, axes: list[int]) -> str:
    """The blob of index input ``key`` addressing ``x``'s ``axes`` (the last index dim runs over
    them when there are several), with negative indices made non-negative where MIL allows them."""
    iv = inp(op, key)
    if not _negatives_allowed(op):
        return e.blob(iv)
    const = e.const(iv)
    x_dims = dims(x)
    if const is not None:
        idx = np.asarray(const, np.int64)
        if not (idx < 0).any():
            return e.blob(iv)
        if all(is_static_dim(x_dims[a]) for a in axes):
            sizes = np.asarray([int(x_dims[a]) for a in axes], np.int64)
            return e.load_constant(None, np.where(idx < 0, idx + sizes, idx).astype(np.float32), f"{op.name}_{key}")
    n = op.name
    neg, wrap, out = e.fresh(f"{n}_{key}_negative"), e.fresh(f"{n}_{key}_wrap"), e.fresh(f"{n}_{key}_wrapped")
    e.layer("lessThan", neg, [e.blob(iv)], [neg]).alpha = 0.0
    e.layer("multiplyBroadcastable", wrap, [neg, _sizes_blob(e, op, x, axes)], [wrap])
    e.layer("addBroadcastable", out, [e.blob(iv), wrap], [out])
    return out


def _no_batch_dims(e: NetworkEmitter, op: Op) -> None:
    if op.opdef is None or "batch_dims" not in op.opdef.signature.inputs:
        return
    b = e.param(op, "batch_dims")
    if b is not None and int(np.asarray(b)) != 0:
        raise LoweringError("batch_dims (iOS16) has no NeuralNetwork form")


@lowering("gather", absorbs=embedding_absorbs,
          note="embeddingND for rows of a constant 2-D table at indices known to be >= 0 (quantized and fp16 "
               "tables kept; a bias add and index reshapes absorbed); else gather (negative indices documented); "
               "a rank-0 index adds a squeeze (it is a [1] blob); batch_dims != 0 unsupported")
def _gather(e: NetworkEmitter, op: Op) -> None:
    _no_batch_dims(e, op)
    plan = plan_embedding(op)
    if plan is not None:
        lower_embedding(e, op, plan)
        return
    x, indices = inp(op, "x"), inp(op, "indices")
    axis = axis_param(e, op, "axis", rank(x))
    if rank(indices) == 0 and rank(x) > 1:  # the [1] index blob would keep the axis
        picked = e.fresh(f"{op.name}_picked")
        e.layer("gather", picked, [e.blob(x), e.blob(indices)], [picked]).axis = axis
        single(e, op, "squeeze", [picked]).axes.append(axis)
        return
    single(e, op, "gather", [e.blob(x), e.blob(indices)]).axis = axis


@lowering("gather_along_axis")
def _gather_along_axis(e: NetworkEmitter, op: Op) -> None:
    x = inp(op, "x")
    single(e, op, "gatherAlongAxis", [e.blob(x), e.blob(inp(op, "indices"))]).axis = axis_param(
        e, op, "axis", rank(x))


@lowering("gather_nd", note="gatherND; negative indices made non-negative first; batch_dims != 0 unsupported")
def _gather_nd(e: NetworkEmitter, op: Op) -> None:
    _no_batch_dims(e, op)
    x = inp(op, "x")
    k = dims(inp(op, "indices"))[-1]
    if not is_static_dim(k):
        raise LoweringError("the index length (last dim of indices) must be static")
    single(e, op, "gatherND", [e.blob(x), _indices(e, op, x, "indices", list(range(int(k))))])


def _mode_value(mode: str) -> int:
    from ....formats.proto import NeuralNetwork_pb2

    return NeuralNetwork_pb2.ScatterMode.Value(_SCATTER_MODES[mode])


def _scatter_mode(e: NetworkEmitter, op: Op) -> int:
    mode = str(np.asarray(e.const_param(op, "mode")))
    if mode not in _SCATTER_MODES:
        raise LoweringError(f"unknown scatter mode '{mode}'")
    if mode == "div" and op.outputs[0].type.dtype.kind != "float":  # type: ignore[union-attr]
        raise LoweringError("integer scatter 'div' truncates each quotient; the layer divides in fp32")
    return _mode_value(mode)


@lowering("scatter", note="scatter (every mode; integer div refused); negative indices made non-negative first")
def _scatter(e: NetworkEmitter, op: Op) -> None:
    data = inp(op, "data")
    axis = axis_param(e, op, "axis", rank(data))
    params = single(e, op, "scatter", [e.blob(data), _indices(e, op, data, "indices", [axis]),
                                       e.blob(inp(op, "updates"))])
    params.axis = axis
    params.mode = _scatter_mode(e, op)


@lowering("scatter_along_axis", note="scatterAlongAxis (negative indices documented)")
def _scatter_along_axis(e: NetworkEmitter, op: Op) -> None:
    data = inp(op, "data")
    params = single(e, op, "scatterAlongAxis", [e.blob(data), e.blob(inp(op, "indices")), e.blob(inp(op, "updates"))])
    params.axis = axis_param(e, op, "axis", rank(data))
    params.mode = _scatter_mode(e, op)


@lowering("scatter_nd", note="scatterND; negative indices made non-negative first")
def _scatter_nd(e: NetworkEmitter, op: Op) -> None:
    data = inp(op, "data")
    k = dims(inp(op, "indices"))[-1]
    if not is_static_dim(k):
        raise LoweringError("the index length (last dim of indices) must be static")
    params = single(e, op, "scatterND", [e.blob(data), _indices(e, op, data, "indices", list(range(int(k)))),
                                         e.blob(inp(op, "updates"))])
    params.mode = _scatter_mode(e, op)


# ---------------------------------------------------------------------------------------------
# one-hot, band part, non-zero, select


@lowering("one_hot", note="oneHot (iOS14); a run-time size as the second input; under a lower --target: "
          "equal against the positions, then the on/off values")
def _one_hot(e: NetworkEmitter, op: Op) -> None:
    indices = inp(op, "indices")
    size_v = inp(op, "one_hot_vector_size")
    size = e.const(size_v)
    on = exact_float(e.param(op, "on_value"), "on_value")
    off = exact_float(e.param(op, "off_value"), "off_value")
    scalar = rank(indices) == 0  # a [1] blob
    axis = axis_param(e, op, "axis", rank(indices), extra=1)
    if not allows(e, 5):
        if size is None:
            raise LoweringError("a run-time one_hot_vector_size needs the oneHot layer (iOS14), above the requested "
                                "version")
        _one_hot_by_equal(e, op, e.blob(indices), int(np.asarray(size).reshape(())), axis, rank(indices), on, off)
        return
    inputs = [e.blob(indices)] if size is not None else [e.blob(indices), e.blob(size_v)]
    # a scalar index: the vector goes last and the unit dim of its [1] blob is squeezed
    hot = e.fresh(f"{op.name}_hot") if scalar else op.name
    params = e.layer("oneHot", hot, inputs, [hot] if scalar else [e.define(op.outputs[0])])
    if size is not None:
        params.oneHotVectorSize = int(np.asarray(size).reshape(()))
    params.axis = 1 if scalar else axis
    params.onValue, params.offValue = on, off
    if scalar:
        single(e, op, "squeeze", [hot]).axes.append(0)


def _one_hot_by_equal(e: NetworkEmitter, op: Op, idx: str, size: int, axis: int, r: int, on: float,
                      off: float) -> None:
    """(indices at a unit dim at ``axis``) == positions [size, 1, ...]: 1/0, then on/off (exact:
    a select, or a product when off is 0). An index outside [0, size) matches nothing: all off."""
    n = op.name
    if r > 0:
        expanded = e.fresh(f"{n}_at_axis")
        e.layer("expandDims", expanded, [idx], [expanded]).axes.append(axis)
        idx = expanded
    positions = e.load_constant(None, np.arange(size, dtype=np.float32).reshape([size] + [1] * (r - axis)),
                                f"{n}_positions")
    if on == 1.0 and off == 0.0:
        single(e, op, "equal", [idx, positions])
        return
    hot = e.fresh(f"{n}_hot")
    e.layer("equal", hot, [idx, positions], [hot])
    if off == 0.0:
        single(e, op, "multiply", [hot]).alpha = on
        return
    on_b = e.load_constant(None, np.asarray([on], np.float32), f"{n}_on")
    off_b = e.load_constant(None, np.asarray([off], np.float32), f"{n}_off")
    single(e, op, "whereBroadcastable", [hot, on_b, off_b])


@lowering("band_part", note="matrixBandPart (the proto's formula multiplies by the band: an inf or NaN outside "
          "the band may give NaN where MIL gives 0)")
def _band_part(e: NetworkEmitter, op: Op) -> None:
    params = single(e, op, "matrixBandPart")
    params.numLower = int(np.asarray(e.const_param(op, "lower")))
    params.numUpper = int(np.asarray(e.const_param(op, "upper")))


@lowering("non_zero")
def _non_zero(e: NetworkEmitter, op: Op) -> None:
    single(e, op, "whereNonZero")


@lowering("select")
def _select(e: NetworkEmitter, op: Op) -> None:
    single(e, op, "whereBroadcastable", [e.blob(inp(op, k)) for k in ("cond", "a", "b")])


# ---------------------------------------------------------------------------------------------
# sorting, arg-reductions, cumulative sums


@lowering("topk", note="topK (useBottomK = ascending); iOS17's k = -1 is the axis size")
def _topk(e: NetworkEmitter, op: Op) -> None:
    x = inp(op, "x")
    axis = axis_param(e, op, "axis", rank(x))
    k = int(np.asarray(e.const_param(op, "k")).reshape(()))
    if k == -1:  # iOS17: the whole axis
        d = dims(x)[axis]
        if not is_static_dim(d):
            raise LoweringError("k = -1 over a flexible axis (the layer's K is a number)")
        k = int(d)
    outs = [e.define(v) for v in op.outputs]
    if len(outs) == 1:  # return_indices=False (iOS16): the layer writes them anyway
        outs.append(e.fresh(f"{op.name}_indices"))
    params = e.layer("topK", op.name, [e.blob(x)], outs)
    params.axis = axis
    params.K = k
    params.useBottomK = bool(e.param(op, "ascending"))


@lowering("argsort", note="argSort (iOS14); under a lower --target: the indices of a topK over the whole "
          "(static) axis")
def _argsort(e: NetworkEmitter, op: Op) -> None:
    x = inp(op, "x")
    axis = axis_param(e, op, "axis", rank(x))
    ascending = bool(e.param(op, "ascending"))
    if not allows(e, 5):
        d = dims(x)[axis]
        if not is_static_dim(d):
            raise LoweringError("argsort over a flexible axis needs argSort (iOS14), above the requested version")
        params = e.layer("topK", op.name, [e.blob(x)], [e.fresh(f"{op.name}_sorted"), e.define(op.outputs[0])])
        params.axis, params.K, params.useBottomK = axis, int(d), ascending
        return
    params = single(e, op, "argSort")
    params.axis = axis
    params.descending = not ascending


#: the longest axis a cumsum is written as a matmul for (its weight is axis x axis)
CUMSUM_MATMUL_MAX = 2048


@lowering("cumsum", note="cumSum (iOS14): exclusive = excludeFinalSum; under a lower --target: a batchedMatmul "
          "by a triangular 0/1 matrix over a static axis (transposed to the last)")
def _cumsum(e: NetworkEmitter, op: Op) -> None:
    x = inp(op, "x")
    r = rank(x)
    axis = axis_param(e, op, "axis", r)
    exclusive, reverse = bool(e.param(op, "exclusive")), bool(e.param(op, "reverse"))
    if allows(e, 5):
        params = single(e, op, "cumSum")
        params.axis = axis
        params.excludeFinalSum = exclusive
        params.reverse = reverse
        return
    d = dims(x)[axis]
    if not is_static_dim(d) or int(d) > CUMSUM_MATMUL_MAX:
        raise LoweringError(f"cumsum over an axis of {d} values needs cumSum (iOS14), above the requested version "
                            f"(the matmul form takes a static axis of at most {CUMSUM_MATMUL_MAX})")
    length = int(d)
    # y[j] = sum_i x[i] w[i, j]; the layer stores w transposed ([out j, in i]): j >= i (inclusive),
    # j > i (exclusive), j <= i / j < i when summing from the end
    ones = np.ones((length, length), np.float32)
    stored = np.triu(ones, 1 if exclusive else 0) if reverse else np.tril(ones, -1 if exclusive else 0)
    perm = list(range(r))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    src = e.blob(x)
    if axis != r - 1:
        moved = e.fresh(f"{op.name}_last")
        e.layer("transpose", moved, [src], [moved]).axes.extend(perm)
        src = moved
    summed = op.name if axis == r - 1 else e.fresh(f"{op.name}_summed")
    out = [e.define(op.outputs[0])] if axis == r - 1 else [summed]
    params = e.layer("batchedMatmul", summed, [src], out)
    params.weightMatrixFirstDimension = params.weightMatrixSecondDimension = length
    e.weights(params.weights, stored)
    if axis != r - 1:
        single(e, op, "transpose", [summed]).axes.extend(perm)


def _arg_reduce(kind: str):  # noqa: ANN202
    def lower(e: NetworkEmitter, op: Op) -> None:
        x = inp(op, "x")
        params = single(e, op, kind)
        params.axis = axis_param(e, op, "axis", rank(x))
        params.removeDim = not bool(e.param(op, "keep_dims"))
    return lower


lowering("reduce_argmax", note="argMax (removeDim = not keep_dims)")(_arg_reduce("argMax"))
lowering("reduce_argmin", note="argMin (removeDim = not keep_dims)")(_arg_reduce("argMin"))
