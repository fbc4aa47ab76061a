"""NeuralNetwork models (plain, classifier, regressor, and pipelines of them) -> IR.

The program has one function, ``main``, whose inputs and outputs are the model's features in
their declared form (so a migrated model is a drop-in replacement). Each network converts its
inputs to the tensors its layers expect (io.py), lowers its layers one by one (layers/*.py) and
converts the results back. What cannot be converted is reported once, completely, before any work.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ...errors import ConverterError, FormatError, TypeInferenceError, UnsupportedError
from ...formats import description as desc
from ...formats.model_file import ModelFile
from ...formats.proto import Model_pb2, NeuralNetwork_pb2
from ...ir.builder import Builder
from ...ir.core import FeatureInfo, Function, Program, Value
from ...ir.runtime import ListValue
from ...ir.symbols import canonicalize_symbols
from ...ir.types import Symbol, TensorType, Type, fp32, fresh_symbol, scalar
from ...passes.dce import DeadCodeElimination
from . import io
from .context import LayerContext, NetworkState, Options
from .parameters import parameter_problem
from .registry import lowering_for
from .weights import has_weights, iter_weight_params

NN_KINDS = ("neuralNetwork", "neuralNetworkClassifier", "neuralNetworkRegressor")
PIPELINE_KINDS = ("pipeline", "pipelineClassifier", "pipelineRegressor")
RECURRENT = {"simpleRecurrent", "gru", "uniDirectionalLSTM", "biDirectionalLSTM"}
# Layers that act on each time step separately: a sequence flows through them to a recurrent layer.
PER_STEP = {"activation", "innerProduct", "embedding", "batchnorm", "unary", "add", "multiply", "scale", "bias",
            "concat", "copy", "softmax", "l2normalize", "mvn"}


# ---------------------------------------------------------------------------------------------
# Model structure


def pipeline_models(model: Model_pb2.Model) -> list[Model_pb2.Model]:
    kind = model.WhichOneof("Type")
    if kind == "pipeline":
        return list(model.pipeline.models)
    if kind == "pipelineClassifier":
        return list(model.pipelineClassifier.pipeline.models)
    if kind == "pipelineRegressor":
        return list(model.pipelineRegressor.pipeline.models)
    return []


def stages(model: Model_pb2.Model, file: str) -> list[Model_pb2.Model]:
    """The neural networks of a model in execution order; UnsupportedError naming every other part."""
    found: list[Model_pb2.Model] = []
    others: list[str] = []

    def walk(m: Model_pb2.Model, path: str) -> None:
        kind = m.WhichOneof("Type")
        if kind in NN_KINDS:
            found.append(m)
        elif kind in PIPELINE_KINDS:
            for i, sub in enumerate(pipeline_models(m)):
                walk(sub, f"{path}/{i}")
        else:
            others.append(f"{path or 'model'}: {kind or 'no model type'}")

    walk(model, "")
    if others:
        kind = model.WhichOneof("Type")
        what = "pipeline stages" if kind in PIPELINE_KINDS else "model type"
        raise UnsupportedError(
            f"only neural networks can be converted; {what} that are not: {'; '.join(others)}", file=file
        )
    return found


def network_of(model: Model_pb2.Model) -> Any:
    return getattr(model, model.WhichOneof("Type"))


def iter_layers(nn: Any, path: str = "") -> Iterator[tuple[str, NeuralNetwork_pb2.NeuralNetworkLayer]]:
    """Every layer of a network, nested networks (branch, loop) included."""
    for layer in nn.layers:
        yield path, layer
        kind = layer.WhichOneof("layer")
        if kind == "branch":
            yield from iter_layers(layer.branch.ifBranch, f"{path}{layer.name}/if/")
            yield from iter_layers(layer.branch.elseBranch, f"{path}{layer.name}/else/")
        elif kind == "loop":
            yield from iter_layers(layer.loop.conditionNetwork, f"{path}{layer.name}/condition/")
            yield from iter_layers(layer.loop.bodyNetwork, f"{path}{layer.name}/body/")


def blob_reads(layers: Iterable[NeuralNetwork_pb2.NeuralNetworkLayer]) -> Counter[str]:
    """How many times ``layers`` read each blob: as an input, or as a loop's conditionVar."""
    c: Counter[str] = Counter()
    for layer in layers:
        c.update(layer.input)
        if layer.WhichOneof("layer") == "loop" and layer.loop.conditionVar:
            c[layer.loop.conditionVar] += 1
    return c


def check_layers(models: list[Model_pb2.Model], file: str) -> None:
    """One UnsupportedError naming every custom or unknown layer, with its name and kind."""
    problems = []
    for m in models:
        for path, layer in iter_layers(network_of(m)):
            kind = layer.WhichOneof("layer")
            where = f"'{path}{layer.name}'"
            if kind == "custom":
                problems.append(f"{where} is a custom layer (class '{layer.custom.className}')")
            elif kind is None:
                problems.append(f"{where} has no layer type")
            elif lowering_for(kind) is None:
                problems.append(f"{where} of kind '{kind}' has no conversion")
    if problems:
        raise UnsupportedError(f"{len(problems)} layer(s) cannot be converted: " + "; ".join(problems), file=file)


def uses_quantized_weights(models: list[Model_pb2.Model]) -> bool:
    return any(wp.HasField("quantization") and has_weights(wp)
               for m in models for wp in iter_weight_params(network_of(m)))


def sequence_inputs(nn: Any, names: list[str]) -> set[str]:
    """Inputs that reach a recurrent layer's sequence input through per-step layers.

    Only recurrent layers decide this up front: reshapes and permutes that mention Seq are common
    in models fed with Seq = 1 (Keras exports), and giving their inputs the [Seq, 1, C, H, W] form
    would change the interface of models that never see a sequence. Inputs whose other layers need
    Seq > 1 are found by ``load_neural_network`` (see ``sequence_retry_inputs``).
    """
    out = set()
    for name in names:
        reach = {name}
        for _, layer in iter_layers(nn):
            kind = layer.WhichOneof("layer")
            if kind in RECURRENT and layer.input and layer.input[0] in reach:
                out.add(name)
                break
            if kind in PER_STEP and any(i in reach for i in layer.input):
                reach.update(layer.output)
    return out


def layers_reached(nn: Any, name: str) -> set[str]:
    """Names of the layers (nested ones included) that read blob ``name``, directly or through
    other layers."""
    reach, layers = {name}, set()
    for _, layer in iter_layers(nn):
        if any(i in reach for i in layer.input):
            layers.add(layer.name or layer.WhichOneof("layer") or "")
            reach.update(layer.output)
    return layers


def sequence_retry_inputs(error: FormatError, models: list[Model_pb2.Model], candidates: Iterable[str]) -> set[str]:
    """The ``candidates`` (rank-5 array inputs fed with Seq = 1 so far) from which the layer that
    refused the model (``error.op``) is reached: the inputs that may need a sequence."""
    if not error.op or not (error.op_type or "").startswith("layer"):
        return set()
    return {name for name in candidates
            if any(error.op in layers_reached(network_of(m), name) for m in models)}


def index_inputs(nn: Any, names: list[str]) -> dict[str, int]:
    """Inputs read directly as embedding indices, with their vocabulary size."""
    out: dict[str, int] = {}
    for _, layer in iter_layers(nn):
        kind = layer.WhichOneof("layer")
        if kind in ("embedding", "embeddingND") and layer.input and layer.input[0] in names:
            size = layer.embedding.inputDim if kind == "embedding" else layer.embeddingND.vocabSize
            out[layer.input[0]] = int(size)
    return out


# ---------------------------------------------------------------------------------------------
# Conversion


class NetworkConverter:
    """Converts networks into one function; lowerings of branch/loop call ``convert_layers``."""

    def __init__(self, mf: ModelFile, fn: Function, options: Options, models: list[Model_pb2.Model]) -> None:
        self.mf = mf
        self.file = str(mf.path)
        self.fn = fn
        self.options = options
        self.models = models  # the networks converted (``stages``)
        self.notes: list[str] = []
        # loop lowerings: the types a probe of a loop body found, per loop layer and context
        # (control_flow._fresh_initial)
        self.loop_probes: dict[Any, Any] = {}

    @functools.cached_property
    def model_reads(self) -> tuple[Counter[str], frozenset[str]]:
        """How many times every layer of the model (nested networks included) reads each blob, and
        the networks' declared outputs: what control-flow lowerings subtract their own layers from
        (computed once, not per branch or loop)."""
        total = blob_reads(layer for m in self.models for _, layer in iter_layers(network_of(m)))
        outputs = frozenset(f.name for m in self.models for f in m.description.output)
        return total, outputs

    def convert_layers(self, state: NetworkState, layers: Any, b: Builder) -> None:
        for layer in layers:
            kind = layer.WhichOneof("layer")
            lower = lowering_for(kind)
            ctx = LayerContext(state, layer, b, self)
            assert lower is not None, kind  # check_layers ran first
            bad = parameter_problem(ctx.params, kind) if ctx.params is not None else None
            if bad is not None:
                raise ctx.fail(bad[1], field=bad[0])
            try:
                outs = lower(ctx)
            except TypeInferenceError as e:  # an IR op refused what the layer gave it: a malformed layer
                raise ctx.fail(f"{e.message} (in {e.op_type or 'op'} '{e.op}')") from None
            except ConverterError as e:
                e.with_location(file=self.file, op=ctx.name, op_type=f"layer {kind}")
                raise
            outs = [outs] if isinstance(outs, Value) else list(outs)
            if len(outs) != len(layer.output):
                raise ctx.fail(f"produced {len(outs)} values for {len(layer.output)} outputs")
            for name, v in zip(layer.output, outs):
                state.values[name] = v

    def convert_network(self, model: Model_pb2.Model, features: dict[str, Value], b: Builder) -> None:
        nn = network_of(model)
        spec = model.specificationVersion
        rank5 = spec <= 3 or nn.arrayInputShapeMapping == NeuralNetwork_pb2.RANK5_ARRAY_MAPPING
        state = NetworkState(self.file, spec, rank5, self.options, self.notes)
        pre: dict[str, list[Any]] = {}
        for p in nn.preprocessing:
            pre.setdefault(p.featureName, []).append(p)
        if "" in pre:  # a single preprocessing entry may leave featureName empty: the image input
            images = [f.name for f in model.description.input if f.type.WhichOneof("Type") == "imageType"]
            if len(images) == 1:
                pre.setdefault(images[0], []).extend(pre.pop(""))
        for f in model.description.input:
            if f.name not in features:
                raise FormatError(f"network input '{f.name}' is not produced by an earlier stage", file=self.file)
            state.values[f.name] = io.to_network(b, features[f.name], f.type, rank5=rank5,
                                                 image_mapping=nn.imageInputShapeMapping,
                                                 preprocessing=pre.get(f.name, []), name=f.name, file=self.file)
        self.convert_layers(state, nn.layers, b)
        kind = model.WhichOneof("Type")
        d = model.description
        for f in d.output:
            if kind == "neuralNetworkClassifier" and f.name in (d.predictedFeatureName, d.predictedProbabilitiesName):
                continue
            v = state.values.get(f.name)
            if v is None:
                raise FormatError(f"model output '{f.name}' is not produced by any layer", file=self.file,
                                  field="description.output")
            features[f.name] = io.from_network(b, v, f.type, rank5=rank5, out_dtype=io.output_dtype(f.type),
                                               name=f.name)
        if kind == "neuralNetworkClassifier":
            self.classifier_outputs(model, state, features, b)

    def classifier_outputs(self, model: Model_pb2.Model, state: NetworkState, features: dict[str, Value],
                           b: Builder) -> None:
        nn = model.neuralNetworkClassifier
        d = model.description
        prob_name = nn.labelProbabilityLayerName or (nn.layers[-1].output[0] if nn.layers else "")
        probs = state.values.get(prob_name)
        if probs is None:
            raise FormatError(f"class probabilities '{prob_name}' are not produced by any layer", file=self.file,
                              field="labelProbabilityLayerName")
        which = nn.WhichOneof("ClassLabels")
        if which == "stringClassLabels":
            labels = ListValue(scalar("string"), [np.array(x) for x in nn.stringClassLabels.vector], False)
        elif which == "int64ClassLabels":
            labels = ListValue(scalar("int64"), [np.array(x, np.int64) for x in nn.int64ClassLabels.vector], False)
        else:
            raise FormatError("classifier has no class labels", file=self.file, field="ClassLabels")
        probs = b.reshape(x=b.cast(x=probs, dtype="fp32", name=f"{prob_name}_probs") if probs.type.dtype.name != "fp32"
                          else probs, shape=[-1], name=f"{prob_name}_flat")
        label, prob_dict = b.add_op("classify", {"probabilities": probs, "classes": labels}, name="classify").outputs
        if d.predictedFeatureName:
            features[d.predictedFeatureName] = label
        if d.predictedProbabilitiesName:
            features[d.predictedProbabilitiesName] = prob_dict


def _input_type(f: Model_pb2.FeatureDescription, sequence: str | None, notes: list[str], file: str) -> Type:
    """The IR type of input ``f``; ``sequence``: why it takes the [Seq, 1, C, H, W] form (None:
    its declared form)."""
    try:
        t = desc.feature_to_type(f.type, fresh_symbol)
    except desc.DescriptionError as e:
        raise UnsupportedError(f"input '{f.name}': {e}", file=file) from None
    if isinstance(t, TensorType) and t.dtype.name == "fp64":
        t = t.with_dtype(fp32)
        notes.append(f"input '{f.name}' is DOUBLE; the network computes in fp32 (as Core ML does), so the "
                     f"converted model takes fp32")
    if sequence is not None and _sequence_capable(t):
        chw = tuple(t.shape) + (1, 1) if len(t.shape) == 1 else tuple(t.shape)
        t = TensorType(t.dtype, (io.sequence_symbol(f.name), 1) + chw)
        notes.append(f"input '{f.name}' {sequence}: it takes the legacy [Seq, Batch, C, H, W] form "
                     f"(Seq flexible, Batch 1)")
    return t


def _sequence_capable(t: Type) -> bool:
    """A declared [C] or [C, H, W] array: Core ML also feeds it as a sequence [Seq, 1, C, H, W]."""
    return isinstance(t, TensorType) and t.shape is not None and len(t.shape) in (1, 3)


def load_neural_network(mf: ModelFile, options: Options | None = None) -> Program:
    """The IR of a NeuralNetwork model (see module docstring).

    Rank-5 inputs and the sequence axis: Core ML feeds a declared [C] or [C, H, W] array of a
    rank-5 network either in that form (Seq = 1) or as a sequence [Seq, 1, C, H, W] of any length.
    An ML program has one input shape, so each such input gets one of two forms:
    - its declared form (Seq = 1), the rule: a model fed single steps keeps its interface, in
      ``converter.run`` and in the migrated model;
    - [Seq, 1, C, H, W] with Seq flexible (1 and up, no upper bound), when the network needs a
      sequence: the input reaches a recurrent layer through per-step layers (``sequence_inputs``),
      or a layer refuses the model with Seq = 1 (for example an innerProduct whose inputChannels
      count Seq steps moved into C by a permute) and converting again with the sequence form
      for the inputs that layer reads from (``sequence_retry_inputs``) succeeds. If it does not,
      the Seq = 1 error is reported (two conversions at most). ``converter.run`` still accepts
      the declared form of such an input (as Seq = 1); the migrated model declares the rank-5
      form, default [1, 1, C, H, W], Seq ranging from 1 without upper bound.
    Like Core ML, a network that needs a sequence may accept only some lengths (the permute ->
    innerProduct example takes exactly inputChannels / C steps): other lengths fail when run.
    """
    options = options or Options()
    file = str(mf.path)
    model = mf.model
    models = stages(model, file)
    for m in [model, *models]:
        try:
            desc.check_description(m.description)
        except desc.DescriptionError as e:
            raise FormatError(str(e), file=file, field="description") from None
    check_layers(models, file)
    d = model.description
    names = [f.name for f in d.input]
    seq: dict[str, str] = {}
    candidates: set[str] = set()  # declared [C] / [C, H, W] arrays of rank-5 networks
    indices: dict[str, int] = {}
    for m in models:
        nn = network_of(m)
        if m.specificationVersion <= 3 or nn.arrayInputShapeMapping == NeuralNetwork_pb2.RANK5_ARRAY_MAPPING:
            seq.update(dict.fromkeys(sequence_inputs(nn, names), "feeds a recurrent layer"))
            candidates.update(f.name for f in d.input if f.type.WhichOneof("Type") == "multiArrayType"
                              and len(f.type.multiArrayType.shape) in (1, 3))
        indices.update(index_inputs(nn, names))
    try:
        return _convert(mf, options, models, seq, indices)
    except FormatError as e:
        more = sequence_retry_inputs(e, models, candidates - set(seq))
        if not more:
            raise
        error = e
    seq.update(dict.fromkeys(more, f"feeds layer '{error.op}', which needs a sequence (Seq > 1)"))
    try:  # one more conversion at most: the cost of a refused model stays bounded
        return _convert(mf, options, models, seq, indices)
    except FormatError:
        raise error from None


def _convert(mf: ModelFile, options: Options, models: list[Model_pb2.Model], seq: dict[str, str],
             indices: dict[str, int]) -> Program:
    """The program of ``models``; inputs named in ``seq`` take the sequence form (see
    ``load_neural_network``)."""
    file = str(mf.path)
    model = mf.model
    opset = "iOS16" if options.keep_compression and uses_quantized_weights(models) else "iOS15"
    prog = Program()
    fn = Function("main", opset)
    prog.add_function(fn)
    conv = NetworkConverter(mf, fn, options, models)
    d = model.description
    features: dict[str, Value] = {}
    for f in d.input:
        t = _input_type(f, seq.get(f.name), conv.notes, file)
        features[f.name] = fn.block.new_input(f.name, t)
        fn.input_info[f.name] = FeatureInfo(f.name, _described_input(f.type, t), f.shortDescription)
        if f.name in indices:  # for random test inputs (converter.check): valid indices only
            fn.input_info[f.name].extra["index_range"] = indices[f.name]
    b = Builder(fn.block)
    for m in models:
        conv.convert_network(m, features, b)
    outs = []
    for f in d.output:
        if f.name in fn.output_info:  # a program output has one name: keep the first declaration
            conv.notes.append(f"output '{f.name}' is declared more than once; the converted model declares it once")
            continue
        v = features.get(f.name)
        if v is None:
            raise FormatError(f"model output '{f.name}' is not produced", file=file, field="description.output")
        outs.append(_named_output(b, v, f.name, fn, outs))
        fn.output_info[f.name] = FeatureInfo(f.name, f.type.SerializeToString(), f.shortDescription)
    fn.block.set_outputs(outs)
    DeadCodeElimination().run(prog)
    canonicalize_symbols(prog, keep={s.name for v in fn.inputs for s in _symbols(v.type)})
    prog.meta.update({
        "spec_version": model.specificationVersion,
        "model_description": d.SerializeToString(),
        "source_format": "neuralnetwork",
        "notes": conv.notes,
    })
    if model.isUpdatable:
        conv.notes.append("the model is updatable: its inference graph was converted, training parameters dropped")
    return prog


def _described_input(ft: Any, t: Type) -> bytes:
    """The input's feature type as the converted program takes it: a DOUBLE array becomes FLOAT32
    (see ``_input_type``); everything else (optional flag and default, flexibility) is kept, so
    that a backend writing the description keeps it too."""
    if (ft.WhichOneof("Type") == "multiArrayType" and isinstance(t, TensorType) and t.dtype.name == "fp32"
            and ft.multiArrayType.dataType == desc.ARRAY_DTYPE.DOUBLE):
        ft = type(ft).FromString(ft.SerializeToString())
        ft.multiArrayType.dataType = desc.ARRAY_DTYPE.FLOAT32
    return ft.SerializeToString()


def _symbols(t: Type) -> list[Symbol]:
    return t.symbols() if isinstance(t, TensorType) else []


def _named_output(b: Builder, v: Value, name: str, fn: Function, outputs: list[Value]) -> Value:
    """The value under the feature's name: ``v`` itself, renamed, unless it cannot take the name
    (it already serves as one of ``outputs``, under its own feature's name, or it is a function
    input): then an identity of it. A value that holds the name already gives it up, unless it is
    a function input (the identity is then ``{name}_out``)."""
    shared = v.is_block_input or any(o is v for o in outputs)
    if v.name == name and not shared:
        return v
    holder = next((x for x in fn.values() if x.name == name and x is not v), None)
    if holder is None and not shared:
        v.name = name  # the function's name scope follows renames
        return v
    holder_is_input = holder is not None and any(holder is x for x in fn.inputs)
    if holder is not None and not holder_is_input:
        holder.name = b.names.unique(f"{name}_inner")  # frees the name: the identity below takes it
    return b.identity(x=v, name=f"{name}_out" if holder_is_input else name)
