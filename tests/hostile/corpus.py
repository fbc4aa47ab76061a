"""A corpus of hostile and broken model files, generated on demand (no binary blobs in the repo).

Every case writes its file(s) below a folder it is given and returns the path a user would pass
to ``converter convert``. The cases are the ones issue 7 lists (crafted and fuzzed inputs that gave
raw tracebacks, hangs or unbounded memory), plus more of the same classes found while fixing them.
``expect`` says what the converter must do with it: ``"error"`` (a one-line ``converter.errors``
error, exit 2 from the CLI) or ``"ok"`` (loads, saves and runs). tests/hostile/test_corpus.py runs
every case through the library and the CLI under a time and memory limit (tests/hostile/harness.py).

Run ``python -m tests.hostile.corpus DIR`` to write the whole corpus into DIR (to try it by hand).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from converter.formats.proto import FeatureTypes_pb2, MIL_pb2, Model_pb2, NeuralNetwork_pb2

ARRAY = FeatureTypes_pb2.ArrayFeatureType
Layer = NeuralNetwork_pb2.NeuralNetworkLayer
GIB = 1 << 30


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[Path], Path]  # writes the case below a folder; returns the model path
    expect: str  # "error" (one-line converter error, exit 2) or "ok" (loads, converts and runs)
    what: str  # what the file is, and what happened before the fix
    fragment: str = ""  # a piece of the expected error message
    # what the converter did before these fixes (commit 8b19e0a): "crash" (a raw traceback), "hang"
    # (over 5 s), "memory" (an unbounded allocation), "cli-exit-0"; "error" or "ok" for the cases
    # kept as guards, which it already handled (with a less precise message for some errors)
    before: str = "crash"


CASES: dict[str, Case] = {}


def case(name: str, expect: str, what: str, fragment: str = "", *,
         before: str = "crash") -> Callable[[Callable[[Path], Path]], Callable]:
    def deco(make: Callable[[Path], Path]) -> Callable[[Path], Path]:
        assert name not in CASES, name
        CASES[name] = Case(name, make, expect, what, fragment, before)
        return make

    return deco


# -- building blocks ------------------------------------------------------------------------------


def array_feature(name: str, shape: list[int] | None, dtype: int = ARRAY.FLOAT32) -> Model_pb2.FeatureDescription:
    f = Model_pb2.FeatureDescription(name=name)
    f.type.multiArrayType.dataType = dtype
    if shape is not None:
        f.type.multiArrayType.shape.extend(shape)
    return f


def nn_model(layers: list[Layer], inputs: dict[str, list[int] | None], outputs: dict[str, list[int] | None],
             *, spec: int = 4, nd: bool = True) -> Model_pb2.Model:
    """A NeuralNetwork model (ND semantics unless ``nd`` is false) of the given layers."""
    m = Model_pb2.Model(specificationVersion=spec)
    m.description.input.extend(array_feature(k, s) for k, s in inputs.items())
    m.description.output.extend(array_feature(k, s) for k, s in outputs.items())
    m.neuralNetwork.layers.extend(layers)
    if nd:
        m.neuralNetwork.arrayInputShapeMapping = NeuralNetwork_pb2.EXACT_ARRAY_MAPPING
    return m


def layer(name: str, kind: str, inputs: list[str], outputs: list[str], **params: object) -> Layer:
    """A layer of ``kind`` (the oneof field name) with scalar/repeated ``params`` set."""
    lay = Layer(name=name)
    lay.input.extend(inputs)
    lay.output.extend(outputs)
    p = getattr(lay, kind)
    p.SetInParent()
    for k, v in params.items():
        if isinstance(v, (list, tuple)):
            getattr(p, k).extend(v)
        else:
            setattr(p, k, v)
    return lay


def one_layer(kind: str, x: list[int] | None = (3,), y: list[int] | None = None, **params: object) -> Model_pb2.Model:
    m = nn_model([layer("L", kind, ["x"], ["y"], **params)], {"x": None if x is None else list(x)}, {"y": y})
    if kind == "activation":
        m.neuralNetwork.layers[0].activation.ReLU.SetInParent()
    return m


def write_model(path: Path, model: Model_pb2.Model) -> Path:
    path.write_bytes(model.SerializeToString())
    return path


def tiny_model() -> Model_pb2.Model:
    """y = relu(x), x of shape [3]: a small valid model to corrupt."""
    return one_layer("activation", x=[3], y=[3])


def _relu(m: Model_pb2.Model) -> Model_pb2.Model:
    m.neuralNetwork.layers[0].activation.ReLU.SetInParent()
    return m


def package(folder: Path, model_bytes: bytes | None = None, *, manifest: bytes | None = None,
            name: str = "m.mlpackage") -> Path:
    """An .mlpackage holding ``model_bytes`` (default: the tiny model) and ``manifest``."""
    pkg = folder / name
    data = pkg / "Data" / "com.apple.CoreML"
    data.mkdir(parents=True)
    if model_bytes is not None:
        (data / "model.mlmodel").write_bytes(model_bytes)
    if manifest is None:
        manifest = json.dumps({
            "fileFormatVersion": "1.0.0",
            "itemInfoEntries": {"A": {"author": "com.apple.CoreML", "description": "", "name": "model.mlmodel",
                                      "path": "com.apple.CoreML/model.mlmodel"}},
            "rootModelIdentifier": "A",
        }).encode()
    (pkg / "Manifest.json").write_bytes(manifest)
    return pkg


def mil_package(folder: Path, edit: Callable[[Model_pb2.Model], None] | None = None, *,
                program: Callable[[], object] | None = None) -> Path:
    """An ML program package written by the converter (default: y = relu(x)), its Model proto then
    changed by ``edit``."""
    import converter
    from converter.ir.builder import new_program
    from converter.ir.types import tensor

    prog = program() if program else new_program({"x": tensor("fp32", [3])}, lambda b, x: [b.relu(x=x, name="y")])
    pkg = converter.save(prog, folder / "m.mlpackage")
    if edit is not None:
        path = pkg / "Data" / "com.apple.CoreML" / "model.mlmodel"
        m = Model_pb2.Model()
        m.ParseFromString(path.read_bytes())
        edit(m)
        path.write_bytes(m.SerializeToString())
    return pkg


def main_ops(m: Model_pb2.Model) -> object:
    fn = m.mlProgram.functions["main"]
    return fn.block_specializations[fn.opset].operations


# -- files that are not files ---------------------------------------------------------------------


@case("fifo", "error", "a FIFO named x.mlmodel: open() blocked forever", "not a regular file", before="hang")
def _fifo(d: Path) -> Path:
    p = d / "x.mlmodel"
    os.mkfifo(p)
    return p


@case("dev_zero_symlink", "error", "x.mlmodel -> /dev/zero: read until memory ran out (MemoryError)",
      "not a regular file", before="hang")
def _dev_zero(d: Path) -> Path:
    p = d / "x.mlmodel"
    p.symlink_to("/dev/zero")
    return p


@case("socket", "error", "a Unix socket named x.mlmodel (refused as 'No such device or address')", "not a regular file", before="error")
def _socket(d: Path) -> Path:
    p = d / "x.mlmodel"
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(p))
    finally:
        s.close()
    return p


@case("package_model_fifo", "error", "an .mlpackage whose model.mlmodel is a FIFO (refused as 'not a file')",
      "not a regular file", before="error")
def _package_model_fifo(d: Path) -> Path:
    pkg = package(d)
    os.mkfifo(pkg / "Data" / "com.apple.CoreML" / "model.mlmodel")
    return pkg


@case("package_manifest_fifo", "error", "an .mlpackage whose Manifest.json is a FIFO: the CLI took it for a folder of models, exit 0",
      "Manifest.json", before="cli-exit-0")
def _package_manifest_fifo(d: Path) -> Path:
    pkg = package(d, tiny_model().SerializeToString())
    (pkg / "Manifest.json").unlink()
    os.mkfifo(pkg / "Manifest.json")
    return pkg


@case("package_weights_fifo", "error", "an ML program whose weight.bin is a FIFO (refused as 'missing')", "weight", before="error")
def _package_weights_fifo(d: Path) -> Path:
    import converter
    from converter.ir.builder import new_program
    from converter.ir.types import tensor

    w = np.arange(64, dtype=np.float32).reshape(8, 8)
    prog = new_program({"x": tensor("fp32", [8])}, lambda b, x: [b.matmul(x=x, y=w, name="y")])
    pkg = converter.save(prog, d / "m.mlpackage")
    weight = pkg / "Data" / "com.apple.CoreML" / "weights" / "weight.bin"
    weight.unlink()
    os.mkfifo(weight)
    return pkg


# -- sizes ----------------------------------------------------------------------------------------


@case("package_sparse_8gb_model", "error", "an .mlpackage whose model.mlmodel is a sparse 8 GB file: MemoryError",
      "GiB", before="memory")
def _sparse_package(d: Path) -> Path:
    pkg = package(d, b"")
    os.truncate(pkg / "Data" / "com.apple.CoreML" / "model.mlmodel", 8 * GIB)
    return pkg


@case("sparse_8gb_mlmodel", "error", "a sparse 8 GB .mlmodel (a tiny model, then holes)", "GiB", before="hang")
def _sparse_bare(d: Path) -> Path:
    p = write_model(d / "x.mlmodel", _relu(tiny_model()))
    os.truncate(p, 8 * GIB)
    return p


@case("zero_tail_16mb", "error", "a tiny valid model followed by 16 MB of zero bytes: 30 s to be refused",
      "not a Core ML model", before="hang")
def _zero_tail(d: Path) -> Path:
    p = d / "x.mlmodel"
    p.write_bytes(_relu(tiny_model()).SerializeToString() + bytes(16 << 20))
    return p


@case("varint_spam_16mb", "error", "8 million copies of specificationVersion (16 MB of tiny fields): 10 s to walk",
      "model type", before="hang")
def _varint_spam(d: Path) -> Path:
    p = d / "x.mlmodel"
    p.write_bytes(b"\x08\x04" * (8 << 20))
    return p


@case("empty_file", "error", "an empty .mlmodel", "not a Core ML model", before="error")
def _empty(d: Path) -> Path:
    p = d / "x.mlmodel"
    p.write_bytes(b"")
    return p


# -- Manifest.json --------------------------------------------------------------------------------


@case("manifest_nested_100k", "error", "a Manifest.json nested 100,000 deep: RecursionError", "Manifest.json")
def _manifest_deep(d: Path) -> Path:
    return package(d, tiny_model().SerializeToString(), manifest=b"[" * 100_000 + b"]" * 100_000)


@case("manifest_5000_digits", "error", "a Manifest.json holding a 5,000-digit number: ValueError (4300 digits)",
      "Manifest.json")
def _manifest_digits(d: Path) -> Path:
    body = b'{"fileFormatVersion": "1.0.0", "x": ' + b"9" * 5000 + b"}"
    return package(d, tiny_model().SerializeToString(), manifest=body)


@case("manifest_100k_items", "error", "a Manifest.json with 100,000 items: 11 s", "Manifest.json", before="hang")
def _manifest_items(d: Path) -> Path:
    entries = {f"I{i}": {"path": "com.apple.CoreML/model.mlmodel", "name": "model.mlmodel",
                         "author": "com.apple.CoreML"} for i in range(100_000)}
    body = json.dumps({"fileFormatVersion": "1.0.0", "itemInfoEntries": entries, "rootModelIdentifier": "I0"})
    return package(d, _relu(tiny_model()).SerializeToString(), manifest=body.encode())


@case("manifest_sparse_1gb", "error", "a sparse 1 GB Manifest.json", "Manifest.json", before="hang")
def _manifest_huge(d: Path) -> Path:
    pkg = package(d, tiny_model().SerializeToString())
    os.truncate(pkg / "Manifest.json", GIB)
    return pkg


# -- NeuralNetwork features -----------------------------------------------------------------------


@case("feature_negative_dim", "error", "an input feature of shape [-1]: ValueError: negative dimension", "-1")
def _negative_dim(d: Path) -> Path:
    return write_model(d / "x.mlmodel", _relu(one_layer("activation", x=[-1], y=[-1])))


@case("feature_huge_dim", "error", "an input feature of shape [2^40, 2^40]: overflow/MemoryError", "shape")
def _huge_dim(d: Path) -> Path:
    return write_model(d / "x.mlmodel", _relu(one_layer("activation", x=[1 << 40, 1 << 40], y=None)))


@case("enumerated_negative", "error", "an enumerated shape of -733: ValueError: Value out of range: -733", "-733")
def _enumerated_negative(d: Path) -> Path:
    m = _relu(one_layer("activation", x=[3], y=None))
    shapes = m.description.input[0].type.multiArrayType.enumeratedShapes.shapes
    shapes.add().shape.extend([3])
    shapes.add().shape.extend([-733])
    return write_model(d / "x.mlmodel", m)


@case("shape_range_huge_lower", "error", "a shape range whose lower bound is 2^62 (random inputs of that size)",
      "shapeRange")
def _range_huge(d: Path) -> Path:
    m = _relu(one_layer("activation", x=[3], y=None))
    r = m.description.input[0].type.multiArrayType.shapeRange.sizeRanges.add()
    r.lowerBound, r.upperBound = 1 << 62, -1
    return write_model(d / "x.mlmodel", m)


@case("pipeline_dict_input", "error", "a pipeline with a dictionary input: AttributeError (DictType .shape)",
      "declared as a multiArray")
def _pipeline_dict(d: Path) -> Path:
    inner = _relu(nn_model([layer("L", "activation", ["x"], ["y"])], {"x": [3]}, {"y": [3]}, spec=1, nd=False))
    m = Model_pb2.Model(specificationVersion=4)
    m.description.CopyFrom(inner.description)
    m.description.input[0].type.Clear()  # the pipeline says dictionary, its stage multiArray
    m.description.input[0].type.dictionaryType.stringKeyType.SetInParent()
    m.pipeline.models.add().CopyFrom(inner)
    return write_model(d / "x.mlmodel", m)


@case("int64_input_times_3e38", "error",
      "multiply by alpha = 3.4e38 of an int64 input feature: OverflowError (found by atheris)", "does not fit")
def _int64_times_huge(d: Path) -> Path:
    m = one_layer("multiply", x=[1], y=None, alpha=3.4e38)
    m.description.input[0].type.Clear()
    m.description.input[0].type.int64Type.SetInParent()
    return write_model(d / "x.mlmodel", m)


@case("dict_input", "error", "a neural network with a dictionary input", "must be a tensor, got dict", before="error")
def _dict_input(d: Path) -> Path:
    m = _relu(one_layer("activation", x=[3], y=[3]))
    m.description.input[0].type.Clear()
    m.description.input[0].type.dictionaryType.int64KeyType.SetInParent()
    return write_model(d / "x.mlmodel", m)


# -- NeuralNetwork layer parameters ---------------------------------------------------------------


def _param_case(name: str, kind: str, x: list[int], field: str, before: str = "crash", **params: object) -> None:
    happened = "OverflowError (out of bounds for int32)" if before == "crash" else "already refused, for another reason"
    @case(name, "error", f"{kind} with {field} = {params[field]}: {happened}", field, before=before)
    def make(d: Path) -> Path:
        return write_model(d / "x.mlmodel", one_layer(kind, x=x, **params))


_param_case("constant_pad_1e12", "constantPad", [2, 3], "padAmounts", padAmounts=[0, 10**12, 0, 0])
_param_case("lrn_2p62", "lrn", [1, 3, 4, 4], "localSize", localSize=1 << 62, alpha=1.0, beta=0.75, k=1.0)
_param_case("matrix_band_part_1e12", "matrixBandPart", [3, 3], "numLower", numLower=10**12, numUpper=1)
_param_case("one_hot_2p62", "oneHot", [3], "oneHotVectorSize", oneHotVectorSize=1 << 62, axis=-1, onValue=1.0)
_param_case("reshape_static_1e12", "reshapeStatic", [3], "targetShape", targetShape=[10**12, 3])
_param_case("tile_2p62", "tile", [3], "reps", reps=[1 << 62])
_param_case("tile_1e12", "tile", [3], "reps", reps=[10**12])
_param_case("upper_triangular_2p62", "upperTriangular", [3, 3], "k", k=-(1 << 62))
_param_case("concat_nd_axis_2p62", "concatND", [3], "axis", before="error", axis=1 << 62)


@case("slice_static_int64_bounds", "ok", "sliceStatic with beginIds 2^62 and endIds INT64_MAX (wrapped to 0 and -1)")
def _slice_int64(d: Path) -> Path:
    m = one_layer("sliceStatic", x=[3], beginIds=[-(1 << 62)], endIds=[(1 << 63) - 1], strides=[1 << 62],
                  beginMasks=[False], endMasks=[False])
    return write_model(d / "x.mlmodel", m)
_param_case("embedding_nd_vocab_2p62", "embeddingND", [3], "vocabSize", before="error", vocabSize=1 << 62, embeddingSize=2)
_param_case("conv_kernel_2p62", "convolution", [1, 1, 4, 4], "kernelSize", before="error", kernelSize=[1 << 62, 1],
            outputChannels=1, kernelChannels=1)


@case("lrn_window_2p31", "ok", "lrn with localSize 2^31 - 1 over 3 channels: looped 2^31 times (a hang)",
      before="hang")
def _lrn_window(d: Path) -> Path:
    return write_model(d / "x.mlmodel", one_layer("lrn", x=[1, 3, 4, 4], localSize=(1 << 31) - 1, alpha=1e-4,
                                                  beta=0.75, k=1.0))


@case("pooling_window_1e4", "ok",
      "average pooling, 10^4 x 10^4 window padded by 10^4 over a 4 x 4 input: MemoryError for a 4.5 GiB padded "
      "copy (then a loop of 10^8 taps)", before="memory")
def _pool_window(d: Path) -> Path:
    m = one_layer("pooling", x=[1, 3, 4, 4], type=NeuralNetwork_pb2.PoolingLayerParams.AVERAGE,
                  kernelSize=[10_000, 10_000], stride=[10_000, 10_000])
    m.neuralNetwork.layers[0].pooling.includeLastPixel.paddingAmounts.extend([10_000, 10_000])
    return write_model(d / "x.mlmodel", m)


@case("deconvolution_stride_1e6", "error",
      "a deconvolution of stride 10^6 cropped to an 8 x 8 output: MemoryError for a 32 TiB uncropped result (fuzzed)",
      "intermediate", before="memory")
def _deconv_stride(d: Path) -> Path:
    m = one_layer("convolution", x=[1, 4, 4], isDeconvolution=True, outputChannels=1, kernelChannels=1,
                  kernelSize=[2, 2], stride=[10**6, 10**6], outputShape=[8, 8])
    conv = m.neuralNetwork.layers[0].convolution
    conv.valid.SetInParent()
    conv.weights.floatValue.extend([1.0, 2.0, 3.0, 4.0])
    return write_model(d / "x.mlmodel", m)


@case("inner_product_overflowing_channels", "error",
      "innerProduct with inputChannels = outputChannels = 2^32 and no weights (their product wraps to 0 in int64)",
      "Channels")
def _ip_overflow(d: Path) -> Path:
    m = one_layer("innerProduct", x=[3], inputChannels=1 << 32, outputChannels=1 << 32)
    m.neuralNetwork.layers[0].innerProduct.weights.SetInParent()
    return write_model(d / "x.mlmodel", m)


@case("range_static_inf", "error", "rangeStatic with endValue = inf: OverflowError: cannot convert float infinity",
      "endValue")
def _range_inf(d: Path) -> Path:
    m = nn_model([layer("L", "rangeStatic", [], ["y"], endValue=float("inf"), startValue=0.0, stepSizeValue=1.0)],
                 {"x": [1]}, {"y": None})
    return write_model(d / "x.mlmodel", m)


@case("range_static_nan", "error", "rangeStatic with stepSizeValue = nan", "stepSizeValue", before="error")
def _range_nan(d: Path) -> Path:
    m = nn_model([layer("L", "rangeStatic", [], ["y"], endValue=5.0, startValue=0.0, stepSizeValue=float("nan"))],
                 {"x": [1]}, {"y": None})
    return write_model(d / "x.mlmodel", m)


@case("range_static_huge", "error", "rangeStatic from 0 to 1e30 step 1 (10^30 elements)", "rangeStatic")
def _range_huge_len(d: Path) -> Path:
    m = nn_model([layer("L", "rangeStatic", [], ["y"], endValue=1e30, startValue=0.0, stepSizeValue=1.0)],
                 {"x": [1]}, {"y": None})
    return write_model(d / "x.mlmodel", m)


@case("load_constant_nd_rank100", "error", "loadConstantND of rank 100: maximum supported dimension is 64",
      "rank")
def _rank100_nn(d: Path) -> Path:
    lay = layer("L", "loadConstantND", [], ["y"], shape=[1] * 100)
    lay.loadConstantND.data.floatValue.append(1.0)
    return write_model(d / "x.mlmodel", nn_model([lay], {"x": [1]}, {"y": None}))


@case("load_constant_nd_huge", "error", "loadConstantND of shape [2^31, 2^31] and no data", "shape", before="error")
def _huge_const_nn(d: Path) -> Path:
    lay = layer("L", "loadConstantND", [], ["y"], shape=[1 << 31, 1 << 31])
    lay.loadConstantND.data.SetInParent()
    return write_model(d / "x.mlmodel", nn_model([lay], {"x": [1]}, {"y": None}))


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (built by hand: protobuf's own API refuses messages nested
    deeper than it parses)."""
    from tests.hostile.mutate import encode_varint

    return encode_varint(number << 3 | 2) + encode_varint(len(payload)) + payload


def _nested_loops(depth: int) -> bytes:
    """A model whose layer is a loop (one iteration) holding a loop ... ``depth`` deep, around a relu."""
    fields = {d.name: d.number for d in Layer.DESCRIPTOR.fields}
    inner = layer("inner", "activation", ["x"], ["x"])
    inner.activation.ReLU.SetInParent()
    body = inner.SerializeToString()
    for i in range(depth):
        params = NeuralNetwork_pb2.LoopLayerParams(maxLoopIterations=1).SerializeToString()
        params += _field(NeuralNetwork_pb2.LoopLayerParams.DESCRIPTOR.fields_by_name["bodyNetwork"].number,
                         _field(NeuralNetwork_pb2.NeuralNetwork.DESCRIPTOR.fields_by_name["layers"].number, body))
        body = _field(fields["name"], f"loop{i}".encode()) + _field(fields["loop"], params)
    m = nn_model([], {"x": [3]}, {"x": None})
    network = _field(NeuralNetwork_pb2.NeuralNetwork.DESCRIPTOR.fields_by_name["layers"].number, body)
    network += NeuralNetwork_pb2.NeuralNetwork(arrayInputShapeMapping=NeuralNetwork_pb2.EXACT_ARRAY_MAPPING
                                               ).SerializeToString()
    m.ClearField("neuralNetwork")
    return m.SerializeToString() + _field(Model_pb2.Model.DESCRIPTOR.fields_by_name["neuralNetwork"].number, network)


@case("loops_nested_400", "error", "loop layers nested 400 deep: RecursionError", "protobuf decoding failed")
def _loops_400(d: Path) -> Path:
    p = d / "x.mlmodel"
    p.write_bytes(_nested_loops(400))
    return p


@case("loops_nested_30", "ok", "loop layers nested 30 deep (as deep as protobuf parses)", before="ok")
def _loops_30(d: Path) -> Path:
    p = d / "x.mlmodel"
    p.write_bytes(_nested_loops(30))
    return p


@case("loop_2p62_iterations", "error", "a loop layer of 2^62 iterations with no condition network: endless --check",
      "iterations", before="hang")
def _loop_forever(d: Path) -> Path:
    lay = layer("L", "loop", [], [], maxLoopIterations=1 << 62)
    inner = lay.loop.bodyNetwork.layers.add()
    inner.CopyFrom(layer("inner", "activation", ["x"], ["x_out"]))
    inner.activation.ReLU.SetInParent()
    return write_model(d / "x.mlmodel", nn_model([lay], {"x": [3]}, {"x": None}))


@case("pipeline_nested_deep", "error", "pipelines nested 90 deep", "protobuf decoding failed", before="error")
def _pipeline_deep(d: Path) -> Path:
    m = _relu(one_layer("activation", x=[3], y=[3]))
    for _ in range(90):
        outer = Model_pb2.Model(specificationVersion=4)
        outer.description.CopyFrom(m.description)
        outer.pipeline.models.add().CopyFrom(m)
        m = outer
    return write_model(d / "x.mlmodel", m)


# -- MIL programs ---------------------------------------------------------------------------------


@case("mil_empty_name", "error", "a MIL op whose 'name' attribute is an empty string tensor: IndexError", "name")
def _mil_empty_name(d: Path) -> Path:
    def edit(m: Model_pb2.Model) -> None:
        op = main_ops(m)[0]
        v = op.attributes["name"]
        v.type.tensorType.rank = 1
        v.type.tensorType.dimensions.add().constant.size = 0
        v.immediateValue.tensor.strings.Clear()
        v.immediateValue.tensor.strings.SetInParent()

    return mil_package(d, edit)


@case("mil_string_as_bytes", "error", "a MIL string value stored as bytes: IndexError", "string")
def _mil_string_bytes(d: Path) -> Path:
    def edit(m: Model_pb2.Model) -> None:
        v = main_ops(m)[0].attributes["name"]
        v.immediateValue.tensor.bytes.values = b"abc"

    return mil_package(d, edit)


@case("mil_dict_tensor_key", "error", "a MIL dictionary attribute whose key is a 2-element tensor: ValueError",
      "dictionary key")
def _mil_dict_key(d: Path) -> Path:
    def edit(m: Model_pb2.Model) -> None:
        v = m.mlProgram.attributes["weird"]
        v.type.dictionaryType.keyType.tensorType.dataType = MIL_pb2.INT32
        v.type.dictionaryType.valueType.tensorType.dataType = MIL_pb2.INT32
        kv = v.immediateValue.dictionary.values.add()
        kv.key.type.tensorType.dataType = MIL_pb2.INT32
        kv.key.type.tensorType.rank = 1
        kv.key.type.tensorType.dimensions.add().constant.size = 2
        kv.key.immediateValue.tensor.ints.values.extend([1, 2])
        kv.value.type.tensorType.dataType = MIL_pb2.INT32
        kv.value.immediateValue.tensor.ints.values.append(3)

    return mil_package(d, edit)


def _add_one_program() -> object:
    """y = x + [1] with a const of its own (the const the cases below rewrite)."""
    from converter.ir.builder import new_program
    from converter.ir.types import tensor

    return new_program({"x": tensor("fp32", [1])}, lambda b, x: [b.add(x=x, y=np.ones(1, np.float32), name="y")])


@case("mil_const_rank100", "error", "a MIL const of rank 100: maximum supported dimension for an ndarray is 64",
      "rank")
def _mil_rank100(d: Path) -> Path:
    def edit(m: Model_pb2.Model) -> None:
        for op in main_ops(m):
            if op.type == "const":
                tt = op.attributes["val"].type.tensorType
                tt.rank = 100
                del tt.dimensions[:]
                for _ in range(100):
                    tt.dimensions.add().constant.size = 1

    return mil_package(d, edit, program=_add_one_program)


@case("mil_input_rank100", "error", "a MIL function input of rank 100", "rank", before="error")
def _mil_input_rank100(d: Path) -> Path:
    def edit(m: Model_pb2.Model) -> None:
        tt = m.mlProgram.functions["main"].inputs[0].type.tensorType
        tt.rank = 100
        del tt.dimensions[:]
        for _ in range(100):
            tt.dimensions.add().constant.size = 1

    return mil_package(d, edit)


@case("mil_const_huge_shape", "error", "a MIL const of shape [2^62, 0] (no elements, absurd dims)",
      "dimension")
def _mil_huge_shape(d: Path) -> Path:
    def edit(m: Model_pb2.Model) -> None:
        for op in main_ops(m):
            if op.type == "const":
                v = op.attributes["val"]
                tt = v.type.tensorType
                tt.rank = 2
                del tt.dimensions[:]
                tt.dimensions.add().constant.size = 1 << 62
                tt.dimensions.add().constant.size = 0
                v.immediateValue.tensor.floats.Clear()
                v.immediateValue.tensor.floats.SetInParent()

    return mil_package(d, edit, program=_add_one_program)


@case("mil_while_true", "error", "--check of a MIL while_loop whose condition is always true: never ended",
      "iterations", before="hang")
def _mil_while_true(d: Path) -> Path:
    def program() -> object:
        from converter.ir.builder import new_program
        from converter.ir.types import tensor

        def body(b, x):  # noqa: ANN001
            (out,) = b.while_loop([x], lambda cb, v: cb.const(np.bool_(True)), lambda bb, v: [bb.relu(x=v)])
            return [b.relu(x=out, name="y")]

        return new_program({"x": tensor("fp32", [3])}, body)

    return mil_package(d, program=program)


@case("mil_nested_while_1e3_x_1e3", "error",
      "two nested while_loops of 1,000 iterations each (a million in all: each loop under a per-loop bound)",
      "iterations", before="hang")
def _mil_nested_while(d: Path) -> Path:
    def program() -> object:
        from converter.ir.builder import new_program
        from converter.ir.types import tensor

        def count_to(b, n, x, body):  # noqa: ANN001 - (i, x) -> (i + 1, body(x)) while i < n
            def step(bb, i, v):  # noqa: ANN001
                return [bb.add(x=i, y=np.int32(1)), body(bb, v)]

            return b.while_loop([b.const(np.int32(0)), x], lambda cb, i, v: cb.less(x=i, y=np.int32(n)), step)[1]

        def outer_body(b, x):  # noqa: ANN001
            return count_to(b, 1000, x, lambda bb, v: bb.relu(x=v))

        return new_program({"x": tensor("fp32", [3])},
                           lambda b, x: [b.relu(x=count_to(b, 1000, x, outer_body), name="y")])

    return mil_package(d, program=program)


@case("mil_make_list_2p31", "error", "a MIL make_list of init_length 2^31 - 1: a 16 GB list of empty slots",
      "make_list", before="memory")
def _mil_make_list(d: Path) -> Path:
    def program() -> object:
        from converter.ir.builder import new_program
        from converter.ir.types import tensor

        def body(b, x):  # noqa: ANN001
            ls = b.make_list(init_length=np.int32(2**31 - 1), elem_shape=[np.int32(3)], dtype="fp32",
                             dynamic_length=False)
            return [b.add(x=x, y=b.cast(x=b.list_length(ls=ls), dtype="fp32"), name="y")]

        return new_program({"x": tensor("fp32", [3])}, body)

    return mil_package(d, program=program)


@case("mil_blob_huge_offset", "error", "a MIL blob value whose offset is 2^63 - 1", "offset", before="error")
def _mil_blob_offset(d: Path) -> Path:
    def program() -> object:
        from converter.ir.builder import new_program
        from converter.ir.types import tensor

        w = np.arange(64, dtype=np.float32).reshape(8, 8)
        return new_program({"x": tensor("fp32", [8])}, lambda b, x: [b.matmul(x=x, y=w, name="y")])

    def edit(m: Model_pb2.Model) -> None:
        for op in main_ops(m):
            for v in op.attributes.values():
                if v.WhichOneof("value") == "blobFileValue":
                    v.blobFileValue.offset = (1 << 63) - 1

    return mil_package(d, edit, program=program)


@case("mil_cond_nested_30", "ok", "cond ops nested 30 deep (protobuf parses about 40)", before="ok")
def _mil_nested(d: Path) -> Path:
    def program() -> object:
        from converter.ir.builder import new_program
        from converter.ir.types import tensor

        def nest(b, x, depth):  # noqa: ANN001
            if depth == 0:
                return [b.relu(x=x)]
            pred = b.const(np.bool_(True))
            return list(b.cond(pred, lambda t: nest(t, x, depth - 1), lambda f: [f.identity(x=x)]))

        return new_program({"x": tensor("fp32", [3])}, lambda b, x: [b.identity(x=nest(b, x, 30)[0], name="y")])

    return mil_package(d, program=program)


# -- by hand ----------------------------------------------------------------------------------------


def write_all(folder: Path) -> dict[str, Path]:
    out = {}
    for name, c in CASES.items():
        sub = folder / name
        sub.mkdir(parents=True)
        out[name] = c.make(sub)
    return out


if __name__ == "__main__":  # pragma: no cover - a tool
    for name, path in write_all(Path(sys.argv[1])).items():
        print(f"{name:32} {path}")
