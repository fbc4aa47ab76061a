"""Shape and data movement: reshape family, transpose (free: a layout change), concat/split,
slicing, tile, reverse, gather/scatter, pad and constants made by ops."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ....ir.core import Op, Value
from ....ir.opdef import InferArgs
from ..emitter import GraphEmitter, LoweringError, Operand, is_identity
from ._common import axis_of, cast, common_layout, float_scalar, int_list, out, physical_axis, reshape
from .registry import lowering


def _same_order(x: Operand) -> bool:
    """Whether ``x``'s elements are in the IR value's order although its layout differs: the axes
    it moves are all of size 1 (an NHWC [N, 1, 1, C] is an NCHW [N, C, 1, 1] byte for byte)."""
    if x.perm is None:
        return True
    moved = [p for p, d in zip(x.perm, x.shape) if d != 1]
    return moved == sorted(moved)


def _flatten_into_linear(e: GraphEmitter, op: Op, x: Operand) -> bool:
    """A flatten of a permuted operand's trailing axes read only by ``linear`` ops with constant
    weights: reshape the operand as it is and let `linear` permute its weight columns instead
    (an NHWC CNN then needs no transpose before its classifier)."""
    y = out(op)
    in_shape, out_shape = e.shape(op.inputs["x"]), e.shape(y)
    if x.perm is None or not out_shape:
        return False
    # the leading axes keep their place and size product; the rest become the last axis
    k = next((k for k in range(len(in_shape)) if tuple(x.perm[:k]) == tuple(range(k))
              and np.prod(in_shape[:k]) == np.prod(out_shape[:-1]) and np.prod(in_shape[k:]) == out_shape[-1]), None)
    if k is None:
        return False
    users = y.users()
    if not users or any(u.type != "linear" or u.inputs.get("x") is not y or e.value_of(u.inputs["weight"]) is None
                        for u in users) or y in e.fn.outputs:
        return False
    tail = [in_shape[a] for a in range(k, len(in_shape))]
    order = np.arange(int(np.prod(tail))).reshape(tail).transpose([p - k for p in x.perm[k:]]).ravel()
    e.bind(y, e.emit("reshape", x, list(out_shape), shape=out_shape, dtype=x.dtype))
    e.flat_orders[y] = order
    return True


def _reshape_to_output(e: GraphEmitter, op: Op, x_key: str = "x") -> None:
    x = e.any(op.inputs[x_key])
    if not _same_order(x):
        if _flatten_into_linear(e, op, x):
            return
        x = e.get(op.inputs[x_key])
    result = e.emit("reshape", x, list(e.shape(out(op))), shape=e.shape(out(op)), dtype=x.dtype)
    e.bind(out(op), result)


for _t in ("reshape", "expand_dims", "squeeze", "flatten2d", "reshape_like"):
    lowering(_t, note="reshape to the static output shape")(lambda e, op: _reshape_to_output(e, op))


@lowering("transpose", note="no call: a layout change of the operand (a transpose is written only where "
                            "a later op needs the IR's layout)")
def _transpose(e: GraphEmitter, op: Op) -> None:
    x = e.any(op.inputs["x"])
    perm = [axis_of(p, x.rank) for p in int_list(e.const_param(op, "perm"))]
    # physical axis i of x holds x's axis src[i]; the result's axis j is x's axis perm[j]
    src = x.perm if x.perm is not None else tuple(range(x.rank))
    new = tuple(perm.index(s) for s in src)
    e.bind(out(op), Operand(x.js, x.shape, x.dtype, None if is_identity(new) else new))


@lowering("concat", note="concat (axis mapped to the layout); interleave decomposed by reshapes")
def _concat(e: GraphEmitter, op: Op) -> None:
    values = list(op.inputs["values"])
    rank = len(e.shape(out(op)))
    axis = axis_of(int(float_scalar(e.const_param(op, "axis"))), rank)
    interleave = bool(np.asarray(e.param(op, "interleave")).reshape(-1)[0]) if "interleave" in op.inputs else False
    if interleave and len(values) > 1:
        xs = [e.get(v) for v in values]
        shape = e.shape(out(op))
        expanded = [reshape(e, x, x.shape[: axis + 1] + (1,) + x.shape[axis + 1:]) for x in xs]
        cat_shape = list(expanded[0].shape)
        cat_shape[axis + 1] = len(xs)
        cat = e.emit("concat", expanded, axis + 1, shape=cat_shape, dtype=xs[0].dtype)
        e.bind(out(op), reshape(e, cat, shape))
        return
    if len(values) == 1:
        x = e.any(values[0])
        e.bind(out(op), e.emit("identity", x, shape=x.shape, dtype=x.dtype, perm=x.perm))
        return
    if not e.shape(values[0]):  # rank-0 values are joined into a 1-D tensor
        xs = [reshape(e, e.get(v), [1]) for v in values]
        e.bind(out(op), e.emit("concat", xs, 0, shape=[len(xs)], dtype=xs[0].dtype))
        return
    xs, perm = common_layout(e, values)
    shape = list(xs[0].shape)
    pa = axis if perm is None else perm.index(axis)
    shape[pa] = sum(x.shape[pa] for x in xs)
    e.bind(out(op), e.emit("concat", xs, pa, shape=shape, dtype=xs[0].dtype, perm=perm))


@lowering("stack", kind="decomposed", note="reshape each input, then concat")
def _stack(e: GraphEmitter, op: Op) -> None:
    values = list(op.inputs["values"])
    shape = e.shape(out(op))
    axis = axis_of(int(float_scalar(e.const_param(op, "axis"))), len(shape))
    xs = [e.get(v) for v in values]
    expanded = [reshape(e, x, x.shape[:axis] + (1,) + x.shape[axis:]) for x in xs]
    if len(expanded) == 1:
        e.bind(out(op), e.emit("identity", expanded[0], shape=shape, dtype=expanded[0].dtype))
        return
    e.bind(out(op), e.emit("concat", expanded, axis, shape=shape, dtype=xs[0].dtype))


@lowering("split", note="split (sizes from the static output shapes)")
def _split(e: GraphEmitter, op: Op) -> None:
    x = e.any(op.inputs["x"])
    axis = axis_of(int(float_scalar(e.const_param(op, "axis"))), x.rank)
    pa = physical_axis(x, axis)
    sizes = [e.shape(v)[axis] for v in op.outputs]
    outs_shapes = []
    for s in sizes:
        shape = list(x.shape)
        shape[pa] = s
        outs_shapes.append((shape, x.dtype))
    if len(sizes) == 1:
        e.bind(op.outputs[0], e.emit("identity", x, shape=x.shape, dtype=x.dtype, perm=x.perm))
        return
    results = e.emit_multi("split", x, sizes, outputs=outs_shapes, axis=pa)
    for v, r in zip(op.outputs, results):
        e.bind(v, Operand(r.js, r.shape, r.dtype, x.perm))


def _slice(e: GraphEmitter, x: Operand, starts: list[int], sizes: list[int], strides: list[int]) -> Operand:
    """``sizes`` elements from ``starts`` every ``strides`` (WebNN's sizes are of the input window it
    reads: ``(size - 1) * stride + 1``)."""
    if list(sizes) == list(x.shape) and not any(starts):
        return x
    if any(s == 0 for s in sizes):
        raise LoweringError("an empty slice has no WebNN form (WebNN has no zero-size tensors)")
    options = {"strides": strides} if any(s != 1 for s in strides) else {}
    # WebNN's sizes are the extents read from the input (spec 8.9.47: start + size <= input size);
    # the result holds ceil(size / stride) elements per axis
    window = [(n - 1) * s + 1 for n, s in zip(sizes, strides)]
    return e.emit("slice", x, starts, window, shape=sizes, dtype=x.dtype, perm=x.perm, **options)


@lowering("slice_by_index", note="slice (starts, sizes, strides computed at conversion time); negative strides "
                                 "via reverse; squeezed axes via reshape")
def _slice_by_index(e: GraphEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    x = e.any(xv)
    shape = e.shape(xv)
    begins, ends, strides, squeeze = op.opdef._params(InferArgs(op.opdef, op), len(shape))
    if any(not isinstance(b, (int, type(None))) for b in begins + ends):
        raise LoweringError("slice bounds must be known at conversion time")
    starts, sizes, steps, reverse_axes = [0] * len(shape), list(shape), [1] * len(shape), []
    for axis, (d, b, en, s, sq) in enumerate(zip(shape, begins, ends, strides, squeeze)):
        at = 0 if b is None else b  # a squeezed axis keeps the one element at begin (negative: from the end)
        idx = (np.arange(d)[at:][:1] if -d <= at < d else np.arange(0)) if sq else np.arange(d)[slice(b, en, s)]
        if sq and idx.size == 0:
            raise LoweringError(f"squeezed index {b} is out of range for size {d}")
        if idx.size == 0:
            raise LoweringError("an empty slice has no WebNN form (WebNN has no zero-size tensors)")
        step = 1 if sq else s
        if step < 0:
            reverse_axes.append(axis)
            idx = d - 1 - idx
            step = -step
        starts[axis], sizes[axis], steps[axis] = int(idx[0]), int(idx.size), step
    if reverse_axes:
        x = e.emit("reverse", x, shape=x.shape, dtype=x.dtype, perm=x.perm,
                   axes=sorted(physical_axis(x, a) for a in reverse_axes))
    order = x.perm if x.perm is not None else tuple(range(len(shape)))
    y = _slice(e, x, [starts[a] for a in order], [sizes[a] for a in order], [steps[a] for a in order])
    if any(squeeze):
        if y.perm is not None:
            y = _to_canonical(e, y)
        y = reshape(e, y, e.shape(out(op)))
    e.bind(out(op), y)


def _to_canonical(e: GraphEmitter, y: Operand) -> Operand:
    inv = [0] * y.rank
    for i, p in enumerate(y.perm or range(y.rank)):
        inv[p] = i
    return e.emit("transpose", y, shape=[y.shape[i] for i in inv], dtype=y.dtype, permutation=inv)


@lowering("slice_by_size", note="slice")
def _slice_by_size(e: GraphEmitter, op: Op) -> None:
    x = e.any(op.inputs["x"])
    shape = e.shape(op.inputs["x"])
    begins = int_list(e.const_param(op, "begin"))
    out_shape = e.shape(out(op))
    starts = [b + d if b < 0 else b for b, d in zip(begins, shape)]
    order = x.perm if x.perm is not None else tuple(range(len(shape)))
    e.bind(out(op), _slice(e, x, [starts[a] for a in order], [out_shape[a] for a in order], [1] * len(shape)))


@lowering("crop", note="slice of the two last axes")
def _crop(e: GraphEmitter, op: Op) -> None:
    x = e.get(op.inputs["x"])
    shape = e.shape(op.inputs["x"])
    ch = int_list(e.const_param(op, "crop_height"))
    cw = int_list(e.const_param(op, "crop_width"))
    starts = [0] * (len(shape) - 2) + [ch[0], cw[0]]
    e.bind(out(op), _slice(e, x, starts, list(e.shape(out(op))), [1] * len(shape)))


@lowering("tile")
def _tile(e: GraphEmitter, op: Op) -> None:
    x = e.any(op.inputs["x"])
    reps = int_list(e.const_param(op, "reps"))
    order = x.perm if x.perm is not None else tuple(range(x.rank))
    prep = [reps[a] for a in order]
    e.bind(out(op), e.emit("tile", x, prep, shape=[d * r for d, r in zip(x.shape, prep)], dtype=x.dtype, perm=x.perm))


@lowering("reverse")
def _reverse(e: GraphEmitter, op: Op) -> None:
    x = e.any(op.inputs["x"])
    axes_v = e.param(op, "axes")
    axes = list(range(x.rank)) if axes_v is None else [axis_of(a, x.rank) for a in int_list(axes_v)]
    e.bind(out(op), e.emit("reverse", x, shape=x.shape, dtype=x.dtype, perm=x.perm,
                           axes=sorted(physical_axis(x, a) for a in axes)))


def _indices(e: GraphEmitter, v: Value, axis_size: int) -> Operand:
    """Gather indices as int32, negative ones wrapped: at conversion time for constants, else with
    ``where(i < 0, i + n, i)`` in the graph (MIL counts negative indices from the end; WebNN does not)."""
    const = e.value_of(v) if not e.is_bound(v) else None
    if const is not None:
        wrapped = np.where(const < 0, const + axis_size, const)
        if wrapped.size and (wrapped.min() < 0 or wrapped.max() >= axis_size):
            raise LoweringError(f"an index is out of range for size {axis_size}")
        return e.constant(wrapped.astype(np.int32), "int32")
    i = cast(e, e.get(v), "int32")
    neg = e.emit("lesser", i, e.scalar(0, "int32"), shape=i.shape, dtype="uint8")
    shifted = e.emit("add", i, e.scalar(axis_size, "int32"), shape=i.shape, dtype="int32")
    return e.emit("where", neg, shifted, i, shape=i.shape, dtype="int32")


@lowering("gather", note="gather; negative indices wrapped (constants at conversion time, else where())")
def _gather(e: GraphEmitter, op: Op) -> None:
    x = e.get(op.inputs["x"])
    axis = axis_of(int(float_scalar(e.const_param(op, "axis"))), x.rank)
    if int(np.asarray(e.param(op, "batch_dims") if "batch_dims" in op.inputs else 0).reshape(-1)[0]) != 0:
        raise LoweringError("gather with batch_dims has no WebNN form")
    idx = _indices(e, op.inputs["indices"], x.shape[axis])
    shape = e.shape(out(op))
    if not shape:  # Chromium gathers into rank >= 1 only: gather one index as [1], then reshape to a scalar
        idx = reshape(e, idx, [1])
        one = e.emit("gather", x, idx, shape=[1], dtype=x.dtype, axis=axis)
        e.bind(out(op), e.emit("reshape", one, [], shape=[], dtype=x.dtype))
        return
    e.bind(out(op), e.emit("gather", x, idx, shape=shape, dtype=x.dtype, axis=axis))


@lowering("gather_along_axis", note="gatherElements (constant indices), else gather from the flattened input; "
                                    "negative indices wrapped")
def _gather_along_axis(e: GraphEmitter, op: Op) -> None:
    x = e.get(op.inputs["x"])
    axis = axis_of(int(float_scalar(e.const_param(op, "axis"))), x.rank)
    iv = op.inputs["indices"]
    idx = _indices(e, iv, x.shape[axis])
    if e.is_bound(iv) or e.value_of(iv) is None:
        e.bind(out(op), _gather_elements_by_flat_index(e, x, idx, axis))
        return
    e.bind(out(op), e.emit("gatherElements", x, idx, shape=e.shape(out(op)), dtype=x.dtype, axis=axis))


def _gather_elements_by_flat_index(e: GraphEmitter, x: Operand, idx: Operand, axis: int) -> Operand:
    """Chromium's gatherElements takes constant indices only: run-time ones pick from the flattened
    ``x`` at ``idx * stride(axis)`` plus the flat offset of the element's other coordinates."""
    strides = [int(np.prod(x.shape[d + 1:])) for d in range(x.rank)]
    coords = np.indices(idx.shape)
    offset = sum(coords[d] * strides[d] for d in range(x.rank) if d != axis)
    scaled = e.emit("mul", idx, e.scalar(strides[axis], "int32"), shape=idx.shape, dtype="int32")
    flat = e.emit("add", scaled, e.constant(np.asarray(offset, np.int32), "int32"), shape=idx.shape, dtype="int32")
    return e.emit("gather", reshape(e, x, [int(np.prod(x.shape))]), flat, shape=idx.shape, dtype=x.dtype, axis=0)


@lowering("pad", note="pad constant/reflection; replicate decomposed (Chromium refuses 'edge')")
def _pad(e: GraphEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    x = e.any(xv)
    rank = x.rank
    amounts = int_list(e.const_param(op, "pad"))
    if len(amounts) % 2:
        raise LoweringError("pad needs an even number of amounts")
    pairs = [(0, 0)] * (rank - len(amounts) // 2) + [(amounts[2 * i], amounts[2 * i + 1])
                                                     for i in range(len(amounts) // 2)]
    mode = str(np.asarray(e.param(op, "mode")).reshape(-1)[0])
    value = float_scalar(e.param(op, "constant_val")) if mode == "constant" else 0.0
    order = x.perm if x.perm is not None else tuple(range(rank))
    before = [pairs[a][0] for a in order]
    after = [pairs[a][1] for a in order]
    shape = [d + b + a for d, b, a in zip(x.shape, before, after)]
    if mode == "replicate":
        e.bind(out(op), _replicate_pad(e, x, before, after))
        return
    wn_mode = {"constant": "constant", "reflect": "reflection"}.get(mode)
    if wn_mode is None:
        raise LoweringError(f"pad mode '{mode}' has no WebNN form")
    options = {"mode": wn_mode}
    if wn_mode == "constant" and value != 0.0:
        options["value"] = value
    e.bind(out(op), e.emit("pad", x, before, after, shape=shape, dtype=x.dtype, perm=x.perm, **options))


def _replicate_pad(e: GraphEmitter, x: Operand, before: list[int], after: list[int]) -> Operand:
    """Edge padding as concatenations of tiled edge slices, one axis at a time."""
    y = x
    for axis, (b, a) in enumerate(zip(before, after)):
        if not (b or a):
            continue
        parts = []
        size = y.shape[axis]
        for count, start in ((b, 0), (None, None), (a, size - 1)):
            if count is None:
                parts.append(y)
                continue
            if not count:
                continue
            starts = [0] * y.rank
            sizes = list(y.shape)
            starts[axis], sizes[axis] = start, 1
            edge = _slice(e, y, starts, sizes, [1] * y.rank)
            reps = [1] * y.rank
            reps[axis] = count
            shape = list(sizes)
            shape[axis] = count
            parts.append(e.emit("tile", edge, reps, shape=shape, dtype=y.dtype, perm=y.perm))
        shape = list(y.shape)
        shape[axis] += b + a
        y = e.emit("concat", parts, axis, shape=shape, dtype=y.dtype, perm=y.perm)
    return y


def _constant_result(e: GraphEmitter, op: Op) -> None:
    value = e.value_of(out(op))
    if value is None:
        raise LoweringError("its value must be known at conversion time (WebNN graphs are static)")
    e.bind(out(op), e.constant(value, e.dtype_of(out(op))))


for _t in ("shape", "fill", "range_1d"):
    lowering(_t, note="a constant (computed at conversion time)")(_constant_result)


@lowering("fill_like", kind="decomposed", note="a constant of the static shape")
def _fill_like(e: GraphEmitter, op: Op) -> None:
    value = float_scalar(e.param(op, "value"))
    e.bind(out(op), e.constant(np.full(e.shape(out(op)), value), e.dtype_of(out(op))))


@lowering("band_part", kind="decomposed", note="where(constant band mask, x, 0)")
def _band_part(e: GraphEmitter, op: Op) -> None:
    x = e.get(op.inputs["x"])
    lower, upper = int(float_scalar(e.param(op, "lower"))), int(float_scalar(e.param(op, "upper")))
    m, n = x.shape[-2:]
    i, j = np.ogrid[:m, :n]
    mask = ((lower < 0) | (i - j <= lower)) & ((upper < 0) | (j - i <= upper))
    if x.dtype == "uint8":
        raise LoweringError("band_part of bool tensors has no WebNN form")
    # zeros replace what is outside the band (a NaN or inf there becomes 0, which a 0/1 product would not do)
    e.bind(out(op), e.emit("where", e.constant(mask.astype(np.uint8), "uint8"), x, e.scalar(0, x.dtype),
                           shape=x.shape, dtype=x.dtype))


def _rearrange(e: GraphEmitter, op: Op, factor_key: str, split: Callable[[int, int, int, int, int], list[int]],
               perm: list[int]) -> None:
    """Block rearrangements of [N, C, H, W]: reshape to ``split(n, c, h, w, factor)``, transpose
    by ``perm``, reshape to the op's output shape."""
    x = e.get(op.inputs["x"])
    f = int(float_scalar(e.const_param(op, factor_key)))
    blocks = split(*x.shape, f)
    t = reshape(e, x, blocks)
    t = e.emit("transpose", t, shape=[blocks[p] for p in perm], dtype=x.dtype, permutation=perm)
    e.bind(out(op), reshape(e, t, e.shape(out(op))))


@lowering("depth_to_space", kind="decomposed", note="reshape, transpose, reshape (DCR order)")
def _depth_to_space(e: GraphEmitter, op: Op) -> None:
    _rearrange(e, op, "block_size", lambda n, c, h, w, b: [n, b, b, c // (b * b), h, w], [0, 3, 4, 1, 5, 2])


@lowering("space_to_depth", kind="decomposed", note="reshape, transpose, reshape")
def _space_to_depth(e: GraphEmitter, op: Op) -> None:
    _rearrange(e, op, "block_size", lambda n, c, h, w, b: [n, c, h // b, b, w // b, b], [0, 3, 5, 1, 2, 4])


@lowering("pixel_shuffle", kind="decomposed", note="reshape, transpose, reshape (CRD order)")
def _pixel_shuffle(e: GraphEmitter, op: Op) -> None:
    _rearrange(e, op, "upscale_factor", lambda n, c, h, w, f: [n, c // (f * f), f, f, h, w], [0, 1, 4, 2, 5, 3])


@lowering("pixel_unshuffle", kind="decomposed", note="reshape, transpose, reshape")
def _pixel_unshuffle(e: GraphEmitter, op: Op) -> None:
    _rearrange(e, op, "downscale_factor", lambda n, c, h, w, f: [n, c, h // f, f, w // f, f], [0, 1, 3, 5, 2, 4])

