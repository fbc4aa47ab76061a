"""Shape and layout ops: reshape, transpose, squeeze/expand_dims, concat/stack/split, slicing,
tile, pad, flatten2d, reverse, shape, fill/fill_like, range_1d, depth/space rearrangements.

MIL's int32 shapes, sizes and indices become the int64 ONNX requires (constants converted at
conversion time, run-time values through Cast). Slicing follows numpy: for constant bounds on a
static dim the bounds are normalized here (``slice.indices``), so ONNX's clamping rules never
come into play; masked bounds are the int64 extremes.
"""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....ir.core import Op, Value
from ....ir.opdef import opset_index
from ....ir.types import is_static_dim
from ..emitter import OnnxEmitter, onnx_type
from ._common import bool_param, const_array, input_as, int_list, int_param, str_param, to_int64
from .registry import lowering

INT64_MAX = int(np.iinfo(np.int64).max)
INT64_MIN = int(np.iinfo(np.int64).min)


def shape_of(e: OnnxEmitter, v: Value, dims: list | tuple | None = None) -> str:
    """An int64 [rank] tensor holding ``dims`` (default: ``v``'s shape): a constant when static,
    else a Concat of constants and Gathers of Shape(v) for the symbolic dims of ``v``."""
    dims = list(e.tensor_type(v).shape if dims is None else dims)
    if all(is_static_dim(d) for d in dims):
        return e.int64s([int(d) for d in dims])
    src = list(e.tensor_type(v).shape)
    shape = e.node("Shape", [e.name(v)])
    parts = []
    for d in dims:
        if is_static_dim(d):
            parts.append(e.int64s([int(d)]))
        elif d in src:
            parts.append(e.node("Gather", [shape, e.int64s([src.index(d)])]))
        else:
            raise LoweringError(f"size {d} is not a size of '{v.name}'")
    return e.node("Concat", parts, axis=0)


@lowering("reshape", note="Reshape to the inferred shape (run-time shape: MIL's 0s resolved first)")
def _reshape(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    out = e.tensor_type(op.outputs[0]).shape
    x = e.input(op)
    zero_dim = out is not None and any(is_static_dim(d) and int(d) == 0 for d in out)
    if const_array(e, op, "shape") is not None and out is not None:
        src = e.tensor_type(xv).shape or ()
        # static sizes as they are, symbolic ones gathered from x's shape, at most one other as -1
        dims = [d if is_static_dim(d) or d in src else -1 for d in out]
        if dims.count(-1) <= 1:
            e.node("Reshape", [x, shape_of(e, xv, dims)], [e.out(op)], allowzero=1 if zero_dim else None)
            return
        # several sizes that are expressions of x's: the literal target, with MIL's 0 rules below
    shape = to_int64(e, op, "shape")
    rank = e.tensor_type(xv).rank
    length = e.tensor_type(op.inputs["shape"]).shape
    right_aligned = opset_index(op.opdef.signature.since) >= opset_index("iOS17")
    if right_aligned and rank is not None and length and is_static_dim(length[0]) and int(length[0]) != rank:
        # iOS17: a 0 copies the dim of x aligned from the right (1 where x has none); ONNX's 0 copies
        # the dim at the same index, so the 0s are replaced before the Reshape
        n = int(length[0])
        offset = rank - n
        xs = e.node("Shape", [x])
        aligned = e.node("Slice", [xs, e.int64s([max(offset, 0)]), e.int64s([rank])]) if offset >= 0 else \
            e.node("Concat", [e.int64s([1] * -offset), xs], axis=0)
        shape = e.node("Where", [e.node("Equal", [shape, e.int64s([0])]), aligned, shape])
    e.node("Reshape", [x, shape], [e.out(op)])


@lowering("transpose", note="Transpose")
def _transpose(e: OnnxEmitter, op: Op) -> None:
    rank = e.rank(op.inputs["x"])
    e.node("Transpose", [e.input(op)], [e.out(op)], perm=[p % rank for p in int_list(e, op, "perm")])


@lowering("squeeze", note="Squeeze of the dims the IR type removes (static size 1)")
def _squeeze(e: OnnxEmitter, op: Op) -> None:
    shape = e.tensor_type(op.inputs["x"]).shape
    rank = len(shape)
    requested = range(rank) if "axes" not in op.inputs else [a % rank for a in int_list(e, op, "axes")]
    axes = sorted(a for a in requested if is_static_dim(shape[a]) and int(shape[a]) == 1)
    if not axes:
        e.node("Identity", [e.input(op)], [e.out(op)])
        return
    e.node("Squeeze", [e.input(op), e.int64s(axes)], [e.out(op)])


@lowering("expand_dims", note="Unsqueeze")
def _expand_dims(e: OnnxEmitter, op: Op) -> None:
    out_rank = e.rank(op.outputs[0])
    e.node("Unsqueeze", [e.input(op), e.int64s(sorted(a % out_rank for a in int_list(e, op, "axes")))],
           [e.out(op)])


def _values(e: OnnxEmitter, op: Op) -> list[str]:
    return [e.name(v) for v in op.inputs["values"]]


@lowering("concat", note="Concat; interleave: Unsqueeze, Concat on a new axis, Reshape")
def _concat(e: OnnxEmitter, op: Op) -> None:
    vals = list(op.inputs["values"])
    names = _values(e, op)
    out_rank = e.rank(op.outputs[0])
    axis = int_param(e, op, "axis") % out_rank
    if e.rank(vals[0]) == 0:  # rank-0 values join into a 1-D tensor
        names = [e.node("Unsqueeze", [n, e.int64s([0])]) for n in names]
    if not bool_param(e, op, "interleave") or len(names) == 1:
        e.node("Concat", names, [e.out(op)], axis=axis)
        return
    stacked = e.node("Concat", [e.node("Unsqueeze", [n, e.int64s([axis + 1])]) for n in names], axis=axis + 1)
    e.node("Reshape", [stacked, shape_of(e, vals[0], _out_dims(e, op, vals[0]))], [e.out(op)])


def _out_dims(e: OnnxEmitter, op: Op, like: Value) -> list:
    out = e.tensor_type(op.outputs[0]).shape
    if out is None:
        raise LoweringError("unknown output shape")
    return list(out)


@lowering("stack", note="Unsqueeze each value, Concat")
def _stack(e: OnnxEmitter, op: Op) -> None:
    axis = int_param(e, op, "axis") % e.rank(op.outputs[0])
    e.node("Concat", [e.node("Unsqueeze", [n, e.int64s([axis])]) for n in _values(e, op)], [e.out(op)], axis=axis)


@lowering("split", note="Split (sizes from the output types; equal pieces of a symbolic size: num_outputs)")
def _split(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    rank = e.rank(xv)
    axis = int_param(e, op, "axis") % rank
    sizes = [e.tensor_type(v).shape[axis] for v in op.outputs]
    outs = [e.out(op, i) for i in range(len(op.outputs))]
    if all(is_static_dim(s) for s in sizes):
        e.node("Split", [e.input(op), e.int64s([int(s) for s in sizes])], outs, axis=axis)
    elif e.opset >= 18:
        e.node("Split", [e.input(op)], outs, axis=axis, num_outputs=len(outs))
    else:
        e.node("Split", [e.input(op)], outs, axis=axis)


def _normalized_slice(b: int | None, end: int | None, s: int, n) -> tuple[int, int]:  # noqa: ANN001 - Dim
    """ONNX (start, end) taking what numpy's ``[b:end:s]`` takes from a dim of size ``n``."""
    if is_static_dim(n):
        start, stop, _ = slice(b, end, s).indices(int(n))
        if s < 0 and stop < 0:
            stop = INT64_MIN  # "before element 0" (ONNX reads -1 as the last element)
        return start, stop
    if b is None:
        b = 0 if s > 0 else INT64_MAX
    if end is None:
        end = INT64_MAX if s > 0 else INT64_MIN
    return b, end


@lowering("slice_by_index", note="Slice (numpy bounds and masks), Squeeze for squeeze_mask")
def _slice_by_index(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    shape = e.tensor_type(xv).shape
    rank = len(shape)
    begin, end = const_array(e, op, "begin"), const_array(e, op, "end")
    strides = int_list(e, op, "stride") if "stride" in op.inputs else [1] * rank
    masks = {k: ([bool(v) for v in np.asarray(e.const_param(op, k)).reshape(-1)] if k in op.inputs else [False] * rank)
             for k in ("begin_mask", "end_mask", "squeeze_mask")}
    squeeze = [i for i in range(rank) if masks["squeeze_mask"][i]]
    if begin is None or end is None:
        sliced = _runtime_slice(e, op, rank, strides, masks)
    else:
        starts, ends = [], []
        for i in range(rank):
            b = None if masks["begin_mask"][i] else int(begin[i])
            en = None if masks["end_mask"][i] else int(end[i])
            if masks["squeeze_mask"][i]:
                b = b or 0
                start, stop = _normalized_slice(b, b + 1 if b != -1 else None, 1, shape[i])
                strides[i] = 1
            else:
                start, stop = _normalized_slice(b, en, strides[i], shape[i])
            starts.append(start)
            ends.append(stop)
        sliced = e.node("Slice", [e.input(op), e.int64s(starts), e.int64s(ends), e.int64s(range(rank)),
                                  e.int64s(strides)])
    if squeeze:
        e.node("Squeeze", [sliced, e.int64s(squeeze)], [e.out(op)])
    else:
        e.node("Identity", [sliced], [e.out(op)])


def _runtime_slice(e: OnnxEmitter, op: Op, rank: int, strides: list[int], masks: dict) -> str:
    """Slice with run-time begin/end: masked and squeezed entries replaced with Where."""
    begin = to_int64(e, op, "begin")
    end = to_int64(e, op, "end")
    sq = np.array(masks["squeeze_mask"])
    strides = [1 if q else st for q, st in zip(sq, strides)]
    neg = np.array(strides) < 0
    bmask = np.array(masks["begin_mask"])  # a squeezed dim takes the element at begin (0 when masked)
    if bmask.any():
        begin = e.node("Where", [e.constant(bmask), e.int64s(np.where(neg, INT64_MAX, 0)), begin])
    emask = np.array(masks["end_mask"])
    if emask.any():
        end = e.node("Where", [e.constant(emask), e.int64s(np.where(neg, INT64_MIN, INT64_MAX)), end])
    if sq.any():  # one element at begin: end = begin + 1, or the end of the dim for begin = -1
        one_more = e.node("Add", [begin, e.int64s([1] * rank)])
        one_more = e.node("Where", [e.node("Equal", [one_more, e.int64s([0] * rank)]), e.int64s([INT64_MAX] * rank),
                                    one_more])
        end = e.node("Where", [e.constant(sq), one_more, end])
    return e.node("Slice", [e.input(op), begin, end, e.int64s(range(rank)), e.int64s(strides)])


@lowering("slice_by_size", note="Slice (size -1: to the end of the dim)")
def _slice_by_size(e: OnnxEmitter, op: Op) -> None:
    shape = e.tensor_type(op.inputs["x"]).shape
    rank = len(shape)
    begin, size = const_array(e, op, "begin"), const_array(e, op, "size")
    if begin is not None and size is not None:
        starts, ends = [], []
        for i in range(rank):
            b, s = int(begin[i]), int(size[i])
            if is_static_dim(shape[i]) and b < 0:
                b += int(shape[i])
            end = INT64_MAX if s == -1 or (b < 0 and b + s == 0) else b + s
            starts.append(b)
            ends.append(end)
        e.node("Slice", [e.input(op), e.int64s(starts), e.int64s(ends), e.int64s(range(rank))], [e.out(op)])
        return
    b, s = to_int64(e, op, "begin"), to_int64(e, op, "size")
    end = e.node("Add", [b, s])
    to_end = e.node("Or", [e.node("Equal", [s, e.int64s([-1] * rank)]),
                           e.node("And", [e.node("Less", [b, e.int64s([0] * rank)]),
                                          e.node("Equal", [end, e.int64s([0] * rank)])])])
    end = e.node("Where", [to_end, e.int64s([INT64_MAX] * rank), end])
    e.node("Slice", [e.input(op), b, end, e.int64s(range(rank))], [e.out(op)])


@lowering("tile", note="Tile")
def _tile(e: OnnxEmitter, op: Op) -> None:
    e.node("Tile", [e.input(op), to_int64(e, op, "reps")], [e.out(op)])


@lowering("pad", note="Pad (replicate: edge); pads of the last dims reordered as ONNX's [begins, ends]")
def _pad(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    rank = e.rank(xv)
    mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge"}[str_param(e, op, "mode")]
    value = e.scalar(np.asarray(e.const_param(op, "constant_val")).reshape(()), xv) if mode == "constant" else None
    pad = const_array(e, op, "pad")
    if pad is not None:
        p = [int(v) for v in pad.reshape(-1)]
        widths = [(0, 0)] * (rank - len(p) // 2) + [(p[i], p[i + 1]) for i in range(0, len(p), 2)]
        pads = e.int64s([b for b, _ in widths] + [a for _, a in widths])
    else:  # a run-time pad covers every dim: [b0, e0, b1, e1, ...] -> [b0, b1, ..., e0, e1, ...]
        pairs = e.node("Reshape", [to_int64(e, op, "pad"), e.int64s([rank, 2])])
        pads = e.node("Reshape", [e.node("Transpose", [pairs], perm=[1, 0]), e.int64s([2 * rank])])
    e.node("Pad", [e.input(op), pads, value], [e.out(op)], mode=mode)


@lowering("flatten2d", note="Flatten")
def _flatten2d(e: OnnxEmitter, op: Op) -> None:
    e.node("Flatten", [e.input(op)], [e.out(op)], axis=int_param(e, op, "axis"))


@lowering("reverse", kind="decomposed", note="Slice with step -1 on the axes")
def _reverse(e: OnnxEmitter, op: Op) -> None:
    rank = e.rank(op.inputs["x"])
    axes = list(range(rank)) if "axes" not in op.inputs else sorted({a % rank for a in int_list(e, op, "axes")})
    if not axes:
        e.node("Identity", [e.input(op)], [e.out(op)])
        return
    n = len(axes)
    e.node("Slice", [e.input(op), e.int64s([-1] * n), e.int64s([INT64_MIN] * n), e.int64s(axes),
                     e.int64s([-1] * n)], [e.out(op)])


@lowering("reverse_sequence", note="ReverseSequence (other axes than 0 and 1: Transpose around it)")
def _reverse_sequence(e: OnnxEmitter, op: Op) -> None:
    rank = e.rank(op.inputs["x"])
    seq, batch = int_param(e, op, "seq_axis") % rank, int_param(e, op, "batch_axis") % rank
    lengths = to_int64(e, op, "lengths")
    x = e.input(op)
    if {seq, batch} <= {0, 1}:
        e.node("ReverseSequence", [x, lengths], [e.out(op)], batch_axis=batch, time_axis=seq)
        return
    perm = [batch, seq] + [i for i in range(rank) if i not in (batch, seq)]
    inverse = [perm.index(i) for i in range(rank)]
    y = e.node("ReverseSequence", [e.node("Transpose", [x], perm=perm), lengths], batch_axis=0, time_axis=1)
    e.node("Transpose", [y], [e.out(op)], perm=inverse)


@lowering("shape", note="Shape, Cast to int32")
def _shape(e: OnnxEmitter, op: Op) -> None:
    e.node("Cast", [e.node("Shape", [e.input(op)])], [e.out(op)], to=onnx_type(e.dtype(op.outputs[0])))


@lowering("fill", note="Expand(value, shape)")
def _fill(e: OnnxEmitter, op: Op) -> None:
    out_dt = e.dtype(op.outputs[0])
    value = input_as(e, op, "value", out_dt) if "value" in op.inputs else e.scalar(0.0, out_dt)
    e.node("Expand", [value, to_int64(e, op, "shape")], [e.out(op)])


@lowering("fill_like", note="Expand(value, Shape(ref_tensor))")
def _fill_like(e: OnnxEmitter, op: Op) -> None:
    out_dt = e.dtype(op.outputs[0])
    value = input_as(e, op, "value", out_dt) if "value" in op.inputs else e.scalar(0.0, out_dt)
    e.node("Expand", [value, shape_of(e, op.inputs["ref_tensor"])], [e.out(op)])


@lowering("range_1d", note="Range (fp16: computed in fp32, then Cast; ONNX Range has no float16)")
def _range_1d(e: OnnxEmitter, op: Op) -> None:
    dt = e.dtype(op.outputs[0])
    if dt.name == "fp16":
        r = e.node("Range", [input_as(e, op, k, "fp32") for k in ("start", "end", "step")])
        e.node("Cast", [r], [e.out(op)], to=onnx_type(dt))
        return
    e.node("Range", [input_as(e, op, k, dt) for k in ("start", "end", "step")], [e.out(op)])


@lowering("depth_to_space", note="DepthToSpace (DCR, TensorFlow's order)")
def _depth_to_space(e: OnnxEmitter, op: Op) -> None:
    e.node("DepthToSpace", [e.input(op)], [e.out(op)], blocksize=int_param(e, op, "block_size"), mode="DCR")


@lowering("pixel_shuffle", note="DepthToSpace (CRD, torch's order)")
def _pixel_shuffle(e: OnnxEmitter, op: Op) -> None:
    e.node("DepthToSpace", [e.input(op)], [e.out(op)], blocksize=int_param(e, op, "upscale_factor"), mode="CRD")


@lowering("space_to_depth", note="SpaceToDepth")
def _space_to_depth(e: OnnxEmitter, op: Op) -> None:
    e.node("SpaceToDepth", [e.input(op)], [e.out(op)], blocksize=int_param(e, op, "block_size"))


@lowering("pixel_unshuffle", kind="decomposed", note="Reshape, Transpose, Reshape (torch's channel order)")
def _pixel_unshuffle(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    f = int_param(e, op, "downscale_factor")
    n, c, h, w = e.tensor_type(xv).shape
    if not all(is_static_dim(d) for d in (c, h, w)):
        raise LoweringError("pixel_unshuffle of a symbolic C, H or W")
    c, h, w = int(c), int(h), int(w)
    six = e.node("Reshape", [e.input(op), e.int64s([-1, c, h // f, f, w // f, f])])
    moved = e.node("Transpose", [six], perm=[0, 1, 3, 5, 2, 4])
    e.node("Reshape", [moved, e.int64s([-1, c * f * f, h // f, w // f])], [e.out(op)])


@lowering("crop", note="Slice of the last two dims")
def _crop(e: OnnxEmitter, op: Op) -> None:
    top, bottom = int_list(e, op, "crop_height")
    left, right = int_list(e, op, "crop_width")
    rank = e.rank(op.inputs["x"])
    ends = [-bottom if bottom else INT64_MAX, -right if right else INT64_MAX]
    e.node("Slice", [e.input(op), e.int64s([top, left]), e.int64s(ends), e.int64s([rank - 2, rank - 1])],
           [e.out(op)])


@lowering("sliding_windows", kind="decomposed", note="Gather of a constant [windows, size] index table")
def _sliding_windows(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    rank = e.rank(xv)
    axis = int_param(e, op, "axis") % rank
    size, stride = int_param(e, op, "size"), int_param(e, op, "stride")
    n = e.tensor_type(xv).shape[axis]
    if not is_static_dim(n):
        raise LoweringError("sliding_windows over a symbolic dim")
    count = (int(n) - size) // stride + 1
    table = np.arange(count)[:, None] * stride + np.arange(size)[None, :]
    e.node("Gather", [e.input(op), e.constant(table.astype(np.int64))], [e.out(op)], axis=axis)


@lowering("reshape_like", note="Reshape to the concatenated slices of the reference shapes")
def _reshape_like(e: OnnxEmitter, op: Op) -> None:
    out = e.tensor_type(op.outputs[0]).shape
    if out is not None and all(is_static_dim(d) for d in out):
        e.node("Reshape", [e.input(op), e.int64s([int(d) for d in out])], [e.out(op)], allowzero=1)
        return
    begins, ends = int_list(e, op, "begins"), int_list(e, op, "ends")
    masks = [bool(m) for m in np.asarray(e.const_param(op, "end_masks")).reshape(-1)]
    parts = []
    for ref, b, en, m in zip(op.inputs["ref_tensors"], begins, ends, masks):
        shape = e.node("Shape", [e.name(ref)])
        parts.append(e.node("Slice", [shape, e.int64s([b]), e.int64s([INT64_MAX if m else en])]))
    e.node("Reshape", [e.input(op), e.node("Concat", parts, axis=0)], [e.out(op)], allowzero=1)


def _batch_space_params(e: OnnxEmitter, op: Op, amounts: str) -> tuple[list[int], list[list[int]], list[int]]:
    shape = e.tensor_type(op.inputs["x"]).shape
    if not all(is_static_dim(d) for d in shape):
        raise LoweringError(f"{op.type} of a symbolic shape")
    block = int_list(e, op, "block_shape")
    pairs = np.asarray(e.const_param(op, amounts)).astype(int).reshape(2, 2).tolist()
    return block, pairs, [int(d) for d in shape]


@lowering("space_to_batch", kind="decomposed", note="Pad, Reshape, Transpose, Reshape (TensorFlow's order)")
def _space_to_batch(e: OnnxEmitter, op: Op) -> None:
    (bh, bw), ((t, b), (left, r)), (n, c, h, w) = _batch_space_params(e, op, "paddings")
    x = e.input(op)
    if t or b or left or r:
        x = e.node("Pad", [x, e.int64s([0, 0, t, left, 0, 0, b, r])], mode="constant")
    h, w = h + t + b, w + left + r
    six = e.node("Reshape", [x, e.int64s([n, c, h // bh, bh, w // bw, bw])])
    moved = e.node("Transpose", [six], perm=[3, 5, 0, 1, 2, 4])  # [bh, bw, N, C, H/bh, W/bw]
    e.node("Reshape", [moved, e.int64s([bh * bw * n, c, h // bh, w // bw])], [e.out(op)])


@lowering("batch_to_space", kind="decomposed", note="Reshape, Transpose, Reshape, Slice (TensorFlow's order)")
def _batch_to_space(e: OnnxEmitter, op: Op) -> None:
    (bh, bw), ((t, b), (left, r)), (nb, c, h, w) = _batch_space_params(e, op, "crops")
    n = nb // (bh * bw)
    six = e.node("Reshape", [e.input(op), e.int64s([bh, bw, n, c, h, w])])
    moved = e.node("Transpose", [six], perm=[2, 3, 4, 0, 5, 1])  # [N, C, H, bh, W, bw]
    full = e.node("Reshape", [moved, e.int64s([n, c, h * bh, w * bw])])
    e.node("Slice", [full, e.int64s([t, left]), e.int64s([h * bh - b, w * bw - r]), e.int64s([2, 3])], [e.out(op)])


@lowering("_const_symbolic", note="initializer (coremltools' constant of known values)")
def _const_symbolic(e: OnnxEmitter, op: Op) -> None:
    val = np.asarray(op.attributes.get("val"))
    if val.dtype == object:
        raise LoweringError("a constant holding symbolic sizes")
    e.bind(op.outputs[0], e.constant(val.astype(e.dtype(op.outputs[0]).storage)))
