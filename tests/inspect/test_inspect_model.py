"""converter.inspect.inspect_model against readings we did not write: coremltools' protobuf classes
(ct.utils.load_spec) for features, labels, layers and compressed weights; coremltools' MIL loader
for the op histogram and the fp16 constants of an ML program; the WebNN graph document itself."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import converter
from converter.errors import FormatError
from converter.inspect import inspect_model
from converter.ir.census import parameter_census

from ..conftest import MODELS
from ..mil.helpers import multifunction_program
from ..optimize.counting import ct_load, ct_op_histogram
from .helpers import (
    CLASSIFIER,
    DEEPLAB,
    FLEXIBLE,
    FP16_PROGRAM,
    LOOP,
    ML_CLASSIFIER,
    PIPELINE,
    REFUSED,
    ct_spec,
    write_webnn_graph,
)


def _weight_params(msg, out: list) -> list:  # noqa: ANN001 - any coremltools protobuf message
    """Every WeightParams message under ``msg`` (walked through the fields that are set)."""
    for fd, value in msg.ListFields():
        if fd.message_type is None:
            continue
        items = value if fd.is_repeated else [value]
        for item in items:
            if fd.message_type.name == "WeightParams":
                out.append(item)
            else:
                _weight_params(item, out)
    return out


def test_image_model_input_in_the_users_terms():
    s = inspect_model(DEEPLAB)
    image = ct_spec(DEEPLAB).description.input[0].type.imageType
    (f,) = s.functions[0].inputs
    assert (s.format, s.specification_version) == ("NeuralNetwork", ct_spec(DEEPLAB).specificationVersion)
    assert f.kind == "image" and f.dtype == "uint8"
    assert f.shape == [image.height, image.width, 3] == [513, 513, 3]
    assert f.details["colour_space"] == "RGB" and image.colorSpace == image.RGB


def test_lut_weights_stored_and_decompressed_bytes_match_the_file():
    """8-bit LUT weights: the uint8 indices as stored are the file's rawValue bytes; decompressed,
    each index is one fp32 weight (4 bytes); the LUTs are stored fp32."""
    s = inspect_model(DEEPLAB)
    weights = _weight_params(ct_spec(DEEPLAB).neuralNetwork, [])
    luts = [w for w in weights if w.quantization.WhichOneof("QuantizationType") == "lookupTableQuantization"]
    assert luts and all(w.quantization.numberOfBits == 8 for w in luts)
    # coremltools' threshold: tensors under 2048 elements (biases) are not worth keeping compressed
    kept = [w for w in luts if len(w.rawValue) >= 2048]
    indices = sum(len(w.rawValue) for w in kept)
    p = s.parameters
    assert p.compressed_tensors == len(kept) == 45
    assert p.stored["uint8"].bytes == indices and p.stored["uint8"].tensors == len(kept)
    lut_values = sum(len(w.quantization.lookupTableQuantization.floatValue) for w in kept)
    # decompressed fp32 = the other fp32 constants + one fp32 per index; stored fp32 also holds the LUTs
    assert p.decompressed["fp32"].elements - indices == p.stored["fp32"].elements - lut_values
    assert p.decompressed["fp32"].bytes == 4 * p.decompressed["fp32"].elements
    assert p.stored_bytes < p.decompressed_bytes / 3.5


def test_layer_histogram_is_coremltools_layer_list():
    from coremltools.models.utils import _get_nn_layers

    s = inspect_model(DEEPLAB)
    assert s.layer_histogram == Counter(layer.WhichOneof("layer") for layer in _get_nn_layers(ct_spec(DEEPLAB)))


def test_nested_layers_and_pipeline_stages_are_counted():
    spec = ct_spec(LOOP)
    loop = next(layer.loop for layer in spec.neuralNetwork.layers if layer.WhichOneof("layer") == "loop")
    nested = list(spec.neuralNetwork.layers) + list(loop.bodyNetwork.layers) + list(loop.conditionNetwork.layers)
    assert inspect_model(LOOP).layer_histogram == Counter(layer.WhichOneof("layer") for layer in nested)
    spec = ct_spec(PIPELINE)
    s = inspect_model(PIPELINE)
    assert (s.format, s.pipeline_stages) == ("pipeline", ["NeuralNetwork"] * len(spec.pipeline.models))
    stages = [layer.WhichOneof("layer") for m in spec.pipeline.models for layer in m.neuralNetwork.layers]
    assert s.layer_histogram == Counter(stages)


def test_classifier_labels_are_the_models_class_labels():
    labels = list(ct_spec(CLASSIFIER).neuralNetworkClassifier.stringClassLabels.vector)
    c = inspect_model(CLASSIFIER).classifier
    assert (c.count, c.label_type, c.first) == (len(labels), "string", labels[:5])
    c = inspect_model(ML_CLASSIFIER).classifier  # an ML program: the classify op's classes
    assert c.count == 2 and c.label_type == "string"


def test_flexible_shape_ranges_are_the_declared_ranges():
    ranges = ct_spec(FLEXIBLE).description.input[0].type.multiArrayType.shapeRange.sizeRanges
    (f,) = inspect_model(FLEXIBLE).functions[0].inputs
    expected = [r.lowerBound if r.lowerBound == r.upperBound else {"min": r.lowerBound, "max": r.upperBound}
                for r in ranges]
    assert f.shape == expected and f.shape_text() == "3 x 4..32 x 4..32"


def test_ml_program_ops_and_fp16_weights_match_coremltools_reading():
    s = inspect_model(FP16_PROGRAM)
    theirs = ct_load(FP16_PROGRAM)
    assert s.op_histogram == ct_op_histogram(theirs)
    fn = s.functions[0]
    assert (fn.opset, fn.file_opset) == ("iOS15", ct_spec(FP16_PROGRAM).mlProgram.functions["main"].opset)
    fp16 = [op.val.val for f in theirs.functions.values() for op in f.operations
            if op.op_type == "const" and getattr(op.val.val, "dtype", None) == np.float16]
    assert s.parameters.stored["fp16"].elements == sum(np.size(v) for v in fp16)
    assert s.parameters.stored["fp16"].bytes == 2 * sum(np.size(v) for v in fp16)
    assert s.parameters.stored == s.parameters.decompressed  # nothing compressed


def test_metadata_is_the_files():
    meta = ct_spec(DEEPLAB).description.metadata
    m = inspect_model(DEEPLAB).metadata
    assert (m["author"], m["license"], m["short_description"], m["version"]) == (
        meta.author, meta.license, meta.shortDescription, meta.versionString)
    assert inspect_model(FP16_PROGRAM).metadata["user_defined"] == dict(
        ct_spec(FP16_PROGRAM).description.metadata.userDefined)


def test_webnn_graph(tmp_path: Path):
    s = inspect_model(write_webnn_graph(tmp_path))
    assert (s.format, s.specification_version, s.layer_histogram) == ("WebNN", None, None)
    (x,), (y,) = s.functions[0].inputs, s.functions[0].outputs
    assert (x.name, x.dtype, x.shape, y.name, y.shape) == ("x", "float32", [2, 3], "y", [2, 3])
    assert s.op_histogram == {"add": 1, "relu": 1}
    assert s.parameters.stored["fp32"].elements == 6  # the constant c


def test_several_functions_default_marked(tmp_path: Path):
    path = converter.save(multifunction_program(), tmp_path / "two.mlpackage")
    s = inspect_model(path)
    assert [(f.name, f.default, f.file_opset) for f in s.functions] == [
        ("main", True, "CoreML8"), ("second", False, "CoreML8")]
    assert "function main (default)" in s.text() and "function second:" in s.text()


def test_a_model_the_converter_refuses_is_described_from_its_file():
    spec = ct_spec(REFUSED)
    s = inspect_model(REFUSED)
    assert s.program is None and s.refusal and "treeEnsembleClassifier" in s.refusal
    assert s.format == spec.WhichOneof("Type") == "pipelineClassifier"
    assert [f.name for f in s.functions[0].inputs] == [f.name for f in spec.description.input]
    assert s.functions[0].inputs[0].kind == "dictionary"


def test_census_counts_constexpr_inputs_as_stored_not_as_parameters():
    """The constants a constexpr op decompresses are stored bytes; the parameter is its result."""
    from converter.ir.builder import new_program
    from converter.ir.types import tensor

    def body(b, x):
        dense = b.constexpr_lut_to_dense(indices=np.zeros(2, np.uint8), lut=np.arange(4, dtype=np.float32),
                                         shape=np.array([2, 4], np.uint32))
        return [b.add(x=x, y=dense)]

    prog = new_program({"x": tensor("fp32", [2, 4])}, body, opset="iOS16")
    p = parameter_census(prog)
    assert p.compressed_tensors == 1 and p.decompressed["fp32"].elements == 8
    assert "uint8" not in p.decompressed and p.stored["uint8"].bytes == 2  # 8 two-bit indices, packed


def test_a_program_built_in_python():
    prog = multifunction_program()
    s = inspect_model(prog)
    assert (s.format, s.file, s.specification_version) == ("program", None, None)
    assert [f.opset for f in s.functions] == ["iOS18", "iOS18"] and s.op_histogram == {"relu": 1, "expand_dims": 1,
                                                                                        "linear": 1}
    assert s.metadata["user_defined"] == {} and s.to_json()["parameters"]["stored"]["fp32"]["elements"] == 48


def test_a_model_the_frontend_finds_malformed_is_described_with_the_reason():
    path = MODELS / "builder/elementwise_unary.mlmodel"
    with pytest.raises(FormatError) as info:
        converter.load(path)
    s = inspect_model(path)
    assert s.program is None and s.refusal == f"malformed: {info.value.where().split(', ', 1)[1]}: {info.value.message}"
    assert s.format == "NeuralNetwork" and s.layer_histogram == Counter(
        layer.WhichOneof("layer") for layer in ct_spec(path).neuralNetwork.layers)


_SHARED_PACKAGES = sorted(MODELS.glob("*/*.mlpackage"))
_SHARED_NN = sorted(MODELS.glob("*/*.mlmodel"))


@pytest.mark.parametrize("path", _SHARED_PACKAGES, ids=lambda p: p.name)
def test_op_histogram_is_coremltools_on_every_shared_ml_program(path: Path):
    assert inspect_model(path).op_histogram == ct_op_histogram(ct_load(path))


def test_layer_histogram_is_coremltools_layer_list_on_every_shared_neural_network():
    """coremltools' _get_nn_layers lists a network's top-level layers (the first stage only of a
    pipeline), so the comparison is on the models it reads whole: no pipeline, no nested network."""
    from coremltools.models.utils import _get_nn_layers

    from converter.formats.model_file import read_model_file
    from converter.inspect import layer_histogram

    compared = 0
    for path in _SHARED_NN:
        spec = ct_spec(path)
        layers = list(_get_nn_layers(spec))
        if spec.WhichOneof("Type") not in ("neuralNetwork", "neuralNetworkClassifier", "neuralNetworkRegressor") or any(
                layer.WhichOneof("layer") in ("loop", "branch") for layer in layers):
            continue
        assert layer_histogram(read_model_file(path).model) == Counter(
            layer.WhichOneof("layer") for layer in layers), path.name
        compared += 1
    assert compared >= 40


def test_states_are_listed_apart_from_the_inputs(tmp_path: Path):
    from ..mil.test_io import _stateful_program

    path = converter.save(_stateful_program(), tmp_path / "s.mlpackage")
    m = ct_spec(path)
    fn = inspect_model(path).functions[0]
    assert [f.name for f in fn.inputs] == [f.name for f in m.description.input] == ["x"]
    assert [(f.name, f.kind, f.dtype, f.shape) for f in fn.states] == [("cache", "state", "float16", [2, 3])]
    assert [f.name for f in m.description.state] == ["cache"]
