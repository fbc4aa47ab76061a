"""load_onnx: sources, errors, external data, symbols, zero-copy weights, opset policy, api/CLI.

Oracles: onnxruntime runs the same ONNX model (value checks); the rest are properties of the
loader stated by its contract (error kinds and messages, views, symbols, untouched inputs).
"""

from __future__ import annotations

import mmap

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import cli
import converter
from converter.errors import FormatError, UnsupportedError
from converter.frontends.onnx import load_onnx
from converter.ir.interpreter import run
from converter.ir.types import Symbol


def _model(nodes, inputs, outputs, inits=(), opset=21):
    g = h.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def _vi(name, et, shape):
    return h.make_tensor_value_info(name, et, shape)


def _ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def _consts(prog):
    return {op.name: op.attributes["val"] for op in prog.main.block.ops if op.type == "const"}


def _weighted_model(n=64):
    w = np.arange(n * 4, dtype=np.float32).reshape(n, 4) / 7
    return _model([h.make_node("Add", ["x", "w"], ["y"])], [_vi("x", T.FLOAT, ["batch", 4])],
                  [_vi("y", T.FLOAT, ["batch", 4])], [numpy_helper.from_array(w, "w")]), w


def test_path_bytes_and_message_give_the_same_program(tmp_path):
    model, w = _weighted_model()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    x = np.ones((64, 4), np.float32)
    want = _ort(model, {"x": x})["y"]
    for src in (path, str(path), model.SerializeToString(), model):
        np.testing.assert_array_equal(run(load_onnx(src), {"x": x})["y"], want)
    np.testing.assert_array_equal(run(converter.load(path), {"x": x})["y"], want)
    np.testing.assert_array_equal(run(converter.load(model), {"x": x})["y"], want)


def test_the_given_message_is_not_modified():
    model, _ = _weighted_model()
    before = model.SerializeToString()
    load_onnx(model)
    assert model.SerializeToString() == before


def test_raw_data_initializers_are_views_not_copies():
    model, w = _weighted_model()
    (val,) = [v for k, v in _consts(load_onnx(model)).items() if k == "w"]
    np.testing.assert_array_equal(val, w)
    assert not val.flags.owndata  # np.frombuffer over the tensor's bytes


def test_large_raw_data_of_a_model_file_stays_in_the_mapped_file(tmp_path):
    model, w = _weighted_model(n=8192)  # 128 KiB of weights: above MAPPED_MIN_BYTES
    small = numpy_helper.from_array(np.arange(4, dtype=np.float32), "small")
    model.graph.initializer.append(small)
    model.graph.node.append(h.make_node("Add", ["y", "small"], ["z"]))
    model.graph.output.append(_vi("z", T.FLOAT, ["batch", 4]))
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    prog = load_onnx(path)
    val = _consts(prog)["w"]
    np.testing.assert_array_equal(val, w)
    owner = val
    while isinstance(owner, np.ndarray):
        owner = owner.base
    assert isinstance(owner, memoryview) and isinstance(owner.obj, mmap.mmap)  # a view of the mapped file
    x = np.ones((8192, 4), np.float32)
    want = _ort(model, {"x": x})
    got = run(prog, {"x": x})
    for k in ("y", "z"):
        np.testing.assert_array_equal(got[k], want[k])


def test_external_data_is_memory_mapped(tmp_path):
    model, w = _weighted_model()
    path = tmp_path / "m.onnx"
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="m.onnx.data",
                    size_threshold=0)
    assert (tmp_path / "m.onnx.data").stat().st_size == w.nbytes
    prog = load_onnx(path)
    val = _consts(prog)["w"]
    assert isinstance(val, np.memmap) or isinstance(val.base, np.memmap)  # a view of the mapped file
    x = np.full((64, 4), 0.5, np.float32)
    np.testing.assert_array_equal(run(prog, {"x": x})["y"], x + w)
    with pytest.raises(FormatError, match="external file 'm.onnx.data'"):
        load_onnx(path.read_bytes())  # no folder to look in
    assert run(load_onnx(path.read_bytes(), base_dir=tmp_path), {"x": x})["y"].shape == (64, 4)


@pytest.mark.parametrize("location", ["../evil.data", "/etc/passwd"])
def test_external_data_outside_the_model_folder_is_refused(tmp_path, location):
    model, _ = _weighted_model()
    t = model.graph.initializer[0]
    t.ClearField("raw_data")
    t.data_location = T.EXTERNAL
    t.external_data.add(key="location", value=location)
    with pytest.raises(FormatError, match="must be a relative path inside the model's folder"):
        load_onnx(model, base_dir=tmp_path)


def test_truncated_external_data_is_a_format_error(tmp_path):
    model, w = _weighted_model()
    path = tmp_path / "m.onnx"
    onnx.save_model(model, path, save_as_external_data=True, location="m.onnx.data", size_threshold=0)
    data = tmp_path / "m.onnx.data"
    data.write_bytes(data.read_bytes()[:100])
    with pytest.raises(FormatError, match="has 100 bytes"):
        load_onnx(path)


def test_dim_params_become_shared_symbols_and_unnamed_dims_fresh_ones():
    model = _model([h.make_node("Add", ["a", "b"], ["c"])],
                   [_vi("a", T.FLOAT, ["N", 3]), _vi("b", T.FLOAT, ["N", None])], [_vi("c", T.FLOAT, ["N", 3])])
    a, b = load_onnx(model).main.inputs
    assert a.type.shape[0] == Symbol("N") and b.type.shape[0] == Symbol("N")
    assert isinstance(b.type.shape[1], Symbol) and b.type.shape[1] != Symbol("N")


def test_interface_uses_core_ml_feature_types():
    """bool / uint8 inputs and outputs are declared int32 and scalars [1] (what Core ML features
    hold); the values are exact and the ONNX types are recorded."""
    model = _model([h.make_node("Not", ["m"], ["n"]), h.make_node("Add", ["u", "s"], ["v"])],
                   [_vi("m", T.BOOL, [3]), _vi("u", T.UINT8, [3]), _vi("s", T.UINT8, [])],
                   [_vi("n", T.BOOL, [3]), _vi("v", T.UINT8, [3])])
    prog = load_onnx(model)
    fn = prog.main
    assert [(v.type.dtype.name, v.type.shape) for v in fn.inputs] == [("int32", (3,)), ("int32", (3,)),
                                                                        ("int32", (1,))]
    assert [v.type.dtype.name for v in fn.outputs] == ["int32", "int32"]
    assert fn.output_info["n"].extra["onnx_elem_type"] == "bool"
    out = run(prog, {"m": np.array([1, 0, 1]), "u": np.array([250, 3, 7]), "s": np.array([10])})
    assert out["n"].tolist() == [0, 1, 0]
    assert out["v"].tolist() == [4, 13, 17]  # uint8 wraps


def test_garbage_is_a_format_error_naming_the_file(tmp_path):
    p = tmp_path / "bad.onnx"
    p.write_bytes(b"\xff\xfe not a protobuf")
    with pytest.raises(FormatError, match="bad.onnx"):
        load_onnx(p)
    with pytest.raises(FormatError, match="cannot read"):
        load_onnx(tmp_path / "missing.onnx")


def test_every_unsupported_op_is_listed_in_one_error():
    nodes = [h.make_node("Relu", ["x"], ["r"]), h.make_node("NonMaxSuppressionX", ["r"], ["a"], domain="custom.dom"),
             h.make_node("StringNormalizer", ["r"], ["d1"], name="sn1"),
             h.make_node("StringNormalizer", ["r"], ["d2"], name="sn2"),
             h.make_node("TfIdfVectorizer", ["i"], ["s"])]
    model = _model(nodes, [_vi("x", T.FLOAT, [2, 2]), _vi("i", T.UINT8, [2])],
                   [_vi("d1", T.FLOAT, []), _vi("d2", T.FLOAT, []), _vi("s", T.UINT8, [2]), _vi("a", T.FLOAT, None)])
    model.opset_import.append(h.make_opsetid("custom.dom", 1))
    with pytest.raises(UnsupportedError) as e:
        load_onnx(model)
    msg = str(e.value)
    assert "3 unsupported ONNX op type(s)" in msg
    for part in ("TfIdfVectorizer", "StringNormalizer", "'sn1', 'sn2'", "custom.dom::NonMaxSuppressionX",
                 "domain 'custom.dom'"):
        assert part in msg
    assert "Relu" not in msg


def test_unsupported_ops_inside_subgraphs_are_listed_up_front_too():
    """Ops of If branches and Loop bodies (nested too) join the one error, named outer/inner,
    before anything is converted."""
    inner_loop = h.make_graph([h.make_node("TfIdfVectorizer", ["x"], ["v"], name="tfidf"),
                               h.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
                              [_vi("i", T.INT64, []), _vi("cond_in", T.BOOL, [])],
                              [_vi("cond_out", T.BOOL, []), _vi("v", T.FLOAT, None)])
    then = h.make_graph([h.make_node("Frobnicate", ["x"], ["t"], domain="com.example", name="frob"),
                         h.make_node("Loop", ["n", "c"], ["t2"], body=inner_loop, name="loop")],
                        "then", [], [_vi("t", T.FLOAT, [2])])
    other = h.make_graph([h.make_node("StringNormalizer", ["x"], ["e"], name="sn")], "else", [], [_vi("e", T.FLOAT, [2])])
    nodes = [h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="branch"),
             h.make_node("Relu", ["x"], ["r"])]
    model = _model(nodes, [_vi("c", T.BOOL, []), _vi("x", T.FLOAT, [2]), _vi("n", T.INT64, [])],
                   [_vi("y", T.FLOAT, [2]), _vi("r", T.FLOAT, [2])])
    model.opset_import.append(h.make_opsetid("com.example", 1))
    with pytest.raises(UnsupportedError) as e:
        load_onnx(model)
    msg = str(e.value)
    assert "3 unsupported ONNX op type(s)" in msg
    for part in ("com.example::Frobnicate", "'branch/frob'", "StringNormalizer", "'branch/sn'", "TfIdfVectorizer",
                 "'branch/loop/tfidf'"):
        assert part in msg


def test_an_op_version_whose_semantics_changed_is_refused_naming_it():
    # Concat before opset 4 defaults its axis to 1 (later versions require it): version 1 is not mapped
    model = _model([h.make_node("Concat", ["a", "b"], ["c"])], [_vi("a", T.FLOAT, [2, 2]), _vi("b", T.FLOAT, [2, 2])],
                   [_vi("c", T.FLOAT, [2, 4])], opset=3)
    with pytest.raises(UnsupportedError, match=r"Concat \(version 1 of the op is not supported"):
        load_onnx(model)


def test_a_newer_opset_is_accepted_where_the_op_is_unchanged():
    model = _model([h.make_node("Relu", ["a"], ["c"])], [_vi("a", T.FLOAT, [3])], [_vi("c", T.FLOAT, [3])],
                   opset=onnx.defs.onnx_opset_version())
    np.testing.assert_array_equal(run(load_onnx(model), {"a": np.array([-1, 0, 2], np.float32)})["c"], [0, 0, 2])


def test_an_opset_newer_than_onnx_knows_is_refused():
    model = _model([h.make_node("Relu", ["a"], ["c"])], [_vi("a", T.FLOAT, [3])], [_vi("c", T.FLOAT, [3])])
    model.opset_import[0].version = onnx.defs.onnx_opset_version() + 1
    with pytest.raises(UnsupportedError, match="knows opsets up to"):
        load_onnx(model)


def test_int64_is_held_as_int32_and_out_of_range_constants_are_refused():
    big = numpy_helper.from_array(np.array([2**40], np.int64), "big")
    model = _model([h.make_node("Add", ["a", "big"], ["c"])], [_vi("a", T.INT64, [1])], [_vi("c", T.INT64, [1])],
                   [big])
    with pytest.raises(UnsupportedError, match="tensor 'big'.*outside the int32 range"):
        load_onnx(model)
    small = numpy_helper.from_array(np.array([-5], np.int64), "big")
    model.graph.initializer[0].CopyFrom(small)
    prog = load_onnx(model)
    assert prog.main.inputs[0].type.dtype.name == "int32"
    assert prog.main.output_info["c"].extra["onnx_elem_type"] == "int64"
    assert run(prog, {"a": np.array([7])})["c"].tolist() == [2]


@pytest.mark.parametrize("nodes,match", [
    ([h.make_node("Add", ["a", "nowhere"], ["c"], name="the_add")], "'nowhere' is not a graph input"),
    ([h.make_node("Relu", ["b"], ["c"], name="first"), h.make_node("Relu", ["a"], ["b"], name="second")],
     "output of an earlier node"),
    ([h.make_node("Relu", ["a"], ["c"], name="one"), h.make_node("Relu", ["a"], ["c"], name="two")],
     "'c' is defined twice"),
])
def test_malformed_graphs_are_format_errors_naming_the_node(nodes, match):
    model = _model(nodes, [_vi("a", T.FLOAT, [2])], [_vi("c", T.FLOAT, [2])])
    with pytest.raises(FormatError, match=match) as e:
        load_onnx(model)
    assert e.value.op is not None


def test_graph_outputs_keep_their_names_when_they_are_inputs_or_constants():
    k = numpy_helper.from_array(np.array([1.5], np.float32), "k")
    model = _model([h.make_node("Identity", ["x"], ["same"]), h.make_node("Identity", ["k"], ["kk"])],
                   [_vi("x", T.FLOAT, [1])], [_vi("same", T.FLOAT, [1]), _vi("kk", T.FLOAT, [1]), _vi("x", T.FLOAT, [1])],
                   [k])
    prog = load_onnx(model)
    assert [v.name for v in prog.main.outputs] == ["same", "kk", "x"]
    out = run(prog, {"x": np.array([2.0], np.float32)})
    assert out == {"same": [2.0], "kk": [1.5], "x": [2.0]}


def test_cli_converts_an_onnx_model_to_mil(tmp_path):
    model, w = _weighted_model()
    src = tmp_path / "m.onnx"
    onnx.save(model, src)
    out = tmp_path / "m.mlpackage"
    r = CliRunner().invoke(cli.main, ["convert", str(src), "--to", "mil", "-o", str(out)])
    assert r.exit_code == 0, r.output
    x = np.full((64, 4), 2.0, np.float32)
    np.testing.assert_allclose(run(converter.load(out), {"x": x})["y"], _ort(model, {"x": x})["y"])


def test_convert_api_takes_an_onnx_path(tmp_path):
    model, w = _weighted_model()
    src = tmp_path / "m.onnx"
    onnx.save(model, src)
    prog = converter.convert(src, to="mil", out=tmp_path / "m.mlpackage")
    x = np.full((64, 4), -1.5, np.float32)
    want = _ort(model, {"x": x})["y"]
    np.testing.assert_allclose(converter.run(prog, {"x": x})["y"], want)
    np.testing.assert_allclose(run(converter.load(tmp_path / "m.mlpackage"), {"x": x})["y"], want)
    assert src.read_bytes() == model.SerializeToString()  # the source is never written
