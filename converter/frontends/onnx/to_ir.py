"""An ONNX model -> an IR `Program` (one function, ``main``, MIL opset iOS18).

Graph inputs and outputs are declared with Core ML feature dtypes (fp32, fp16, int32; see
INTERFACE_DTYPES and context.py for the dtype policy).

Order of work: the opsets and every node are checked first (one UnsupportedError lists every
op type the IR cannot take, with the reason for each), then onnx's shape inference types the
graph, then the nodes are mapped one by one through the registry. Graph inputs and outputs keep
their names; ``dim_param`` names become IR symbols (one symbol per name, shared across inputs),
unnamed unknown dims fresh symbols. Initializers that are also graph inputs (IR version < 4
defaults) are treated as constants.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from typing import Any

import numpy as np
import onnx
from onnx import defs

from ...errors import ConversionWarning, ConverterError, FormatError, UnsupportedError
from ...ir.builder import Builder
from ...ir.core import FeatureInfo, Function, Program, Value
from ...ir.types import Symbol, TensorType, dtype, fresh_symbol
from . import ops  # noqa: F401  (fills the registry)
from .context import Ctx, Node, elem_type_name, ir_dtype
from .model_file import ModelSource, inferred_types, tensor_array
from .registry import find_mapping

#: MIL opset of the programs built (the widest dtype support of the ops used).
OPSET = "iOS18"
#: Dtypes of graph inputs and outputs as declared in the IR: what a Core ML model's features hold
#: on every target. bool and 8/16-bit integer features are declared int32 (exact: a cast inside
#: the function converts), their ONNX type kept in the feature's ``extra["onnx_elem_type"]``.
#: A scalar input is declared with shape [1] (Core ML inputs have rank >= 1) and reshaped inside.
INTERFACE_DTYPES = ("fp32", "fp16", "int32")
DEFAULT_DOMAINS = ("", "ai.onnx")


def default_opset(src: ModelSource) -> int | None:
    """The model's default-domain opset (None when it imports none); UnsupportedError when newer
    than the onnx package knows."""
    versions = {imp.domain: imp.version for imp in src.model.opset_import}
    version = versions.get("", versions.get("ai.onnx"))
    if version is None:
        return None
    newest = defs.onnx_opset_version()
    if version > newest:
        raise UnsupportedError(f"the model uses ONNX opset {version}; this converter knows opsets up to {newest}",
                               file=src.label)
    return version


def _schema(op_type: str, opset: int) -> onnx.defs.OpSchema | None:
    if not isinstance(op_type, str):  # protobuf hands out bytes for a name that is not UTF-8
        return None
    try:
        return defs.get_schema(op_type, opset, "")
    except defs.SchemaError:
        return None


def check_supported(graph: onnx.GraphProto, opset: int | None, label: str) -> list[Node]:
    """The main graph's nodes, in order, with their schema versions; raises one UnsupportedError
    listing every op type that has no mapping (with the nodes using it and why)."""
    problems: dict[str, tuple[str, list[str]]] = {}
    nodes: list[Node] = []
    defined = {vi.name for vi in graph.input} | {t.name for t in graph.initializer}
    for i, n in enumerate(graph.node):
        where = n.name or (n.output[0] if n.output else f"#{i}")
        for name in n.input:
            if name and name not in defined:
                raise FormatError(f"'{name}' is not a graph input, an initializer or the output of an earlier node "
                                  "(ONNX nodes are in topological order)", file=label, op=where, op_type=n.op_type)
        for o in n.output:
            if o and o in defined:
                raise FormatError(f"value '{o}' is defined twice (ONNX graphs are in SSA form)", file=label, op=where,
                                  op_type=n.op_type)
            defined.add(o)
        schema = _node_schema(n, where, opset, label, problems)
        if schema is not None:
            nodes.append(Node(n, schema, schema.since_version, {a.name: a for a in n.attribute}))
        _check_subgraphs(n, where, opset, label, problems)
    if problems:
        lines = []
        for op, (why, wheres) in sorted(problems.items()):
            shown = ", ".join(repr(w) for w in wheres[:3]) + (f" and {len(wheres) - 3} more" if len(wheres) > 3 else "")
            lines.append(f"{op} ({why}; nodes {shown})")
        raise UnsupportedError(f"{len(problems)} unsupported ONNX op type(s): " + "; ".join(lines), file=label,
                               details=sorted(problems))
    return nodes


def _node_schema(n: onnx.NodeProto, where: str, opset: int | None, label: str,
                 problems: dict[str, tuple[str, list[str]]]) -> Any:
    """The schema of node ``n`` when a mapping converts it; else None, with why added to ``problems``."""
    if n.domain not in DEFAULT_DOMAINS:
        key = f"{n.domain}::{n.op_type}"
        problems.setdefault(key, (f"domain '{n.domain}' is not supported (only the default ONNX domain)", []))
        problems[key][1].append(where)
        return None
    if opset is None:
        raise FormatError("the model imports no opset of the default ONNX domain, which its node uses",
                          file=label, op=where, op_type=n.op_type)
    schema = _schema(n.op_type, opset)
    if schema is None:
        problems.setdefault(n.op_type, (f"not an ONNX operator at opset {opset}", []))[1].append(where)
        return None
    found = find_mapping(n.op_type, schema.since_version)
    if isinstance(found, str):
        problems.setdefault(n.op_type, (found, []))[1].append(where)
        return None
    return schema


def _check_subgraphs(n: onnx.NodeProto, where: str, opset: int | None, label: str,
                     problems: dict[str, tuple[str, list[str]]]) -> None:
    """Add the unsupported op types of ``n``'s subgraphs (If branches, Loop and Scan bodies, at
    any depth) to ``problems``, their nodes named ``outer/inner``: one error lists them all, up
    front, as for the main graph."""
    for a in n.attribute:
        for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
            for i, sub in enumerate(g.node):
                inner = f"{where}/{sub.name or (sub.output[0] if sub.output else f'#{i}')}"
                _node_schema(sub, inner, opset, label, problems)
                _check_subgraphs(sub, inner, opset, label, problems)


def _static_shapes(g: onnx.GraphProto) -> dict[str, tuple[int, ...]]:
    """Shapes onnx's inference found fully static, by value name."""
    out: dict[str, tuple[int, ...]] = {}
    for vi in (*g.value_info, *g.output):
        tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        if tt is not None and tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            out[vi.name] = tuple(int(d.dim_value) for d in tt.shape.dim)
    return out


def _elem_types(g: onnx.GraphProto, out: dict[str, int] | None = None) -> dict[str, int]:
    """ONNX name -> element type, for the graph and (recursively) the subgraphs of its nodes
    (control flow; ONNX names do not shadow outer ones)."""
    out = {} if out is None else out
    for vi in (*g.input, *g.value_info, *g.output):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            out.setdefault(vi.name, vi.type.tensor_type.elem_type)
    for t in g.initializer:
        out.setdefault(t.name, t.data_type)
    for n in g.node:
        for a in n.attribute:
            for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else a.graphs):
                _elem_types(sub, out)
    return out


def _input_type(vi: onnx.ValueInfoProto, symbols: dict[str, Symbol], label: str) -> TensorType:
    which = vi.type.WhichOneof("value")
    if which != "tensor_type":
        raise UnsupportedError(f"graph input '{vi.name}' is a {which or 'untyped value'}; only tensors are supported",
                               file=label)
    tt = vi.type.tensor_type
    dt = ir_dtype(tt.elem_type, f"graph input '{vi.name}'", read_only=True)
    if not tt.HasField("shape"):
        raise UnsupportedError(f"graph input '{vi.name}' has no shape (unknown rank)", file=label)
    dims = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            if d.dim_value < 0:
                raise FormatError(f"graph input '{vi.name}' has a negative dimension", file=label)
            dims.append(int(d.dim_value))
        elif d.dim_param:
            dims.append(symbols.setdefault(d.dim_param, Symbol(d.dim_param)))
        else:
            dims.append(fresh_symbol())
    return TensorType(dtype(dt), tuple(dims))


def graph_to_program(src: ModelSource) -> Program:
    """The program of ``src``; any inconsistency the checks above did not name is still a
    FormatError naming the file (a corrupt file must never surface as another exception)."""
    try:
        return _graph_to_program(src)
    except ConverterError:
        raise
    except (TypeError, ValueError, KeyError, IndexError, OverflowError, UnicodeError, RecursionError) as e:
        raise FormatError(f"malformed ONNX model ({type(e).__name__}: {e})", file=src.label) from None


def _graph_to_program(src: ModelSource) -> Program:
    label = src.label
    opset = default_opset(src)
    nodes = check_supported(src.model.graph, opset, label)
    typed = inferred_types(src)
    prog = Program()
    fn = Function("main", OPSET)
    prog.add_function(fn)
    ctx = Ctx(Builder(fn.block), src, label)
    ctx.elem_types = _elem_types(typed)
    shapes = _static_shapes(typed)
    prog.meta["onnx"] = {"opset": opset, "ir_version": src.model.ir_version,
                         "producer": f"{src.model.producer_name} {src.model.producer_version}".strip()}
    for t in src.model.graph.initializer:
        ctx.arrays[t.name] = tensor_array(t, src)
    symbols: dict[str, Symbol] = {}
    typed_inputs = {vi.name: vi for vi in typed.input}
    for vi in src.model.graph.input:
        if vi.name in ctx.arrays:
            continue
        t = _input_type(typed_inputs.get(vi.name, vi), symbols, label)
        held, scalar = t.dtype.name, t.shape == ()
        declared = TensorType(dtype(held if held in INTERFACE_DTYPES else "int32"), (1,) if scalar else t.shape)
        v = fn.block.new_input(vi.name, declared)
        if scalar:  # Core ML inputs have rank >= 1: declared [1], a scalar inside
            v = ctx.b.reshape(x=v, shape=np.zeros(0, np.int32))
        if held not in INTERFACE_DTYPES:  # declared int32, cast to the held dtype inside
            v = ctx.b.cast(x=v, dtype=held)
        ctx.values[vi.name] = v
        ctx.elem_types.setdefault(vi.name, vi.type.tensor_type.elem_type)
        fn.input_info[vi.name] = FeatureInfo(vi.name, extra={"onnx_elem_type": elem_type_name(ctx.elem_types[vi.name])})
    unavailable: dict[str, str] = {}
    for node in nodes:
        _map_node(ctx, node, unavailable)
        _check_shapes(ctx, node, shapes)
    _name_outputs(ctx, fn, src.model.graph, unavailable)
    return prog


def _map_node(ctx: Ctx, node: Node, unavailable: dict[str, str]) -> None:
    ctx.node = node
    mapping = find_mapping(node.op_type, node.version)
    assert not isinstance(mapping, str)
    for name in node.proto.input:
        if name and name in unavailable:
            raise ctx.unsupported(f"input '{name}' is an output the converter cannot give: {unavailable[name]}")
    try:
        results = list(mapping.fn(ctx, node))
        if len(results) > len(node.proto.output):
            results = results[: len(node.proto.output)]
        results += [None] * (len(node.proto.output) - len(results))
        for name, v in zip(node.proto.output, results):
            if not name:
                continue
            if v is None:
                unavailable[name] = f"optional output of {node.op_type} not supported"
            elif isinstance(v, np.ndarray):
                ctx.arrays[name] = v  # known at conversion time: kept in its ONNX dtype
                ctx.elem_types.setdefault(name, onnx.helper.np_dtype_to_tensor_dtype(v.dtype))
            else:
                ctx.values[name] = ctx.fit(v, ctx.elem_types.get(name))
    except ConverterError as e:
        if isinstance(e, (FormatError, UnsupportedError)):
            raise e.with_location(file=ctx.file, op=node.name, op_type=node.op_type) from None
        raise FormatError(f"the node cannot be built: {e.message}", file=ctx.file, op=node.name,
                          op_type=node.op_type) from None
    except (IndexError, KeyError, ValueError, TypeError, ZeroDivisionError, OverflowError) as e:
        raise FormatError(f"invalid arguments for the operand shapes ({type(e).__name__}: {e})", file=ctx.file,
                          op=node.name, op_type=node.op_type) from None


def _check_shapes(ctx: Ctx, node: Node, shapes: dict[str, tuple[int, ...]]) -> None:
    """Where both onnx's shape inference and the IR know an output's shape, compare them. A
    difference is reported as a ConversionWarning, not refused: onnx's inference has known errors
    (e.g. AveragePool with ceil_mode keeps a window starting in the right padding, which
    onnxruntime and onnx's reference implementation drop, as the mappings do)."""
    for name in node.proto.output:
        want = shapes.get(name)
        if want is None:
            continue
        v = ctx.values.get(name)
        got = ctx.static_shape(v) if v is not None else tuple(ctx.arrays[name].shape) if name in ctx.arrays else None
        if got is not None and got != want:
            where = ConverterError("", file=ctx.file, op=node.name, op_type=node.op_type).where()
            warnings.warn(f"{where}: output '{name}' has shape {list(got)}; ONNX's shape inference says {list(want)}",
                          ConversionWarning, stacklevel=2)


def _name_outputs(ctx: Ctx, fn: Function, graph: onnx.GraphProto, unavailable: dict[str, str]) -> None:
    """Give the output values the graph's output names exactly (an output that is an input, a
    constant or another output gets an identity op of its own to carry the name)."""
    ctx.node = None
    wanted = {o.name for o in graph.output}
    chosen: list[Value] = []
    counts: dict[Value, int] = defaultdict(int)
    for o in graph.output:
        if o.name in unavailable:
            raise UnsupportedError(f"graph output '{o.name}': {unavailable[o.name]}", file=ctx.file)
        v = ctx.value(o.name)
        if not isinstance(v, Value):  # a sequence / optional held at conversion time (ops_sequence)
            raise UnsupportedError(f"graph output '{o.name}' is a {o.type.WhichOneof('value') or 'non-tensor value'}; "
                                   "Core ML programs return tensors", file=ctx.file)
        if o.type.HasField("tensor_type") and o.type.tensor_type.elem_type:
            v = ctx.fit(v, o.type.tensor_type.elem_type)
        if v.type.dtype.name not in INTERFACE_DTYPES:
            v = ctx.b.cast(x=v, dtype="int32")
        counts[v] += 1
        is_input_itself = v.is_block_input and v.name == o.name  # ONNX lets a graph output be an input
        if not is_input_itself and (v.producer is None or v.producer.type == "const" or counts[v] > 1):
            v = ctx.b.identity(x=v)  # an output needs an op of its own to carry its name
        chosen.append(v)
    chosen_set = set(chosen)
    for v in list(fn.values()):
        if v.name in wanted and v not in chosen_set:
            v.name = fn.names.unique(f"{v.name}_internal")
    for o, v in zip(graph.output, chosen):
        v.name = o.name
        et = ctx.elem_types.get(o.name) or o.type.tensor_type.elem_type
        fn.output_info[o.name] = FeatureInfo(o.name, extra={"onnx_elem_type": elem_type_name(et)})
    fn.block.set_outputs(chosen)
