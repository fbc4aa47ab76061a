"""Indexing ONNX ops: gathers, scatters, TopK, ArgMax/ArgMin, Hardmax, Where, OneHot, Range,
CumSum/CumProd, Trilu, EyeLike, NonZero, Compress, ReverseSequence, TensorScatter.
- Unique: a stable argsort, group starts where a sorted value differs from
  the one before (NonZero gives their positions, so the output size is data dependent as in
  ONNX), first-occurrence indices from the stable order, inverse indices scattered back, counts
  from the distances between starts; ``sorted=0`` reorders the groups by first occurrence. Each
  NaN is its own value (NaN != NaN). Along an axis, slices are sorted lexicographically by one
  stable argsort per slice element (static shapes, slices up to UNIQUE_MAX_SLICE elements).

Where ONNX and MIL differ the ONNX rule is written in IR ops:

- Negative indices (Gather, GatherElements, GatherND, Scatter*, OneHot): ONNX counts them from
  the end; the programs built are iOS18, where MIL's gather/scatter call a negative index out of
  range. Indices are wrapped first (``i + size`` where ``i < 0``; at conversion time when they are
  constant). OneHot wraps ``[-depth, 0)`` and leaves the rest out of range (all ``off``), which
  MIL one_hot gives for any index outside ``[0, depth)``.
- ArgMax/ArgMin ``select_last_index``: MIL takes the first extreme; the last one is
  ``size - 1 - argmax(reverse(x))``.
- TopK: the IR topk keeps equal values in index order (lower index first, ONNX's rule) in both
  directions; ``k`` must be known at conversion time (MIL's ``k`` is a constant).
- NonZero: MIL gives ``[N, rank]``, ONNX ``[rank, N]`` (a transpose).
- Trilu / EyeLike: a mask ``col - row (>=|<=|==) k`` built from two ranges (MIL band_part cannot
  express a band that excludes the main diagonal).
- CumProd has no IR op: one ``mul`` per step along a static axis (exact, no log/exp).
"""

from __future__ import annotations

import math

import numpy as np

from ...ir.consteval import compile_time_value
from ...ir.core import Value
from ...ir.types import is_static_dim
from .context import FLOATS, NUMERIC, Ctx, Node, narrow, normalize_axis
from .registry import onnx_op

#: dtypes the iOS17+ gather family takes for ``x``.
GATHERABLE = ("fp32", "fp16", "int32", "int16", "uint16", "int8", "uint8")
SELECTABLE = ("fp32", "fp16", "int32", "bool")
INDEX = ("int32",)
#: CumProd is unrolled into one mul per step; longer axes are refused.
CUMPROD_MAX_STEPS = 1024


# -- helpers -----------------------------------------------------------------------------------


def dim_size(ctx: Ctx, x: Value, axis: int) -> int | Value:
    """``x.shape[axis]`` as an int when static, else a scalar int32 value read at run time."""
    d = x.type.shape[axis]
    if is_static_dim(d):
        return int(d)
    return ctx.b.gather(x=ctx.b.shape(x=x), indices=np.int32(axis), axis=0)


def wrap_negative(ctx: Ctx, idx: Value, size: int | Value) -> Value:
    """Indices ``i < 0`` as ``i + size`` (ONNX counts negative indices from the end). Constant
    indices with a static size are wrapped at conversion time."""
    const = compile_time_value(idx)
    if const is not None and isinstance(size, int):
        arr = np.asarray(const, np.int64)
        if not (arr < 0).any():
            return idx
        return ctx.b.const(np.where(arr < 0, arr + size, arr).astype(np.int32))
    b = ctx.b
    size_v = ctx.const(size, idx) if isinstance(size, int) else size
    return b.select(cond=b.less(x=idx, y=ctx.const(0, idx)), a=b.add(x=idx, y=size_v), b=idx)


def _index_input(ctx: Ctx, i: int) -> Value:
    return ctx.input(i, INDEX)


def common(ctx: Ctx, values: list[Value]) -> list[Value]:
    """Values cast to the dtype of the first (ONNX requires equal types; the dtype policy can only
    make them differ by widening)."""
    dt = values[0].type.dtype
    return [v if v.type.dtype == dt else ctx.b.cast(x=v, dtype=dt.name) for v in values]


def _rank(ctx: Ctx, v: Value) -> int:
    if v.type.shape is None:
        raise ctx.unsupported("an operand of unknown rank")
    return len(v.type.shape)


# -- gathers -----------------------------------------------------------------------------------


@onnx_op("Gather", versions=(1, 13))
def gather(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, GATHERABLE)
    axis = normalize_axis(ctx, int(ctx.attr("axis", 0)), _rank(ctx, x))
    idx = wrap_negative(ctx, _index_input(ctx, 1), dim_size(ctx, x, axis))
    return [ctx.b.gather(x=x, indices=idx, axis=axis)]


def _smaller_elsewhere(ctx: Ctx, x: Value, idx: Value, axis: int) -> list[int] | None:
    """The indices' shape when it is smaller than ``x`` in a dim other than ``axis`` (ONNX allows
    it, MIL's *_along_axis ops need those dims equal), else None."""
    xs, ids = x.type.shape, idx.type.shape
    if xs is None or ids is None or len(xs) != len(ids):
        return None
    if all(k == axis or (is_static_dim(a) and is_static_dim(c) and int(a) == int(c)) or a is c
           for k, (a, c) in enumerate(zip(xs, ids))):
        return None
    if not all(is_static_dim(d) for d in ids):
        raise ctx.unsupported("indices smaller than the data in a non-axis dim need a static shape")
    return [int(d) for d in ids]


@onnx_op("GatherElements", versions=(11, 13))
def gather_elements(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, GATHERABLE)
    axis = normalize_axis(ctx, int(ctx.attr("axis", 0)), _rank(ctx, x))
    idx = wrap_negative(ctx, _index_input(ctx, 1), dim_size(ctx, x, axis))
    smaller = _smaller_elsewhere(ctx, x, idx, axis)
    if smaller is not None:  # only the leading part of the other dims is read: slice it off
        size = list(smaller)
        size[axis] = -1
        x = ctx.b.slice_by_size(x=x, begin=[0] * len(size), size=size)
    return [ctx.b.gather_along_axis(x=x, indices=idx, axis=axis)]


def _wrap_nd(ctx: Ctx, x: Value, idx: Value, batch_dims: int) -> Value:
    """GatherND/ScatterND indices: component k of the last dim counts from the end of
    ``x.shape[batch_dims + k]``."""
    depth = idx.type.shape[-1] if idx.type.shape else None
    if not is_static_dim(depth):
        raise ctx.unsupported("the last dim of indices must be known at conversion time")
    sizes = [dim_size(ctx, x, batch_dims + k) for k in range(int(depth))]
    if all(isinstance(s, int) for s in sizes):
        size_v: int | Value = ctx.b.const(np.asarray(sizes, np.int32))
        const = compile_time_value(idx)
        if const is not None:
            arr = np.asarray(const, np.int64)
            return ctx.b.const(np.where(arr < 0, arr + np.asarray(sizes), arr).astype(np.int32))
    else:
        parts = [ctx.b.const(np.asarray([s], np.int32)) if isinstance(s, int) else
                 ctx.b.reshape(x=s, shape=[1]) for s in sizes]
        size_v = ctx.b.concat(values=parts, axis=0) if len(parts) > 1 else parts[0]
    b = ctx.b
    return b.select(cond=b.less(x=idx, y=ctx.const(0, idx)), a=b.add(x=idx, y=size_v), b=idx)


@onnx_op("GatherND", versions=(11, 13))
def gather_nd(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, GATHERABLE)
    batch_dims = int(ctx.attr("batch_dims", 0))
    idx = _wrap_nd(ctx, x, _index_input(ctx, 1), batch_dims)
    return [ctx.b.gather_nd(x=x, indices=idx, batch_dims=batch_dims)]


# -- scatters ----------------------------------------------------------------------------------

_REDUCTION = {"none": "update", "add": "add", "mul": "mul", "max": "max", "min": "min"}


def _mode(ctx: Ctx) -> str:
    red = ctx.attr("reduction", "none")
    if red not in _REDUCTION:
        raise ctx.format_error(f"reduction must be one of {', '.join(_REDUCTION)}, not '{red}'")
    return _REDUCTION[red]


@onnx_op("Scatter", versions=(9, 11))
@onnx_op("ScatterElements", versions=(11, 18))
def scatter_elements(ctx: Ctx, node: Node) -> list[Value]:
    """MIL scatter_along_axis; indices smaller than the data in another dim become full
    coordinates for scatter_nd (same modes, same sequential order)."""
    b = ctx.b
    data = ctx.input(0, NUMERIC)
    updates, = common(ctx, [data, ctx.input(2, NUMERIC)])[1:]
    axis = normalize_axis(ctx, int(ctx.attr("axis", 0)), _rank(ctx, data))
    idx = wrap_negative(ctx, _index_input(ctx, 1), dim_size(ctx, data, axis))
    smaller = _smaller_elsewhere(ctx, data, idx, axis)
    if smaller is None:
        return [b.scatter_along_axis(data=data, indices=idx, updates=updates, axis=axis, mode=_mode(ctx))]
    grid = np.stack(np.meshgrid(*[np.arange(n, dtype=np.int32) for n in smaller], indexing="ij"), axis=-1)
    coords = [b.const(np.ascontiguousarray(grid[..., k:k + 1])) for k in range(len(smaller))]
    coords[axis] = b.expand_dims(x=idx, axes=[-1])
    return [b.scatter_nd(data=data, indices=b.concat(values=coords, axis=-1), updates=updates, mode=_mode(ctx))]


@onnx_op("ScatterND", versions=(11, 18))
def scatter_nd(ctx: Ctx, node: Node) -> list[Value]:
    data = ctx.input(0, NUMERIC)
    updates, = common(ctx, [data, ctx.input(2, NUMERIC)])[1:]
    idx = _wrap_nd(ctx, data, _index_input(ctx, 1), 0)
    return [ctx.b.scatter_nd(data=data, indices=idx, updates=updates, mode=_mode(ctx))]


@onnx_op("TensorScatter", versions=(24, 24))
def tensor_scatter(ctx: Ctx, node: Node) -> list[Value]:
    """past_cache with ``update`` written along ``axis`` from ``write_indices[b]`` (per batch row,
    0 when absent), wrapping modulo the cache length in ``circular`` mode: one
    scatter_along_axis whose indices are ``write_indices[b] + arange(seq)``."""
    b = ctx.b
    cache = ctx.input(0, NUMERIC)
    update, = common(ctx, [cache, ctx.input(1, NUMERIC)])[1:]
    rank = _rank(ctx, cache)
    axis = normalize_axis(ctx, int(ctx.attr("axis", -2)), rank)
    if axis == 0:
        raise ctx.format_error("axis must not be the batch axis 0")
    mode = ctx.attr("mode", "linear")
    if mode not in ("linear", "circular"):
        raise ctx.format_error(f"mode must be 'linear' or 'circular', not '{mode}'")
    seq = update.type.shape[axis]
    if not is_static_dim(seq):
        raise ctx.unsupported("the update's sequence length must be known at conversion time")
    shape = [1] * rank
    shape[axis] = int(seq)
    pos = b.const(ctx.arange(int(seq), "the update's positions").reshape(shape))
    if ctx.has(2):
        start = b.reshape(x=_index_input(ctx, 2), shape=[-1] + [1] * (rank - 1))
        pos = b.add(x=pos, y=start)
    if mode == "circular":
        size = dim_size(ctx, cache, axis)
        pos = b.mod(x=pos, y=ctx.const(size, pos) if isinstance(size, int) else size)
    idx = b.add(x=pos, y=b.fill_like(ref_tensor=update, value=np.int32(0)))  # broadcast to the update's shape
    return [b.scatter_along_axis(data=cache, indices=idx, updates=update, axis=axis, mode="update")]


# -- selection ---------------------------------------------------------------------------------


@onnx_op("TopK", versions=(10, 24))
def topk(ctx: Ctx, node: Node) -> list[Value]:
    """MIL topk when ``k`` is known at conversion time; else a stable argsort cut to ``k`` (a
    run-time size), whose tie order is the same (lower index first)."""
    b = ctx.b
    x = ctx.input(0, NUMERIC)
    rank = _rank(ctx, x)
    axis = normalize_axis(ctx, int(ctx.attr("axis", -1)), rank)
    ascending = not int(ctx.attr("largest", 1))
    k_arr = ctx.const_input(1)
    if k_arr is not None:
        if k_arr.size != 1:
            raise ctx.format_error(f"k must hold one value, holds {k_arr.size}")
        values, indices = b.topk(x=x, k=np.int32(k_arr.reshape(-1)[0]), axis=axis, ascending=ascending, sort=True)
        return [values, indices]
    k = b.reshape(x=_index_input(ctx, 1), shape=[1])
    size = b.concat(values=[b.const(np.full(axis, -1, np.int32)), k,
                            b.const(np.full(rank - axis - 1, -1, np.int32))], axis=0)
    order = b.argsort(x=x, axis=axis, ascending=ascending)
    indices = b.slice_by_size(x=order, begin=np.zeros(rank, np.int32), size=size)
    return [b.gather_along_axis(x=x, indices=indices, axis=axis), indices]


def _arg(ctx: Ctx, node: Node) -> Value:
    b = ctx.b
    x = ctx.input(0, NUMERIC)
    axis = normalize_axis(ctx, int(ctx.attr("axis", 0)), _rank(ctx, x))
    keep = bool(int(ctx.attr("keepdims", 1)))
    ir_op = "reduce_argmax" if node.op_type == "ArgMax" else "reduce_argmin"
    if not int(ctx.attr("select_last_index", 0)):
        return b.add_op(ir_op, {"x": x, "axis": axis, "keep_dims": keep}).outputs[0]
    first = b.add_op(ir_op, {"x": b.reverse(x=x, axes=[axis]), "axis": axis, "keep_dims": keep}).outputs[0]
    size = dim_size(ctx, x, axis)
    last = ctx.const(size - 1, first) if isinstance(size, int) else b.sub(x=size, y=np.int32(1))
    return b.sub(x=last, y=first)


@onnx_op("ArgMax", "ArgMin", versions=(11, 13))
def arg_max_min(ctx: Ctx, node: Node) -> list[Value]:
    return [_arg(ctx, node)]


@onnx_op("Hardmax", versions=(13, 13))
def hardmax(ctx: Ctx, node: Node) -> list[Value]:
    """1 at the first maximum along ``axis``, 0 elsewhere (one_hot of the argmax)."""
    b = ctx.b
    x = ctx.input(0, FLOATS)
    axis = normalize_axis(ctx, int(ctx.attr("axis", -1)), _rank(ctx, x))
    size = dim_size(ctx, x, axis)
    first = b.reduce_argmax(x=x, axis=axis, keep_dims=False)
    depth = np.int32(size) if isinstance(size, int) else size
    st = x.type.dtype.storage
    return [b.one_hot(indices=first, one_hot_vector_size=depth, axis=axis, on_value=st.type(1), off_value=st.type(0))]


@onnx_op("Where", versions=(9, 16))
def where(ctx: Ctx, node: Node) -> list[Value]:
    cond = ctx.input(0, ("bool",))
    a, other = common(ctx, [ctx.input(1, SELECTABLE), ctx.input(2, SELECTABLE)])
    return [ctx.b.select(cond=cond, a=a, b=other)]


@onnx_op("OneHot", versions=(9, 28))
def one_hot(ctx: Ctx, node: Node) -> list[Value]:
    """MIL one_hot after wrapping negative indices; run-time ``values`` select between
    ``values[1]`` and ``values[0]`` through a bool one-hot (MIL's on/off values are constants)."""
    b = ctx.b
    depth_v = ctx.input(1, NUMERIC)
    depth_c = compile_time_value(depth_v)
    if depth_c is not None:
        depth: int | Value = int(np.floor(np.asarray(depth_c, np.float64).reshape(-1)[0]))
    else:
        if depth_v.type.dtype.is_float:
            depth_v = b.cast(x=b.floor(x=depth_v), dtype="int32")
        depth = b.reshape(x=depth_v, shape=[])
    idx = ctx.input(0, NUMERIC)
    if idx.type.dtype.is_float:
        idx = b.cast(x=b.floor(x=idx), dtype="int32")  # ONNX casts float indices to integers
    idx = wrap_negative(ctx, idx, depth)
    axis = normalize_axis(ctx, int(ctx.attr("axis", -1)), _rank(ctx, idx) + 1)
    size = np.int32(depth) if isinstance(depth, int) else depth
    values = ctx.const_input(2)
    if values is not None:
        if values.size != 2:
            raise ctx.format_error(f"values must hold [off_value, on_value], holds {values.size} elements")
        vals = narrow(np.asarray(values).reshape(-1), "values")
        if vals.dtype not in (np.float32, np.float16, np.int32, np.bool_):
            vals = vals.astype(np.int32)
        return [b.one_hot(indices=idx, one_hot_vector_size=size, axis=axis, on_value=vals[1], off_value=vals[0])]
    vals = b.reshape(x=ctx.input(2, SELECTABLE), shape=[2])
    hot = b.one_hot(indices=idx, one_hot_vector_size=size, axis=axis, on_value=True, off_value=False)
    return [b.select(cond=hot, a=b.gather(x=vals, indices=np.int32(1), axis=0),
                     b=b.gather(x=vals, indices=np.int32(0), axis=0))]


@onnx_op("Range", versions=(11, 27))
def range_(ctx: Ctx, node: Node) -> list[Value | np.ndarray]:
    consts = [ctx.const_input(i) for i in range(3)]
    if all(c is not None for c in consts):
        start, limit, delta = (np.asarray(c).reshape(()) for c in consts)
        if delta == 0:
            raise ctx.format_error("delta is 0")
        n = max(int(np.ceil((float(limit) - float(start)) / float(delta))), 0)
        return [(start + delta * np.arange(n)).astype(start.dtype)]  # exact, in the ONNX dtype
    start, limit, delta = common(ctx, [ctx.input(i, NUMERIC) for i in range(3)])
    b = ctx.b
    start, limit, delta = (b.reshape(x=v, shape=[]) for v in (start, limit, delta))
    return [b.range_1d(start=start, end=limit, step=delta)]


# -- scans -------------------------------------------------------------------------------------


def _scan(ctx: Ctx, one_axis) -> list[Value]:
    """Run ``one_axis(x, axis, exclusive, reverse)``; a run-time ``axis`` selects among the
    results for every axis of ``x`` (MIL's axis is a constant)."""
    b = ctx.b
    x = ctx.input(0, NUMERIC)
    rank = _rank(ctx, x)
    exclusive, reverse = bool(int(ctx.attr("exclusive", 0))), bool(int(ctx.attr("reverse", 0)))
    axis_arr = ctx.const_input(1)
    if axis_arr is not None:
        axis = normalize_axis(ctx, int(np.asarray(axis_arr).reshape(-1)[0]), rank)
        return [one_axis(x, axis, exclusive, reverse)]
    if rank == 1:  # 0 and -1 are the only valid axes
        return [one_axis(x, 0, exclusive, reverse)]
    a = b.reshape(x=_index_input(ctx, 1), shape=[])
    a = b.select(cond=b.less(x=a, y=np.int32(0)), a=b.add(x=a, y=np.int32(rank)), b=a)
    out = one_axis(x, rank - 1, exclusive, reverse)
    for k in range(rank - 1):
        out = b.select(cond=b.equal(x=a, y=np.int32(k)), a=one_axis(x, k, exclusive, reverse), b=out)
    return [out]


@onnx_op("CumSum", versions=(11, 14))
def cumsum(ctx: Ctx, node: Node) -> list[Value]:
    return _scan(ctx, lambda x, axis, exclusive, reverse: ctx.b.cumsum(x=x, axis=axis, exclusive=exclusive,
                                                                      reverse=reverse))


@onnx_op("CumProd", versions=(26, 26))
def cumprod(ctx: Ctx, node: Node) -> list[Value]:
    return _scan(ctx, lambda x, axis, exclusive, reverse: _cumprod(ctx, x, axis, exclusive, reverse))


def _cumprod(ctx: Ctx, x: Value, axis: int, exclusive: bool, reverse: bool) -> Value:
    """Running products, one mul per step along the (static) axis."""
    b = ctx.b
    n = x.type.shape[axis]
    if not is_static_dim(n):
        raise ctx.unsupported("CumProd needs the scanned axis size at conversion time")
    n = int(n)
    if n > CUMPROD_MAX_STEPS:
        raise ctx.unsupported(f"CumProd over {n} steps (at most {CUMPROD_MAX_STEPS} are unrolled)")
    if n == 0:
        return b.identity(x=x)
    rank = _rank(ctx, x)
    parts: dict[int, Value] = {}
    acc = None
    for i in (range(n - 1, -1, -1) if reverse else range(n)):
        begin = [0] * rank
        begin[axis] = i
        size = [-1] * rank
        size[axis] = 1
        sl = b.slice_by_size(x=x, begin=begin, size=size)
        if exclusive:
            parts[i] = acc if acc is not None else b.fill_like(ref_tensor=sl, value=sl.type.dtype.storage.type(1))
        acc = sl if acc is None else b.mul(x=acc, y=sl)
        if not exclusive:
            parts[i] = acc
    return b.concat(values=[parts[i] for i in range(n)], axis=axis) if n > 1 else b.identity(x=parts[0])


# -- masks -------------------------------------------------------------------------------------


def _offsets(ctx: Ctx, x: Value) -> Value:
    """``col - row`` over the last two dims of ``x`` (an int32 [rows, cols] tensor)."""
    b = ctx.b
    rank = _rank(ctx, x)
    rows, cols = dim_size(ctx, x, rank - 2), dim_size(ctx, x, rank - 1)
    if isinstance(rows, int) and isinstance(cols, int):
        return b.const(np.arange(cols, dtype=np.int32)[None, :] - np.arange(rows, dtype=np.int32)[:, None])
    r = b.range_1d(start=np.int32(0), end=rows if not isinstance(rows, int) else np.int32(rows), step=np.int32(1))
    c = b.range_1d(start=np.int32(0), end=cols if not isinstance(cols, int) else np.int32(cols), step=np.int32(1))
    return b.sub(x=b.expand_dims(x=c, axes=[0]), y=b.expand_dims(x=r, axes=[1]))


@onnx_op("Trilu", versions=(14, 14))
def trilu(ctx: Ctx, node: Node) -> list[Value]:
    """upper: keep ``col - row >= k``; lower: keep ``col - row <= k``; zero elsewhere."""
    b = ctx.b
    x = ctx.input(0, SELECTABLE)
    if _rank(ctx, x) < 2:
        raise ctx.format_error("input must have rank >= 2")
    k = ctx.optional_input(1, INDEX)
    k = b.reshape(x=k, shape=[]) if k is not None else np.int32(0)
    off = _offsets(ctx, x)
    upper = bool(int(ctx.attr("upper", 1)))
    keep = b.greater_equal(x=off, y=k) if upper else b.less_equal(x=off, y=k)
    zero = np.zeros((), x.type.dtype.storage)
    return [b.select(cond=keep, a=x, b=zero)]


@onnx_op("EyeLike", versions=(9, 22))
def eye_like(ctx: Ctx, node: Node) -> list[Value | np.ndarray]:
    """Ones where ``col - row == k``. The output dtype (the ``dtype`` attribute, else the input's)
    is applied by the driver."""
    x = ctx.input(0)
    if _rank(ctx, x) != 2:
        raise ctx.format_error("input must be 2-D")
    k = int(ctx.attr("k", 0))
    shape = x.type.shape
    if all(is_static_dim(d) for d in shape):
        out = np.eye(int(shape[0]), int(shape[1]), k=k, dtype=np.float32)
        return [ctx.b.const(out)]
    return [ctx.b.cast(x=ctx.b.equal(x=_offsets(ctx, x), y=np.int32(k)), dtype="fp32")]


# -- data-dependent shapes ---------------------------------------------------------------------


@onnx_op("NonZero", versions=(9, 13))
def non_zero(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, ("fp32", "fp16", "int32", "bool"))
    if _rank(ctx, x) == 0:
        raise ctx.unsupported("NonZero of a scalar")
    return [ctx.b.transpose(x=ctx.b.non_zero(x=x), perm=[1, 0])]


@onnx_op("Compress", versions=(9, 28))
def compress(ctx: Ctx, node: Node) -> list[Value]:
    """The slices of ``input`` along ``axis`` (of the flattened input when absent) whose
    ``condition`` is true: a gather at the condition's non-zero positions."""
    b = ctx.b
    x = ctx.input(0, GATHERABLE)
    cond = ctx.input(1, ("bool",))
    axis = ctx.attr("axis")
    if axis is None:
        x = b.reshape(x=x, shape=[-1])
        axis = 0
    axis = normalize_axis(ctx, int(axis), _rank(ctx, x))
    idx = b.reshape(x=b.non_zero(x=cond), shape=[-1])
    return [b.gather(x=x, indices=idx, axis=axis)]


@onnx_op("ReverseSequence", versions=(10, 28))
def reverse_sequence(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, ("fp32", "fp16", "int32", "int8", "int16", "uint8", "uint16", "bool"))
    rank = _rank(ctx, x)
    batch_axis = normalize_axis(ctx, int(ctx.attr("batch_axis", 1)), rank)
    time_axis = normalize_axis(ctx, int(ctx.attr("time_axis", 0)), rank)
    return [ctx.b.reverse_sequence(x=x, lengths=ctx.input(1, INDEX), seq_axis=time_axis, batch_axis=batch_axis)]


#: Unique along an axis sorts slices with one stable argsort per element of a slice.
UNIQUE_MAX_SLICE = 256


def _unique_rows(ctx: Ctx, x: Value, axis: int) -> tuple[Value, Value, Value]:
    """``x`` with ``axis`` first, as [n, m] rows; the stable lexicographic row order (one stable
    argsort per column, last column first); True where a sorted row starts a new value."""
    b = ctx.b
    rank = _rank(ctx, x)
    shape = x.type.shape
    if not all(is_static_dim(d) for d in shape):
        raise ctx.unsupported("Unique along an axis needs a static input shape")
    m = math.prod(int(d) for k, d in enumerate(shape) if k != axis)
    if m > UNIQUE_MAX_SLICE:
        raise ctx.unsupported(f"Unique of slices of {m} elements (at most {UNIQUE_MAX_SLICE})")
    rows = b.reshape(x=b.transpose(x=x, perm=[axis] + [k for k in range(rank) if k != axis]), shape=[int(shape[axis]), m])
    order = b.const(ctx.arange(int(shape[axis]), "the slices' order"))
    for col in range(m - 1, -1, -1):
        key = b.gather(x=b.gather(x=rows, indices=np.int32(col), axis=1), indices=order, axis=0)
        order = b.gather(x=order, indices=b.argsort(x=key, axis=0, ascending=True), axis=0)
    ordered = b.gather(x=rows, indices=order, axis=0)
    later = b.slice_by_index(x=ordered, begin=[1, 0], end=[0, 0], end_mask=[True, True])
    earlier = b.slice_by_index(x=ordered, begin=[0, 0], end=[-1, 0], begin_mask=[True, True], end_mask=[False, True])
    differs = b.reduce_max(x=b.cast(x=b.not_equal(x=later, y=earlier), dtype="int32"), axes=[1], keep_dims=False)
    starts = b.concat(values=[b.const(np.array([True])), b.cast(x=differs, dtype="bool")], axis=0)
    return rows, order, starts


@onnx_op("Unique", versions=(11, 28))
def unique(ctx: Ctx, node: Node) -> list[Value]:
    b = ctx.b
    x = ctx.input(0, NUMERIC)
    axis = ctx.attr("axis")
    if axis is None:
        rows = b.reshape(x=x, shape=[-1])
        order = b.argsort(x=rows, axis=0, ascending=True)  # stable: equal values keep index order
        ordered = b.gather(x=rows, indices=order, axis=0)
        later = b.slice_by_index(x=ordered, begin=[1], end=[0], end_mask=[True])
        earlier = b.slice_by_index(x=ordered, begin=[0], end=[-1], begin_mask=[True])
        starts = b.concat(values=[b.const(np.array([True])), b.not_equal(x=later, y=earlier)], axis=0)
    else:
        axis = normalize_axis(ctx, int(axis), _rank(ctx, x))
        rows, order, starts = _unique_rows(ctx, x, axis)
    pos = b.reshape(x=b.non_zero(x=starts), shape=[-1])  # sorted positions where a value starts
    first = b.gather(x=order, indices=pos, axis=0)
    group = b.sub(x=b.cumsum(x=b.cast(x=starts, dtype="int32"), axis=0), y=np.int32(1))
    inverse = b.scatter(data=b.fill_like(ref_tensor=order, value=np.int32(0)), indices=order, updates=group,
                        axis=0, mode="update")
    n = b.slice_by_size(x=b.shape(x=rows), begin=[0], size=[1])
    counts = b.sub(x=b.concat(values=[b.slice_by_index(x=pos, begin=[1], end=[0], end_mask=[True]), n], axis=0),
                   y=pos)
    if not int(ctx.attr("sorted", 1)):
        by_first = b.argsort(x=first, axis=0, ascending=True)
        new_group = b.argsort(x=by_first, axis=0, ascending=True)  # the inverse permutation
        first, inverse = b.gather(x=first, indices=by_first, axis=0), b.gather(x=new_group, indices=inverse, axis=0)
        counts = b.gather(x=counts, indices=by_first, axis=0)
    values = b.gather(x=rows, indices=first, axis=0)  # the first occurrence of each value, in output order
    if axis is not None:
        shape = [int(d) for d in x.type.shape]
        rest = [d for k, d in enumerate(shape) if k != axis]
        values = b.reshape(x=values, shape=[-1] + rest)
        back = list(range(1, axis + 1)) + [0] + list(range(axis + 1, len(shape)))
        values = b.transpose(x=values, perm=back)
    return [values, first, inverse, counts]
