"""An IR function -> the layers of a NeuralNetwork, with its image preprocessing and classifier.

`lower_block` walks a block's ops through the lowering table; an op that cannot be lowered is
recorded (all of them are reported in one `UnsupportedError`) and its results get placeholder blobs,
so the ops after it are still checked. Nested blocks (cond, while_loop) are lowered by their
lowerings through `lower_block` with a child emitter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import LoweringError, UnsupportedError
from ...formats import description as desc
from ...formats.proto import NeuralNetwork_pb2
from ...ir.core import Block, FeatureInfo, Function, Op, Value
from ...ir.runtime import ListValue
from ...ir.types import DictType, TensorType
from .emitter import ModelState, NetworkEmitter
from .lowering import LOWERINGS, UNSUPPORTED, load_all


@dataclass
class Classifier:
    """A ``classify`` op: the blob of class probabilities, the labels, and the outputs it feeds."""

    probabilities: str
    labels: list[Any]
    label_output: str | None
    probability_output: str | None


@dataclass
class LoweredNetwork:
    classifier: Classifier | None = None
    problems: list[str] = field(default_factory=list)


def lower_block(e: NetworkEmitter, block: Block, problems: list[str], skip: frozenset[Op] = frozenset()) -> None:
    """Append the layers of ``block``'s ops (but ``skip``); what cannot be lowered goes to ``problems``."""
    load_all()
    absorbed = _absorbed(block, skip)
    skipped = set(skip).union(*absorbed.values())
    for op in block.ops:
        if op.type == "const" or op in skipped:
            continue
        low = LOWERINGS.get(op.type)
        try:
            if low is None:
                raise LoweringError(UNSUPPORTED.get(op.type, "no NeuralNetwork lowering"))
            low.fn(e, op)
        except LoweringError as err:
            problems.append(f"{op.type} '{op.name}': {err.message if hasattr(err, 'message') else err}")
            for v in [*op.outputs, *(w for a in absorbed.get(op, ()) for w in a.outputs)]:
                if e.lookup(v) is None:  # placeholders: the ops reading them are still checked
                    e.bind(v, v.name)


def _absorbed(block: Block, skip: frozenset[Op]) -> dict[Op, list[Op]]:
    """For each op of ``block`` whose lowering absorbs others (`Lowering.absorbs`), those ops (of
    this block, each claimed once; an absorbed op absorbs nothing and an absorbing op is not absorbed,
    so every op is lowered by someone)."""
    out: dict[Op, list[Op]] = {}
    claimed: set[Op] = set()
    for op in block.ops:
        low = LOWERINGS.get(op.type)
        if low is None or low.absorbs is None or op in skip or op in claimed:
            continue
        ops = [a for a in low.absorbs(op) if a.block is block and a not in claimed and a not in skip and a not in out]
        if ops:
            out[op] = ops
            claimed.update(ops)
    return out


def lower_function(fn: Function, e: NetworkEmitter, network: Any) -> LoweredNetwork:
    """The layers of ``fn`` (its main block) in ``network``; the model's inputs and outputs are
    blobs named after the features."""
    out = LoweredNetwork()
    names = [v.name for v in fn.inputs] + [v.name for v in fn.outputs]
    e.reserve(names)
    for v in fn.inputs:
        e.bind(v, v.name)
    for v in fn.outputs:
        if v.producer is not None and not v.is_block_input:
            e.state.preassigned.setdefault(v, v.name)
    skip = set(_image_preprocessing(fn, e, network))
    classify = [op for op in fn.block.ops if op.type == "classify"]
    if len(classify) > 1:
        out.problems.append(f"{len(classify)} classify ops: a NeuralNetworkClassifier has one set of class labels")
    skip.update(classify)
    lower_block(e, fn.block, out.problems, frozenset(skip))
    if len(classify) == 1:
        try:
            out.classifier = _classifier(e, classify[0], fn)
        except LoweringError as err:
            out.problems.append(f"classify '{classify[0].name}': {err}")
    classifier_outputs = set(classify[0].outputs) if len(classify) == 1 else set()
    for v in fn.outputs:
        if v in classifier_outputs:
            continue
        if isinstance(v.type, DictType):
            out.problems.append(f"output '{v.name}' is a dictionary, which only a classifier's probabilities can be")
            continue
        try:
            blob = e.blob(v)
        except LoweringError:
            continue  # its producer was reported
        if blob != v.name:  # a model input, or a value another output already holds
            e.layer("activation", f"{v.name}_copy", [blob], [v.name]).linear.alpha = 1.0
    keep = {v.name for v in fn.outputs}
    if out.classifier is not None:
        keep.add(out.classifier.probabilities)
    remove_dead_layers(network, keep)
    return out


_SIDE_EFFECTS = frozenset({"branch", "loop", "loopBreak", "loopContinue"})


def _nested_reads(layer: Any, into: set[str]) -> None:
    """Blobs read by the layers of ``layer``'s nested networks (and a loop's condition blob)."""
    kind = layer.WhichOneof("layer")
    nets = ((layer.branch.ifBranch, layer.branch.elseBranch) if kind == "branch" else
            (layer.loop.conditionNetwork, layer.loop.bodyNetwork) if kind == "loop" else ())
    if kind == "loop" and layer.loop.conditionVar:
        into.add(layer.loop.conditionVar)
    for net in nets:
        for inner in net.layers:
            into.update(inner.input)
            _nested_reads(inner, into)


def remove_dead_layers(network: Any, keep: set[str]) -> int:
    """Drop the top-level layers whose results nothing reads (a decomposition's leftover, a value the
    program computed but never used): one backward sweep. Nested networks are kept whole. Returns
    how many layers were dropped."""
    needed = set(keep)
    for layer in network.layers:
        _nested_reads(layer, needed)
    dead = []
    for i in range(len(network.layers) - 1, -1, -1):
        layer = network.layers[i]
        if layer.WhichOneof("layer") in _SIDE_EFFECTS or any(o in needed for o in layer.output):
            needed.update(layer.input)
        else:
            dead.append(i)
    for i in dead:  # from the end: the indices still to delete stay valid
        del network.layers[i]
    return len(dead)


def _classifier(e: NetworkEmitter, op: Op, fn: Function) -> Classifier:
    labels = e.const(op.inputs["classes"])
    if labels is None:
        raise LoweringError("the class labels must be constants")
    probs = e.blob(op.inputs["probabilities"])
    outs = {v for v in fn.outputs}
    label, prob = op.outputs
    items = labels.items if isinstance(labels, ListValue) else list(np.asarray(labels).reshape(-1))
    return Classifier(probs, list(items),
                      label.name if label in outs else None, prob.name if prob in outs else None)


def write_classifier(network: Any, d: Any, c: Classifier | None) -> None:
    """A NeuralNetworkClassifier's labels and probability blob, and the description's names of its
    label and probability outputs (nothing when ``c`` is None)."""
    if c is None:
        return
    set_class_labels(network, c.labels)
    network.labelProbabilityLayerName = c.probabilities
    if c.label_output:
        d.predictedFeatureName = c.label_output
    if c.probability_output:
        d.predictedProbabilitiesName = c.probability_output


def refuse_above(state: ModelState, need: int, floor: int | None, source: str | None) -> None:
    """An UnsupportedError naming everything that needs a later specification version than ``floor``."""
    if floor is None or need <= floor:
        return
    reasons = [f"{why} (version {v})" for v, whys in sorted(state.version_reasons.items()) if v > floor
               for why in whys]
    raise UnsupportedError(f"the model needs specification version {need}, above the requested {floor}: "
                           + "; ".join(reasons), file=source)


def set_class_labels(network: Any, labels: list[Any]) -> None:
    """String or int64 class labels of a NeuralNetworkClassifier."""
    values = [np.asarray(x).item() for x in labels]
    if all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in values):
        network.int64ClassLabels.vector.extend(int(x) for x in values)
    else:
        network.stringClassLabels.vector.extend(x.decode() if isinstance(x, bytes) else str(x) for x in values)


# ---------------------------------------------------------------------------------------------
# Image preprocessing: the ops a frontend wrote for NeuralNetworkImageScaler / mean image


def _image_preprocessing(fn: Function, e: NetworkEmitter, network: Any) -> list[Op]:
    """Ops at the start of an image input that Core ML's image preprocessing does (scale, then a
    per-channel bias; or a mean image subtracted): written as the network's preprocessing entries
    and skipped; the last one's result reads the image blob (Core ML preprocesses an image input
    before any layer reads it)."""
    skipped: list[Op] = []
    for v in fn.inputs:
        info = fn.input_info.get(v.name)
        ft = desc.feature_from_bytes(info.feature_type) if isinstance(info, FeatureInfo) else None
        if ft is None or desc.feature_kind(ft) != "imageType" or not isinstance(v.type, TensorType):
            continue
        ops, entry = _scaler(e, v, ft)
        if entry is None:
            continue
        pre = network.preprocessing.add()
        pre.featureName = v.name
        pre.CopyFrom(entry)
        pre.featureName = v.name
        skipped.extend(ops)
        e.bind(ops[-1].outputs[0], v.name)
    return skipped


def _only_use(v: Value, op_type: str) -> Op | None:
    """The one op reading ``v`` when it is of ``op_type`` (a model output has a block as a user too)."""
    uses = list(v.uses)
    if len(uses) != 1 or not isinstance(uses[0].user, Op) or uses[0].user.type != op_type:
        return None
    return uses[0].user


def _other(op: Op, v: Value) -> Value | None:
    x, y = op.inputs.get("x"), op.inputs.get("y")
    return y if x is v else x if y is v else None


def _scaler(e: NetworkEmitter, v: Value, ft: Any) -> tuple[list[Op], Any]:
    """(ops, NeuralNetworkPreprocessing) for ``mul(v, scale)`` and/or ``add(., bias[1, C, 1, 1])``
    right at image input ``v``; (_, None) when the input does not start that way."""
    channels = desc.image_channels(ft)
    ops: list[Op] = []
    cur = v
    scale = 1.0
    mul = _only_use(cur, "mul")
    if mul is not None:
        s = e.const(_other(mul, cur))
        if s is not None and np.asarray(s).size == 1:
            scale = float(np.asarray(s).reshape(()))
            ops.append(mul)
            cur = mul.outputs[0]
    bias = np.zeros(channels, np.float32)
    add = _only_use(cur, "add")
    if add is not None:
        b = e.const(_other(add, cur))
        arr = np.asarray(b) if b is not None else None
        if arr is not None and (arr.size == 1 or arr.shape in ((1, channels, 1, 1), (channels, 1, 1))):
            bias = np.broadcast_to(arr.reshape(-1), (channels,)).astype(np.float32)
            ops.append(add)
            cur = add.outputs[0]
    if not ops:
        return _mean_image(e, v)
    if cur.type != v.type:
        return [], None
    entry = NeuralNetwork_pb2.NeuralNetworkPreprocessing()
    s = entry.scaler
    s.channelScale = scale
    if channels == 1:
        s.grayBias = float(bias[0])
    elif ft.imageType.colorSpace == desc.IMAGE.BGR:
        s.blueBias, s.greenBias, s.redBias = (float(x) for x in bias)
    else:
        s.redBias, s.greenBias, s.blueBias = (float(x) for x in bias)
    return ops, entry


def _mean_image(e: NetworkEmitter, v: Value) -> tuple[list[Op], Any]:
    """(ops, NeuralNetworkPreprocessing) for ``sub(v, mean[1, C, H, W])`` right at image input ``v``
    (Core ML's mean image: a constant of the image's own [C, H, W] size)."""
    sub = _only_use(v, "sub")
    if sub is None or sub.inputs.get("x") is not v:
        return [], None
    mean = e.const(sub.inputs.get("y"))
    shape = v.type.shape if isinstance(v.type, TensorType) else None
    if mean is None or shape is None or sub.outputs[0].type != v.type:
        return [], None
    arr = np.asarray(mean, np.float32)
    if arr.shape not in (tuple(shape), tuple(shape[1:])):
        return [], None
    entry = NeuralNetwork_pb2.NeuralNetworkPreprocessing()
    entry.meanImage.meanImage.extend(arr.reshape(-1).tolist())
    return [sub], entry
