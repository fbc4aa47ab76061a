"""Shape and layout ops: Shape, Size, Reshape, Transpose, Concat, Split, Slice, Squeeze,
Unsqueeze, Flatten, Expand, Tile, Pad.

Where ONNX and MIL differ:
- Reshape: ONNX's 0 copies the input dim at the same index (or is a real 0 with allowzero=1);
  MIL's 0 copies right-aligned. Zeros are resolved here (a dim whose size is only known at run
  time comes from ``shape(x)``), so the IR reshape never sees a 0.
- Slice: ONNX's clamping rules are numpy's, which slice_by_index implements; indices are
  clamped to the int32 range (exact, since no dim is that large).
- Expand: bidirectional broadcast, as ``tile`` of a rank-aligned input when the target shape is
  known, else a multiplication by ones (exact: x * 1 keeps -0, inf and NaN).
- Pad: negative pads crop; 'wrap' is written as concatenated slices; integer constant padding is
  concatenation with filled blocks (MIL pad takes floats only).
Shape/Size of a statically shaped value are numpy arrays (exact int64, known at conversion time).
"""

from __future__ import annotations

import numpy as np

from ...ir.core import Value
from ...ir.types import Symbol
from .context import Ctx, Node, normalize_axis
from .registry import onnx_op

_I32 = np.iinfo(np.int32)


def _i32(v: int) -> int:
    return int(min(max(v, _I32.min), _I32.max))


def _axes_arg(ctx: Ctx, node: Node, input_index: int, attr_before: int) -> list[int] | None:
    """``axes`` from the attribute (schema versions < attr_before) or the input."""
    if node.version < attr_before:
        val = ctx.attr("axes")
        return None if val is None else [int(a) for a in val]
    return ctx.ints(input_index, "axes")


def _dims(ctx: Ctx, x: Value) -> Value:
    """shape(x) as an int32 IR value (x widened to a dtype shape takes)."""
    return ctx.op("shape", x=ctx.widen(x, ctx.accepts("shape")))


# -- Shape, Size -----------------------------------------------------------------------------------


@onnx_op("Shape", versions=(1, 25))
def shape(ctx: Ctx, node: Node) -> list[Value | np.ndarray]:
    x = ctx.input(0)
    rank = ctx.rank(x)
    start = int(ctx.attr("start", 0)) if node.version >= 15 else 0
    end = ctx.attr("end") if node.version >= 15 else None
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = rank if end is None else min(max(int(end) + rank if int(end) < 0 else int(end), 0), rank)
    static = ctx.static_shape(x)
    if static is not None:
        return [np.array(static[start:end], dtype=np.int64)]
    dims = _dims(ctx, x)
    if start == 0 and end == rank:
        return [dims]
    return [ctx.b.slice_by_index(x=dims, begin=[start], end=[max(end, start)])]


@onnx_op("Size", versions=(1, 25))
def size(ctx: Ctx, node: Node) -> list[Value | np.ndarray]:
    x = ctx.input(0)
    static = ctx.static_shape(x)
    if static is not None:
        return [np.array(int(np.prod(static, dtype=np.int64)), dtype=np.int64)]
    return [ctx.b.reduce_prod(x=_dims(ctx, x), keep_dims=False)]


# -- Reshape, Flatten, Squeeze, Unsqueeze ------------------------------------------------------------


@onnx_op("Reshape", versions=(5, 25))
def reshape(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, ctx.accepts("reshape"))
    allowzero = int(ctx.attr("allowzero", 0)) if node.version >= 14 else 0
    target = ctx.const_input(1)
    if target is None:
        if allowzero:  # a run-time 0 would be a real 0, which the IR reshape reads as "copy"
            ctx.require_const(1, "the shape of an allowzero Reshape")
        return [_reshape_runtime(ctx, x, allowzero)]
    want = [int(v) for v in np.asarray(target).reshape(-1)]
    if allowzero and 0 in want:
        if -1 in want:
            raise ctx.format_error(f"shape {want} holds both 0 (allowzero) and -1")
        return [_empty_like_shape(ctx, x, want)]
    return [reshape_to(ctx, x, want)]


def reshape_to(ctx: Ctx, x: Value, want: list[int]) -> Value:
    """``x`` reshaped to ONNX shape ``want`` (0 = copy the dim of x at that index, -1 = infer)."""
    xs = x.type.shape
    dims: list[int | None] = []
    for i, d in enumerate(want):
        if d != 0:
            dims.append(d)
            continue
        if xs is None or i >= len(xs):
            raise ctx.format_error(f"shape {want} copies dim {i}, the input has rank {len(xs or ())}")
        dims.append(int(xs[i]) if not isinstance(xs[i], Symbol) else None)
    unknown = [i for i, d in enumerate(dims) if d is None]
    if not unknown:
        return ctx.b.reshape(x=x, shape=np.array(dims, np.int32))
    if len(unknown) == 1 and -1 not in dims:
        dims[unknown[0]] = -1  # the one run-time dim is what the others leave
        return ctx.b.reshape(x=x, shape=np.array(dims, np.int32))
    xdims = _dims(ctx, x)
    parts = [ctx.b.slice_by_index(x=xdims, begin=[i], end=[i + 1]) if d is None else np.array([d], np.int32)
             for i, d in enumerate(dims)]
    return ctx.b.reshape(x=x, shape=ctx.b.concat(values=tuple(parts), axis=0))


def _reshape_runtime(ctx: Ctx, x: Value, allowzero: int) -> Value:
    shape = ctx.input(1, ("int32",))
    n = shape.type.shape[0] if shape.type.shape else None
    if not isinstance(n, (int, np.integer)):
        raise ctx.unsupported("a run-time shape of unknown length")
    if not allowzero:  # ONNX 0 = the input's dim at the same index
        xdims = _dims(ctx, x)
        rank = ctx.rank(x)
        if int(n) > rank:
            xdims = ctx.b.concat(values=(xdims, np.zeros(int(n) - rank, np.int32)), axis=0)
        elif int(n) < rank:
            xdims = ctx.b.slice_by_index(x=xdims, begin=[0], end=[int(n)])
        shape = ctx.b.select(cond=ctx.b.equal(x=shape, y=np.int32(0)), a=xdims, b=shape)
    return ctx.b.reshape(x=x, shape=shape)


def _empty_like_shape(ctx: Ctx, x: Value, want: list[int]) -> Value:
    """An allowzero reshape to a shape holding 0: the result has no elements."""
    held = x.type.dtype.name if x.type.dtype.name in ("fp16", "fp32", "int32", "bool") else "int32"
    return ctx.b.fill(shape=np.array(want, np.int32), value=np.zeros((), x.type.dtype.storage).astype(
        np.dtype({"fp16": np.float16, "fp32": np.float32, "int32": np.int32, "bool": np.bool_}[held])))


@onnx_op("Flatten", versions=(1, 25))
def flatten(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, ctx.accepts("reshape"))
    rank = ctx.rank(x)
    axis = int(ctx.attr("axis", 1))
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis <= rank:
        raise ctx.format_error(f"axis {ctx.attr('axis', 1)} is out of range for rank {rank}")
    static = ctx.static_shape(x)
    if static is not None:
        return [ctx.b.reshape(x=x, shape=np.array([int(np.prod(static[:axis])), int(np.prod(static[axis:]))],
                                                  np.int32))]
    xs = x.type.shape
    head, tail = xs[:axis], xs[axis:]
    if all(not isinstance(d, Symbol) for d in tail):
        return [ctx.b.reshape(x=x, shape=np.array([-1, int(np.prod([int(d) for d in tail]))], np.int32))]
    if all(not isinstance(d, Symbol) for d in head):
        return [ctx.b.reshape(x=x, shape=np.array([int(np.prod([int(d) for d in head])), -1], np.int32))]
    xdims = _dims(ctx, x)
    lead = ctx.b.reduce_prod(x=ctx.b.slice_by_index(x=xdims, begin=[0], end=[axis]), axes=[0], keep_dims=True)
    return [ctx.b.reshape(x=x, shape=ctx.b.concat(values=(lead, np.array([-1], np.int32)), axis=0))]


@onnx_op("Squeeze", versions=(1, 25))
def squeeze(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, ctx.accepts("squeeze"))
    rank = ctx.rank(x)
    axes = _axes_arg(ctx, node, 1, 13)
    if axes is None:
        shape = x.type.shape
        if any(isinstance(d, Symbol) for d in shape):
            raise ctx.unsupported("Squeeze without axes on an input whose shape is only known at run time")
        axes = [i for i, d in enumerate(shape) if int(d) == 1]
    axes = sorted({normalize_axis(ctx, a, rank) for a in axes})
    for a in axes:
        d = x.type.shape[a]
        if not isinstance(d, Symbol) and int(d) != 1:
            raise ctx.format_error(f"cannot squeeze axis {a} of size {d}")
    if not axes:
        return [x]
    if len(axes) == rank:  # to a scalar
        return [ctx.b.reshape(x=x, shape=np.zeros(0, np.int32))]
    return [ctx.b.squeeze(x=x, axes=axes)]


@onnx_op("Unsqueeze", versions=(1, 25))
def unsqueeze(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, ctx.accepts("expand_dims"))
    axes = _axes_arg(ctx, node, 1, 13)
    if axes is None:
        raise ctx.format_error("axes are required")
    out_rank = ctx.rank(x) + len(axes)
    norm = sorted(normalize_axis(ctx, a, out_rank) for a in axes)
    if len(set(norm)) != len(norm):
        raise ctx.format_error(f"repeated axes {axes}")
    return [ctx.b.expand_dims(x=x, axes=norm)]


# -- Transpose, Concat, Split -----------------------------------------------------------------------


@onnx_op("Transpose", versions=(1, 25))
def transpose(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, ctx.accepts("transpose"))
    rank = ctx.rank(x)
    perm = ctx.attr("perm")
    perm = list(range(rank))[::-1] if perm is None else [int(p) for p in perm]
    if sorted(normalize_axis(ctx, p, rank) for p in perm) != list(range(rank)):
        raise ctx.format_error(f"perm {perm} is not a permutation of {rank} axes")
    return [ctx.b.transpose(x=x, perm=[normalize_axis(ctx, p, rank) for p in perm])]


@onnx_op("Concat", versions=(4, 13))
def concat(ctx: Ctx, node: Node) -> list[Value]:
    values = [ctx.input(i) for i in range(len(node.inputs))]
    dt = values[0].type.dtype.name
    values = [v if v.type.dtype.name == dt else ctx.b.cast(x=v, dtype=dt) for v in values]
    axis = normalize_axis(ctx, int(ctx.required_attr("axis")), ctx.rank(values[0]))
    if len(values) == 1:
        return [values[0]]
    return [ctx.b.concat(values=tuple(values), axis=axis)]


@onnx_op("Split", versions=(2, 18))
def split(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, ctx.accepts("split"))
    rank = ctx.rank(x)
    axis = normalize_axis(ctx, int(ctx.attr("axis", 0)), rank)
    n_out = len(node.outputs)
    sizes = [int(s) for s in ctx.attr("split")] if node.version < 13 and ctx.attr("split") else (
        ctx.ints(1, "split") if node.version >= 13 else None)
    dim = x.type.shape[axis]
    if sizes is None:
        if node.version >= 18:
            n = ctx.attr("num_outputs")
            if n is None:
                raise ctx.format_error("needs the 'split' input or the 'num_outputs' attribute")
            if int(n) != n_out:
                raise ctx.format_error(f"num_outputs is {n} but the node has {n_out} outputs")
        if isinstance(dim, Symbol):
            outs = ctx.b.split(x=x, num_splits=n_out, axis=axis)
            return list(outs) if isinstance(outs, tuple) else [outs]
        chunk = -(-int(dim) // n_out)  # ceil: the last output takes what is left (opset 18)
        sizes = [min(chunk, max(int(dim) - chunk * i, 0)) for i in range(n_out)]
    if len(sizes) != n_out:
        raise ctx.format_error(f"split has {len(sizes)} sizes for {n_out} outputs")
    if not isinstance(dim, Symbol) and sum(sizes) != int(dim):
        raise ctx.format_error(f"split sizes {sizes} do not add up to the dim size {dim}")
    if n_out == 1:
        return [x]
    if 0 in sizes:  # MIL split takes positive sizes: slice each part instead
        starts = np.cumsum([0, *sizes])
        return [ctx.b.slice_by_index(x=x, begin=[int(starts[i]) if a == axis else 0 for a in range(rank)],
                                     end=[int(starts[i + 1]) if a == axis else 0 for a in range(rank)],
                                     begin_mask=[a != axis for a in range(rank)],
                                     end_mask=[a != axis for a in range(rank)]) for i in range(n_out)]
    outs = ctx.b.split(x=x, split_sizes=np.array(sizes, np.int32), axis=axis)
    return list(outs) if isinstance(outs, tuple) else [outs]


# -- Slice --------------------------------------------------------------------------------------------


@onnx_op("Slice", versions=(10, 13))
def slice_(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, ctx.accepts("slice_by_index"))
    rank = ctx.rank(x)
    if ctx.const_input(1) is None or ctx.const_input(2) is None:
        return [_slice_runtime(ctx, x, rank)]
    starts, ends = ctx.ints(1, "starts"), ctx.ints(2, "ends")
    axes = ctx.ints(3, "axes") if ctx.has(3) else list(range(len(starts)))
    steps = ctx.ints(4, "steps") if ctx.has(4) else [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ctx.format_error("starts, ends, axes and steps differ in length")
    return [slice_numpy(ctx, x, rank, starts, ends, axes, steps)]


def _slice_runtime(ctx: Ctx, x: Value, rank: int) -> Value:
    """Starts/ends known only at run time (e.g. from Shape of a dynamic dim): the IR slice takes
    run-time begin/end vectors, built per axis from the ONNX vectors (numpy clamping at run time);
    axes and steps must be known."""
    b = ctx.b
    starts, ends = ctx.input(1, ("int32",)), ctx.input(2, ("int32",))
    n = starts.type.shape[0] if starts.type.shape else None
    if not isinstance(n, (int, np.integer)):
        raise ctx.unsupported("run-time starts of unknown length")
    n = int(n)
    axes = ctx.ints(3, "axes") if ctx.has(3) else list(range(n))
    steps = ctx.ints(4, "steps") if ctx.has(4) else [1] * n
    if not len(axes) == len(steps) == n:
        raise ctx.format_error("starts, ends, axes and steps differ in length")
    axes = [normalize_axis(ctx, a, rank) for a in axes]
    if len(set(axes)) != n or 0 in steps:
        raise ctx.format_error("repeated axes or a step of 0")
    where = {a: k for k, a in enumerate(axes)}
    stride = [steps[where[a]] if a in where else 1 for a in range(rank)]

    def vector(src: Value) -> Value:
        parts = [b.slice_by_index(x=src, begin=[where[a]], end=[where[a] + 1]) if a in where
                 else np.zeros(1, np.int32) for a in range(rank)]
        return parts[0] if rank == 1 else b.concat(values=tuple(parts), axis=0)

    unsliced = [a not in where for a in range(rank)]
    return b.slice_by_index(x=x, begin=vector(starts), end=vector(ends), stride=np.array(stride, np.int32),
                            begin_mask=unsliced, end_mask=unsliced)


@onnx_op("Slice", versions=(1, 1))
def slice_v1(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, ctx.accepts("slice_by_index"))
    rank = ctx.rank(x)
    starts, ends = [int(v) for v in ctx.required_attr("starts")], [int(v) for v in ctx.required_attr("ends")]
    axes = [int(v) for v in ctx.attr("axes")] if ctx.attr("axes") else list(range(len(starts)))
    return [slice_numpy(ctx, x, rank, starts, ends, axes, [1] * len(starts))]


def slice_numpy(ctx: Ctx, x: Value, rank: int, starts: list[int], ends: list[int], axes: list[int],
                steps: list[int]) -> Value:
    """x[starts:ends:steps] on ``axes`` with numpy's (= ONNX's) clamping."""
    begin, end, stride = [0] * rank, [0] * rank, [1] * rank
    bmask, emask = [True] * rank, [True] * rank
    seen = set()
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = normalize_axis(ctx, a, rank)
        if a in seen:
            raise ctx.format_error(f"axis {a} is sliced twice")
        seen.add(a)
        if st == 0:
            raise ctx.format_error("a step of 0")
        begin[a], end[a], stride[a] = _i32(s), _i32(e), _i32(st)
        bmask[a] = emask[a] = False
        if st < 0 and e < -(1 << 31):  # past the front: numpy's end=None
            emask[a] = True
    return ctx.b.slice_by_index(x=x, begin=np.array(begin, np.int32), end=np.array(end, np.int32),
                                stride=np.array(stride, np.int32), begin_mask=bmask, end_mask=emask)


# -- Expand, Tile -------------------------------------------------------------------------------------


@onnx_op("Expand", versions=(8, 13))
def expand(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, ctx.accepts("tile"))
    target = ctx.const_input(1)
    xs = x.type.shape
    if target is not None and xs is not None:
        want = [int(v) for v in np.asarray(target).reshape(-1)]
        rank = max(len(want), len(xs))
        xs_full = [1] * (rank - len(xs)) + list(xs)
        want_full = [1] * (rank - len(want)) + want
        reps = []
        for d, w in zip(xs_full, want_full):
            if isinstance(d, Symbol):
                if w != 1:
                    break  # a run-time dim: fall back to broadcasting
                reps.append(1)
            elif int(d) == 1:
                reps.append(max(w, 1) if w != 0 else 0)
            elif w in (1, int(d)):
                reps.append(1)
            else:
                raise ctx.format_error(f"cannot expand shape {list(xs)} to {want}")
        else:
            if rank > len(xs):
                x = ctx.b.reshape(x=x, shape=np.array([int(d) if not isinstance(d, Symbol) else 0 for d in xs_full],
                                                      np.int32)) if ctx.static_shape(x) is not None else \
                    ctx.b.expand_dims(x=x, axes=list(range(rank - len(xs))))
            if all(r == 1 for r in reps):
                return [x if rank > len(xs) else ctx.b.identity(x=x)]
            if 0 in reps:
                return [ctx.b.fill(shape=np.array([0 if r == 0 else int(d) * r for d, r in zip(xs_full, reps)],
                                                  np.int32), value=np.zeros((), x.type.dtype.storage))]
            return [ctx.b.tile(x=x, reps=np.array(reps, np.int32))]
    ones = ctx.b.fill(shape=ctx.input(1, ("int32",)), value=np.ones((), x.type.dtype.storage))
    if x.type.dtype.name == "bool":
        return [ctx.b.logical_and(x=x, y=ones)]
    return [ctx.b.mul(x=x, y=ones)]


@onnx_op("Tile", versions=(6, 13))
def tile(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, ctx.accepts("tile"))
    reps = ctx.const_input(1)
    if reps is not None and any(int(r) < 0 for r in np.asarray(reps).reshape(-1)):
        raise ctx.format_error("negative repeats")
    return [ctx.b.tile(x=x, reps=ctx.input(1, ("int32",)))]


# -- Pad ------------------------------------------------------------------------------------------------


@onnx_op("Pad", versions=(11, 25))
def pad(ctx: Ctx, node: Node) -> list[Value]:
    mode = ctx.attr("mode", "constant")
    x = ctx.input(0)
    rank = ctx.rank(x)
    if ctx.const_input(1) is None and x.type.dtype.name in ("fp32", "fp16") and mode != "wrap" and not (
            node.version >= 18 and ctx.has(3)):
        return [_pad_runtime(ctx, x, rank, mode)]
    pads = ctx.ints(1, "pads")
    axes = ctx.ints(3, "axes") if node.version >= 18 and ctx.has(3) else list(range(rank))
    axes = [normalize_axis(ctx, a, rank) for a in axes]
    if len(pads) != 2 * len(axes):
        raise ctx.format_error(f"pads has {len(pads)} values for {len(axes)} axes")
    before, after = [0] * rank, [0] * rank
    for k, a in enumerate(axes):
        before[a], after[a] = pads[k], pads[k + len(axes)]
    return [_pad(ctx, x, before, after, mode, 2 if ctx.has(2) else None)]


@onnx_op("Pad", versions=(2, 2))
def pad_v2(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0)
    rank = ctx.rank(x)
    pads = [int(p) for p in ctx.required_attr("pads")]
    if len(pads) != 2 * rank:
        raise ctx.format_error(f"pads has {len(pads)} values for rank {rank}")
    value = float(ctx.attr("value", 0.0))
    return [_pad(ctx, x, pads[:rank], pads[rank:], ctx.attr("mode", "constant"), None, value)]


def _pad(ctx: Ctx, x: Value, before: list[int], after: list[int], mode: str, value_input: int | None,
         value: float = 0.0) -> Value:
    rank = len(before)
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise ctx.format_error(f"unknown mode '{mode}'")
    if any(b < 0 for b in before) or any(e < 0 for e in after):  # negative pads crop first
        x = ctx.b.slice_by_index(
            x=ctx.widen(x, ctx.accepts("slice_by_index")),
            begin=np.array([max(-b, 0) for b in before], np.int32),
            end=np.array([min(e, 0) for e in after], np.int32),
            end_mask=[e >= 0 for e in after])
        before, after = [max(b, 0) for b in before], [max(e, 0) for e in after]
    if not any(before) and not any(after):
        return ctx.b.identity(x=x)
    if mode == "wrap":
        return _pad_wrap(ctx, x, before, after)
    fill = value
    if mode == "constant" and value_input is not None:
        got = ctx.require_const(value_input, "constant_value")
        if np.asarray(got).size:
            fill = np.asarray(got).reshape(-1)[0]
    if x.type.dtype.name not in ("fp32", "fp16"):
        if mode != "constant":
            x = ctx.widen(x, ctx.accepts("slice_by_index"))
            return _pad_by_concat(ctx, x, before, after, mode, None)
        return _pad_by_concat(ctx, x, before, after, mode, fill)
    flat = [p for b, e in zip(before, after) for p in (b, e)]
    first = next(i for i in range(rank) if before[i] or after[i])
    mil_mode = {"constant": "constant", "reflect": "reflect", "edge": "replicate"}[mode]
    return ctx.b.pad(x=x, pad=np.array(flat[2 * first:], np.int32), mode=mil_mode,
                     constant_val=np.asarray(fill, x.type.dtype.storage))


def _pad_runtime(ctx: Ctx, x: Value, rank: int, mode: str) -> Value:
    """Pads known at run time (all axes): ONNX's [begins..., ends...] reordered to the IR's
    [begin_0, end_0, ...]; the IR pad refuses a negative pad when it runs."""
    b = ctx.b
    pads = ctx.input(1, ("int32",))
    pairs = b.transpose(x=b.reshape(x=pads, shape=np.array([2, rank], np.int32)), perm=[1, 0])
    fill = ctx.require_const(2, "constant_value") if ctx.has(2) else np.zeros(())
    fill = np.asarray(fill).reshape(-1)[0] if np.asarray(fill).size else 0.0
    return b.pad(x=x, pad=b.reshape(x=pairs, shape=np.array([2 * rank], np.int32)),
                 mode={"constant": "constant", "reflect": "reflect", "edge": "replicate"}[mode],
                 constant_val=np.asarray(fill, x.type.dtype.storage))


def _pad_by_concat(ctx: Ctx, x: Value, before: list[int], after: list[int], mode: str, fill) -> Value:
    """Pad any dtype by concatenation (constant blocks, or edge slices repeated)."""
    for a, (b, e) in enumerate(zip(before, after)):
        if not b and not e:
            continue
        shape = ctx.static_shape(x)
        if shape is None:
            raise ctx.unsupported(f"'{mode}' padding of a {x.type.dtype.name} input whose shape is only known at run "
                                  "time")
        parts = []
        for n, at_end in ((b, False), (e, True)):
            if not n:
                parts.append(None)
                continue
            if mode == "constant":
                blk = list(shape)
                blk[a] = n
                parts.append(ctx.b.const(np.full(blk, fill, x.type.dtype.storage)))
            else:
                parts.append(_edge_block(ctx, x, a, n, at_end, mode, shape))
        x = ctx.b.concat(values=tuple(p for p in (parts[0], x, parts[1]) if p is not None), axis=a)
    return x


def _edge_block(ctx: Ctx, x: Value, axis: int, n: int, at_end: bool, mode: str, shape: tuple[int, ...]) -> Value:
    rank = len(shape)
    d = shape[axis]
    if mode == "edge":
        idx = [d - 1] * n if at_end else [0] * n
    elif mode == "reflect":
        if n > d - 1:
            raise ctx.format_error(f"reflect padding of {n} is too large for a dim of size {d}")
        idx = [d - 2 - k for k in range(n)] if at_end else [n - k for k in range(n)]
    else:
        raise ctx.format_error(f"unknown mode '{mode}'")
    pieces = []
    for i in idx:
        pieces.append(ctx.b.slice_by_index(x=x, begin=[i if k == axis else 0 for k in range(rank)],
                                           end=[i + 1 if k == axis else 0 for k in range(rank)],
                                           begin_mask=[k != axis for k in range(rank)],
                                           end_mask=[k != axis for k in range(rank)]))
    return pieces[0] if len(pieces) == 1 else ctx.b.concat(values=tuple(pieces), axis=axis)


def _pad_wrap(ctx: Ctx, x: Value, before: list[int], after: list[int]) -> Value:
    """Circular padding: the last ``b`` entries in front, the first ``e`` behind, per axis."""
    x = ctx.widen(x, ctx.accepts("slice_by_index"))
    rank = len(before)
    for a, (b, e) in enumerate(zip(before, after)):
        if not b and not e:
            continue
        shape = ctx.static_shape(x)
        if shape is None or b > shape[a] or e > shape[a]:
            raise ctx.unsupported("'wrap' padding needs a static shape and pads no larger than the dim")
        mask = [k != a for k in range(rank)]
        parts = []
        if b:
            parts.append(ctx.b.slice_by_index(x=x, begin=[shape[a] - b if k == a else 0 for k in range(rank)],
                                              end=[0] * rank, begin_mask=mask, end_mask=[True] * rank))
        parts.append(x)
        if e:
            parts.append(ctx.b.slice_by_index(x=x, begin=[0] * rank, end=[e if k == a else 0 for k in range(rank)],
                                              begin_mask=[True] * rank, end_mask=mask))
        x = ctx.b.concat(values=tuple(parts), axis=a)
    return x
