"""Issue 4, whole models: every NeuralNetwork model of ../shared/data/models (builder/*.mlmodel,
real/*.mlmodel, torch/*_nn.mlmodel) loads, runs, and migrates to an .mlpackage that keeps the
model's interface, computes bit-identical outputs, and is accepted by coremltools' MIL proto
loader (which re-runs coremltools' type inference on every op). Models that are not neural
networks are refused with an UnsupportedError naming their type or every offending pipeline stage;
malformed networks with a FormatError naming the layer.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import converter
from converter.errors import EvaluationError, FormatError, UnsupportedError
from converter.formats.model_file import read_model_file
from converter.formats.proto import Model_pb2
from converter.formats.proto.FeatureTypes_pb2 import ImageFeatureType

from ..mil.helpers import CoremltoolsLoader, same_bits
from .shared import (
    BUILDER,
    MALFORMED,
    MALFORMED_LAYERS,
    MODELS,
    NN_FILES,
    REFUSED,
    RUNS,
    Migration,
    Migrations,
    model_id,
    read_spec,
    without_layers,
)

_NEURAL = {"neuralNetwork", "neuralNetworkClassifier", "neuralNetworkRegressor", "pipeline", "pipelineClassifier",
           "pipelineRegressor"}


def test_model_tables_match_the_manifest(shared_dir: Path) -> None:
    """The files tested are exactly the manifest's .mlmodel files of builder/ and real/ and its
    torch/*_nn.mlmodel; a model is refused exactly when the manifest says some part of it is not a
    neural network."""
    manifest = {r["path"]: r for r in json.loads((MODELS / "manifest.json").read_text())}
    listed = sorted(p for p in manifest if p.endswith(".mlmodel") and (
        p.startswith(("builder/", "real/")) or (p.startswith("torch/") and p.endswith("_nn.mlmodel"))))
    assert [model_id(p) for p in NN_FILES] == listed
    not_neural = sorted(p for p in listed if manifest[p]["model_type"] is None
                        or not set(manifest[p]["submodel_types"]) <= _NEURAL)
    assert sorted(REFUSED) == not_neural
    assert set(MALFORMED) <= set(listed) - set(not_neural)
    assert (len(NN_FILES), len(REFUSED), len(MALFORMED), len(RUNS)) == (80, 20, 3, 57)


@pytest.mark.parametrize("path", [MODELS / p for p in sorted(REFUSED)], ids=model_id)
def test_refused_with_the_model_type(path: Path) -> None:
    with pytest.raises(UnsupportedError) as info:
        converter.load(path)
    assert REFUSED[model_id(path)] in info.value.message
    assert info.value.file == str(path)


@pytest.mark.parametrize("path", [MODELS / p for p in sorted(MALFORMED)], ids=model_id)
def test_malformed_network_names_the_layer(path: Path, migrations: Migrations, coremltools_loader: CoremltoolsLoader,
                                           tmp_path: Path) -> None:
    layer, why = MALFORMED[model_id(path)]
    with pytest.raises(FormatError) as info:
        converter.load(path)
    assert info.value.op == layer, f"expected the error at layer '{layer}' ({why}); got: {info.value}"
    assert info.value.file == str(path)
    names = MALFORMED_LAYERS.get(model_id(path))
    if names:  # the rest of the model is sound: it runs and migrates
        rest = without_layers(path, names, tmp_path / path.name)
        m = migrations.get(rest, feeds_of=path)
        check_outputs(m, read_spec(rest))
        check_migration(m, read_spec(rest), coremltools_loader)


@pytest.mark.parametrize("path", RUNS, ids=model_id)
def test_runs_and_migrates_to_mil(path: Path, migrations: Migrations, coremltools_loader: CoremltoolsLoader) -> None:
    m = migrations.get(path)
    spec = read_spec(path)
    check_outputs(m, spec)
    check_migration(m, spec, coremltools_loader)


def test_npz_image_of_flexible_image_sizes_is_refused(migrations: Migrations) -> None:
    """The .npz image (24 rows x 32 columns) is no size the model enumerates (16 x 16; width 24,
    height 32): a Core ML app could not pass it either. The migration test feeds it transposed."""
    path = BUILDER / "flexible_image_sizes.mlmodel"
    prog = converter.load(path)
    with np.load(path.with_suffix(".npz")) as data:
        image = data["image"]
    assert image.shape == (24, 32, 3)
    with pytest.raises(EvaluationError, match=r"input 'image': got a uint8 array of shape 24 x 32 x 3, expected "
                                              r"image one of 16 x 16, 24 x 32 \(W x H\)"):
        converter.run(prog, {"image": image})
    m = migrations.get(path)
    assert m.feeds["image"].shape == (32, 24, 3)
    assert m.outputs["y"].shape[-2:] == (32, 24)


# -- checks ----------------------------------------------------------------------------------------


def _labels(spec: Any) -> list[Any]:
    nn = spec.neuralNetworkClassifier if spec.WhichOneof("Type") == "neuralNetworkClassifier" else None
    if nn is None:
        return []
    which = nn.WhichOneof("ClassLabels")
    return list(getattr(nn, which).vector) if which else []


def _fits_declared(shape: tuple[int, ...], declared: list[int]) -> bool:
    """The declared shape, or (rank-5 networks) the sequence form [Seq, 1, C, H, W] of a declared
    [C] or [C, H, W] output."""
    if not declared or list(shape) == declared:
        return True
    chw = declared + [1, 1] if len(declared) == 1 else declared
    return len(shape) == 5 and len(chw) == 3 and shape[1] == 1 and list(shape[2:]) == chw


def _unique(features: Any) -> list[Any]:
    """Features in order, each name once (builder/embedding_simple_rnn declares 'h_out' twice)."""
    first: dict[str, Any] = {}
    for f in features:
        first.setdefault(f.name, f)
    return list(first.values())


def check_outputs(m: Migration, spec: Any) -> None:
    """Every declared output, in order, in its declared form; not vacuous (some finite value)."""
    declared = _unique(spec.description.output)
    assert list(m.outputs) == [f.name for f in declared]
    labels = list(dict.fromkeys(_labels(spec)))  # a dict has each label once (SqueezeNet has 'crane' twice)
    for f in declared:
        value = m.outputs[f.name]
        kind = f.type.WhichOneof("Type")
        if kind == "dictionaryType":
            assert list(value) == labels, f"{f.name}: keys are not the class labels in order"
            assert np.isfinite(list(value.values())).all()
        elif kind in ("stringType", "int64Type") and f.name == spec.description.predictedFeatureName:
            probs = m.outputs.get(spec.description.predictedProbabilitiesName)
            assert value in labels
            if probs is not None:  # the predicted label is the most probable one
                assert value == max(probs, key=probs.get)
        elif kind == "multiArrayType":
            shape = [int(d) for d in f.type.multiArrayType.shape]
            flexible = f.type.multiArrayType.WhichOneof("ShapeFlexibility") is not None
            assert flexible or _fits_declared(np.shape(value), shape), f"{f.name}: shape {np.shape(value)}, declared {shape}"
            assert np.asarray(value).size == 0 or np.isfinite(np.asarray(value, np.float64)).any(), f"{f.name}: no finite value"
        elif kind == "imageType":
            gray = (ImageFeatureType.GRAYSCALE, ImageFeatureType.GRAYSCALE_FLOAT16)
            channels = 1 if f.type.imageType.colorSpace in gray else 3
            assert np.shape(value) == (1, channels, f.type.imageType.height, f.type.imageType.width)


_MIL_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _interface(features: Any) -> list[tuple[str, str, bool]]:
    return [(f.name, f.type.WhichOneof("Type"), f.type.isOptional) for f in features]


def _same_interface(source: Any, migrated: Any) -> None:
    """Same features in order: kinds, optional flags and names (a name that is no MIL identifier,
    e.g. '0', has to change, into an identifier)."""
    a, b = _interface(source), _interface(migrated)
    assert [x[1:] for x in a] == [x[1:] for x in b], f"{a} -> {b}"
    for (name, _, _), (new, _, _) in zip(a, b):
        assert new == name or (not _MIL_IDENTIFIER.fullmatch(name) and _MIL_IDENTIFIER.fullmatch(new)), (name, new)


def check_migration(m: Migration, spec: Any, loader: CoremltoolsLoader) -> None:
    """The .mlpackage keeps the interface (names, feature kinds, optional inputs), gives bit-identical
    outputs, and coremltools' MIL proto loader accepts it."""
    migrated = read_model_file(m.package).model
    assert migrated.WhichOneof("Type") == "mlProgram"
    _same_interface(spec.description.input, migrated.description.input)
    _same_interface(_unique(spec.description.output), migrated.description.output)
    assert list(m.outputs_again) == list(m.outputs)
    for name, value in m.outputs.items():
        assert same_bits(m.outputs_again[name], value), f"output '{name}' changed through MIL"
    loader.load(m.package)


def test_optional_inputs_take_their_default(migrations: Migrations, tmp_path: Path) -> None:
    """An optional input left out is its declared default (0 unless given), as in Core ML; the
    migrated model keeps the inputs optional. builder/lstm_bidirectional's .npz leaves out the four
    optional initial states."""
    path = BUILDER / "lstm_bidirectional.mlmodel"
    m = migrations.get(path)
    assert sorted(m.feeds) == ["seq"]
    zeros = {name: np.zeros(5, np.float32) for name in ("hf_in", "cf_in", "hb_in", "cb_in")}
    explicit = converter.run(m.prog, {**m.feeds, **zeros})
    assert all(same_bits(explicit[k], m.outputs[k]) for k in m.outputs)
    assert all(f.type.isOptional for f in read_model_file(m.package).model.description.input[1:])

    spec = Model_pb2.Model(specificationVersion=5)
    x = spec.description.input.add(name="x")
    x.type.isOptional = True
    x.type.multiArrayType.shape.append(3)
    x.type.multiArrayType.dataType = x.type.multiArrayType.FLOAT32
    x.type.multiArrayType.floatDefaultValue = 2.5
    y = spec.description.output.add(name="y")
    y.type.multiArrayType.shape.append(3)
    y.type.multiArrayType.dataType = x.type.multiArrayType.FLOAT32
    spec.neuralNetwork.layers.add(name="copy", input=["x"], output=["y"]).activation.linear.alpha = 1.0
    (tmp_path / "m.mlmodel").write_bytes(spec.SerializeToString())
    prog = converter.load(tmp_path / "m.mlmodel")
    np.testing.assert_array_equal(converter.run(prog, {})["y"], np.full(3, 2.5, np.float32))
    again = converter.load(converter.save(prog, tmp_path / "m.mlpackage"))
    np.testing.assert_array_equal(converter.run(again, {})["y"], np.full(3, 2.5, np.float32))
