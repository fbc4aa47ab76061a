"""Legacy NeuralNetwork models for iOS 11 / 12 (specification versions 1-3): rank-5 layers.

Before specification version 4 every blob is ``[Seq, Batch, C, H, W]`` and features are declared
``[C]`` or ``[C, H, W]`` (RANK5_ARRAY_MAPPING, RANK5_IMAGE_MAPPING). This mode writes the programs
old devices run — CNN and MLP classifiers and regressors on one example (batch 1), recurrent
networks over a sequence input (recurrent.py) — with its own lowering table (lowering.py) over
blob layouts (layout.py); the N-dimensional backend is not used (its recurrent layer parameters
are: lowering/recurrent.py ``fill_*``).

- Features: an IR value ``[C]`` / ``[1, C]`` is declared ``[C]``, ``[C, H, W]`` / ``[1, C, H, W]`` /
  ``[1, 1, C, H, W]`` is declared ``[C, H, W]``; images stay images. When that changes the
  interface (a program input ``[1, 3, 224, 224]`` becomes ``[3, 224, 224]``) a ConversionWarning
  says so.
- Version: the lowest that has everything used: 1; 2 when a weight is fp16 (``float16Value``);
  3 for a ``resizeBilinear`` layer (the versions come from the layer table in versions.py and
  `Rank5Emitter.weights`). Quantized weights would need 3, but none are written: the backend's
  preparation expands compressed weights (constexpr ops) into fp32 constants.
- Features: an output that has no [C] / [C, H, W] form (a [513, 513] map) is declared in its own
  shape, which Core ML gives the network's result when the element counts agree.
- Sequences: an input ``[S, 1, C, H, W]`` with a symbolic S (what our frontend reads for a
  declared input of a legacy model that reaches a recurrent layer) is declared ``[C]`` (H = W = 1)
  or ``[C, H, W]``: Core ML feeds such an input as a sequence of any length. Per-step layers and
  the recurrent layers (rnn -> simpleRecurrent, gru -> gru, lstm -> uniDirectionalLSTM /
  biDirectionalLSTM, recurrent.py) carry the sequence; an output ``[S, 1, C, ..]`` is declared by
  its step the same way. layout.py says which ops take sequences.
- Flexible shapes: a feature whose H and W are symbolic keeps the source's ``shapeRange`` /
  ``enumeratedShapes`` (multiArray) or ``imageSizeRange`` / ``enumeratedSizes`` (image), which
  need specification version 3 (iOS 12): a version 1-2 floor refuses them, naming each feature.
  The layers must not need the sizes (convolution, pooling, activations, elementwise ops).
- Refusal: every op with no rank-5 form is named, with why, in one UnsupportedError.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from ....errors import ConversionWarning, LoweringError, UnsupportedError
from ....formats import description as desc
from ....formats.proto import Model_pb2, NeuralNetwork_pb2
from ....ir.core import FeatureInfo, Function, Program, Value
from ....ir.types import TensorType
from ...features import describe_feature, recorded_metadata
from ..emitter import ModelState
from ..network import Classifier, _image_preprocessing, refuse_above, remove_dead_layers, write_classifier
from . import dense, elementwise, recurrent, reduce, shapes, slicing, spatial  # noqa: F401  (register the lowerings)
from .layout import (
    Rank5Emitter,
    dims,
    is_static,
    natural_layout,
    sequence_split,
    shape_text,
    static_shape,
    vector_layout,
)
from .lowering import PER_STEP, RANK5_LOWERINGS, natural


def rank5_model(prog: Program, floor: int, *, source: str | None = None) -> tuple[Model_pb2.Model, list]:
    """The Model proto of the (prepared, one-function) ``prog`` as a rank-5 network of
    specification version <= ``floor``, and its weight payloads."""
    fn = prog.main
    model = Model_pb2.Model()
    classify = [op for op in fn.block.ops if op.type == "classify"]
    network = model.neuralNetworkClassifier if classify else model.neuralNetwork
    network.arrayInputShapeMapping = NeuralNetwork_pb2.RANK5_ARRAY_MAPPING
    network.imageInputShapeMapping = NeuralNetwork_pb2.RANK5_IMAGE_MAPPING
    state = ModelState()
    e = Rank5Emitter(network, state)
    problems: list[str] = []
    classifier = _lower(fn, e, network, classify, problems)
    if problems:
        raise UnsupportedError(f"{_count(problems)} no legacy rank-5 form (specification version {floor} was asked; they need "
                               f"version 4 or later, the N-dimensional layers): " + "; ".join(problems), file=source)
    d = model.description
    recorded_metadata(prog, d)
    notes: list[str] = []
    for what, values, infos, feats in (("input", fn.inputs, fn.input_info, d.input),
                                       ("output", fn.outputs, fn.output_info, d.output)):
        for v in values:
            feat = feats.add()
            version = _describe(v, infos.get(v.name), feat, what, notes, sequence=e.seq(v) is not None)
            state.need(version, f"{what} '{v.name}' of type {v.type}")
            flexibility = _flexibility(feat)
            if flexibility:
                state.need(3, f"{what} '{v.name}': flexible sizes ({flexibility})")
    need = state.spec_version
    write_classifier(network, d, classifier)
    refuse_above(state, need, floor, source)
    model.specificationVersion = need
    model.isUpdatable = False
    for note in notes:
        warnings.warn(ConversionWarning(note), stacklevel=4)
    return model, state.payloads


def _count(problems: list[str]) -> str:
    """"3 ops and 1 feature have" for the problems listed."""
    features = sum(p.startswith(("input '", "output '")) for p in problems)
    ops = len(problems) - features
    parts = [f"{n} {word}{'s' if n > 1 else ''}" for n, word in ((ops, "op"), (features, "feature")) if n]
    return " and ".join(parts) + (" have" if len(problems) > 1 else " has")


def _lower(fn: Function, e: Rank5Emitter, network, classify: list, problems: list[str]) -> Classifier | None:
    """The layers of ``fn``; what has no rank-5 form goes to ``problems``."""
    e.reserve([v.name for v in fn.inputs] + [v.name for v in fn.outputs])
    for v in fn.inputs:
        e.bind(v, v.name)
        try:
            split = sequence_split(dims(v)) if isinstance(v.type, TensorType) and v.type.shape else None
            if split is not None and is_static(split[1]):
                e.seqs[v], e.layouts[v] = split
            else:
                e.layouts[v] = natural(v)
        except LoweringError as err:
            problems.append(f"input '{v.name}': {err}")
            e.layouts[v] = _placeholder_layout(v)
    skip = set(_image_preprocessing(fn, e, network))
    for op in skip:
        if e.lookup(op.outputs[0]) is not None:
            e.layouts[op.outputs[0]] = _placeholder_layout(op.outputs[0])
    if len(classify) > 1:
        problems.append(f"{len(classify)} classify ops: a NeuralNetworkClassifier has one set of class labels")
    skip.update(classify)
    for op in fn.block.ops:
        if op.type == "const" or op in skip:
            continue
        low = RANK5_LOWERINGS.get(op.type)
        try:
            if low is None:
                raise LoweringError("no legacy (rank-5) layer for this op")
            sequences = [v for v in op.input_values() if e.seq(v) is not None] if op.type not in PER_STEP else []
            if any(not is_static([e.seq(v)]) for v in sequences):
                raise LoweringError(f"reads the sequence '{sequences[0].name}': no legacy layer computes this op "
                                    f"step by step")
            with _unsequenced(e, sequences):
                low(e, op)
        except LoweringError as err:
            problems.append(f"{op.type} '{op.name}': {err.message if hasattr(err, 'message') else err}")
            for v in op.outputs:  # placeholders: the ops reading them are still checked
                if e.lookup(v) is None:
                    e.bind(v, v.name)
                    e.layouts[v] = _placeholder_layout(v)
    classifier_outputs = set(classify[0].outputs) if len(classify) == 1 else set()
    _name_outputs(fn, e, classifier_outputs, problems)
    if len(classify) != 1 or problems:
        classifier = None
    else:
        try:
            classifier = _classifier(e, classify[0], fn)
        except LoweringError as err:
            problems.append(f"classify '{classify[0].name}': {err}")
            classifier = None
    keep = {v.name for v in fn.outputs} | ({classifier.probabilities} if classifier is not None else set())
    remove_dead_layers(network, keep)  # a concat whose parts a split read instead, ...
    return classifier


@contextmanager
def _unsequenced(e: Rank5Emitter, values: list[Value]) -> Iterator[None]:
    """While an op that does not take sequences is lowered, its sequence inputs of static Seq are
    seen in their natural layout (``Rank5Emitter.unsequenced``)."""
    saved = [(v, e.lookup(v), e.layouts[v], e.seqs[v]) for v in values]
    try:
        for v in values:
            blob, layout = e.unsequenced(v)
            del e.seqs[v]
            e.bind(v, blob)
            e.layouts[v] = layout
        yield
    finally:
        for v, blob, layout, seq in saved:
            e.bind(v, blob)  # type: ignore[arg-type]
            e.layouts[v], e.seqs[v] = layout, seq


def _placeholder_layout(v: Value) -> tuple[int, int, int]:
    """A layout for a value that has none (so that the ops reading it are still checked): its
    elements as a vector when its size is known."""
    try:
        return natural(v)
    except LoweringError:
        try:
            return (int(np.prod(static_shape(v))), 1, 1)
        except LoweringError:
            return (1, 1, 1)


def _name_outputs(fn: Function, e: Rank5Emitter, skip: set[Value], problems: list[str]) -> None:
    """Each output's blob gets the feature's name (in the declared feature's layout): the layer
    writing it is renamed, or a copy is written when the blob is an input or another output."""
    inputs = {v.name for v in fn.inputs}
    named: set[str] = set()
    for v in fn.outputs:
        if v in skip:
            continue
        try:
            blob = e.get(v, _feature_layout(e, v))
        except LoweringError as err:
            problems.append(f"output '{v.name}': {err}")
            continue
        if blob == v.name:
            named.add(blob)
        elif blob in inputs or blob in named:
            e.layer("activation", f"{v.name}_copy", [blob], [v.name]).linear.alpha = 1.0
        else:
            e.rename(blob, v.name)
            named.add(v.name)


def _feature_layout(e: Rank5Emitter, v: Value):
    """The layout of output ``v`` as declared (one step's for a sequence)."""
    seq = e.seq(v)
    if seq is not None:
        split = sequence_split(dims(v), seq)
        if split is None:
            raise LoweringError(f"'{v.name}' of shape {shape_text(dims(v))} is not a [Seq, 1, C, H, W] sequence")
        return split[1]
    return natural_layout(dims(v))  # None: the blob as it is (an output of another shape, _describe)


def _flexibility(feat: Model_pb2.FeatureDescription) -> str | None:
    """The flexible-shape field of a written feature (specification version 3), if any."""
    kind = feat.type.WhichOneof("Type")
    if kind == "multiArrayType":
        return feat.type.multiArrayType.WhichOneof("ShapeFlexibility")
    if kind == "imageType":
        return feat.type.imageType.WhichOneof("SizeFlexibility")
    return None


def _classifier(e: Rank5Emitter, op, fn: Function) -> Classifier:
    from ....ir.runtime import ListValue

    labels = e.const(op.inputs["classes"])
    if labels is None:
        raise LoweringError("the class labels must be constants")
    probs_v = op.inputs["probabilities"]
    probs = e.get(probs_v, vector_layout(probs_v, "classify probabilities"))
    outs = set(fn.outputs)
    label, prob = op.outputs
    items = labels.items if isinstance(labels, ListValue) else list(labels.reshape(-1))
    return Classifier(probs, list(items), label.name if label in outs else None, prob.name if prob in outs else None)


def declared_shape(shape: list, *, sequence: bool = False) -> list:
    """The feature shape of an IR value in a rank-5 model: [C] or [C, H, W] (module docstring); an
    output of another shape (a [513, 513] map) keeps its shape: Core ML gives the network's result
    that shape when the element counts agree. A sequence ``[S, 1, ..]`` is declared by its step:
    [C] when H = W = 1 (a sequence of vectors), else [C, H, W]."""
    if sequence:
        layout = natural_layout(shape[1:])
        assert layout is not None
        return [layout[0]] if tuple(layout[1:]) == (1, 1) else list(layout)
    layout = natural_layout(shape)
    if layout is None:
        return list(shape)
    return [layout[0]] if len(shape) <= 2 else list(layout)


_ARRAY_DTYPES = ("fp16", "fp32", "fp64", "int32")


def _describe(v: Value, info: FeatureInfo | None, out: Model_pb2.FeatureDescription, what: str,
              notes: list[str], *, sequence: bool = False) -> int:
    """A feature of the rank-5 model (``notes``: when its declared shape differs from the program's);
    the specification version it needs."""
    t = v.type
    if not isinstance(t, TensorType) or t.dtype.name not in _ARRAY_DTYPES:
        return describe_feature(info, v.name, t, out)
    ft = desc.feature_from_bytes(info.feature_type) if isinstance(info, FeatureInfo) else None
    if ft is not None and desc.feature_kind(ft) == "imageType":
        return describe_feature(info, v.name, t, out)
    shape = dims(v)
    if what == "output" and not sequence and not is_static(shape):
        # flexible sizes: the output is declared by its type only (as the builder writes it): an
        # output's shape flexibility would have to pair the sizes the inputs allow
        out.name = v.name
        out.type.multiArrayType.dataType = desc.IR_TO_ARRAY_DTYPE[t.dtype.name]
        if info is not None and info.short_description:
            out.shortDescription = info.short_description
        return desc.feature_min_spec_version(out.type)
    declared = declared_shape(shape, sequence=sequence)
    if sequence:
        notes.append(f"{what} '{v.name}' of shape {shape_text(shape)} is declared {declared}, its step: "
                     f"a rank-5 model's features hold sequences of any length as [Seq, 1, C, H, W]")
    elif declared != shape:
        notes.append(f"{what} '{v.name}' of shape {shape} is declared {declared}: the features of a rank-5 "
                     f"(iOS 11/12) model have no batch axis")
    return describe_feature(info, v.name, TensorType(t.dtype, tuple(declared)), out)


__all__ = ["declared_shape", "rank5_model"]
