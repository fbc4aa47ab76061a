"""Sequences and optionals, held at conversion time.

An ONNX sequence whose length is known at conversion time is a `Sequence`: a Python list of its
elements (IR values, or numpy arrays for constants), stored under its ONNX name like a value, so
SequenceInsert / SequenceErase / SequenceAt with constant positions, SequenceLength,
SplitToSequence, ConcatFromSequence and SequenceMap (its body converted once per element) cost
nothing at run time and elements may differ in shape, as ONNX allows. An ``Optional`` is an
`OptionalValue` (its element, or None for an empty optional), so OptionalHasElement is a constant.

What this cannot hold is refused: a sequence or optional graph input or output (Core ML programs
take and return tensors), a sequence position known only at run time when the elements differ
in shape (equal shapes: stacked and gathered at run time), and a sequence carried through a Loop
or returned by an If whose condition is only known at run time (the IR's lists would need one
element type and a run-time length; not implemented).
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


def sequence_input(ctx: Ctx, i: int) -> Sequence:
    got = operand(ctx, i)
    if isinstance(got, OptionalValue):
        got = got.value
    if not isinstance(got, Sequence):
        raise ctx.unsupported(f"input {i} is not a sequence known at conversion time")
    return got


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
    if any(isinstance(x, (Sequence, OptionalValue)) or x is None for x in items):
        raise ctx.format_error("the inputs must be tensors")
    return [Sequence(items, ctx.input_elem_type(0) if items else None)]  # type: ignore[arg-type]


@onnx_op("SequenceInsert", versions=(11, 28))
def sequence_insert(ctx: Ctx, node: Node) -> list[Sequence]:
    seq = sequence_input(ctx, 0)
    item = operand(ctx, 1)
    if isinstance(item, (Sequence, OptionalValue)) or item is None:
        raise ctx.format_error("the inserted value must be a tensor")
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
def sequence_length(ctx: Ctx, node: Node) -> list[np.ndarray]:
    return [np.asarray(len(sequence_input(ctx, 0).items), np.int64)]


@onnx_op("SequenceAt", versions=(11, 28))
def sequence_at(ctx: Ctx, node: Node) -> list[Element]:
    seq = sequence_input(ctx, 0)
    n = len(seq.items)
    if n == 0:
        raise ctx.format_error("reading from an empty sequence")
    if ctx.const_input(1) is not None:
        return [seq.items[_position(ctx, 1, n, 0)]]
    elems = [tensor(ctx, e) for e in seq.items]
    if len({e.type for e in elems}) != 1 or any(not is_static_dim(d) for d in elems[0].type.shape or (None,)):
        raise ctx.unsupported("a run-time position into a sequence whose elements differ in type or shape")
    b = ctx.b
    p = ctx.input(1, ("int32",))
    if p.type.shape != ():
        p = b.reshape(x=p, shape=np.zeros(0, np.int32))
    p = b.select(cond=b.less(x=p, y=np.int32(0)), a=b.add(x=p, y=np.int32(n)), b=p)
    return [b.gather(x=b.stack(values=tuple(elems), axis=0), indices=p, axis=0)]


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
        items = [_slice_axis(ctx, x, axis, b.gather(x=starts, indices=np.int32(k), axis=0),
                             b.gather(x=ends, indices=np.int32(k), axis=0)) for k in range(int(count))]
        return [Sequence(list(items), ctx.input_elem_type(0))]
    if not is_static_dim(dim):
        raise ctx.unsupported("the split axis must have a size known at conversion time")
    dim = int(dim)
    if split is None:
        sizes, keep = [1] * dim, bool(int(ctx.attr("keepdims", 1)))
    else:
        s = np.asarray(split).reshape(-1) if np.ndim(split) else None
        if s is None:  # a scalar: equal chunks, the last one smaller
            step = int(split)
            if step < 1:
                raise ctx.format_error(f"split must be positive, got {step}")
            sizes = [min(step, dim - k) for k in range(0, dim, step)]
        else:
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
    seq = sequence_input(ctx, 0)
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


@onnx_op("SequenceMap", versions=(17, 28))
def sequence_map(ctx: Ctx, node: Node) -> list[Sequence]:
    """The body converted once per element (sequences of equal length; tensors shared by all)."""
    from .ops_control import convert_graph, subgraph

    body = subgraph(ctx, "body")
    args = [operand(ctx, i) for i in range(len(node.inputs))]
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
            if isinstance(e, (Sequence, OptionalValue)) or e is None:
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
    """True for the conversion-time containers of this module (not tensors)."""
    return isinstance(v, (Sequence, OptionalValue))


__all__ = ["OptionalValue", "Sequence", "is_held", "operand", "sequence_input", "tensor"]
