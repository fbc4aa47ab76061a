"""The ONNX backend's interface: program_to_onnx / save_onnx, converter.save/convert and the
command line with --to onnx, feature names and types, symbolic dims, external data, atomic and
refused writes, the ops table. Values are checked with onnxruntime (the oracle for "the file
is a working ONNX model") and the ONNX checker."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner

import cli
import converter
from converter.backends.onnx import program_to_onnx, save_onnx
from converter.backends.onnx.lowering import LOWERINGS
from converter.destination import DestinationError
from converter.errors import UnsupportedError
from converter.ir.builder import new_program
from converter.ir.types import Symbol, TensorType, fp32

from .helpers import program, run_onnx

MODELS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "models"


def _weighted(n: int = 64):  # noqa: ANN202
    w = np.arange(n * n, dtype=np.float32).reshape(n, n) / (n * n)
    x = np.linspace(-1, 1, n * n, dtype=np.float32).reshape(n, n)
    return program({"x": x}, lambda b, x: b.add(x=x, y=w)), x, x + w


def test_feature_names_kept_exactly_and_typed() -> None:
    x = np.ones((2, 3), np.float32)
    names = {"in put:0": x, "ünï/x": x}
    prog = program(names, lambda b, a, c: [b.relu(x=a, name="out/put 1"), b.cast(x=c, dtype="int32", name="y:0")])
    model = program_to_onnx(prog)
    assert [i.name for i in model.graph.input] == ["in put:0", "ünï/x"]
    assert [o.name for o in model.graph.output] == ["out/put 1", "y:0"]
    out_types = [o.type.tensor_type.elem_type for o in model.graph.output]
    assert out_types == [onnx.TensorProto.FLOAT, onnx.TensorProto.INT32]
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim] == [2, 3]
    onnx.checker.check_model(model, full_check=True)
    got = run_onnx(prog, names)
    assert set(got) == {"out/put 1", "y:0"}


def test_symbolic_dims_are_dim_params() -> None:
    batch = Symbol("batch")
    prog = new_program([("x", TensorType(fp32, (batch, 3)))], lambda b, x: b.sigmoid(x=x))
    model = program_to_onnx(prog)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "batch" and dims[1].dim_value == 3
    assert model.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    sess = ort.InferenceSession(model.SerializeToString())
    for n in (1, 5):
        x = np.linspace(-2, 2, n * 3, dtype=np.float32).reshape(n, 3)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], 1 / (1 + np.exp(-x)), rtol=1e-6)


def test_opset_and_ir_version() -> None:
    prog, _, _ = _weighted(4)
    for opset, ir in ((17, 8), (19, 9), (21, 10)):
        model = program_to_onnx(prog, opset=opset)
        assert [(o.domain, o.version) for o in model.opset_import] == [("", opset)]
        assert model.ir_version == ir
    for bad in (16, 22, "21"):
        with pytest.raises(UnsupportedError, match="opset"):
            program_to_onnx(prog, opset=bad)  # type: ignore[arg-type]


def test_constants_are_initializers_and_const_outputs_get_identity() -> None:
    prog, x, want = _weighted(8)
    model = program_to_onnx(prog)
    assert len(model.graph.initializer) == 1 and model.graph.initializer[0].HasField("raw_data")
    np.testing.assert_array_equal(next(iter(run_onnx(prog, {"x": x}).values())), want)
    c = np.array([1.5, -2.0], np.float32)
    prog = program({"x": x}, lambda b, x: [b.relu(x=x), b.const(c, name="k")])
    got = run_onnx(prog, {"x": x})
    np.testing.assert_array_equal(got["k"], c)


def test_output_that_is_an_input_is_refused() -> None:
    x = np.ones(2, np.float32)
    prog = program({"x": x}, lambda b, x: [x])
    with pytest.raises(UnsupportedError, match="output 'x'"):
        program_to_onnx(prog)


def test_every_unlowered_op_is_named_in_one_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(LOWERINGS, "relu")
    monkeypatch.delitem(LOWERINGS, "sigmoid")
    x = np.ones(2, np.float32)
    prog = program({"x": x}, lambda b, x: [b.relu(x=x, name="r1"), b.exp(x=b.sigmoid(x=x, name="s1"))])
    with pytest.raises(UnsupportedError) as info:
        program_to_onnx(prog)
    msg = str(info.value)
    assert "2 ops have no ONNX" in msg and "relu 'r1'" in msg and "sigmoid 's1'" in msg and "exp" not in msg


def test_gelu_needs_no_opset_20_thanks_to_its_decomposition() -> None:
    from converter.backends.onnx.lowering import onnx_entry

    entry = onnx_entry("gelu")
    assert entry["status"] == "direct" and entry["min_opset"] == "20"
    assert entry["below_opset_20"].startswith("decomposed")
    assert onnx_entry("const")["status"] == "direct"


def test_save_is_atomic_checked_and_refuses_to_overwrite(tmp_path: Path) -> None:
    prog, x, want = _weighted(8)
    path = tmp_path / "m.onnx"
    converter.save(prog, path, to="onnx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]  # no temporary left
    onnx.checker.check_model(str(path), full_check=True)
    np.testing.assert_array_equal(ort.InferenceSession(str(path)).run(None, {"x": x})[0], want)
    with pytest.raises(DestinationError, match="already exists"):
        converter.save(prog, path, to="onnx")
    converter.save(prog, path, to="onnx", overwrite=True, opset=18)
    assert onnx.load(str(path)).opset_import[0].version == 18
    other = tmp_path / "notes.onnx"
    other.write_text("my notes")
    with pytest.raises(DestinationError, match="not replaced, even with --overwrite"):
        converter.save(prog, other, to="onnx", overwrite=True)
    assert other.read_text() == "my notes"
    with pytest.raises(DestinationError, match="extension"):
        converter.save(prog, tmp_path / "m.mlpackage", to="onnx")
    with pytest.raises(UnsupportedError, match="not options of --to onnx"):
        converter.save(prog, tmp_path / "n.onnx", to="onnx", layout="nhwc")


def test_external_data_over_the_threshold(tmp_path: Path) -> None:
    prog, x, want = _weighted(64)  # a 16 KiB weight
    path = tmp_path / "big.onnx"
    save_onnx(prog, path, external_threshold=8 << 10)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.onnx", "big.onnx.data"]
    meta = onnx.load(str(path), load_external_data=False)
    (w,) = meta.graph.initializer
    assert w.data_location == onnx.TensorProto.EXTERNAL
    assert {e.key: e.value for e in w.external_data}["location"] == "big.onnx.data"
    onnx.checker.check_model(str(path), full_check=True)
    np.testing.assert_array_equal(ort.InferenceSession(str(path)).run(None, {"x": x})[0], want)
    assert path.stat().st_size < 4096  # the weight is not in the model file
    # a data file the user has is never replaced (nor with overwrite unless it is this model's own)
    other = tmp_path / "o.onnx"
    (tmp_path / "o.onnx.data").write_text("mine")
    with pytest.raises(converter.ConverterError, match="already exists"):
        save_onnx(prog, other, external_threshold=8 << 10)
    assert (tmp_path / "o.onnx.data").read_text() == "mine" and not other.exists()
    save_onnx(prog, path, external_threshold=8 << 10, overwrite=True)  # replacing its own data is fine
    np.testing.assert_array_equal(ort.InferenceSession(str(path)).run(None, {"x": x})[0], want)


def test_program_is_not_modified() -> None:
    from converter.ir.text import print_program

    prog = program({"x": np.ones((2, 2), np.float32)}, lambda b, x: b.floor_div(x=b.gelu(x=x, mode="EXACT"), y=2.0))
    before = print_program(prog)
    program_to_onnx(prog, opset=17)
    assert print_program(prog) == before


def test_cli_convert_to_onnx(tmp_path: Path) -> None:
    src = MODELS / "builder" / "activations_all.mlmodel"
    if not src.exists():
        pytest.skip("shared models not found")
    out = tmp_path / "a.onnx"
    r = CliRunner().invoke(cli.main, ["convert", str(src), "--to", "onnx", "--onnx-opset", "18", "-o", str(out)])
    assert r.exit_code == 0, r.output
    model = onnx.load(str(out))
    assert model.opset_import[0].version == 18
    prog = converter.convert(str(src))
    sess = ort.InferenceSession(str(out))
    x = np.linspace(-3, 3, 60, dtype=np.float32).reshape(4, 3, 5)
    want = converter.run(prog, {"x": x})
    for name, got in zip([o.name for o in sess.get_outputs()], sess.run(None, {"x": x})):
        np.testing.assert_allclose(got, want[name], rtol=1e-5, atol=1e-6, err_msg=name)
    r = CliRunner().invoke(cli.main, ["convert", str(src), "--onnx-opset", "18", "-o", str(tmp_path / "b.mlpackage")])
    assert r.exit_code != 0 and "--onnx-opset is an option of --to onnx" in r.output


def test_ops_json_has_an_onnx_entry_per_op() -> None:
    r = CliRunner().invoke(cli.main, ["ops", "--json"])
    rows = {row["op"]: row for row in json.loads(r.output)}
    assert all("onnx" in row and row["onnx"]["status"] in ("direct", "decomposed", "unsupported")
               for row in rows.values())
    assert rows["relu"]["onnx"]["status"] == "direct"
    assert rows["floor_div"]["onnx"]["status"] == "decomposed"
    assert "ONNX form" in CliRunner().invoke(cli.main, ["ops"]).output.splitlines()[0]


def test_metadata_and_descriptions_are_kept(tmp_path: Path) -> None:
    src = MODELS / "builder" / "activations_all.mlmodel"
    if not src.exists():
        pytest.skip("shared models not found")
    from converter.formats.model_file import read_model_file
    from converter.formats.proto import Model_pb2

    spec = read_model_file(src).model
    spec.description.metadata.author = "A. Author"
    spec.description.metadata.shortDescription = "activations"
    spec.description.metadata.userDefined["origin"] = "test"
    spec.description.input[0].shortDescription = "the input"
    assert isinstance(spec, Model_pb2.Model)
    path = tmp_path / "m.mlmodel"
    path.write_bytes(spec.SerializeToString())
    model = program_to_onnx(converter.convert(str(path)))
    assert model.doc_string == "activations"
    assert {p.key: p.value for p in model.metadata_props} == {"author": "A. Author", "origin": "test"}
    assert model.graph.input[0].doc_string == "the input"
