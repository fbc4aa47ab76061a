"""What a model is, without converting it: `inspect_model` gathers a `ModelSummary` (format,
specification version, functions and their opsets, inputs and outputs in the user's terms,
classifier labels, op and layer histograms, parameters by dtype, metadata) for ``converter
inspect``. Printing is elsewhere (converter/inspect_text.py); the JSON form is documented by
docs/schemas/inspect.schema.json.

A Core ML model the converter cannot read into the IR (a model type it does not convert, a layer
it refuses or finds malformed) is still described from its file: format, version, description
features, metadata and layers, with the reason as ``refusal``. A file that is not a Core ML model
(missing, not a protobuf message, a package without its manifest) is an error. An ONNX model is
described by converter/inspect_onnx.py, in the same form plus its own facts (``onnx``).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import ConverterError, FormatError, UnsupportedError
from .interface import Feature, described
from .interface import inputs as feature_inputs
from .interface import outputs as feature_outputs
from .interface import states as feature_states
from .ir.census import ParameterCensus, op_histogram, parameter_census
from .ir.core import Function, Program
from .ir.runtime import ListValue

if TYPE_CHECKING:
    from .inspect_onnx import OnnxFacts

#: The format names inspect prints, by the Model.Type oneof member.
_FORMATS = {"neuralNetwork": "NeuralNetwork", "neuralNetworkClassifier": "NeuralNetworkClassifier",
            "neuralNetworkRegressor": "NeuralNetworkRegressor", "pipeline": "pipeline",
            "pipelineClassifier": "pipelineClassifier", "pipelineRegressor": "pipelineRegressor",
            "mlProgram": "mlProgram"}
_NN_KINDS = ("neuralNetwork", "neuralNetworkClassifier", "neuralNetworkRegressor")
_PIPELINE_KINDS = ("pipeline", "pipelineClassifier", "pipelineRegressor")
#: Labels shown in full; beyond that, the first few and the count.
FIRST_LABELS = 5


@dataclass
class FunctionSummary:
    """One function (entry point) of the model."""

    name: str
    default: bool
    #: the MIL opset of the program as read into the IR ("iOS15".."iOS18"); None when not read
    opset: str | None
    #: an ML program's own opset name as the file declares it ("CoreML5"...); None otherwise
    file_opset: str | None
    inputs: list[Feature]
    outputs: list[Feature]
    states: list[Feature] = field(default_factory=list)
    #: ops other than const, nested blocks included; None when the model was not read into the IR
    ops: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "default": self.default, "opset": self.opset, "file_opset": self.file_opset,
                "inputs": [f.to_json() for f in self.inputs], "outputs": [f.to_json() for f in self.outputs],
                "states": [f.to_json() for f in self.states], "ops": self.ops}


@dataclass
class ClassifierLabels:
    count: int
    label_type: str  # "string" or "int64"
    first: list[str | int]

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "label_type": self.label_type, "first": self.first}


@dataclass
class ModelSummary:
    """Everything ``converter inspect`` reports about one model (see the module docstring)."""

    file: str | None
    #: NeuralNetwork, NeuralNetworkClassifier, NeuralNetworkRegressor, pipeline, pipelineClassifier,
    #: pipelineRegressor, mlProgram, ONNX, WebNN, program (built in Python), or another Model.Type member
    format: str
    specification_version: int | None
    functions: list[FunctionSummary]
    #: a pipeline's stages, in order, by format
    pipeline_stages: list[str] = field(default_factory=list)
    classifier: ClassifierLabels | None = None
    #: {op type: count}: ops other than const, nested blocks included, every function
    op_histogram: dict[str, int] = field(default_factory=dict)
    #: NeuralNetwork models: {layer kind: count} over every network, nested and pipeline stages included
    layer_histogram: dict[str, int] | None = None
    parameters: ParameterCensus | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: why the model could not be read into the IR ("malformed: ..." when the frontend found the
    #: model's content invalid); None when it was
    refusal: str | None = None
    notes: list[str] = field(default_factory=list)
    #: the program read (for --ir and --graph); None when the model was refused
    program: Program | None = field(default=None, repr=False, compare=False)
    #: an ONNX model's own facts (converter/inspect_onnx.py); None for other formats
    onnx: OnnxFacts | None = None

    @property
    def default_function(self) -> FunctionSummary | None:
        return next((f for f in self.functions if f.default), None)

    def to_json(self) -> dict[str, Any]:
        """The JSON form (docs/schemas/inspect.schema.json)."""
        p = self.parameters
        return {
            "file": self.file, "format": self.format, "specification_version": self.specification_version,
            "pipeline_stages": self.pipeline_stages, "refusal": self.refusal,
            "functions": [f.to_json() for f in self.functions],
            "classifier": None if self.classifier is None else self.classifier.to_json(),
            "ops": {"total": sum(self.op_histogram.values()), "histogram": self.op_histogram},
            "layers": None if self.layer_histogram is None else {
                "total": sum(self.layer_histogram.values()), "histogram": self.layer_histogram},
            "parameters": None if p is None else {
                "count": p.parameters, "stored_bytes": p.stored_bytes, "decompressed_bytes": p.decompressed_bytes,
                "compressed_tensors": p.compressed_tensors,
                "stored": {k: vars(v).copy() for k, v in p.stored.items()},
                "decompressed": {k: vars(v).copy() for k, v in p.decompressed.items()}},
            "metadata": self.metadata, "notes": self.notes,
            **({"onnx": self.onnx.to_json()} if self.onnx is not None else {}),
        }

    def text(self) -> str:
        """The human-readable report ``converter inspect`` prints."""
        from .inspect_text import summary_text

        return summary_text(self)


def inspect_model(source: str | os.PathLike | Program) -> ModelSummary:
    """Describe a model file (``.mlmodel``, ``.mlpackage``, ``.onnx``, WebNN graph) or a program. What is not
    a model file (missing, not a protobuf message, no package manifest; a malformed WebNN graph)
    raises `FormatError`; a Core ML model the converter refuses or finds malformed inside is
    described from its file (``refusal`` says why, ``program`` is None)."""
    from .api import load
    from .formats.model_file import read_model_file
    from .frontends.onnx import is_onnx_source
    from .frontends.webnn import is_webnn_path

    if isinstance(source, Program):
        return summarize_program(source, fmt=_program_format(source), file=source.meta.get("source_path"))
    path = os.fspath(source)
    if is_onnx_source(path):
        from .inspect_onnx import inspect_onnx

        return inspect_onnx(path)
    if is_webnn_path(path):
        prog = load(path)
        return summarize_program(prog, fmt="WebNN", file=path)
    model = read_model_file(path).model  # FormatError for what is not a model file
    try:
        prog: Program | None = load(path)
    except UnsupportedError as e:
        prog, refusal = None, _reason(e)
    except FormatError as e:  # the file parsed, but its content is invalid for the converter
        prog, refusal = None, f"malformed: {_reason(e)}"
    else:
        refusal = None
    kind = model.WhichOneof("Type") or "none"
    if prog is None:
        summary = _summarize_description(model, path)
        summary.refusal = refusal
    else:
        summary = summarize_program(prog, fmt=_FORMATS.get(kind, kind), file=path)
    summary.specification_version = int(model.specificationVersion)
    summary.metadata = model_metadata(model.description.metadata)
    if kind in _PIPELINE_KINDS:
        summary.pipeline_stages = [_FORMATS.get(m.WhichOneof("Type") or "none", m.WhichOneof("Type") or "none")
                                   for m in _stages(model, kind)]
    layers = layer_histogram(model)
    if kind in _NN_KINDS or layers:
        summary.layer_histogram = dict(sorted(layers.items(), key=lambda kv: (-kv[1], kv[0])))
    if prog is not None and kind == "mlProgram":
        opsets = {name: f.opset for name, f in model.mlProgram.functions.items()}
        for f in summary.functions:
            f.file_opset = opsets.get(f.name)
    return summary


def _reason(e: ConverterError) -> str:
    """The error's message with its location inside the model (the file is the one inspected)."""
    where = ConverterError(e.message, function=e.function, op=e.op, op_type=e.op_type, field=e.field,
                           offset=e.offset).where()
    return f"{where}: {e.message}" if where else e.message


def _program_format(prog: Program) -> str:
    return {"mlprogram": "mlProgram", "neuralnetwork": "NeuralNetwork"}.get(prog.meta.get("source_format", ""),
                                                                          "program")


def summarize_program(prog: Program, *, fmt: str, file: str | None = None) -> ModelSummary:
    """The parts of a summary the IR holds (functions, features, labels, ops, parameters)."""
    histogram = op_histogram(prog)
    functions = [_function_summary(fn, fn.name == prog.default_function) for fn in prog.functions.values()]
    return ModelSummary(file=file, format=fmt, specification_version=prog.meta.get("spec_version"),
                        functions=functions, classifier=classifier_labels(prog),
                        op_histogram=dict(sorted(histogram.items(), key=lambda kv: (-kv[1], kv[0]))),
                        parameters=parameter_census(prog), notes=list(prog.meta.get("notes", [])), program=prog,
                        metadata=_program_metadata(prog))


def _program_metadata(prog: Program) -> dict[str, Any]:
    """The metadata a program read from a Core ML file keeps in its description (empty otherwise)."""
    from .formats.proto import Model_pb2

    d = Model_pb2.ModelDescription()
    raw = prog.meta.get("model_description")
    if isinstance(raw, bytes):
        d.ParseFromString(raw)
    return model_metadata(d.metadata)


def _function_summary(fn: Function, default: bool) -> FunctionSummary:
    ops = sum(1 for op in fn.walk() if op.type not in ("const", "_const_symbolic"))
    ins = feature_inputs(fn)
    states = feature_states(fn) or [f for f in ins if f.kind == "state"]
    # a state is not passed with the inputs (Core ML lists it apart, in the description's states)
    ins = [f for f in ins if f.kind != "state"]
    return FunctionSummary(fn.name, default, fn.opset, fn.meta.get("mil_opset"), ins, feature_outputs(fn), states,
                           ops)


def _summarize_description(model: Any, path: str) -> ModelSummary:
    """A model the converter does not read: its description's features only."""
    d = model.description
    fn = FunctionSummary("main", True, None, None,
                         [described(f.name, f.type.SerializeToString(), f.shortDescription) for f in d.input],
                         [described(f.name, f.type.SerializeToString(), f.shortDescription) for f in d.output])
    kind = model.WhichOneof("Type") or "none"
    return ModelSummary(file=path, format=_FORMATS.get(kind, kind), specification_version=None, functions=[fn])


def classifier_labels(prog: Program, first: int = FIRST_LABELS) -> ClassifierLabels | None:
    """The class labels of the program's ``classify`` op (frontends keep a classifier's labels as
    its ``classes`` input); None when there is none."""
    for op in prog.walk():
        if op.type != "classify":
            continue
        classes = op.inputs.get("classes")
        labels = None if classes is None else classes.const_val
        if labels is None:
            continue
        items = labels.items if isinstance(labels, ListValue) else list(getattr(labels, "flat", labels))
        flat = [_scalar(x) for x in items]
        label_type = "int64" if all(isinstance(x, int) for x in flat) else "string"
        return ClassifierLabels(len(flat), label_type, [x if label_type == "int64" else str(x) for x in flat[:first]])
    return None


def _scalar(x: Any) -> Any:
    """A label as a Python str or int (numpy scalars and 0-d arrays unwrapped, bytes decoded)."""
    x = x.item() if hasattr(x, "item") else x
    return x.decode("utf-8", "replace") if isinstance(x, bytes) else x


def model_metadata(meta: Any) -> dict[str, Any]:
    """A Core ML Metadata message as a dict (every key present; empty strings where unset)."""
    return {"short_description": meta.shortDescription, "version": meta.versionString, "author": meta.author,
            "license": meta.license, "user_defined": dict(sorted(meta.userDefined.items()))}


def layer_histogram(model: Any) -> Counter[str]:
    """{layer kind: count} of a NeuralNetwork model or pipeline: every network, including loop and
    branch bodies and pipeline stages."""
    out: Counter[str] = Counter()
    stack = [model]
    while stack:
        m = stack.pop()
        kind = m.WhichOneof("Type")
        if kind in _PIPELINE_KINDS:
            stack.extend(reversed(_stages(m, kind)))
        elif kind in _NN_KINDS:
            _count_layers(getattr(m, kind).layers, out)
    return out


def _stages(model: Any, kind: str) -> list[Any]:
    """A pipeline's models (a pipelineClassifier/Regressor holds its Pipeline in ``.pipeline``)."""
    p = getattr(model, kind)
    return list(p.models if kind == "pipeline" else p.pipeline.models)


def _count_layers(layers: Any, out: Counter[str]) -> None:
    for layer in layers:
        kind = layer.WhichOneof("layer")
        if kind is None:
            out["(none)"] += 1
            continue
        out[kind] += 1
        params = getattr(layer, kind)
        for fd in params.DESCRIPTOR.fields:  # nested networks: loop and branch bodies
            if fd.message_type is not None and fd.message_type.name == "NeuralNetwork":
                _count_layers(getattr(params, fd.name).layers, out)
