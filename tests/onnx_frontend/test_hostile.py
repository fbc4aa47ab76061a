"""Hostile ONNX files: byte-level corruption and hand-crafted bad attributes/shapes. Whatever the
file, load_onnx either returns a program or raises a converter error (FormatError or
UnsupportedError naming the file) — never another exception, a hang or unbounded memory."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from converter.errors import ConverterError, FormatError, UnsupportedError
from converter.frontends.onnx import load_onnx
from converter.ir.interpreter import run


def _cnn() -> bytes:
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    shape = numpy_helper.from_array(np.array([0, -1], np.int64), "shape")
    nodes = [h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
             h.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], ceil_mode=1),
             h.make_node("Reshape", ["p", "shape"], ["r"]),
             h.make_node("Softmax", ["r"], ["y"], axis=-1)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["N", 3, 8, 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], [w, shape])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


def _load_and_maybe_run(data: bytes) -> None:
    try:
        prog = load_onnx(data)
    except (FormatError, UnsupportedError):
        return
    try:
        run(prog, {"x": np.ones((1, 3, 8, 8), np.float32)}, max_tensor_bytes=1 << 24)
    except ConverterError:
        pass


def test_corrupted_bytes_give_converter_errors_only():
    base = _cnn()
    rng = np.random.default_rng(12)
    for _ in range(300):
        data = bytearray(base)
        kind = rng.integers(3)
        if kind == 0:  # flip a few bytes
            for i in rng.integers(0, len(data), 4):
                data[i] = int(rng.integers(256))
        elif kind == 1:  # truncate
            data = data[: int(rng.integers(1, len(data)))]
        else:  # duplicate a slice
            i, j = sorted(rng.integers(0, len(data), 2))
            data = data[:j] + data[i:j] + data[j:]
        _load_and_maybe_run(bytes(data))


@pytest.mark.parametrize("node", [
    h.make_node("Conv", ["x", "w"], ["y"], pads=[-1, 0, 0, 0]),
    h.make_node("Conv", ["x", "w"], ["y"], strides=[0, 1]),
    h.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[9, 9]),
    h.make_node("Conv", ["x", "w"], ["y"], auto_pad="SIDEWAYS"),
    h.make_node("MaxPool", ["x"], ["y"], kernel_shape=[100, 100]),
    h.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[1 << 20, 1]),
    h.make_node("Transpose", ["x"], ["y"], perm=[0, 0, 1, 2]),
    h.make_node("Softmax", ["x"], ["y"], axis=7),
    h.make_node("Split", ["x"], ["y", "z"], axis=1, split=[1, 5]),
    h.make_node("Mod", ["x", "x"], ["y"], fmod=3),
    h.make_node("Gelu", ["x"], ["y"], approximate="cubic"),
    h.make_node("Flatten", ["x"], ["y"], axis=9),
    h.make_node("Squeeze", ["x"], ["y"], axes=[1]),
])
def test_bad_attributes_are_converter_errors(node):
    w = numpy_helper.from_array(np.ones((2, 3, 3, 3), np.float32), "w")
    inputs = [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 6, 6])]
    outs = [h.make_tensor_value_info(o, T.FLOAT, None) for o in node.output]
    opset = 11 if node.op_type in ("Split", "Squeeze") else 20
    model = h.make_model(h.make_graph([node], "g", inputs, outs, [w] if "w" in node.input else []),
                         opset_imports=[h.make_opsetid("", opset)])
    with pytest.raises((FormatError, UnsupportedError)) as e:
        load_onnx(model)
    assert e.value.file == "<ModelProto>"


def test_a_huge_constant_of_shape_costs_nothing_until_run():
    shape = numpy_helper.from_array(np.array([1 << 20, 1 << 20], np.int64), "s")
    g = h.make_graph([h.make_node("ConstantOfShape", ["s"], ["y"])], "g", [],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], [shape])
    prog = load_onnx(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]))
    with pytest.raises(ConverterError, match="more than the interpreter's limit"):
        run(prog, {}, max_tensor_bytes=1 << 20)


@pytest.mark.parametrize("where", ["input", "node", "op_type"])
def test_a_name_that_is_not_utf8_is_a_format_error(where):
    """onnx.proto is proto2: a string field may hold any bytes, which protobuf hands out as bytes
    (found by fuzzing: a value name of bytes crashed the MIL writer)."""
    nodes = [h.make_node("Relu", ["zzqq"], ["r"], name="nnmm"), h.make_node("Zyxw", ["r"], ["y"], domain="x.y")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("zzqq", T.FLOAT, [2])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2])])
    data = h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()
    token = {"input": b"zzqq", "node": b"nnmm", "op_type": b"Zyxw"}[where]
    bad = data.replace(token, b"\xff\xfe\xfd\xfc")
    with pytest.raises(FormatError, match="is not valid UTF-8 text") as e:
        load_onnx(bad)
    assert e.value.file == "<bytes>"
    assert {"input": "graph.", "node": "node[0].name", "op_type": "node[1].op_type"}[where] in str(e.value)


def test_a_huge_declared_dim_is_not_unrolled():
    """Found by the ONNX fuzzer (seed 202156): SplitToSequence without split makes one item per
    element of the axis; a declared dim of 2^32 - 1 made the converter build a list of that many
    (MemoryError). Such a dim is now refused when read; one within the IR's limit (2^31 - 1) is
    refused before anything is unrolled."""
    g = h.make_graph([h.make_node("SplitToSequence", ["x"], ["s"], axis=0),
                      h.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [2**31 - 1, 2])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    with pytest.raises(UnsupportedError, match="2147483647 would be unrolled"):
        load_onnx(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]))


def test_a_constant_table_the_size_of_a_huge_declared_dim_is_refused_before_it_is_made():
    """Blocked DequantizeLinear expands its scales with a gather of i // block_size for every i
    along the axis: that index table is refused past the tensor limit, not allocated."""
    g = h.make_graph([h.make_node("DequantizeLinear", ["x", "s"], ["y"], axis=0, block_size=4)], "g",
                     [h.make_tensor_value_info("x", T.INT8, [2**30]), h.make_tensor_value_info("s", T.FLOAT, [2**28])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    with pytest.raises(UnsupportedError, match="over the 256 MiB tensor limit"):
        load_onnx(h.make_model(g, opset_imports=[h.make_opsetid("", 21)]))


@pytest.mark.parametrize("length, error, match", [
    (2**63 - 1, FormatError, "declares a dimension of 9223372036854775807"),
    (2**31 - 1, UnsupportedError, "declares 2147483647 entries, so a rank over 32"),
])
def test_sizes_onnx_shape_inference_would_allocate_for_are_refused_first(length, error, match):
    """Found by the ONNX fuzzer (seed 301058): Expand's shape operand declared with 2^63 - 1
    entries made onnx's own shape inference allocate a result of that rank (std::bad_alloc past
    1 GiB). Declared dims over 2^31 - 1, and shape-like operands longer than a rank can be, are
    refused before inference runs."""
    g = h.make_graph([h.make_node("Expand", ["x", "shape"], ["y"])], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 1]),
                      h.make_tensor_value_info("shape", T.INT64, [length])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    with pytest.raises(error, match=match) as e:
        load_onnx(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]))
    assert e.value.file == "<ModelProto>"
