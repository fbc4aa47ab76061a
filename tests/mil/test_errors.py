"""Issue 3, malformed MIL packages: each is a package we wrote (or a copy of a shared one) with one
hand-made defect, edited in its proto or bytes; loading it raises a converter.errors exception
whose message names the file and, where they apply, the function, the op and the field."""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import converter
from converter.errors import ConverterError, FormatError, TypeInferenceError, UnsupportedError
from converter.formats.proto import MIL_pb2, Model_pb2
from converter.ir.builder import new_program
from converter.ir.types import tensor

from .helpers import TORCH

MODEL_FILE = Path("Data/com.apple.CoreML/model.mlmodel")
WEIGHT_FILE = Path("Data/com.apple.CoreML/weights/weight.bin")


def _program():
    """conv (weight in the blob file) -> cond whose branches read the conv -> add."""

    def body(b, x):
        w = np.linspace(-1, 1, 54, dtype=np.float32).reshape(3, 2, 3, 3)
        y = b.conv(x=x, weight=w, name="conv")
        p = b.greater(x=b.reduce_sum(x=y, name="total"), y=0.0, name="positive")
        (r,) = b.cond(p, lambda t: [t.relu(x=y, name="inner")], lambda f: [f.sigmoid(x=y, name="inner_sigmoid")],
                      name="branch")
        return [b.add(x=r, y=1.0, name="out")]

    return new_program({"x": tensor("fp32", [1, 2, 5, 5])}, body)


@pytest.fixture
def package(tmp_path: Path) -> Path:
    path = converter.save(_program(), tmp_path / "model.mlpackage")
    converter.load(path)  # the unedited package is fine
    return path


def edit_model(pkg: Path, edit: Callable[[Model_pb2.Model], None]) -> None:
    m = Model_pb2.Model()
    m.ParseFromString((pkg / MODEL_FILE).read_bytes())
    edit(m)
    (pkg / MODEL_FILE).write_bytes(m.SerializeToString())


def main_ops(m: Model_pb2.Model) -> dict[str, MIL_pb2.Operation]:
    """Ops of the main block (and of nested blocks, by first output or name) by name."""
    fn = m.mlProgram.functions["main"]
    out: dict[str, MIL_pb2.Operation] = {}

    def walk(block: MIL_pb2.Block) -> None:
        for op in block.operations:
            out[op.outputs[0].name if op.outputs else op.attributes["name"].immediateValue.tensor.strings.values[0]] = op
            for b in op.blocks:
                walk(b)

    walk(fn.block_specializations[fn.opset])
    return out


def check(exc: ConverterError, cls: type, file: Path, *, function: str | None = None, op: str | None = None,
          field: str | None = None, says: str = "") -> None:
    """``exc`` is a ``cls`` naming ``file`` (and function, op and field) in its one-line message."""
    text = str(exc)
    assert isinstance(exc, cls), f"{type(exc).__name__}: {text}"
    assert "\n" not in text
    assert exc.file == str(file) and f"file '{file}'" in text, text
    if function is not None:
        assert exc.function == function and f"function '{function}'" in text, text
    if op is not None:
        assert exc.op == op and f"op '{op}'" in text, text
    if field is not None:
        assert exc.field == field and f"field '{field}'" in text, text
    assert says in text, text


def load_error(path: Path) -> ConverterError:
    with pytest.raises(ConverterError) as info:
        converter.load(path)
    return info.value


def test_unknown_op_type(package: Path):
    edit_model(package, lambda m: setattr(main_ops(m)["out"], "type", "frobnicate"))
    check(load_error(package), UnsupportedError, package / MODEL_FILE, function="main", op="out", field="type",
          says="unknown op type 'frobnicate'")


def test_unknown_op_type_in_nested_block(package: Path):
    edit_model(package, lambda m: setattr(main_ops(m)["inner_sigmoid"], "type", "frobnicate"))
    check(load_error(package), UnsupportedError, package / MODEL_FILE, function="main", op="inner_sigmoid",
          field="type", says="unknown op type 'frobnicate'")


def test_unknown_opset(package: Path):
    def edit(m: Model_pb2.Model) -> None:
        fn = m.mlProgram.functions["main"]
        fn.block_specializations["CoreML42"].CopyFrom(fn.block_specializations[fn.opset])
        del fn.block_specializations[fn.opset]
        fn.opset = "CoreML42"

    edit_model(package, edit)
    check(load_error(package), UnsupportedError, package / MODEL_FILE, function="main", field="opset",
          says="unknown opset 'CoreML42'")


def test_reference_to_undefined_name(package: Path):
    edit_model(package, lambda m: setattr(main_ops(m)["out"].inputs["x"].arguments[0], "name", "nowhere"))
    check(load_error(package), FormatError, package / MODEL_FILE, function="main", op="out", field="x",
          says="refers to 'nowhere', which is not defined before this use")


def test_reference_before_definition(package: Path):
    # 'conv' reads 'out', which the last op defines: not visible yet
    edit_model(package, lambda m: setattr(main_ops(m)["conv"].inputs["x"].arguments[0], "name", "out"))
    check(load_error(package), FormatError, package / MODEL_FILE, function="main", op="conv", field="x",
          says="refers to 'out', which is not defined before this use")


def test_reference_out_of_scope(package: Path):
    # 'inner' is defined inside the cond's first block; 'out' is outside it
    edit_model(package, lambda m: setattr(main_ops(m)["out"].inputs["x"].arguments[0], "name", "inner"))
    check(load_error(package), FormatError, package / MODEL_FILE, function="main", op="out", field="x",
          says="refers to 'inner', which is defined inside a nested block of op 'branch' and is not visible here")


def test_block_output_out_of_scope(package: Path):
    def edit(m: Model_pb2.Model) -> None:
        fn = m.mlProgram.functions["main"]
        fn.block_specializations[fn.opset].outputs[0] = "inner"

    edit_model(package, edit)
    check(load_error(package), FormatError, package / MODEL_FILE, function="main", field="block.outputs",
          says="refers to 'inner', which is defined inside a nested block of op 'branch'")


def test_type_the_op_does_not_accept(package: Path):
    # the function input becomes int32, and conv does not take int32
    def edit(m: Model_pb2.Model) -> None:
        m.mlProgram.functions["main"].inputs[0].type.tensorType.dataType = MIL_pb2.INT32
        m.description.input[0].type.multiArrayType.dataType = 131104  # INT32

    edit_model(package, edit)
    check(load_error(package), TypeInferenceError, package / MODEL_FILE, function="main", op="conv", field="x",
          says="parameter 'x' has dtype int32; conv accepts fp16, fp32")


def test_declared_output_type_disagrees_with_inference(package: Path):
    edit_model(package, lambda m: main_ops(m)["conv"].outputs[0].type.tensorType.dimensions[1].constant.__setattr__(
        "size", 4))
    check(load_error(package), TypeInferenceError, package / MODEL_FILE, function="main", op="conv",
          field="outputs", says="output 'conv' is declared tensor<fp32, [1, 4, 3, 3]>, but conv produces")


def test_missing_weight_file(package: Path):
    (package / WEIGHT_FILE).unlink()
    check(load_error(package), FormatError, package / MODEL_FILE, function="main", op="conv_weight",
          field="blobFileValue.fileName", says="weight file '@model_path/weights/weight.bin' is missing")


def _blob_value(m: Model_pb2.Model) -> MIL_pb2.Value:
    return main_ops(m)["conv_weight"].attributes["val"]


def test_blob_offset_outside_the_file(package: Path):
    size = (package / WEIGHT_FILE).stat().st_size
    edit_model(package, lambda m: setattr(_blob_value(m).blobFileValue, "offset", size + 4096))
    e = load_error(package)
    check(e, FormatError, package / WEIGHT_FILE, function="main", op="conv_weight",
          says=f"offset past end of file ({size} bytes)")
    assert e.offset == size + 4096


def test_blob_offset_outside_the_file_real_model(tmp_path: Path):
    """The same defect in a copy of a coremltools-written package."""
    pkg = shutil.copytree(TORCH / "mlp_mlprogram.mlpackage", tmp_path / "mlp.mlpackage")
    m = Model_pb2.Model()
    m.ParseFromString((pkg / MODEL_FILE).read_bytes())
    fn = m.mlProgram.functions["main"]
    op = next(o for o in fn.block_specializations[fn.opset].operations
              if o.type == "const" and o.attributes["val"].WhichOneof("value") == "blobFileValue")
    op.attributes["val"].blobFileValue.offset = 1 << 40
    (pkg / MODEL_FILE).write_bytes(m.SerializeToString())
    check(load_error(pkg), FormatError, pkg / WEIGHT_FILE, function="main", op=op.outputs[0].name,
          says="offset past end of file")


def _metadata_offset(m_path: Path) -> int:
    m = Model_pb2.Model()
    m.ParseFromString(m_path.read_bytes())
    return int(_blob_value(m).blobFileValue.offset)


def test_blob_size_disagrees_with_declared_shape(package: Path):
    # the blob's metadata says 36 fp32 values; the model declares [3, 2, 3, 3] = 54
    off = _metadata_offset(package / MODEL_FILE)
    data = bytearray((package / WEIGHT_FILE).read_bytes())
    struct.pack_into("<Q", data, off + 8, 36 * 4)
    (package / WEIGHT_FILE).write_bytes(bytes(data))
    check(load_error(package), FormatError, package / WEIGHT_FILE, function="main", op="conv_weight",
          field="sizeInBytes", says="blob holds 36 fp32 elements (144 bytes), the model declares 54")


def test_declared_shape_disagrees_with_blob_size(package: Path):
    def edit(m: Model_pb2.Model) -> None:
        for vt in (_blob_value(m).type, main_ops(m)["conv_weight"].outputs[0].type):
            vt.tensorType.dimensions[0].constant.size = 2

    edit_model(package, edit)
    check(load_error(package), FormatError, package / WEIGHT_FILE, function="main", op="conv_weight",
          field="sizeInBytes", says="blob holds 54 fp32 elements (216 bytes), the model declares 36")


def test_blob_dtype_disagrees_with_declared_type(package: Path):
    off = _metadata_offset(package / MODEL_FILE)
    data = bytearray((package / WEIGHT_FILE).read_bytes())
    struct.pack_into("<I", data, off + 4, 1)  # dtype code 1: fp16
    (package / WEIGHT_FILE).write_bytes(bytes(data))
    check(load_error(package), FormatError, package / WEIGHT_FILE, function="main", op="conv_weight",
          field="dtype", says="blob holds fp16 data but the model declares fp32")


def test_immediate_value_dtype_disagrees_with_declared_type(package: Path):
    # the add's constant 1.0 declared int32 but holding the float 1.5
    def edit(m: Model_pb2.Model) -> None:
        val = main_ops(m)["out_y"].attributes["val"]
        val.type.tensorType.dataType = MIL_pb2.INT32
        val.immediateValue.tensor.floats.values[:] = [1.5]

    edit_model(package, edit)
    check(load_error(package), FormatError, package / MODEL_FILE, function="main", op="out_y",
          field="attributes.val", says="floats value 1.5 does not fit the declared dtype int32: not an integer")


def test_const_declared_type_disagrees_with_its_value(package: Path):
    edit_model(package, lambda m: setattr(main_ops(m)["out_y"].outputs[0].type.tensorType, "dataType",
                                          MIL_pb2.FLOAT16))
    check(load_error(package), FormatError, package / MODEL_FILE, function="main", op="out_y", field="outputs",
          says="const value of type tensor<fp32, []> declared as tensor<fp16, []>")


@pytest.mark.parametrize("bad_path", ["../../outside/model.mlmodel", "/etc/passwd",
                                      "com.apple.CoreML/../../../outside/model.mlmodel"])
def test_manifest_points_outside_the_package(package: Path, bad_path: str):
    outside = package.parent / "outside"
    outside.mkdir(exist_ok=True)
    shutil.copy(package / MODEL_FILE, outside / "model.mlmodel")  # a valid model is waiting there
    manifest = json.loads((package / "Manifest.json").read_text())
    root = manifest["rootModelIdentifier"]
    manifest["itemInfoEntries"][root]["path"] = bad_path
    (package / "Manifest.json").write_text(json.dumps(manifest))
    check(load_error(package), FormatError, package / "Manifest.json", field=f"itemInfoEntries.{root}.path",
          says="escapes the package")


def test_manifest_symlink_outside_the_package(package: Path):
    outside = package.parent / "outside"
    shutil.copytree(package / "Data", outside)
    shutil.rmtree(package / "Data")
    (package / "Data").symlink_to(outside, target_is_directory=True)
    e = load_error(package)
    check(e, FormatError, package / "Manifest.json", says="outside the package (symlink)")
    assert e.field is not None and e.field.startswith("itemInfoEntries.")


def test_weight_file_name_outside_the_package(package: Path):
    edit_model(package, lambda m: setattr(_blob_value(m).blobFileValue, "fileName", "@model_path/../../../w.bin"))
    check(load_error(package), FormatError, package / MODEL_FILE, function="main", op="conv_weight",
          field="blobFileValue.fileName", says="escapes the package")


def test_not_a_model_file(tmp_path: Path):
    bad = tmp_path / "x.mlmodel"
    bad.write_bytes(b"\xff\xff\xff\xff not a protobuf")
    check(load_error(bad), FormatError, bad, says="not a Core ML model")


def test_scalar_function_input_is_refused_with_the_input_named(tmp_path):
    """Core ML model inputs have rank >= 1 (coremltools' own builder refuses rank-0 inputs too)."""
    import pytest

    import converter
    from converter.errors import UnsupportedError
    from converter.ir.builder import new_program
    from converter.ir.types import tensor

    prog = new_program({"s": tensor("fp32", [])}, lambda b, s: [b.mul(x=s, y=2.0, name="twice")])
    with pytest.raises(UnsupportedError, match="input 's' is a scalar"):
        converter.save(prog, tmp_path / "scalar.mlpackage")
    assert not (tmp_path / "scalar.mlpackage").exists()
