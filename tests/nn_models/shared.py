"""The NeuralNetwork models of ../shared/data/models, what each must do, and one memoised migration
of each (load, run, save as an .mlpackage, load that, run it) that the tests of this package share.

Models: every .mlmodel under builder/ and real/, and torch/*_nn.mlmodel. Feeds: the .npz beside a
builder model; the stored torch inputs of a torch model; random inputs (``converter.check.
random_feeds``) for real models, except that inputs read by an embedding layer get valid indices
(the spec: integers in [0, inputDim)), which random floats are not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import converter
from converter.check import random_feeds
from converter.formats.proto import Model_pb2
from converter.ir.core import Program
from converter.ir.types import is_static_dim

from ..conftest import MODELS
from .coverage import networks

BUILDER, REAL, TORCH = MODELS / "builder", MODELS / "real", MODELS / "torch"
NN_FILES: list[Path] = sorted([*BUILDER.glob("*.mlmodel"), *REAL.glob("*.mlmodel"), *TORCH.glob("*_nn.mlmodel")])


def model_id(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


# Valid models that are not neural networks: converter.load raises UnsupportedError, whose message
# names the model type or every offending pipeline stage (path in the pipeline: type).
_MODEL_TYPE = "model type '{}' cannot be converted"
_STAGES = "only neural networks can be converted; pipeline stages that are not: {}"
_VISION_GLM = _STAGES.format("/0: visionFeaturePrint; /1: glmClassifier")
_DICT_PIPELINE = "/0/0: dictVectorizer; /0/1: featureVectorizer; /1: {}"
REFUSED: dict[str, str] = {
    "real/eef14c4f_YKTextClassifier.mlmodel": _MODEL_TYPE.format("textClassifier"),
    "real/3f6a4207_dummy_v6.mlmodel": _MODEL_TYPE.format("treeEnsembleClassifier"),
    "real/c41255f5_conv_model.mlmodel": _MODEL_TYPE.format("treeEnsembleClassifier"),
    "real/e5541af6_dummy_v6.mlmodel": _MODEL_TYPE.format("treeEnsembleClassifier"),
    "real/ec822a2b_12_11_2020_verses_conv.mlmodel": _MODEL_TYPE.format("treeEnsembleClassifier"),
    "real/f7f6d72e_experimental_verses.mlmodel": _MODEL_TYPE.format("treeEnsembleClassifier"),
    "real/baf6017f_songs.mlmodel": _MODEL_TYPE.format("treeEnsembleRegressor"),
    # an empty Model.Type (spec v4 files holding only a description)
    "real/322f8454_s4tf_model.mlmodel": "the model has no model type, so it cannot be converted",
    "real/3fda455b_s4tf_model.mlmodel": "the model has no model type, so it cannot be converted",
    "real/21560b2e_NamesDT.mlmodel": _STAGES.format(_DICT_PIPELINE.format("treeEnsembleClassifier")),
    "real/2e6f96b0_NamesDT.mlmodel": _STAGES.format(_DICT_PIPELINE.format("treeEnsembleClassifier")),
    "real/5f509266_SentimentPolarity.mlmodel": _STAGES.format(_DICT_PIPELINE.format("glmClassifier")),
    "real/c64d3188_SentimentPolarity.mlmodel": _STAGES.format(_DICT_PIPELINE.format("glmClassifier")),
    "real/0e00d131_CorrectOrientationClassifier_85.mlmodel": _VISION_GLM,
    "real/46ea255a_ImageRotationClassifier.mlmodel": _VISION_GLM,
    "real/5312de8e_RotationClassifier_twoclass.mlmodel": _VISION_GLM,
    "real/5a75d7f8_RotationClassifier.mlmodel": _VISION_GLM,
    "real/3967d1d0_ImageClassifier.mlmodel": _VISION_GLM,
    "real/74aac896_ImageClassifier.mlmodel": _VISION_GLM,
    "real/57f9f6c6_onehot_simple.mlmodel": _STAGES.format(
        "; ".join(f"/{2 * i}: arrayFeatureExtractor; /{2 * i + 1}: oneHotEncoder" for i in range(8))
        + "; /16: featureVectorizer"),
}

# Neural networks that cannot run as stored: converter.load raises FormatError naming the layer
# (the first one found); why. For builder models, the model without its malformed layers (and the
# outputs they produce) must run: see ``without_layers``.
MALFORMED: dict[str, tuple[str, str]] = {
    "builder/elementwise_unary.mlmodel": (
        "dot",
        "its dot layers ('dot', 'cos_dist') read [3, 4, 4] arrays; the spec: \"Two blobs with rank at "
        "least 3, such that the last two dimensions must be 1\""),
    "builder/nd_tensor_ops.mlmodel": (
        "embedded",
        "embeddingND 'embedded' reads ids of shape [2, 3, 4]; the spec: \"Input must have rank at least "
        "2. The last dimension must always be 1\""),
    "real/d39c03c9_s4tf_house_simplified_trained_model.mlmodel": (
        "embedding1",
        "embedding1 reads categoricalInput1, declared [2] (the spec: an embedding reads one index per "
        "step, shape [1]); and layer 'concat' reads 'numericInput', which nothing produces (the input "
        "is 'numericalInput')"),
}

# The layers to take out of a malformed builder model so that the rest of it can run.
MALFORMED_LAYERS = {
    "builder/elementwise_unary.mlmodel": ("dot", "cos_dist"),
    "builder/nd_tensor_ops.mlmodel": ("embedded",),
}

RUNS: list[Path] = [p for p in NN_FILES if model_id(p) not in REFUSED and model_id(p) not in MALFORMED]


def read_spec(path: Path) -> Model_pb2.Model:
    spec = Model_pb2.Model()
    spec.ParseFromString(path.read_bytes())
    return spec


def without_layers(path: Path, names: tuple[str, ...], out: Path) -> Path:
    """A copy of the model at ``path`` without the named layers and the model outputs they produce."""
    spec = read_spec(path)
    nn = next(networks(spec))
    gone = {o for layer in nn.layers if layer.name in names for o in layer.output}
    keep = [layer for layer in nn.layers if layer.name not in names]
    assert len(keep) == len(nn.layers) - len(names), f"not all of {names} are layers of {model_id(path)}"
    del nn.layers[:]
    nn.layers.extend(keep)
    outputs = [f for f in spec.description.output if f.name not in gone]
    del spec.description.output[:]
    spec.description.output.extend(outputs)
    out.write_bytes(spec.SerializeToString())
    return out


def torch_record(path: Path) -> tuple[str, dict[str, Any]]:
    """(model name, the "nn" record of RESULTS.json) of a torch/<name>_nn.mlmodel file."""
    results = json.loads((TORCH / "RESULTS.json").read_text())["models"]
    for name, rec in results.items():
        nn = rec.get("nn")
        if isinstance(nn, dict) and nn.get("path") == model_id(path):
            return name, nn
    raise KeyError(f"{model_id(path)} is not in RESULTS.json")


def _embedding_index_inputs(spec: Model_pb2.Model) -> dict[str, int]:
    """{model input: inputDim} for the inputs embedding layers read directly."""
    names = {f.name for f in spec.description.input}
    out: dict[str, int] = {}
    for nn in networks(spec):
        for layer in nn.layers:
            kind = layer.WhichOneof("layer")
            if kind in ("embedding", "embeddingND") and layer.input and layer.input[0] in names:
                out[layer.input[0]] = int(getattr(layer, kind).vocabSize if kind == "embeddingND"
                                          else layer.embedding.inputDim)
    return out


# builder models whose .npz does not fit the model: the feed used instead, and why
NPZ_FIXES = {
    # enumerated sizes (16 x 16, width 24 x height 32): the .npz image is 24 rows x 32 columns (its
    # notes read the pair as W x H = 32 x 24); the same pixels transposed are an allowed size.
    "builder/flexible_image_sizes.mlmodel": lambda feeds: {"image": np.ascontiguousarray(
        np.transpose(feeds["image"], (1, 0, 2)))},
}


# real models whose inputs take the sequence form [Seq, 1, C, H, W] because their layers need more
# than one step: the sequence length the layers were built for
SEQUENCE_STEPS = {
    # dense_17 has inputChannels 49 = 7 x (2 + 5): the two embeddings (2 and 5 channels) are
    # permuted across their 7 steps and flattened (a Keras model exported for 7-step inputs)
    "real/3a80f611_coreml_no_train.mlmodel": 7,
}


def _with_steps(feeds: dict[str, Any], prog: Program, steps: int) -> dict[str, Any]:
    """``feeds`` with every input of a flexible leading (Seq) dim given ``steps`` steps."""
    out = dict(feeds)
    for v in prog.main.inputs:
        shape = v.type.shape
        if shape is not None and len(shape) == 5 and not is_static_dim(shape[0]):
            x = np.asarray(feeds[v.name])
            out[v.name] = np.resize(x, (steps, *x.shape[1:]))  # the random steps repeated
    return out


def feeds_for(path: Path, prog: Program) -> dict[str, Any]:
    mid = model_id(path)
    if path.parent == BUILDER:
        with np.load(path.with_suffix(".npz")) as data:
            feeds = {k: data[k] for k in data.files}
        return NPZ_FIXES[mid](feeds) if mid in NPZ_FIXES else feeds
    if path.parent == TORCH:
        name, _ = torch_record(path)
        with np.load(TORCH / f"{name}.inputs.npz") as data:
            return {k: data[k] for k in data.files}
    feeds = random_feeds(prog.main, seed=0)
    if mid in SEQUENCE_STEPS:
        feeds = _with_steps(feeds, prog, SEQUENCE_STEPS[mid])
    rng = np.random.default_rng(1)
    for name, dim in (_embedding_index_inputs(read_spec(path)) if path.is_file() else {}).items():
        x = np.asarray(feeds[name])
        feeds[name] = rng.integers(0, dim, x.shape).astype(x.dtype)
    return feeds


# -- the shared migration --------------------------------------------------------------------------


@dataclass
class Migration:
    """One model through load -> run -> save as MIL -> load -> run (``outputs_again`` keyed by the
    source model's output names)."""

    path: Path
    prog: Program
    feeds: dict[str, Any]
    outputs: dict[str, Any]
    package: Path
    again: Program
    outputs_again: dict[str, Any]
    notes: list[str] = field(default_factory=list)


class Migrations:
    """Memoised per process (tests of several modules use the same migration of a model)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._done: dict[Path, Migration] = {}

    def get(self, path: Path, *, feeds_of: Path | None = None) -> Migration:
        """The migration of ``path``, fed as the model ``feeds_of`` (default: itself) is."""
        if path not in self._done:
            prog = converter.load(path)
            feeds = feeds_for(feeds_of or path, prog)
            outputs = converter.run(prog, feeds)
            package = converter.save(prog, self.workdir / f"{path.parent.name}_{path.stem}.mlpackage")
            again = converter.load(package)
            self._done[path] = Migration(path, prog, feeds, outputs, package, again, run_migrated(prog, again, feeds),
                                         list(prog.meta.get("notes", [])))
        return self._done[path]


def run_migrated(source: Program, migrated: Program, feeds: dict[str, Any]) -> dict[str, Any]:
    """``migrated`` run on ``source``'s feeds, its outputs keyed by ``source``'s output names (features
    keep their names, except those that are not MIL identifiers: they are matched by position)."""
    fed = {b.name: feeds[a.name] for a, b in zip(source.main.inputs, migrated.main.inputs) if a.name in feeds}
    names = dict(zip([v.name for v in migrated.main.outputs], [v.name for v in source.main.outputs]))
    return {names.get(k, k): v for k, v in converter.run(migrated, fed).items()}


def max_abs_error(got: Any, want: Any) -> float:
    """Largest |got - want| over arrays (dicts compared per key, which must agree)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), f"keys {list(got)[:5]} vs {list(want)[:5]}"
        return max((max_abs_error(got[k], want[k]) for k in want), default=0.0)
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape, f"shape {g.shape}, expected {w.shape}"
    if g.dtype.kind in "USO" or w.dtype.kind in "USO":  # labels: equal or infinitely far
        return 0.0 if np.array_equal(g.astype(str), w.astype(str)) else float("inf")
    return float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)), initial=0.0))


def max_abs(value: Any) -> float:
    if isinstance(value, dict):
        return max((max_abs(v) for v in value.values()), default=0.0)
    x = np.asarray(value)
    return 0.0 if x.dtype.kind in "USO" else float(np.max(np.abs(x.astype(np.float64)), initial=0.0))
