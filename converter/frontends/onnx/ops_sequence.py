"""Sequences and optionals, held at conversion time.

An ONNX sequence whose length is known at conversion time is a `Sequence`: a Python list of its
elements (IR values, or numpy arrays for constants), stored under its ONNX name like a value, so
SequenceInsert / SequenceErase / SequenceAt with constant positions, SequenceLength,
SplitToSequence, ConcatFromSequence and SequenceMap (its body converted once per element) cost
nothing at run time and elements may differ in shape, as ONNX allows. An ``Optional`` is an
`OptionalValue` (its element, or None for an empty optional), so OptionalHasElement is a constant.

A sequence carried through a ``Loop`` becomes a `ListSequence`, an IR list (MIL's TensorArray)
of one element type (ops_control learns it by converting the body once on the conversion-time
sequence): appended to (SequenceInsert without a position), read (SequenceAt), measured
(SequenceLength) and concatenated (ConcatFromSequence) at run time.

What this cannot hold is refused: a sequence or optional graph input or output (Core ML programs
take and return tensors), a run-time position into a conversion-time sequence whose elements
differ in shape (equal shapes: stacked and gathered at run time), insertion at a position or
erasure in a run-time sequence, and a sequence returned by an If whose condition is only known
at run time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx

from ...ir.core import Value
from ...ir.types import is_static_dim
from .context import Ctx, Node, narrow, normalize_axis
from .registry import onnx_op

Element = Value | np.ndarray


@dataclass(eq=False)
class Sequence:
    """An ONNX sequence known element by element at conversion time."""

    items: list[Element] = field(default_factory=list)
    elem_type: int | None = None  # ONNX element type, where known (an empty sequence's)


@dataclass(eq=False)
class ListSequence:
    """An ONNX sequence held in an IR list at run time (carried through a Loop; see ops_control):
    appended to, read, measured and concatenated with the IR's list ops."""

    ls: Value


@dataclass(eq=False)
class OptionalValue:
    """An ONNX optional: its element (tensor or `Sequence`), or None when empty."""

    value: Element | Sequence | None


def operand(ctx: Ctx, i: int) -> Element | Sequence | OptionalValue | None:
    """Input ``i`` as whatever it holds (None when absent)."""
    if not ctx.has(i):
        return None
    name = ctx.node.proto.input[i]
    held = ctx.values.get(name)
    if held is not None:
        return held
    if name in ctx.arrays:
        return ctx.arrays[name]
    return ctx.value(name)


def sequence_input(ctx: Ctx, i: int, *, run_time: bool = False) -> Sequence | ListSequence:
    """Input ``i`` as a sequence; a run-time (IR list) sequence only where ``run_time``."""
    got = operand(ctx, i)
    if isinstance(got, OptionalValue):
        got = got.value
    if isinstance(got, ListSequence) and not run_time:
        raise ctx.unsupported(f"{ctx.node.op_type} on a sequence held at run time (carried through a Loop)")
    if not isinstance(got, (Sequence, ListSequence)):
        raise ctx.unsupported(f"input {i} is not a sequence known at conversion time")
    return got


def _scalar_index(ctx: Ctx, i: int, length: Value) -> Value:
    """Run-time position input ``i`` as an int32 scalar in [0, length) (negative counts from the end)."""
    b = ctx.b
    p = ctx.input(i, ("int32",))
    if p.type.shape != ():
        p = b.reshape(x=p, shape=np.zeros(0, np.int32))
    return b.select(cond=b.less(x=p, y=np.int32(0)), a=b.add(x=p, y=length), b=p)


def tensor(ctx: Ctx, e: Element) -> Value:
    return e if isinstance(e, Value) else ctx.b.const(narrow(e, "a sequence element"))


def _position(ctx: Ctx, i: int, n: int, default: int, *, inclusive_end: bool = False) -> int:
    """The constant position input ``i`` in [0, n) (or [0, n] for an insertion); ``default`` when absent."""
    if not ctx.has(i):
        return default
    known = ctx.const_input(i)
    if known is None:
        raise ctx.unsupported("a position known only at run time (only constant positions are supported here)")
    p = int(np.asarray(known).reshape(-1)[0])
    hi = n + 1 if inclusive_end else n
    if not -n <= p < hi:
        raise ctx.format_error(f"position {p} is out of range for a sequence of {n} elements")
    return p + n if p < 0 else p


@onnx_op("SequenceEmpty", versions=(11, 28))
def sequence_empty(ctx: Ctx, node: Node) -> list[Sequence]:
    return [Sequence([], int(ctx.attr("dtype", onnx.TensorProto.FLOAT)))]


@onnx_op("SequenceConstruct", versions=(11, 28))
def sequence_construct(ctx: Ctx, node: Node) -> list[Sequence]:
    items = [operand(ctx, i) for i in range(len(node.inputs))]
    if any(is_held(x) or x is None for x in items):
        raise ctx.format_error("the inputs must be tensors")
    return [Sequence(items, ctx.input_elem_type(0) if items else None)]  # type: ignore[arg-type]


@onnx_op("SequenceInsert", versions=(11, 28))
def sequence_insert(ctx: Ctx, node: Node) -> list[Sequence | ListSequence]:
    seq = sequence_input(ctx, 0, run_time=True)
    item = operand(ctx, 1)
    if is_held(item) or item is None:
        raise ctx.format_error("the inserted value must be a tensor")
    if isinstance(seq, ListSequence):
        if ctx.has(2):
            raise ctx.unsupported("inserting at a position into a sequence held at run time (appending is supported)")
        b = ctx.b
        value = tensor(ctx, item)  # type: ignore[arg-type]
        want = seq.ls.type.elem.dtype.name
        if value.type.dtype.name != want:
            value = b.cast(x=value, dtype=want)
        return [ListSequence(b.list_write(ls=seq.ls, index=b.list_length(ls=seq.ls), value=value))]
    pos = _position(ctx, 2, len(seq.items), len(seq.items), inclusive_end=True)
    return [Sequence(seq.items[:pos] + [item] + seq.items[pos:], seq.elem_type)]


@onnx_op("SequenceErase", versions=(11, 28))
def sequence_erase(ctx: Ctx, node: Node) -> list[Sequence]:
    seq = sequence_input(ctx, 0)
    if not seq.items:
        raise ctx.format_error("erasing from an empty sequence")
    pos = _position(ctx, 1, len(seq.items), len(seq.items) - 1)
    return [Sequence(seq.items[:pos] + seq.items[pos + 1:], seq.elem_type)]


@onnx_op("SequenceLength", versions=(11, 28))
def sequence_length(ctx: Ctx, node: Node) -> list[np.ndarray | Value]:
    seq = sequence_input(ctx, 0, run_time=True)
    if isinstance(seq, ListSequence):
        return [ctx.b.list_length(ls=seq.ls)]
    return [np.asarray(len(seq.items), np.int64)]


@onnx_op("SequenceAt", versions=(11, 28))
def sequence_at(ctx: Ctx, node: Node) -> list[Element]:
    seq = sequence_input(ctx, 0, run_time=True)
    if isinstance(seq, ListSequence):
        b = ctx.b
        return [b.list_read(ls=seq.ls, index=_scalar_index(ctx, 1, b.list_length(ls=seq.ls)))]
    n = len(seq.items)
    if n == 0:
        raise ctx.format_error("reading from an empty sequence")
    if ctx.const_input(1) is not None:
        return [seq.items[_position(ctx, 1, n, 0)]]
    elems = [tensor(ctx, e) for e in seq.items]
    if len({e.type for e in elems}) != 1 or any(not is_static_dim(d) for d in elems[0].type.shape or (None,)):
        raise ctx.unsupported("a run-time position into a sequence whose elements differ in type or shape")
    p = _scalar_index(ctx, 1, ctx.b.const(np.int32(n)))
    return [ctx.b.gather(x=ctx.b.stack(values=tuple(elems), axis=0), indices=p, axis=0)]


def _slice_axis(ctx: Ctx, x: Value, axis: int, begin: int | Value, end: int | Value) -> Value:
    """``x`` sliced to [begin, end) along ``axis`` (constant or run-time scalar bounds)."""
    b, r = ctx.b, ctx.rank(x)

    def vec(v: int | Value) -> np.ndarray | Value:
        if not isinstance(v, Value):
            out = np.zeros(r, np.int32)
            out[axis] = v
            return out
        parts = [np.zeros(axis, np.int32), b.reshape(x=v, shape=[1]), np.zeros(r - axis - 1, np.int32)]
        return b.concat(values=tuple(p for p in parts if not (isinstance(p, np.ndarray) and p.size == 0)), axis=0)

    mask = [d != axis for d in range(r)]
    return b.slice_by_index(x=x, begin=vec(begin), end=vec(end), begin_mask=mask, end_mask=mask)


@onnx_op("SplitToSequence", versions=(11, 28))
def split_to_sequence(ctx: Ctx, node: Node) -> list[Sequence]:
    x = ctx.input(0)
    rank = ctx.rank(x)
    axis = normalize_axis(ctx, int(ctx.attr("axis", 0)), rank)
    dim = x.type.shape[axis]
    b = ctx.b
    split = ctx.const_input(1)
    if ctx.has(1) and split is None:  # run-time sizes: the count is the length of the split vector
        sizes_v = ctx.input(1, ("int32",))
        count = sizes_v.type.shape[0] if sizes_v.type.shape else None
        if sizes_v.type.shape is None or len(sizes_v.type.shape) != 1 or not is_static_dim(count):
            raise ctx.unsupported("split sizes known only at run time, and not how many")
        ends = b.cumsum(x=sizes_v, axis=0)
        starts = b.sub(x=ends, y=sizes_v)
        count = ctx.check_unrolled(int(count), "split into a sequence")
        items = [_slice_axis(ctx, x, axis, b.gather(x=starts, indices=np.int32(k), axis=0),
                             b.gather(x=ends, indices=np.int32(k), axis=0)) for k in range(count)]
        return [Sequence(list(items), ctx.input_elem_type(0))]
    if not is_static_dim(dim):
        raise ctx.unsupported("the split axis must have a size known at conversion time")
    dim = int(dim)
    if split is None:
        sizes = [1] * ctx.check_unrolled(dim, "split into a sequence of one item per element")
        keep = bool(int(ctx.attr("keepdims", 1)))
    else:
        s = np.asarray(split).reshape(-1) if np.ndim(split) else None
        if s is None:  # a scalar: equal chunks, the last one smaller
            step = int(split)
            if step < 1:
                raise ctx.format_error(f"split must be positive, got {step}")
            ctx.check_unrolled(-(-dim // step), "split into a sequence")
            sizes = [min(step, dim - k) for k in range(0, dim, step)]
        else:
            ctx.check_unrolled(s.size, "split into a sequence")
            sizes = [int(v) for v in s]
        keep = True
        if sum(sizes) != dim or any(v < 0 for v in sizes):
            raise ctx.format_error(f"split sizes {sizes} do not add up to the axis size {dim}")
    items: list[Element] = []
    start = 0
    for size in sizes:
        piece = _slice_axis(ctx, x, axis, start, start + size)
        items.append(piece if keep else b.squeeze(x=piece, axes=[axis]))
        start += size
    return [Sequence(items, ctx.input_elem_type(0))]


@onnx_op("ConcatFromSequence", versions=(11, 28))
def concat_from_sequence(ctx: Ctx, node: Node) -> list[Value]:
    seq = sequence_input(ctx, 0, run_time=True)
    if isinstance(seq, ListSequence):
        return [_concat_list(ctx, seq.ls, int(ctx.attr("new_axis", 0)), int(ctx.required_attr("axis")))]
    if not seq.items:
        raise ctx.unsupported("concatenating an empty sequence (its shape is unknown)")
    elems = [tensor(ctx, e) for e in seq.items]
    new_axis = int(ctx.attr("new_axis", 0))
    rank = ctx.rank(elems[0])
    axis = normalize_axis(ctx, int(ctx.required_attr("axis")), rank + 1 if new_axis else rank)
    if len(elems) == 1:
        return [ctx.b.expand_dims(x=elems[0], axes=[axis]) if new_axis else ctx.b.identity(x=elems[0])]
    if new_axis:
        return [ctx.b.stack(values=tuple(elems), axis=axis)]
    return [ctx.b.concat(values=tuple(elems), axis=axis)]


def _concat_list(ctx: Ctx, ls: Value, new_axis: int, axis: int) -> Value:
    """The elements of IR list ``ls`` stacked on a new ``axis`` (``new_axis``) or concatenated along
    ``axis``: list_gather stacks them on axis 0, a transpose moves that axis, and for a concat a
    reshape merges it into the next one (sizes read at run time)."""
    b = ctx.b
    elem = ls.type.elem
    if elem.shape is None:
        raise ctx.unsupported("concatenating a run-time sequence of elements of unknown rank")
    rank = len(elem.shape)
    axis = normalize_axis(ctx, axis, rank + 1 if new_axis else rank)
    n = b.list_length(ls=ls)
    stacked = b.list_gather(ls=ls, indices=b.range_1d(start=np.int32(0), end=n, step=np.int32(1)))
    perm = list(range(1, axis + 1)) + [0] + list(range(axis + 1, rank + 1))
    moved = b.transpose(x=stacked, perm=perm) if axis else stacked
    if new_axis:
        return moved
    shape = b.shape(x=moved)  # [d0 .. d_{axis-1}, n, d_axis, ...]: merge n with d_axis
    parts = []
    if axis:
        parts.append(b.slice_by_index(x=shape, begin=[0], end=[axis]))
    parts.append(b.reshape(x=b.mul(x=b.gather(x=shape, indices=np.int32(axis), axis=0),
                                   y=b.gather(x=shape, indices=np.int32(axis + 1), axis=0)), shape=[1]))
    if axis + 2 <= rank:
        parts.append(b.slice_by_index(x=shape, begin=[axis + 2], end=[0], end_mask=[True]))
    target = parts[0] if len(parts) == 1 else b.concat(values=tuple(parts), axis=0)
    return b.reshape(x=moved, shape=target)


@onnx_op("SequenceMap", versions=(17, 28))
def sequence_map(ctx: Ctx, node: Node) -> list[Sequence]:
    """The body converted once per element (sequences of equal length; tensors shared by all)."""
    from .ops_control import convert_graph, subgraph

    body = subgraph(ctx, "body")
    args = [operand(ctx, i) for i in range(len(node.inputs))]
    if any(isinstance(a, ListSequence) for a in args):
        raise ctx.unsupported("SequenceMap over a sequence held at run time (carried through a Loop)")
    lengths = {len(a.items) for a in args if isinstance(a, Sequence)}
    if len(lengths) != 1 or not isinstance(args[0], Sequence):
        raise ctx.format_error("the first input must be a sequence and all sequences must have the same length")
    if len(body.input) != len(args):
        raise ctx.format_error(f"the body takes {len(body.input)} inputs for {len(args)} node inputs")
    outs: list[list[Element]] = [[] for _ in body.output]
    for k in range(lengths.pop()):
        bound = {}
        for vi, a in zip(body.input, args):
            e = a.items[k] if isinstance(a, Sequence) else a
            if is_held(e) or e is None:
                raise ctx.unsupported("a nested sequence or optional input")
            bound[vi.name] = tensor(ctx, e)
        for acc, v in zip(outs, convert_graph(ctx, body, ctx.b, bound)):
            acc.append(v)
    return [Sequence(items) for items in outs]


@onnx_op("Optional", versions=(15, 28))
def optional(ctx: Ctx, node: Node) -> list[OptionalValue]:
    return [OptionalValue(operand(ctx, 0))]  # type: ignore[arg-type]


@onnx_op("OptionalHasElement", versions=(15, 28))
def optional_has_element(ctx: Ctx, node: Node) -> list[np.ndarray]:
    got = operand(ctx, 0)
    has = got is not None and not (isinstance(got, OptionalValue) and got.value is None)
    return [np.asarray(has)]


@onnx_op("OptionalGetElement", versions=(15, 28))
def optional_get_element(ctx: Ctx, node: Node) -> list[Element | Sequence]:
    got = operand(ctx, 0)
    if isinstance(got, OptionalValue):
        if got.value is None:
            raise ctx.format_error("reading the element of an empty optional")
        return [got.value]  # type: ignore[list-item]
    if got is None:
        raise ctx.format_error("input 0 is required")
    return [got]


def is_held(v: object) -> bool:
    """True for the containers of this module (not tensors)."""
    return isinstance(v, (Sequence, ListSequence, OptionalValue))


__all__ = ["ListSequence", "OptionalValue", "Sequence", "is_held", "operand", "sequence_input", "tensor"]
