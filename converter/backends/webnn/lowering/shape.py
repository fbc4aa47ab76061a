"""Shape and data movement: reshape family, transpose (free: a layout change), concat/split,
slicing, tile, reverse, gather/scatter, pad and constants made by ops."""

from __future__ import annotations

import numpy as np

from ....ir.core import Op, Value
from ....ir.opdef import InferArgs
from ..emitter import GraphEmitter, LoweringError, Operand, is_identity
from ._common import axis_of, cast, common_layout, float_scalar, int_list, out, physical_axis, reshape
from .registry import lowering


def _flat_order(e: GraphEmitter, op: Op, xv: Value) -> np.ndarray | None:
    """For a flatten (``[N, d1..dk] -> [..., d1*..*dk]``) of an operand held permuted (NHWC after a
    conv) whose only users are ``linear`` ops with a constant weight: the IR flat position of each
    flat position of the permuted data. Those users permute their weight's columns by it at
    conversion time, so the flatten needs no transpose in the graph. None when that does not apply."""
    bound = e.any(xv)
    y = out(op)
    perm = bound.perm
    x_shape, y_shape = e.shape(xv), e.shape(y)
    if perm is None or perm[0] != 0 or len(x_shape) < 2 or not y_shape:
        return None
    inner = int(np.prod(x_shape[1:]))
    if y_shape[-1] != inner or int(np.prod(y_shape[:-1])) != x_shape[0]:
        return None
    users = y.users()
    if not users or len(users) != len(y.uses):  # a block output is a use that is no op
        return None
    for u in users:
        if u.type != "linear" or u.inputs.get("x") is not y or e.value_of(u.inputs["weight"]) is None:
            return None
    ir_positions = np.arange(inner).reshape(x_shape[1:])
    return np.transpose(ir_positions, [p - 1 for p in perm[1:]]).reshape(-1)


def _reshape_to_output(e: GraphEmitter, op: Op, x_key: str = "x") -> None:
    order = _flat_order(e, op, op.inputs[x_key])
    if order is not None:
        x = e.any(op.inputs[x_key])
        result = e.emit("reshape", x, list(e.shape(out(op))), shape=e.shape(out(op)), dtype=x.dtype)
        e.bind(out(op), result)
        e.flat_orders[out(op)] = order
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
    if list(sizes) == list(x.shape) and not any(starts):
        return x
    if any(s == 0 for s in sizes):
        raise LoweringError("an empty slice has no WebNN form (WebNN has no zero-size tensors)")
    options = {"strides": strides} if any(s != 1 for s in strides) else {}
    return e.emit("slice", x, starts, sizes, shape=sizes, dtype=x.dtype, perm=x.perm, **options)


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
        idx = np.arange(d)[(0 if b is None else b):(0 if b is None else b) + 1] if sq else np.arange(d)[slice(b, en, s)]
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
    e.bind(out(op), e.emit("gather", x, idx, shape=e.shape(out(op)), dtype=x.dtype, axis=axis))


@lowering("gather_along_axis", note="gatherElements; negative indices wrapped")
def _gather_along_axis(e: GraphEmitter, op: Op) -> None:
    x = e.get(op.inputs["x"])
    axis = axis_of(int(float_scalar(e.const_param(op, "axis"))), x.rank)
    idx = _indices(e, op.inputs["indices"], x.shape[axis])
    e.bind(out(op), e.emit("gatherElements", x, idx, shape=e.shape(out(op)), dtype=x.dtype, axis=axis))


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


@lowering("band_part", kind="decomposed", note="mul by a constant band mask")
def _band_part(e: GraphEmitter, op: Op) -> None:
    x = e.get(op.inputs["x"])
    lower, upper = int(float_scalar(e.param(op, "lower"))), int(float_scalar(e.param(op, "upper")))
    m, n = x.shape[-2:]
    i, j = np.ogrid[:m, :n]
    mask = ((lower < 0) | (i - j <= lower)) & ((upper < 0) | (j - i <= upper))
    if x.dtype == "uint8":
        raise LoweringError("band_part of bool tensors has no WebNN form")
    e.bind(out(op), e.emit("mul", x, e.constant(mask.astype(np.float32), x.dtype), shape=x.shape, dtype=x.dtype))


@lowering("depth_to_space", kind="decomposed", note="reshape, transpose, reshape (DCR order)")
def _depth_to_space(e: GraphEmitter, op: Op) -> None:
    x = e.get(op.inputs["x"])
    b = int(float_scalar(e.const_param(op, "block_size")))
    n, c, h, w = x.shape
    t = reshape(e, x, [n, b, b, c // (b * b), h, w])
    t = e.emit("transpose", t, shape=[n, c // (b * b), h, b, w, b], dtype=x.dtype, permutation=[0, 3, 4, 1, 5, 2])
    e.bind(out(op), reshape(e, t, [n, c // (b * b), h * b, w * b]))


@lowering("space_to_depth", kind="decomposed", note="reshape, transpose, reshape")
def _space_to_depth(e: GraphEmitter, op: Op) -> None:
    x = e.get(op.inputs["x"])
    b = int(float_scalar(e.const_param(op, "block_size")))
    n, c, h, w = x.shape
    t = reshape(e, x, [n, c, h // b, b, w // b, b])
    t = e.emit("transpose", t, shape=[n, b, b, c, h // b, w // b], dtype=x.dtype, permutation=[0, 3, 5, 1, 2, 4])
    e.bind(out(op), reshape(e, t, [n, c * b * b, h // b, w // b]))


@lowering("pixel_shuffle", kind="decomposed", note="reshape, transpose, reshape (CRD order)")
def _pixel_shuffle(e: GraphEmitter, op: Op) -> None:
    x = e.get(op.inputs["x"])
    f = int(float_scalar(e.const_param(op, "upscale_factor")))
    n, c, h, w = x.shape
    t = reshape(e, x, [n, c // (f * f), f, f, h, w])
    t = e.emit("transpose", t, shape=[n, c // (f * f), h, f, w, f], dtype=x.dtype, permutation=[0, 1, 4, 2, 5, 3])
    e.bind(out(op), reshape(e, t, [n, c // (f * f), h * f, w * f]))


@lowering("pixel_unshuffle", kind="decomposed", note="reshape, transpose, reshape")
def _pixel_unshuffle(e: GraphEmitter, op: Op) -> None:
    x = e.get(op.inputs["x"])
    f = int(float_scalar(e.const_param(op, "downscale_factor")))
    n, c, h, w = x.shape
    t = reshape(e, x, [n, c, h // f, f, w // f, f])
    t = e.emit("transpose", t, shape=[n, c, f, f, h // f, w // f], dtype=x.dtype, permutation=[0, 1, 3, 5, 2, 4])
    e.bind(out(op), reshape(e, t, [n, c * f * f, h // f, w // f]))

