"""The library entry points: load, save, convert, optimize, run.

``load`` picks the frontend from the model's type; ``save`` picks the backend from the path and
options, and writes only where converter/destination.py allows (by default it replaces nothing:
an existing destination is an error unless ``overwrite=True``, and even then only a Core ML model
is replaced, never the model the program was loaded from); ``run`` feeds a program the way a Core ML app would (declared shapes, any numeric dtype,
images as H x W x 3 uint8 RGB arrays) and returns outputs as Core ML reports them (classifier
probabilities as a dict).

``convert`` runs the default pass pipeline before writing (``passes="none"`` to keep the program as
read); ``save`` writes the program as it is (saving is not optimizing); ``optimize`` runs a
pipeline on a program in place.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .destination import output_format, resolve_model_destination
from .errors import UnsupportedError
from .formats.model_file import read_model_file
from .ir.core import Program

if TYPE_CHECKING:
    from .passes.base import Pass, PipelineStats
    from .passes.rewrite import Explanation

# Model types a frontend reads, by the name of the Model.Type oneof member.
_NEURAL_NETWORK_TYPES = ("neuralNetwork", "neuralNetworkClassifier", "neuralNetworkRegressor",
                         "pipeline", "pipelineClassifier", "pipelineRegressor")


#: ``Program.meta`` key: the file a program was loaded from (absolute), which `save` never writes.
SOURCE_PATH = "source_path"


#: What `load` reads: a path, or a model in memory: the bytes of a ``.mlmodel``, a ``Model``
#: protobuf message (ours, converter.formats.proto.Model_pb2, or coremltools'), or an object with a
#: ``get_spec()`` method (a coremltools ``MLModel``).
ModelSource = Any

_MODEL_MESSAGE = "CoreML.Specification.Model"


def _in_memory(model: Any, weights_dir: str | os.PathLike | None) -> tuple[Any, str, Any] | None:
    """(Model message, label, weights folder) of a model given in memory; None for a path."""
    from .errors import FormatError
    from .formats.model_file import parse_model_bytes
    from .formats.proto import Model_pb2

    if isinstance(model, (str, os.PathLike)):
        return None
    if isinstance(model, (bytes, bytearray, memoryview)):
        label = "<bytes>"
        return parse_model_bytes(bytes(model), Path(label)), label, weights_dir
    if hasattr(model, "get_spec") and not hasattr(model, "DESCRIPTOR"):
        spec = model.get_spec()
        weights_dir = weights_dir if weights_dir is not None else getattr(model, "weights_dir", None)
        label = f"<{type(model).__name__}>"
        model = spec
    else:
        label = "<Model message>"
    descriptor = getattr(model, "DESCRIPTOR", None)
    if getattr(descriptor, "full_name", None) != _MODEL_MESSAGE:
        raise UnsupportedError(f"cannot load a {type(model).__name__}: give a path, the bytes of a .mlmodel, a Core ML "
                               "Model protobuf message, or an object with get_spec() (a coremltools MLModel)")
    copy = Model_pb2.Model()  # a copy: the caller's message is never touched (and may be coremltools' class)
    try:
        copy.ParseFromString(model.SerializeToString())
    except Exception as e:  # noqa: BLE001 - protobuf raises several kinds for a message it cannot encode
        raise FormatError(f"the Model message cannot be serialized: {e}", file=label) from None
    return copy, label, weights_dir


def load(path: ModelSource, *, weights_dir: str | os.PathLike | None = None) -> Program:
    """Read a model into the IR: a Core ML model (``.mlmodel`` file or ``.mlpackage`` directory),
    a WebNN graph (``model.js`` run under Node, or a ``.webnn.json`` graph file), or an ONNX model
    (a ``.onnx`` file or an ``onnx.ModelProto``; converter/frontends/onnx).

    A model in memory is read without touching the disk: the bytes of a ``.mlmodel``, a Core ML
    ``Model`` protobuf message (``converter.formats.proto.Model_pb2.Model`` or coremltools'
    ``model.get_spec()``), or an object with ``get_spec()`` (a coremltools ``MLModel``). An ML
    program keeps large weights in blob files beside its model (``@model_path/weights/...``);
    those are read from ``weights_dir`` (an ``MLModel``'s own ``weights_dir`` by default). The
    message or object given is not modified."""
    from .frontends.onnx import is_onnx_source
    from .frontends.webnn import is_webnn_path

    if is_onnx_source(path):
        from .frontends.onnx import load_onnx

        prog = load_onnx(path)
        if isinstance(path, (str, os.PathLike)):
            prog.meta[SOURCE_PATH] = os.path.abspath(path)
        return prog
    given = _in_memory(path, weights_dir)
    if given is not None:
        from .formats.model_file import model_file_from_message

        model, label, wdir = given
        return _load_model_file(model_file_from_message(model, label, weights_dir=wdir), label)
    if is_webnn_path(path):
        from .frontends.webnn import load_webnn

        prog = load_webnn(path)
        prog.meta[SOURCE_PATH] = os.path.abspath(path)
        return prog
    prog = _load_model_file(read_model_file(path), str(path))
    prog.meta[SOURCE_PATH] = os.path.abspath(path)
    return prog


def _load_model_file(mf: Any, label: str) -> Program:
    kind = mf.model.WhichOneof("Type")
    if kind == "mlProgram":
        from .frontends.mil import load_mil_program

        return load_mil_program(mf)
    if kind in _NEURAL_NETWORK_TYPES:
        from .frontends.neuralnetwork import load_neural_network

        return load_neural_network(mf)
    what = f"model type '{kind}' cannot be converted" if kind else "the model has no model type, so it cannot be converted"
    raise UnsupportedError(
        f"{what}: only neural networks (NeuralNetwork, classifier, regressor, pipelines of them) and ML "
        "programs are supported",
        file=label,
    )


def _sources(program: Program) -> list[str]:
    source = program.meta.get(SOURCE_PATH)
    return [source] if source else []


def save(program: Program, path: str | os.PathLike, *, target: str | None = None, to: str | None = None,
         durable: bool = False, overwrite: bool = False, **backend_options: Any) -> Path:
    """Write ``program``; returns the path written. ``to``: "mil" (default): ``NAME.mlpackage`` is a
    package, ``NAME.mlmodel`` a single file (every value immediate); an existing folder means "into
    it", named after the model the program was loaded from; other extensions are refused.
    ``target``: MIL opset "iOS15".."iOS18".

    ``to="neuralnetwork"``: a NeuralNetwork ``NAME.mlmodel`` (legacy layers; see
    converter/backends/neuralnetwork); ``target`` is then the device floor "iOS11".."iOS14", or give
    ``spec_version`` (1..5).

    Nothing is replaced unless ``overwrite=True`` (`DestinationError` otherwise), and then only a
    Core ML model file or a package holding nothing but its own items; the model the program was
    loaded from is never written, nor anything inside it. Writing is atomic; ``durable=True`` also
    fsyncs before publishing (power-loss safety). The program is written as it is: no pass
    pipeline runs (see `optimize`, `convert`).

    ``to="webnn"``: a folder (model.js, model.bin, model.d.ts, index.html; see
    converter/backends/webnn), with options ``layout`` ("nchw" | "nhwc"), ``precision`` ("fp32" |
    "fp16") and ``input_shapes`` ({input name: sizes}) for flexible inputs.

    ``to="onnx"``: an ONNX model ``NAME.onnx`` (see converter/backends/onnx), with options ``opset``
    (17..21, default 21) and ``classifier`` ("tensor", default: a classifier's probabilities as a
    tensor in class order, or "zipmap": ONNX-ML ZipMap) and ``function`` (the function to export: an
    ONNX model holds one, and a program of several needs it); weights over 2 GB go to
    ``NAME.onnx.data`` beside it."""
    dest = resolve_model_destination(path, to=to, sources=_sources(program), overwrite=overwrite)
    if output_format(to) == "onnx":
        from .backends.onnx import DEFAULT_OPSET, save_onnx

        opset = backend_options.pop("opset", DEFAULT_OPSET)
        classifier = backend_options.pop("classifier", "tensor")
        function = backend_options.pop("function", None)
        if backend_options:
            raise UnsupportedError(f"options {', '.join(sorted(backend_options))} are not options of --to onnx "
                                   "(it takes opset, classifier and function)")
        if target is not None:
            raise UnsupportedError("target is not an option of --to onnx (give opset=17..21)")
        sources = _sources(program)
        return save_onnx(program, dest.path, opset=opset, overwrite=overwrite, durable=durable,
                         source=sources[0] if sources else None, classifier=classifier, function=function)
    if output_format(to) == "webnn":
        from .backends.webnn import write_webnn

        sources = _sources(program)
        return write_webnn(program, dest.path, overwrite=overwrite, source=sources[0] if sources else None,
                           durable=durable, **backend_options)
    if output_format(to) == "neuralnetwork":
        from .backends.neuralnetwork import save_neuralnetwork

        spec_version = backend_options.pop("spec_version", None)
        if backend_options:
            raise UnsupportedError(f"options {', '.join(sorted(backend_options))} are for --to webnn only")
        sources = _sources(program)
        return save_neuralnetwork(program, dest.path, target=target, spec_version=spec_version, durable=durable,
                                  overwrite=overwrite, source=sources[0] if sources else None)
    if backend_options:
        raise UnsupportedError(f"options {', '.join(sorted(backend_options))} are for --to webnn only")
    from .backends.mil import save_mlprogram

    return save_mlprogram(program, dest.path, target=target, durable=durable, single_file=dest.single_file,
                          overwrite=overwrite)


def convert(src: ModelSource | Program, *, to: str = "mil", out: str | os.PathLike | None = None,
            target: str | None = None, overwrite: bool = False,
            passes: str | Sequence[Pass] | None = "default", **backend_options: Any) -> Program:
    """Load ``src`` (a path, a model in memory as `load` takes it, or a Program), optimize it with
    ``passes`` (a pipeline name, "a,b,c", or pass objects; "none" to skip), and write it as ``to`` at
    ``out`` when given (where and whether as for `save`; a destination that is refused is refused
    before ``src`` is read). Returns the converted program; a Program given as ``src`` is not
    modified (a copy is optimized).

    With ``out=None`` nothing is written: the result stays in memory. `converter.export` turns the
    returned program into the Core ML model (a ``Model`` message, ``.to_bytes()``, ``.save()``) in the
    format converted to, without touching the disk.
    ``passes="default"`` is the target's own pipeline (``webnn`` for ``to="webnn"``);
    ``backend_options``: see `save` (webnn: layout, precision, input_shapes; neuralnetwork: spec_version;
    onnx: opset)."""
    from .exported import CONVERTED_TO
    from .passes.pipelines import resolve

    if passes == "default" and output_format(to) in ("webnn", "neuralnetwork"):
        passes = output_format(to)

    pipeline = resolve(passes)  # an unknown pass name is an error before anything is read
    if out is not None and isinstance(src, (str, os.PathLike)):
        resolve_model_destination(out, to=to, sources=[src], overwrite=overwrite)
    elif out is not None:
        resolve_model_destination(out, to=to, sources=[], overwrite=overwrite)
    if isinstance(src, Program):
        from .ir.clone import clone_program

        prog = clone_program(src)[0] if pipeline else src
    else:
        prog = load(src)
    optimize(prog, pipeline)
    prog.meta[CONVERTED_TO] = output_format(to)
    if out is not None:
        save(prog, out, target=target, to=to, overwrite=overwrite, **backend_options)
    return prog


def optimize(program: Program, pipeline: str | Sequence[Pass] | None = "default", *,
             verify: bool = False) -> PipelineStats:
    """Run a pass pipeline on ``program`` in place: ``pipeline`` is a name ("default", "none",
    "webnn", "neuralnetwork"), a comma-separated list of pass or rule names, or a list of pass
    objects. ``verify``: run the verifier after every pass (a `PassError` names the pass that broke
    the program). Returns the statistics per pass (``.format()`` prints them as ``--pass-stats``)."""
    from .passes.pipelines import manager

    return manager(pipeline, verify_each=verify).run(program)


def explain(program: Program, op_name: str, pipeline: str | Sequence[Pass] | None = "default") -> list[Explanation]:
    """For the op named ``op_name``, each rule of the pipeline's rewrite passes rooted at its type,
    and whether it fires or why not (the program is not changed)."""
    from .passes.pipelines import resolve, rules_of
    from .passes.rewrite import explain as explain_rules

    return explain_rules(program, op_name, rules_of(resolve(pipeline)))


def run(program: Program | ModelSource, feeds: Mapping[str, Any], *, function: str | None = None, seed: int = 0,
        max_loop_iterations: int | None = None, max_tensor_bytes: int | None = None,
        runtime: str | None = "interpreter") -> dict[str, Any]:
    """Run ``program`` (a Program, or a model as `load` takes it) on ``feeds`` as a Core ML app
    would (see module docstring). The run is bounded
    (an untrusted model may loop forever or declare huge tensors): ``max_loop_iterations`` per loop
    and ``max_tensor_bytes`` per tensor, defaults in `converter.limits`; beyond them, an
    `EvaluationError`. ``runtime``: "interpreter" (the reference, default), "onnxruntime" or "auto"
    (converter/runtimes); when onnxruntime cannot run the program the interpreter does, with a
    `RuntimeFallbackWarning` saying why."""
    import warnings

    from .errors import RuntimeFallbackWarning
    from .runtimes import prepare

    if not isinstance(program, Program):
        program = load(program)
    prepared = prepare(program, runtime=runtime, function=function, seed=seed,
                       max_loop_iterations=max_loop_iterations, max_tensor_bytes=max_tensor_bytes)
    if prepared.note:  # before running: the run may fail, with the interpreter's error
        warnings.warn(prepared.note, RuntimeFallbackWarning, stacklevel=2)
    known = prepared.note
    out = prepared.run(feeds)
    if prepared.note != known:  # onnxruntime failed during the run
        warnings.warn(prepared.note, RuntimeFallbackWarning, stacklevel=2)
    return out
