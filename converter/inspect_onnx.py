"""What an ONNX model is, for ``converter inspect m.onnx``: the facts of the file (IR version,
opset imports, producer, graph inputs and outputs with their ``dim_param`` names, op types as
ONNX names them, initializers by dtype, ``metadata_props``), gathered from the protobuf alone, and
the program the frontend reads when it reads it (IR ops, parameters, --ir, --graph).

The file is read the way the frontend reads it (converter/frontends/onnx/model_file.py): large
``raw_data`` fields stay in the mapped file and external data files are never opened, so a model
of any size is described in the memory its graph takes. A model the frontend refuses is still
described, with ``refusal`` naming the op types it does not take.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .interface import Feature

#: ONNX element types whose values take less than a byte (two per byte, packed).
_PACKED_4BIT = ("INT4", "UINT4", "FLOAT4E2M1")


@dataclass
class OnnxFacts:
    """The ONNX-specific part of an inspect report (``"onnx"`` in the JSON form)."""

    ir_version: int
    #: {domain ("" is the default ONNX domain, shown as "ai.onnx"): version}
    opset_imports: dict[str, int]
    producer_name: str
    producer_version: str
    domain: str
    model_version: int
    graph_name: str
    #: {op type ("domain::Type" outside the default domain): count}, nested graphs included
    op_histogram: dict[str, int]
    #: {ONNX element type name, lower case ("float", "int64"...): {tensors, elements, bytes}}
    initializers: dict[str, dict[str, int]] = field(default_factory=dict)
    #: bytes of initializers kept in external data files (counted in ``initializers`` too)
    external_bytes: int = 0
    external_files: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"ir_version": self.ir_version, "opset_imports": self.opset_imports,
                "producer_name": self.producer_name, "producer_version": self.producer_version,
                "domain": self.domain, "model_version": self.model_version, "graph_name": self.graph_name,
                "op_histogram": {"total": sum(self.op_histogram.values()), "histogram": self.op_histogram},
                "initializers": {"count": sum(d["tensors"] for d in self.initializers.values()),
                                 "bytes": sum(d["bytes"] for d in self.initializers.values()),
                                 "external_bytes": self.external_bytes, "external_files": self.external_files,
                                 "by_dtype": self.initializers}}


def _type_name(elem_type: int) -> str:
    from onnx import TensorProto

    try:
        return TensorProto.DataType.Name(elem_type)
    except ValueError:
        return f"type{elem_type}"


def _numpy_name(elem_type: int) -> str:
    """The numpy dtype name of an ONNX element type (the ONNX name, lower case, when numpy has none)."""
    from onnx import TensorProto, helper

    if elem_type == TensorProto.STRING:
        return "string"
    try:
        return str(helper.tensor_dtype_to_np_dtype(elem_type).name)
    except (KeyError, ValueError, TypeError):
        return _type_name(elem_type).lower()


def _dim(d: Any) -> Any:
    """An ONNX dimension in the user's terms: its size, ``{"param": NAME}`` for a named symbolic
    size, ``{"min": 0, "max": None}`` for an unnamed unknown one."""
    if d.HasField("dim_value"):
        return int(d.dim_value)
    if d.dim_param:
        return {"param": d.dim_param}
    return {"min": 0, "max": None}


def onnx_feature(vi: Any) -> Feature:
    """A graph input or output as the user passes or gets it (its ONNX type, dims named as declared)."""
    t = vi.type
    which = t.WhichOneof("value")
    desc = vi.doc_string or ""
    if which == "tensor_type":
        tt = t.tensor_type
        shape = [_dim(d) for d in tt.shape.dim] if tt.HasField("shape") else None
        return Feature(vi.name, "tensor", _numpy_name(tt.elem_type), shape, description=desc)
    if which == "sequence_type":
        return Feature(vi.name, "sequence", None, None, description=desc)
    if which == "map_type":
        key = "string" if t.map_type.key_type == 8 else _numpy_name(t.map_type.key_type)
        return Feature(vi.name, "dictionary", None, None, description=desc, details={"key": key})
    if which == "optional_type":
        inner = onnx_feature(_with_type(vi, t.optional_type.elem_type))
        inner.optional = True
        return inner
    return Feature(vi.name, "unknown", None, None, description=desc)


def _with_type(vi: Any, type_proto: Any) -> Any:
    from onnx import ValueInfoProto

    out = ValueInfoProto(name=vi.name, doc_string=vi.doc_string)
    out.type.CopyFrom(type_proto)
    return out


def op_types(graph: Any, out: Counter[str] | None = None) -> Counter[str]:
    """{op type: count} of ``graph`` and the graphs nested in its nodes' attributes (If, Loop, Scan)."""
    from onnx import AttributeProto

    out = Counter() if out is None else out
    for n in graph.node:
        out[n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}"] += 1
        for a in n.attribute:
            if a.type == AttributeProto.GRAPH:
                op_types(a.g, out)
            elif a.type == AttributeProto.GRAPHS:
                for g in a.graphs:
                    op_types(g, out)
    return out


def _tensor_bytes(t: Any, elements: int, name: str) -> int:
    """Bytes the tensor's values take as ONNX stores them (4-bit types packed two a byte)."""
    from onnx import helper

    if name == "STRING":
        return sum(len(s) for s in t.string_data)
    if name in _PACKED_4BIT:
        return (elements + 1) // 2
    try:
        return elements * helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
    except (KeyError, ValueError, TypeError):
        return 0


def initializer_census(graph: Any) -> tuple[dict[str, dict[str, int]], int, list[str]]:
    """Initializers (sparse ones by their values) by element type: ({dtype: {tensors, elements,
    bytes}}, bytes kept in external data, the external files named), from the tensors' headers: no
    external data is read."""
    from onnx import TensorProto

    by: dict[str, dict[str, int]] = {}
    external, files = 0, []
    tensors = [*graph.initializer, *(s.values for s in graph.sparse_initializer)]
    for t in tensors:
        name = _type_name(t.data_type)
        elements = math.prod(int(d) for d in t.dims)
        nbytes = _tensor_bytes(t, elements, name)
        if t.data_location == TensorProto.EXTERNAL:
            info = {e.key: e.value for e in t.external_data}
            external += nbytes
            if info.get("location") and info["location"] not in files:
                files.append(info["location"])
        d = by.setdefault(name.lower(), {"tensors": 0, "elements": 0, "bytes": 0})
        d["tensors"] += 1
        d["elements"] += elements
        d["bytes"] += nbytes
    return dict(sorted(by.items())), external, files


def onnx_facts(model: Any) -> OnnxFacts:
    """The ONNX part of the report, from the ``ModelProto`` (external data not read)."""
    histogram = op_types(model.graph)
    by_dtype, external, files = initializer_census(model.graph)
    return OnnxFacts(
        ir_version=int(model.ir_version),
        opset_imports={(imp.domain or "ai.onnx"): int(imp.version) for imp in model.opset_import},
        producer_name=model.producer_name, producer_version=model.producer_version, domain=model.domain,
        model_version=int(model.model_version), graph_name=model.graph.name,
        op_histogram=dict(sorted(histogram.items(), key=lambda kv: (-kv[1], kv[0]))),
        initializers=by_dtype, external_bytes=external, external_files=files)


def onnx_metadata(model: Any) -> dict[str, Any]:
    """The model's doc string, version and ``metadata_props`` in the report's metadata fields
    (ONNX has no author or license field: ``metadata_props`` keys of those names fill them)."""
    props = {p.key: p.value for p in model.metadata_props}
    return {"short_description": model.doc_string or model.graph.doc_string,
            "version": str(model.model_version) if model.model_version else "",
            "author": props.get("author", ""), "license": props.get("license", ""),
            "user_defined": dict(sorted(props.items()))}


def inspect_onnx(path: str) -> Any:
    """A `ModelSummary` of the ONNX model at ``path`` (see the module docstring); FormatError when
    the file is not an ONNX model."""
    from .api import load
    from .errors import FormatError, UnsupportedError
    from .frontends.onnx.model_file import read_model
    from .inspect import FunctionSummary, ModelSummary, _reason, summarize_program

    model = read_model(path).model  # FormatError for what is not an ONNX model
    try:
        prog = load(path)
    except UnsupportedError as e:
        prog, refusal = None, _reason(e)
    except FormatError as e:
        prog, refusal = None, f"malformed: {_reason(e)}"
    else:
        refusal = None
    g = model.graph
    initializers = {t.name for t in g.initializer}
    ins = [onnx_feature(vi) for vi in g.input if vi.name not in initializers]  # IR < 4: weights listed as inputs
    outs = [onnx_feature(vi) for vi in g.output]
    if prog is None:
        summary = ModelSummary(file=path, format="ONNX", specification_version=None,
                               functions=[FunctionSummary("main", True, None, None, ins, outs)], refusal=refusal)
    else:
        summary = summarize_program(prog, fmt="ONNX", file=path)
        fn = summary.default_function
        if fn is not None:  # the user's terms are the file's: int64 stays int64, a scalar stays a scalar
            fn.inputs, fn.outputs = ins, outs
    summary.metadata = onnx_metadata(model)
    summary.onnx = onnx_facts(model)
    return summary


__all__ = ["OnnxFacts", "initializer_census", "inspect_onnx", "onnx_facts", "onnx_feature", "op_types"]
