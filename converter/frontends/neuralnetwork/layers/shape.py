"""Shape layers: the classic rank-5 ones (reshape, flatten, permute, concat, split, sequenceRepeat)
and the spec-4+ ND ones (transpose, tile, stack, concatND, splitND, squeeze, expandDims,
flattenTo2D, reshape*/rankPreservingReshape, getShape, fill*, broadcastTo*, constantPad, range*).

NeuralNetwork tensors are float at run time: a tensor that carries a shape, a count or indices
arrives as fp32 and is cast to int32 before an op that needs integers; integer results (getShape)
are cast back to fp32. A parameter known at compile time (a layer field, or a const input) is
passed as a literal, so the result keeps static dims; run-time shapes give symbolic dims.

The helpers at the top are shared with indexing.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ....formats.proto import NeuralNetwork_pb2 as nn
from ....ir.core import Value
from ....ir.types import is_static_dim, num_elements
from ..context import LayerContext
from ..registry import lowers

IntArg = Value | np.ndarray  # an int32 operand: a literal (known at compile time) or a run-time value


# ---------------------------------------------------------------------------------------------
# helpers (shared with indexing.py)


def norm_axis(ctx: LayerContext, axis: int, rank: int, what: str = "axis", *, extra: int = 0) -> int:
    """``axis`` in [-(rank + extra), rank + extra) normalised to >= 0, or a FormatError."""
    n = rank + extra
    if not -n <= axis < n:
        raise ctx.fail(f"{what} {axis} is out of range for rank {rank}", field=what)
    return axis + n if axis < 0 else axis


def need_rank(ctx: LayerContext, x: Value, lo: int, why: str = "") -> tuple:
    shape = ctx.shape(x)
    if len(shape) < lo:
        raise ctx.fail(f"needs an input of rank >= {lo}{why}, '{x.name}' has rank {len(shape)}")
    return shape


def is_static(shape: Sequence[Any]) -> bool:
    return all(is_static_dim(d) for d in shape)


def const_value(v: Value) -> np.ndarray | None:
    """The value of a const input, looking through the cast that follows a constant stored in
    fp16 (see LayerContext.weight)."""
    c = v.const_val
    p = v.producer
    if c is None and p is not None and p.type == "cast" and v.type.dtype.name == "fp32":
        src = p.inputs.get("x")
        if isinstance(src, Value) and src.type.dtype.name == "fp16":
            c = src.const_val  # fp16 -> fp32 is exact
    return None if c is None else np.asarray(c)


def const_ints(ctx: LayerContext, v: Value, what: str) -> list[int] | None:
    """The values of a compile-time const input as ints (floats truncated, as a cast does);
    None when the input is computed at run time."""
    c = const_value(v)
    if c is None:
        return None
    arr = c.reshape(-1)
    if arr.dtype.kind == "f":
        if not np.isfinite(arr).all():
            raise ctx.fail(f"input '{v.name}' ({what}) holds non-finite values")
        arr = np.trunc(arr)
    return [int(t) for t in arr]


def as_int32(ctx: LayerContext, v: Value, what: str) -> IntArg:
    """An index/shape tensor as int32: a literal when const, else a cast of the (float) tensor."""
    vals = const_ints(ctx, v, what)
    if vals is not None:
        return np.asarray(vals, np.int32).reshape(np.shape(const_value(v)))
    if v.type.dtype.name == "int32":
        return v
    return ctx.b.cast(x=v, dtype="int32", name=f"{ctx.name}_{what}_int")


def as_scalar(ctx: LayerContext, v: Value, what: str, dtype: str) -> Any:
    """A scalar input (rank 0, or one element such as shape (1,)) as a rank-0 ``dtype`` operand."""
    shape = ctx.shape(v)
    if not all(is_static_dim(d) and int(d) == 1 for d in shape):
        raise ctx.fail(f"input '{v.name}' ({what}) must hold one value, has shape {[str(d) for d in shape]}")
    c = const_value(v)
    if c is not None:
        val = c.reshape(())
        if not np.isfinite(val):
            raise ctx.fail(f"input '{v.name}' ({what}) is not finite")
        return np.int32(np.trunc(val)) if dtype == "int32" else np.float32(val)
    if shape:
        v = ctx.b.squeeze(x=v, name=f"{ctx.name}_{what}_scalar")
    if v.type.dtype.name != dtype:
        v = ctx.b.cast(x=v, dtype=dtype, name=f"{ctx.name}_{what}_{dtype}")
    return v


def to_fp32(ctx: LayerContext, v: Value, name: str) -> Value:
    """An int result as the fp32 tensor NeuralNetwork layers produce."""
    return v if v.type.dtype.name == "fp32" else ctx.b.cast(x=v, dtype="fp32", name=name)


def shape_vector(ctx: LayerContext, ref: Value, what: str) -> IntArg:
    """The shape of ``ref`` as int32: a literal when static (keeps static dims downstream), else
    a ``shape`` op."""
    shape = ctx.shape(ref)
    if is_static(shape):
        return np.asarray([int(d) for d in shape], np.int32)
    return ctx.b.shape(x=ref, name=f"{ctx.name}_{what}_shape")


def reshape_target(lead: Sequence[Any], tail: Sequence[int]) -> list[int]:
    """The reshape target that keeps the ``lead`` dims of an input and gives it ``tail`` after
    them (``tail`` may hold one -1): literal sizes where they are static, -1 for the one unknown
    size when ``tail`` has none, 0 (copy the input's dim) for the others. Literal sizes keep the
    result's dims static, and a -1 rather than a 0 for a symbolic dim lets coremltools' MIL loader
    infer the shape (its reshape inference reads a 0 literally when the input has symbolic dims)."""
    free = -1 not in tail
    out: list[int] = []
    for d in lead:
        if is_static_dim(d):
            out.append(int(d))
        else:
            out.append(-1 if free else 0)
            free = False
    return out + [int(t) for t in tail]


def vector_length(ctx: LayerContext, v: IntArg, what: str) -> int:
    """The length of a 1-D shape/reps vector: a FormatError for another rank, an
    UnsupportedError for a run-time length."""
    shape = np.shape(v) if isinstance(v, np.ndarray) else ctx.shape(v)
    if len(shape) != 1:
        raise ctx.fail(f"{what} must be a 1-D tensor, has shape {[str(d) for d in shape]}")
    if not is_static_dim(shape[0]):
        raise ctx.unsupported(f"{what} has a length known only at run time (the rank it sets must be static)")
    return int(shape[0])


# ---------------------------------------------------------------------------------------------
# classic layers: rank-5 semantics (spec <= 3), axes counted from the end in ND networks


@lowers("reshape")
def reshape(ctx: LayerContext) -> Value:
    """Rank 5 in and out. CHANNEL_FIRST: the row-major data of each [C, H, W] (3-element target)
    or of the whole [Seq, C, H, W] (4-element target) takes the target shape. CHANNEL_LAST: the
    data is read in [H, W, C] order, laid out as [H_out, W_out, C_out] and permuted back to
    [C_out, H_out, W_out] (the spec's flatten-reshape-permute)."""
    p, b, n = ctx.params, ctx.b, ctx.name
    x = ctx.input()
    if ctx.rank(x) != 5:
        raise ctx.fail(f"needs a rank-5 input [Seq, Batch, C, H, W], '{x.name}' has rank {ctx.rank(x)}")
    target = [int(t) for t in p.targetShape]
    shape = ctx.shape(x)
    if len(target) == 3:
        lead = list(shape[:2])  # Seq and Batch kept: each [C, H, W] is reshaped on its own
        size = num_elements(shape[2:])
        if size is not None and size != int(np.prod(target)):
            raise ctx.fail(f"each [C, H, W] of the input holds {size} elements, targetShape {target} holds "
                           f"{int(np.prod(target))}", field="targetShape")
    elif len(target) == 4:
        lead, target = [target[0], shape[1]], target[1:]  # Seq_out from the target, Batch kept
    else:
        raise ctx.fail(f"targetShape must be [C, H, W] or [Seq, C, H, W], got {target}", field="targetShape")
    if p.mode == nn.ReshapeLayerParams.CHANNEL_FIRST:
        return b.reshape(x=x, shape=reshape_target(lead, target), name=n)
    c_out, h_out, w_out = target
    hwc = b.transpose(x=x, perm=[0, 1, 3, 4, 2], name=f"{n}_hwc")
    y = b.reshape(x=hwc, shape=reshape_target(lead, [h_out, w_out, c_out]), name=f"{n}_hwc_out")
    return b.transpose(x=y, perm=[0, 1, 4, 2, 3], name=n)


@lowers("flatten")
def flatten(ctx: LayerContext) -> Value:
    """[..., C, H, W] -> [..., C*H*W, 1, 1] (leading dims are batch); CHANNEL_LAST reads the
    data of each [C, H, W] in [H, W, C] order."""
    x = ctx.input()
    r = len(need_rank(ctx, x, 3))
    if ctx.params.mode == nn.FlattenLayerParams.CHANNEL_LAST:
        x = ctx.b.transpose(x=x, perm=list(range(r - 3)) + [r - 2, r - 1, r - 3], name=f"{ctx.name}_hwc")
    shape = ctx.shape(x)
    size = num_elements(shape[r - 3:])
    return ctx.b.reshape(x=x, shape=reshape_target(shape[: r - 3], [-1 if size is None else size, 1, 1]),
                         name=ctx.name)


@lowers("permute")
def permute(ctx: LayerContext) -> Value:
    """``axis`` permutes [Seq, C, H, W] (indices 0..3) of a rank-5 [Seq, Batch, C, H, W]
    tensor; Batch (axis 1 of the rank-5 view) stays in place. Empty = identity."""
    x = ctx.input()
    if ctx.rank(x) != 5:
        raise ctx.fail(f"needs a rank-5 input [Seq, Batch, C, H, W], '{x.name}' has rank {ctx.rank(x)}")
    axis = [int(a) for a in ctx.params.axis] or [0, 1, 2, 3]
    if sorted(axis) != [0, 1, 2, 3]:
        raise ctx.fail(f"axis must be a permutation of [0, 1, 2, 3] (Seq, C, H, W), got {axis}", field="axis")
    five = [0 if a == 0 else a + 1 for a in axis]
    return ctx.b.transpose(x=x, perm=[five[0], 1, *five[1:]], name=ctx.name)


@lowers("concat")
def concat(ctx: LayerContext) -> Value:
    """Join along C (axis -3), or along Seq (axis -5) with sequenceConcat."""
    ctx.expect_inputs(2, -1)
    seq = ctx.params.sequenceConcat
    lo = 5 if seq else 3
    for x in ctx.inputs:
        need_rank(ctx, x, lo, " (sequenceConcat)" if seq else "")
    return ctx.b.concat(values=tuple(ctx.inputs), axis=-5 if seq else -3, name=ctx.name)


@lowers("split")
def split(ctx: LayerContext) -> Sequence[Value]:
    """nOutputs equal parts along C (axis -3); 0 means one part per listed output."""
    x = ctx.input()
    need_rank(ctx, x, 3)
    n = int(ctx.params.nOutputs) or len(ctx.layer.output)
    ctx.expect_outputs(n, "nOutputs")
    c = ctx.shape(x)[-3]
    if is_static_dim(c) and int(c) % n:
        raise ctx.fail(f"{c} channels do not split into {n} equal parts", field="nOutputs")
    if n == 1:
        return [ctx.b.identity(x=x, name=ctx.name)]
    return list(ctx.b.split(x=x, num_splits=n, axis=-3, name=ctx.name))


@lowers("sequenceRepeat")
def sequence_repeat(ctx: LayerContext) -> Value:
    """Repeat the whole sequence (axis -5) nRepetitions times: [s0, s1, s0, s1, ...]."""
    x = ctx.input()
    r = len(need_rank(ctx, x, 5))
    reps = int(ctx.params.nRepetitions)
    if reps < 1:
        raise ctx.fail("nRepetitions must be >= 1", field="nRepetitions")
    return ctx.b.tile(x=x, reps=[1] * (r - 5) + [reps, 1, 1, 1, 1], name=ctx.name)


# ---------------------------------------------------------------------------------------------
# ND layers: permutations, joins, splits, repeats


@lowers("transpose")
def transpose(ctx: LayerContext) -> Value:
    """``axes`` permutes the input's axes. Axes naming fewer axes than the input has permute the
    trailing ones when the leading axes are 1s, which are dropped (rank len(axes)): an image input
    is [1, C, H, W] or [1, 1, C, H, W] (io.py), and coremltools' builder writes a transpose
    [1, 2, 0] to HWC for images made from [C, H, W] arrays (Core ML runs it)."""
    x = ctx.input()
    axes = [int(a) for a in ctx.params.axes]
    shape = ctx.shape(x)
    r, k = len(shape), len(axes)
    if 0 < k < r and sorted(axes) == list(range(k)) and all(is_static_dim(d) and int(d) == 1 for d in shape[:r - k]):
        x = ctx.b.squeeze(x=x, axes=list(range(r - k)), name=f"{ctx.name}_trailing")
        r = k
    if sorted(axes) != list(range(r)):
        raise ctx.fail(f"axes must be a permutation of [0, {r}), got {axes}", field="axes")
    return ctx.b.transpose(x=x, perm=axes, name=ctx.name)


@lowers("tile")
def tile(ctx: LayerContext) -> Value:
    """reps (a second input overrides the field) shorter than the rank get leading 1s."""
    ctx.expect_inputs(1, 2)
    x = ctx.input()
    r = ctx.rank(x)
    if len(ctx.inputs) == 2:
        reps: IntArg = as_int32(ctx, ctx.input(1), "reps")
        field = "input 2 (reps)"
    else:
        reps = np.asarray([int(t) for t in ctx.params.reps], np.int32)
        field = "reps"
    k = vector_length(ctx, reps, field)
    if not 1 <= k <= r:
        raise ctx.fail(f"{field} has {k} entries, must have 1 to {r} (the input rank)", field=field)
    if isinstance(reps, np.ndarray):
        if (reps < 1).any():
            raise ctx.fail(f"{field} {reps.tolist()} must all be >= 1", field=field)
        reps = np.concatenate([np.ones(r - k, np.int32), reps])
    elif k < r:
        reps = ctx.b.concat(values=(np.ones(r - k, np.int32), reps), axis=0, name=f"{ctx.name}_reps")
    return ctx.b.tile(x=x, reps=reps, name=ctx.name)


@lowers("stack")
def stack(ctx: LayerContext) -> Value:
    ctx.expect_inputs(2, -1)
    r = ctx.rank(ctx.input())
    axis = norm_axis(ctx, int(ctx.params.axis), r, extra=1)
    return ctx.b.stack(values=tuple(ctx.inputs), axis=axis, name=ctx.name)


@lowers("concatND")
def concat_nd(ctx: LayerContext) -> Value:
    """Join along ``axis``; ``interleave`` takes one slice of each input in turn (equal shapes)."""
    ctx.expect_inputs(2, -1)
    p = ctx.params
    axis = norm_axis(ctx, int(p.axis), ctx.rank(ctx.input()))
    return ctx.b.concat(values=tuple(ctx.inputs), axis=axis, interleave=bool(p.interleave), name=ctx.name)


@lowers("splitND")
def split_nd(ctx: LayerContext) -> Sequence[Value]:
    """splitSizes (when given; numSplits is then ignored) or numSplits parts along axis. The spec
    allows unequal parts; Core ML splits as ``numpy.array_split`` does (coremltools' device test
    ``test_split_nd_cpu`` expects it): the first ``dim % numSplits`` parts hold one more element.
    MIL's ``split`` takes ``num_splits`` for equal parts only, so unequal sizes are passed as
    ``split_sizes``; when the axis is only known at run time, the parts are sliced at bounds
    computed from its length (``_array_split_at_run_time``)."""
    p = ctx.params
    x = ctx.input()
    shape = ctx.shape(x)
    axis = norm_axis(ctx, int(p.axis), len(shape))
    if p.splitSizes:
        sizes = [int(s) for s in p.splitSizes]
        ctx.expect_outputs(len(sizes), "splitSizes")
        if len(sizes) == 1:
            return [ctx.b.identity(x=x, name=ctx.name)]
        return list(ctx.b.split(x=x, split_sizes=sizes, axis=axis, name=ctx.name))
    n = int(p.numSplits)
    ctx.expect_outputs(n, "numSplits")
    if n == 1:
        return [ctx.b.identity(x=x, name=ctx.name)]
    dim = shape[axis]
    if not is_static_dim(dim):
        return _array_split_at_run_time(ctx, x, n, axis)
    d = int(dim)
    if d < n:
        raise ctx.fail(f"numSplits {n} is more than the {d} values along axis {int(p.axis)}", field="numSplits")
    if d % n == 0:
        return list(ctx.b.split(x=x, num_splits=n, axis=axis, name=ctx.name))
    q, rem = divmod(d, n)
    return list(ctx.b.split(x=x, split_sizes=[q + 1] * rem + [q] * (n - rem), axis=axis, name=ctx.name))


def _array_split_at_run_time(ctx: LayerContext, x: Value, n: int, axis: int) -> list[Value]:
    """``numpy.array_split(x, n, axis)`` for a run-time length L: part k is [b_k, b_{k+1}) with
    b_k = k * (L // n) + min(k, L % n)."""
    b, name = ctx.b, ctx.name
    r = ctx.rank(x)
    length = b.slice_by_index(x=b.shape(x=x, name=f"{name}_shape"), begin=[axis], end=[axis + 1],
                              name=f"{name}_length")
    q = b.floor_div(x=length, y=np.int32(n), name=f"{name}_quotient")
    rem = b.mod(x=length, y=np.int32(n), name=f"{name}_remainder")
    ks = np.arange(n + 1, dtype=np.int32)
    bounds = b.add(x=b.mul(x=ks, y=q, name=f"{name}_steps"), y=b.minimum(x=ks, y=rem, name=f"{name}_extra"),
                   name=f"{name}_bounds")
    others = [i != axis for i in range(r)]  # every other axis is taken whole (masked bounds)
    zeros_before, zeros_after = np.zeros(axis, np.int32), np.zeros(r - axis - 1, np.int32)

    def at(k: int, what: str) -> Value:
        bound = b.slice_by_index(x=bounds, begin=[k], end=[k + 1], name=f"{name}_{what}{k}")
        parts = [v for v in (zeros_before, bound, zeros_after) if not isinstance(v, np.ndarray) or v.size]
        return bound if len(parts) == 1 else b.concat(values=tuple(parts), axis=0, name=f"{name}_{what}{k}_vector")

    return [b.slice_by_index(x=x, begin=at(k, "begin"), end=at(k + 1, "end"), begin_mask=others, end_mask=others,
                             name=f"{name}_part{k}") for k in range(n)]


# ---------------------------------------------------------------------------------------------
# ND layers: rank changes and reshapes


@lowers("squeeze")
def squeeze(ctx: LayerContext) -> Value:
    """Remove the listed unit dims, or every static unit dim with squeezeAll (or no axes; a
    symbolic dim is assumed not to be 1). Nothing left gives shape [1]: there is no rank 0."""
    p, b, n = ctx.params, ctx.b, ctx.name
    x = ctx.input()
    shape = ctx.shape(x)
    r = len(shape)
    if p.squeezeAll or not p.axes:
        axes = [i for i, d in enumerate(shape) if is_static_dim(d) and int(d) == 1]
    else:
        axes = sorted({norm_axis(ctx, int(a), r, "axes") for a in p.axes})
        if len(axes) != len(p.axes):
            raise ctx.fail(f"axes {list(p.axes)} repeat an axis", field="axes")
        bad = [i for i in axes if is_static_dim(shape[i]) and int(shape[i]) != 1]
        if bad:
            raise ctx.fail(f"axes {bad} have sizes {[int(shape[i]) for i in bad]}, not 1", field="axes")
        symbolic = [i for i in axes if not is_static_dim(shape[i])]
        if symbolic:
            # A listed symbolic dim is 1 at run time: slicing it to [0:1] makes it statically 1,
            # so the squeeze below removes it in our type and in coremltools' alike.
            x = b.slice_by_index(x=x, begin=[0] * r, end=[1] * r, end_mask=[i not in symbolic for i in range(r)],
                                 name=f"{n}_unit")
            if any(not (is_static_dim(ctx.shape(x)[i]) and int(ctx.shape(x)[i]) == 1) for i in symbolic):
                raise ctx.unsupported(f"cannot prove the symbolic dims {symbolic} are 1")
    if not axes:
        return b.identity(x=x, name=n)
    if len(axes) == r:
        return b.reshape(x=x, shape=[1], name=n)
    return b.squeeze(x=x, axes=axes, name=n)


@lowers("expandDims")
def expand_dims(ctx: LayerContext) -> Value:
    """Unit dims at ``axes`` of the output (negative axes count in the output rank)."""
    axes = [int(a) for a in ctx.params.axes]
    if not axes:
        raise ctx.fail("axes is empty", field="axes")
    return ctx.b.expand_dims(x=ctx.input(), axes=axes, name=ctx.name)


@lowers("flattenTo2D")
def flatten_to_2d(ctx: LayerContext) -> Value:
    """[prod(shape[:axis]), prod(shape[axis:])], -rank <= axis <= rank."""
    return ctx.b.flatten2d(x=ctx.input(), axis=int(ctx.params.axis), name=ctx.name)


@lowers("reshapeStatic")
def reshape_static(ctx: LayerContext) -> Value:
    target = [int(t) for t in ctx.params.targetShape]
    if not target:
        raise ctx.fail("targetShape is empty", field="targetShape")
    return ctx.b.reshape(x=ctx.input(), shape=target, name=ctx.name)


@lowers("rankPreservingReshape")
def rank_preserving_reshape(ctx: LayerContext) -> Value:
    """targetShape of the input's rank: 0 keeps the input dim at that index, one -1 is inferred."""
    x = ctx.input()
    target = [int(t) for t in ctx.params.targetShape]
    if len(target) != ctx.rank(x):
        raise ctx.fail(f"targetShape {target} must have the input's rank {ctx.rank(x)}", field="targetShape")
    return ctx.b.reshape(x=x, shape=target, name=ctx.name)


@lowers("reshapeLike")
def reshape_like(ctx: LayerContext) -> Value:
    """The first input with the shape of the second (whose values are not used)."""
    ctx.expect_inputs(2)
    return ctx.b.reshape(x=ctx.input(0), shape=shape_vector(ctx, ctx.input(1), "ref"), name=ctx.name)


@lowers("reshapeDynamic")
def reshape_dynamic(ctx: LayerContext) -> Value:
    """The first input with the shape held by the second (a 1-D tensor)."""
    ctx.expect_inputs(2)
    shape = as_int32(ctx, ctx.input(1), "shape")
    vector_length(ctx, shape, "input 2 (shape)")
    return ctx.b.reshape(x=ctx.input(0), shape=shape, name=ctx.name)


@lowers("getShape")
def get_shape(ctx: LayerContext) -> Value:
    s = ctx.b.shape(x=ctx.input(), name=f"{ctx.name}_int")
    return to_fp32(ctx, s, ctx.name)


# ---------------------------------------------------------------------------------------------
# ND layers: generated tensors and broadcasting


def _fill(ctx: LayerContext, shape: IntArg, value: float) -> Value:
    return ctx.b.fill(shape=shape, value=np.float32(value), name=ctx.name)


@lowers("fillLike")
def fill_like(ctx: LayerContext) -> Value:
    return _fill(ctx, shape_vector(ctx, ctx.input(), "ref"), ctx.params.value)


@lowers("fillStatic")
def fill_static(ctx: LayerContext) -> Value:
    ctx.expect_inputs(0)
    target = [int(t) for t in ctx.params.targetShape]
    if not target:
        raise ctx.fail("targetShape is empty", field="targetShape")
    return _fill(ctx, np.asarray(target, np.int32), ctx.params.value)


@lowers("fillDynamic")
def fill_dynamic(ctx: LayerContext) -> Value:
    shape = as_int32(ctx, ctx.input(), "shape")
    vector_length(ctx, shape, "input 1 (shape)")
    return _fill(ctx, shape, ctx.params.value)


def _broadcast_to(ctx: LayerContext, target: IntArg) -> Value:
    """numpy.broadcast_to of the first input: leading unit dims up to the target rank, then a
    tile by target // size per dim (1 where the sizes agree, the target size where x has 1)."""
    b, n = ctx.b, ctx.name
    x = ctx.input()
    rank = vector_length(ctx, target, "target shape")
    xs = ctx.shape(x)
    if rank < len(xs):
        raise ctx.fail(f"cannot broadcast rank {len(xs)} to the rank-{rank} target shape")
    if rank > len(xs):
        x = b.expand_dims(x=x, axes=list(range(rank - len(xs))), name=f"{n}_rank")
        xs = ctx.shape(x)
    if isinstance(target, np.ndarray) and is_static(xs):
        dims = [int(d) for d in xs]
        if any(d not in (1, t) for d, t in zip(dims, target.tolist())):
            raise ctx.fail(f"cannot broadcast shape {dims} to {target.tolist()}")
        reps: IntArg = np.asarray([t if d == 1 else 1 for d, t in zip(dims, target.tolist())], np.int32)
    else:
        reps = b.floor_div(x=target, y=shape_vector(ctx, x, "x"), name=f"{n}_reps")
    return b.tile(x=x, reps=reps, name=n)


@lowers("broadcastToLike")
def broadcast_to_like(ctx: LayerContext) -> Value:
    ctx.expect_inputs(2)
    return _broadcast_to(ctx, shape_vector(ctx, ctx.input(1), "ref"))


@lowers("broadcastToStatic")
def broadcast_to_static(ctx: LayerContext) -> Value:
    target = [int(t) for t in ctx.params.targetShape]
    if not target:
        raise ctx.fail("targetShape is empty", field="targetShape")
    return _broadcast_to(ctx, np.asarray(target, np.int32))


@lowers("broadcastToDynamic")
def broadcast_to_dynamic(ctx: LayerContext) -> Value:
    ctx.expect_inputs(2)
    return _broadcast_to(ctx, as_int32(ctx, ctx.input(1), "shape"))


@lowers("constantPad")
def constant_pad(ctx: LayerContext) -> Value:
    """Pad every dim i by (padAmounts[2i], padAmounts[2i+1]) with ``value`` (a second input
    overrides padAmounts). With padToGivenOutputSizeMode the non-zero entry of each pair is the
    wanted output size: the dim grows to max(size, pad sum) on that side."""
    ctx.expect_inputs(1, 2)
    p, b, n = ctx.params, ctx.b, ctx.name
    x = ctx.input()
    shape = ctx.shape(x)
    r = len(shape)
    if len(ctx.inputs) == 2:
        pads: IntArg = as_int32(ctx, ctx.input(1), "pad")
        field = "input 2 (pad amounts)"
    else:
        pads = np.asarray([int(t) for t in p.padAmounts], np.int32)
        field = "padAmounts"
    if vector_length(ctx, pads, field) != 2 * r:
        raise ctx.fail(f"{field} must hold {2 * r} values (2 per dim of the rank-{r} input)", field=field)
    if isinstance(pads, np.ndarray) and (pads < 0).any():
        raise ctx.fail(f"{field} {pads.tolist()} must be non-negative", field=field)
    if p.padToGivenOutputSizeMode:
        if isinstance(pads, np.ndarray):
            pairs = pads.reshape(r, 2)
            both = [i for i in range(r) if pairs[i, 0] and pairs[i, 1]]
            if both:
                raise ctx.fail(f"padToGivenOutputSizeMode: dims {both} give a size on both sides", field=field)
        if isinstance(pads, np.ndarray) and is_static(shape):
            grow = np.maximum(pads.reshape(r, 2).sum(axis=1) - np.asarray(shape, np.int64), 0)
            pads = np.where(pads.reshape(r, 2) > 0, grow[:, None], 0).astype(np.int32).reshape(-1)
        else:
            pairs_v = b.reshape(x=pads, shape=[r, 2], name=f"{n}_pairs")
            size = b.reduce_sum(x=pairs_v, axes=[1], name=f"{n}_size")
            grow = b.maximum(x=b.sub(x=size, y=shape_vector(ctx, x, "x"), name=f"{n}_diff"), y=np.int32(0),
                             name=f"{n}_grow")
            side = b.cast(x=b.greater(x=pairs_v, y=np.int32(0), name=f"{n}_given"), dtype="int32", name=f"{n}_side")
            pair_pads = b.mul(x=side, y=b.expand_dims(x=grow, axes=[1], name=f"{n}_grow_col"), name=f"{n}_pair_pads")
            pads = b.reshape(x=pair_pads, shape=[2 * r], name=f"{n}_pads")
    return b.pad(x=x, pad=pads, mode="constant", constant_val=np.float32(p.value), name=n)


@lowers("rangeStatic")
def range_static(ctx: LayerContext) -> Value:
    """numpy.arange(startValue, endValue, stepSizeValue) in fp32."""
    ctx.expect_inputs(0)
    p = ctx.params
    if p.stepSizeValue == 0:
        raise ctx.fail("stepSizeValue must not be 0", field="stepSizeValue")
    return ctx.b.range_1d(end=np.float32(p.endValue), start=np.float32(p.startValue),
                          step=np.float32(p.stepSizeValue), name=ctx.name)


@lowers("rangeDynamic")
def range_dynamic(ctx: LayerContext) -> Value:
    """Inputs in order end, start, step (scalars or shape (1,)); absent ones from the fields."""
    ctx.expect_inputs(1, 3)
    p = ctx.params
    end = as_scalar(ctx, ctx.input(0), "end", "fp32")
    start = as_scalar(ctx, ctx.input(1), "start", "fp32") if len(ctx.inputs) > 1 else np.float32(p.startValue)
    if len(ctx.inputs) > 2:
        step = as_scalar(ctx, ctx.input(2), "step", "fp32")
    else:
        if p.stepSizeValue == 0:
            raise ctx.fail("stepSizeValue must not be 0", field="stepSizeValue")
        step = np.float32(p.stepSizeValue)
    return ctx.b.range_1d(end=end, start=start, step=step, name=ctx.name)
