"""ONNX -> IR -> ONNX keeps the graph's interface element types: the IR holds int64, uint32,
double, bool, int8 ... features in int32/fp32 (the Core ML interface), and the ONNX writer
declares them as the source model did, with a Cast at the graph's edge. The oracle is onnxruntime
on the source model."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

import converter

ort = pytest.importorskip("onnxruntime")


def _model(path):  # noqa: ANN001, ANN202
    nodes = [helper.make_node("Gather", ["table", "idx"], ["g"], axis=0),
             helper.make_node("Cast", ["g"], ["y"], to=T.DOUBLE),
             helper.make_node("Greater", ["g", "zero"], ["pos"]),
             helper.make_node("Add", ["idx", "one"], ["idx1"]),
             helper.make_node("Cast", ["x64"], ["x32"], to=T.FLOAT),
             helper.make_node("Mul", ["x32", "x32"], ["sq32"]),
             helper.make_node("Cast", ["sq32"], ["sq"], to=T.DOUBLE),
             helper.make_node("Not", ["flag"], ["nflag"]),
             helper.make_node("Add", ["u8", "u8"], ["u8x2"]),
             helper.make_node("Identity", ["f"], ["f_out"])]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("idx", T.INT64, [3]), helper.make_tensor_value_info("table", T.FLOAT, [5, 2]),
         helper.make_tensor_value_info("x64", T.DOUBLE, [2]), helper.make_tensor_value_info("flag", T.BOOL, [2]),
         helper.make_tensor_value_info("u8", T.UINT8, [4]), helper.make_tensor_value_info("f", T.FLOAT, [2])],
        [helper.make_tensor_value_info("y", T.DOUBLE, [3, 2]), helper.make_tensor_value_info("pos", T.BOOL, [3, 2]),
         helper.make_tensor_value_info("idx1", T.INT64, [3]), helper.make_tensor_value_info("sq", T.DOUBLE, [2]),
         helper.make_tensor_value_info("nflag", T.BOOL, [2]), helper.make_tensor_value_info("u8x2", T.UINT8, [4]),
         helper.make_tensor_value_info("f_out", T.FLOAT, [2])],
        [helper.make_tensor("zero", T.FLOAT, [], [0.0]), helper.make_tensor("one", T.INT64, [], [1])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


FEEDS = {"idx": np.array([0, 4, -1], np.int64), "table": np.arange(10, dtype=np.float32).reshape(5, 2) - 3,
         "x64": np.array([1.5, -3.25]), "flag": np.array([True, False]), "u8": np.array([1, 2, 100, 200], np.uint8),
         "f": np.array([0.5, 2.0], np.float32)}


def _types(values):  # noqa: ANN001, ANN202
    return {v.name: v.type.tensor_type.elem_type for v in values}


@pytest.mark.parametrize("opset", [17, 21])
def test_onnx_to_onnx_keeps_the_interface_element_types(tmp_path, opset):
    src, out = tmp_path / "in.onnx", tmp_path / "out.onnx"
    _model(src)
    converter.convert(src, to="onnx", out=out, opset=opset)
    a, b = onnx.load(str(src)), onnx.load(str(out))
    assert _types(b.graph.input) == _types(a.graph.input)
    assert _types(b.graph.output) == _types(a.graph.output)
    want = ort.InferenceSession(str(src)).run(None, FEEDS)
    got = ort.InferenceSession(str(out)).run(None, FEEDS)
    for o, x, y in zip(a.graph.output, want, got):
        assert x.dtype == y.dtype, o.name
        np.testing.assert_array_equal(y, x, err_msg=o.name)


def test_the_runtime_and_other_targets_keep_the_ir_interface(tmp_path):
    """The in-memory onnxruntime runtime feeds the IR's types (int32, fp32) and gives what the
    interpreter gives; a .mlpackage declares the Core ML interface types."""
    src = tmp_path / "in.onnx"
    _model(src)
    prog = converter.load(src)
    ours = converter.run(prog, FEEDS, runtime="onnxruntime")
    ref = converter.run(prog, FEEDS, runtime="interpreter")
    for k in ref:
        assert ours[k].dtype == ref[k].dtype, k
        np.testing.assert_array_equal(ours[k], ref[k], err_msg=k)
    assert {v.name: v.type.dtype.name for v in prog.main.inputs}["idx"] == "int32"
