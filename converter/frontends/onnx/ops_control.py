"""If, Loop, Scan: ONNX subgraphs -> nested IR blocks (``cond`` / ``while_loop``).

A subgraph is converted by the same registry as the main graph, in a child `Ctx` whose values
fall back to the enclosing ones (ONNX subgraphs read outer-scope values by name; the nested IR
block references the outer IR value, as MIL allows). Element types of subgraph values come from
onnx's shape inference of the whole model (to_ir collects them from every subgraph).

- ``If`` with a condition known at conversion time is inlined (the taken branch is converted into
  the enclosing block, so it may produce compile-time constants and shape values); otherwise both
  branches become the blocks of a ``cond`` (outputs whose shapes differ get symbolic dims).
- ``Loop`` is a ``while_loop`` over (iteration, condition, carried values..., one list per scan
  output): the condition block is ``cond and i < M``; scan outputs are written into IR lists
  (MIL's TensorArray) at index ``i`` and stacked on a new leading axis afterwards. A trip count
  known to be >= 2^31 (torch exports INT64_MAX for "no limit") is treated as absent.
- ``Scan`` (opset 9+) is a ``while_loop`` over ``i < T``: the scan inputs are sliced with
  ``gather`` along their scan axis (index ``T-1-i`` for a reverse direction), scan outputs go
  through lists like Loop's, then are reversed / moved to their output axis.

A carried value whose shape changes between iterations (a growing tensor) gets symbolic dims: the
body is built once on the initial types to learn what it returns, then on the merged types. A
carried value that changes dtype, or an optional carried value, is refused. A carried sequence
becomes an IR list (ops_sequence.ListSequence) whose element type is learnt by converting the
body once on the conversion-time sequence; the body may append to it, read and measure it.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx

from ...ir.builder import Builder
from ...ir.core import Block, Value
from ...ir.ops.control_flow import merge_types
from ...ir.types import TensorType, Type, bool_, int32, is_static_dim, type_of_array
from .context import Ctx, Node, narrow, normalize_axis
from .model_file import tensor_array
from .ops_sequence import ListSequence, OptionalValue, operand, tensor
from .ops_sequence import Sequence as OnnxSequence
from .registry import onnx_op

_INT32_MAX = int(np.iinfo(np.int32).max)


# -- subgraphs ---------------------------------------------------------------------------------------


def subgraph(ctx: Ctx, name: str) -> onnx.GraphProto:
    a = ctx.node.attrs.get(name)
    if a is None or a.type != onnx.AttributeProto.GRAPH:
        raise ctx.format_error(f"attribute '{name}' (a graph) is required")
    return a.g


def child_ctx(ctx: Ctx, b: Builder, bindings: dict[str, Value]) -> Ctx:
    """A context for a subgraph built with ``b``: its own names first, then the enclosing ones."""
    return Ctx(b, ctx.source, ctx.file, values=ChainMap(dict(bindings), ctx.values),  # type: ignore[arg-type]
               arrays=ChainMap({}, ctx.arrays), elem_types=ctx.elem_types)  # type: ignore[arg-type]


def with_outer_inputs(graph: onnx.GraphProto) -> onnx.GraphProto:
    """``graph``, or a copy of it declaring as inputs the outer-scope names its nodes read (so the
    driver's checks of a graph, which take every name a node reads to be defined in the graph,
    apply to a subgraph unchanged)."""
    defined = {vi.name for vi in graph.input} | {t.name for t in graph.initializer}
    defined.update(o for n in graph.node for o in n.output)
    outer = dict.fromkeys(name for n in graph.node for name in n.input if name and name not in defined)
    if not outer:
        return graph
    g = onnx.GraphProto()
    g.CopyFrom(graph)
    g.input.extend(onnx.ValueInfoProto(name=name) for name in outer)
    return g


def convert_graph(ctx: Ctx, graph: onnx.GraphProto, b: Builder, bindings: dict[str, Value]) -> list[Value | np.ndarray]:
    """Map the nodes of ``graph`` with ``b`` (its inputs bound to ``bindings``); its outputs, as IR
    values or (for values known at conversion time) numpy arrays."""
    from .to_ir import _map_node, check_supported, default_opset

    sub = child_ctx(ctx, b, bindings)
    for t in graph.initializer:
        sub.arrays[t.name] = tensor_array(t, ctx.source)
    nodes = check_supported(with_outer_inputs(graph), default_opset(ctx.source), ctx.file or "<model>")
    unavailable: dict[str, str] = {}
    for node in nodes:
        _map_node(sub, node, unavailable)
    outs: list[Value | np.ndarray] = []
    for o in graph.output:
        if o.name in unavailable:
            raise ctx.unsupported(f"subgraph output '{o.name}': {unavailable[o.name]}")
        if o.name not in sub.values and o.name in sub.arrays:
            outs.append(sub.arrays[o.name])
        else:
            outs.append(sub.value(o.name))
    return outs


def _own(b: Builder, v: Value | np.ndarray, ctx: Ctx) -> Value:
    """``v`` as a value produced inside ``b``'s block (block outputs are then always the block's own:
    an outer value or a block input passes through an identity, a constant becomes a const)."""
    if isinstance(v, np.ndarray):
        return b.const(narrow(v, "a subgraph output"))
    if not isinstance(v, Value):  # a conversion-time sequence / optional (ops_sequence)
        raise ctx.unsupported("a sequence or optional value crossing a control-flow block at run time "
                              "(IR lists are not used for ONNX sequences)")
    if v.producer is not None and v.producer.block is b.block:
        return v
    return b.identity(x=v)


def _scalar(b: Builder, v: Value) -> Value:
    """A one-element tensor as a rank-0 value (loop counters and conditions have a fixed type)."""
    if v.type.shape == ():
        return v
    return b.reshape(x=v, shape=np.zeros(0, np.int32))


def _discard(block: Block) -> None:
    block.drop_all()


def _while_loop(b: Builder, init: Sequence[Value], types: Sequence[Type], cond_fn: Callable[..., Value],
                body_fn: Callable[..., Sequence[Value]]) -> tuple[Value, ...]:
    """Builder.while_loop with the block inputs typed ``types`` (more general than the initial
    values' types when a carried value changes shape)."""
    blocks = []
    for i, fn in enumerate((cond_fn, body_fn)):
        blk = Block()
        args = [blk.new_input(b.names.unique(f"loop_{'cond' if i == 0 else 'body'}_{k}"), t) for k, t in enumerate(types)]
        nb = b.nested(blk)
        outs = fn(nb, *args)
        blk.set_outputs([outs] if isinstance(outs, Value) else list(outs))
        blocks.append(blk)
    op = b.add_op("while_loop", {"loop_vars": tuple(init)}, blocks=blocks)
    return tuple(op.outputs)


def _general(ctx: Ctx, init: Type, got: Type, what: str) -> Type:
    m = merge_types(init, got)
    if m is None:
        raise ctx.unsupported(f"{what} changes type across iterations ({init} -> {got})")
    return m


def _probe(b: Builder, types: Sequence[Type], body_fn: Callable[..., list[Value]]) -> list[Type]:
    """The types ``body_fn`` returns for block inputs of ``types`` (built in a discarded block)."""
    blk = Block()
    args = [blk.new_input(b.names.unique(f"probe_{k}"), t) for k, t in enumerate(types)]
    try:
        outs = body_fn(b.nested(blk), *args)
        return [v.type for v in outs]
    finally:
        _discard(blk)


def _empty_list(ctx: Ctx, elem: Type) -> Value:
    if not isinstance(elem, TensorType) or elem.shape is None:
        raise ctx.unsupported(f"a scan output of type {elem} (unknown rank) cannot be stacked")
    dims = tuple(int(d) if is_static_dim(d) else str(d) for d in elem.shape)
    return ctx.b.make_list(init_length=0, dynamic_length=True, elem_shape=dims, dtype=elem.dtype.name)


def _stack(ctx: Ctx, ls: Value) -> Value:
    b = ctx.b
    n = b.list_length(ls=ls)
    return b.list_gather(ls=ls, indices=b.range_1d(start=np.int32(0), end=n, step=np.int32(1)))


def _loop_body_types(ctx: Ctx, b: Builder, init_types: list[Type], n_fixed: int,
                     build: Callable[..., list[Value]]) -> tuple[list[Type], list[Type]]:
    """(carried types general enough for every iteration, scan-output element types). ``build``
    takes the block inputs (fixed ones, carried ones) and returns (fixed, carried, scan outputs)."""
    types = list(init_types)
    for _ in range(2):
        got = _probe(b, types, build)
        general = [_general(ctx, t, g, f"loop-carried value {k - n_fixed}") if k >= n_fixed else t
                   for k, (t, g) in enumerate(zip(types, got))]
        if general == types:
            return types, got[len(types):]
        types = general
    return types, _probe(b, types, build)[len(types):]


# -- If ----------------------------------------------------------------------------------------------


@onnx_op("If", versions=(11, 25))
def if_(ctx: Ctx, node: Node) -> list[Value | np.ndarray]:
    then_g, else_g = subgraph(ctx, "then_branch"), subgraph(ctx, "else_branch")
    if len(then_g.output) != len(else_g.output) or len(then_g.output) != len(node.outputs):
        raise ctx.format_error(f"the branches give {len(then_g.output)} and {len(else_g.output)} outputs for "
                               f"{len(node.outputs)} node outputs")
    known = ctx.const_input(0)
    if known is not None:
        if np.size(known) != 1:
            raise ctx.format_error(f"cond must hold one element, holds {np.size(known)}")
        return convert_graph(ctx, then_g if bool(np.asarray(known).reshape(-1)[0]) else else_g, ctx.b, {})
    pred = _scalar(ctx.b, ctx.input(0, ("bool",)))

    def branch(g: onnx.GraphProto) -> Callable[[Builder], list[Value]]:
        return lambda nb: [_own(nb, v, ctx) for v in convert_graph(ctx, g, nb, {})]

    return list(ctx.b.cond(pred, branch(then_g), branch(else_g)))


# -- Loop --------------------------------------------------------------------------------------------


def _trip_limit(ctx: Ctx) -> Value | None:
    if not ctx.has(0):
        return None
    known = ctx.const_input(0)
    if known is not None:
        m = int(np.asarray(known).reshape(-1)[0])
        return None if m >= _INT32_MAX else ctx.b.const(np.int32(max(m, 0)))
    return _scalar(ctx.b, ctx.input(0, ("int32",)))


@onnx_op("Loop", versions=(11, 25))
def loop(ctx: Ctx, node: Node) -> list[Value]:
    body = subgraph(ctx, "body")
    n_carried = len(node.inputs) - 2
    if n_carried < 0 or len(body.input) != n_carried + 2 or len(body.output) < n_carried + 1:
        raise ctx.format_error(f"the body takes {len(body.input)} inputs and gives {len(body.output)} outputs for "
                               f"{n_carried} loop-carried values")
    n_scan = len(body.output) - 1 - n_carried
    b = ctx.b
    limit = _trip_limit(ctx)
    cond0 = _scalar(b, ctx.input(1, ("bool",))) if ctx.has(1) else b.const(np.bool_(True))
    raw0 = [operand(ctx, 2 + k) for k in range(n_carried)]
    if any(isinstance(v, OptionalValue) or v is None for v in raw0):
        raise ctx.unsupported("a loop-carried optional value")
    seqs = {k for k, v in enumerate(raw0) if isinstance(v, (OnnxSequence, ListSequence))}
    names = [i.name for i in body.input]
    elems = _carried_sequence_types(ctx, body, raw0, seqs) if seqs else {}
    carried0 = [_as_list(ctx, raw0[k], elems[k]) if k in seqs else ctx.input(2 + k) for k in range(n_carried)]

    def run_body(nb: Builder, i: Value, c: Value, *carried: Value) -> list[Value]:
        bound = [ListSequence(v) if k in seqs else v for k, v in enumerate(carried)]
        outs = convert_graph(ctx, body, nb, dict(zip(names, (i, c, *bound))))
        cond_out = _scalar(nb, _own(nb, outs[0], ctx))
        if cond_out.type.dtype.name != "bool":
            cond_out = nb.cast(x=cond_out, dtype="bool")
        rest = [_unwrap_list(ctx, v) if k in seqs else v for k, v in enumerate(outs[1:])]
        return [nb.add(x=i, y=np.int32(1)), cond_out, *(_own(nb, v, ctx) for v in rest)]

    fixed = [TensorType(int32, ()), TensorType(bool_, ())]
    types, scan_elems = _loop_body_types(ctx, b, fixed + [v.type for v in carried0], 2, run_body)
    lists0 = [_empty_list(ctx, t) for t in scan_elems]
    n_vars = 2 + n_carried

    def cond_fn(nb: Builder, i: Value, c: Value, *rest: Value) -> Value:
        if limit is None:
            return nb.identity(x=c)
        return nb.logical_and(x=c, y=nb.less(x=i, y=limit))

    def body_fn(nb: Builder, *args: Value) -> list[Value]:
        vars_, lists = args[:n_vars], args[n_vars:]
        outs = run_body(nb, *vars_)
        scans = outs[n_vars:]
        return outs[:n_vars] + [nb.list_write(ls=ls, index=vars_[0], value=s) for ls, s in zip(lists, scans)]

    init = [b.const(np.int32(0)), cond0, *carried0, *lists0]
    outs = _while_loop(b, init, types + [ls.type for ls in lists0], cond_fn, body_fn)
    finals = [ListSequence(v) if k in seqs else v for k, v in enumerate(outs[2:n_vars])]
    return finals + [_stack(ctx, ls) for ls in outs[n_vars:n_vars + n_scan]]


def _carried_sequence_types(ctx: Ctx, body: onnx.GraphProto, raw0: list[Any], seqs: set[int]) -> dict[int, TensorType]:
    """The element type of each loop-carried sequence: the body is converted once (in a discarded
    block) with the initial sequences as they are, and the elements it and they hold are merged."""
    b = ctx.b
    blk = Block()
    args = [blk.new_input(b.names.unique("seq_probe_i"), TensorType(int32, ())),
            blk.new_input(b.names.unique("seq_probe_c"), TensorType(bool_, ()))]
    for k, v in enumerate(raw0):
        args.append(v if k in seqs else blk.new_input(b.names.unique(f"seq_probe_{k}"), v.type))
    try:
        outs = convert_graph(ctx, body, b.nested(blk), dict(zip((i.name for i in body.input), args)))
        found: dict[int, TensorType] = {}
        for k in sorted(seqs):
            types = []
            for s in (raw0[k], outs[1 + k]):
                if isinstance(s, ListSequence):
                    types.append(s.ls.type.elem)
                elif isinstance(s, OnnxSequence):
                    types += [e.type if isinstance(e, Value) else type_of_array(narrow(e, "an element"))
                              for e in s.items]
                else:
                    raise ctx.unsupported(f"loop-carried value {k} is a sequence on entry but not on exit")
            if not types:
                raise ctx.unsupported(f"loop-carried sequence {k} never holds an element (its type is unknown)")
            merged: Type | None = types[0]
            for t in types[1:]:
                merged = merge_types(merged, t) if merged is not None else None
            if not isinstance(merged, TensorType) or merged.shape is None:
                raise ctx.unsupported(f"loop-carried sequence {k} holds elements of different dtypes or ranks")
            found[k] = merged
        return found
    finally:
        _discard(blk)


def _as_list(ctx: Ctx, seq: Any, elem: TensorType) -> Value:
    """A sequence as an IR list of ``elem`` elements (a conversion-time one written element by element)."""
    if isinstance(seq, ListSequence):
        return seq.ls
    ls = _empty_list(ctx, elem)
    for j, e in enumerate(seq.items):
        v = tensor(ctx, e)
        if v.type.dtype != elem.dtype:
            v = ctx.b.cast(x=v, dtype=elem.dtype.name)
        ls = ctx.b.list_write(ls=ls, index=np.int32(j), value=v)
    return ls


def _unwrap_list(ctx: Ctx, v: Any) -> Value:
    if not isinstance(v, ListSequence):
        raise ctx.unsupported("a loop-carried sequence the body replaces (rather than appends to)")
    return v.ls


# -- Scan --------------------------------------------------------------------------------------------


def _axes(ctx: Ctx, name: str, count: int) -> list[int]:
    got = ctx.attr(name)
    got = [0] * count if got is None else [int(a) for a in got]
    if len(got) != count:
        raise ctx.format_error(f"'{name}' has {len(got)} entries for {count} tensors")
    return got


@onnx_op("Scan", versions=(9, 25))
def scan(ctx: Ctx, node: Node) -> list[Value]:
    body = subgraph(ctx, "body")
    m = int(ctx.required_attr("num_scan_inputs"))
    n_state = len(node.inputs) - m
    n_scan_out = len(body.output) - n_state
    if m < 1 or n_state < 0 or len(body.input) != n_state + m or n_scan_out < 0:
        raise ctx.format_error(f"the body takes {len(body.input)} inputs and gives {len(body.output)} outputs for "
                               f"{n_state} states and {m} scan inputs")
    b = ctx.b
    states0 = [ctx.input(k) for k in range(n_state)]
    xs = [ctx.input(n_state + j) for j in range(m)]
    if not all(isinstance(v, Value) for v in states0 + xs):
        raise ctx.unsupported("a sequence or optional scan state or input")
    in_axes = [normalize_axis(ctx, a, ctx.rank(x)) for a, x in zip(_axes(ctx, "scan_input_axes", m), xs)]
    in_rev = _axes(ctx, "scan_input_directions", m)
    out_axes = _axes(ctx, "scan_output_axes", n_scan_out)
    out_rev = _axes(ctx, "scan_output_directions", n_scan_out)
    length_dim = xs[0].type.shape[in_axes[0]]
    if is_static_dim(length_dim):
        length = b.const(np.int32(int(length_dim)))
    else:
        length = b.gather(x=b.shape(x=xs[0]), indices=np.int32(in_axes[0]), axis=0)
    names = [i.name for i in body.input]

    def run_body(nb: Builder, i: Value, *states: Value) -> list[Value]:
        last = nb.sub(x=length, y=np.int32(1))
        slices = []
        for x, ax, rev in zip(xs, in_axes, in_rev):
            idx = nb.sub(x=last, y=i) if rev else i
            slices.append(nb.gather(x=x, indices=idx, axis=ax))
        outs = convert_graph(ctx, body, nb, dict(zip(names, (*states, *slices))))
        return [nb.add(x=i, y=np.int32(1)), *(_own(nb, v, ctx) for v in outs)]

    types, scan_elems = _loop_body_types(ctx, b, [TensorType(int32, ())] + [v.type for v in states0], 1, run_body)
    lists0 = [_empty_list(ctx, t) for t in scan_elems]
    n_vars = 1 + n_state

    def body_fn(nb: Builder, *args: Value) -> list[Value]:
        vars_, lists = args[:n_vars], args[n_vars:]
        outs = run_body(nb, *vars_)
        return outs[:n_vars] + [nb.list_write(ls=ls, index=vars_[0], value=s) for ls, s in zip(lists, outs[n_vars:])]

    init = [b.const(np.int32(0)), *states0, *lists0]
    outs = _while_loop(b, init, types + [ls.type for ls in lists0],
                       lambda nb, i, *rest: nb.less(x=i, y=length), body_fn)
    results = list(outs[1:n_vars])
    for ls, ax, rev in zip(outs[n_vars:], out_axes, out_rev):
        y = _stack(ctx, ls)
        if rev:
            y = b.reverse(x=y, axes=[0])
        rank = ctx.rank(y)
        ax = normalize_axis(ctx, ax, rank)
        if ax:
            perm = list(range(1, ax + 1)) + [0] + list(range(ax + 1, rank))
            y = b.transpose(x=y, perm=perm)
        results.append(y)
    return results



