"""Malformed WebNN graph files are refused with a FormatError naming the file (and the operator or
field), never a traceback or unbounded memory; random damage to valid graphs gives either a program
or a ConverterError."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import converter
from converter.errors import ConverterError, FormatError, UnsupportedError
from converter.frontends.webnn.graph import graph_from_dict
from converter.frontends.webnn.to_ir import graph_to_program

from .conformance import load_cases, op_files, to_graph_doc
from .modules import graph_doc, op


def _valid() -> dict:
    x = np.ones((2, 3), np.float32)
    return graph_doc([op("add", ("a", "x"), ("b", "c"), outputs="y")], {"y": "y"}, inputs={"x": x},
                     constants={"c": x})


def _write(tmp_path: Path, doc: dict, blob: bytes | None = None) -> Path:
    path = tmp_path / "g.webnn.json"
    path.write_text(json.dumps(doc))
    if blob is not None:
        (tmp_path / "g.webnn.bin").write_bytes(blob)
    return path


def _with(change) -> dict:  # noqa: ANN001
    doc = _valid()
    change(doc)
    return doc


def _bin_constant(doc: dict, **fields) -> None:  # noqa: ANN003
    doc["weights"] = "g.webnn.bin"
    doc["constants"]["c"] = {"descriptor": {"dataType": "float32", "shape": [2, 3]}} | fields


@pytest.mark.parametrize(("change", "needles"), [
    (lambda d: d["operators"][0].update(name="conv3d"), ["unknown WebNN operation 'conv3d'"]),
    (lambda d: d["operators"][0]["arguments"][1].update(b="nowhere"), ["add", "b:", "not an operand defined"]),
    (lambda d: d["operators"][0]["arguments"].append({"options": {"pads": [0]}}), ["add", "unknown option 'pads'"]),
    (lambda d: d["operators"][0]["arguments"].reverse(), ["arguments are ['b', 'a']"]),
    (lambda d: d["inputs"]["x"]["descriptor"].update(shape=[2, -3]), ["inputs.x", "dimension -3 is negative"]),
    (lambda d: d["inputs"]["x"]["descriptor"].update(shape=[1 << 30, 1 << 30]), ["inputs.x", "elements"]),
    (lambda d: d["inputs"]["x"].update(descriptor={"dataType": "float32", "dimensions": [2, 3]}), ["dimensions"]),
    (lambda d: d["inputs"]["x"]["descriptor"].update(dataType="bool"), ["unknown dataType 'bool'"]),
    (lambda d: d["constants"]["c"].update(data=[1, 2]), ["constants.c", "2 values for a tensor of 6 elements"]),
    (lambda d: d["constants"]["c"].update(descriptor={"dataType": "float32", "shape": [1 << 20, 1 << 20]}, data=0),
     ["constants.c", "too large"]),
    (lambda d: d.update(outputs={"y": "t99"}), ["outputs", "'t99', which nothing defines"]),
    (lambda d: d.update(version=2), ["version 2 is not supported"]),
    (lambda d: d.update(format="onnx"), ["not a WebNN graph file"]),
    (lambda d: d.update(weights="../etc/passwd"), ["weights", "a file name beside the graph file"]),
    (lambda d: _bin_constant(d, offset=16, byteLength=24), ["constants.c", "beyond the end of the weights file (32 bytes)"]),
    (lambda d: _bin_constant(d, offset=0, byteLength=(1 << 62)), ["byteLength"]),
    (lambda d: _bin_constant(d, offset=2, byteLength=24), ["not aligned"]),
    (lambda d: d["operators"].append(op("relu", ("input", "x"), outputs="y")), ["'y' is defined twice"]),
    (lambda d: d["operators"].append(op("softmax", ("input", "x"), ("axis", 5), outputs="z")),
     ["softmax", "invalid"]),
    (lambda d: d["operators"].append(op("reshape", ("input", "x"), ("newShape", [5]), outputs="z")), ["reshape"]),
    (lambda d: d["operators"][0].update(descriptors=[{"dataType": "float32", "shape": [3, 2]}]),
     ["add", "recorded as float32 [3, 2] but the operation gives float32 [2, 3]"]),
    (lambda d: d["operators"][0].update(descriptors=[]), ["one descriptor per output"]),
])
def test_malformed_graph_files(tmp_path: Path, change, needles: list[str]) -> None:  # noqa: ANN001
    path = _write(tmp_path, _with(change), blob=bytes(32))
    with pytest.raises(FormatError) as info:
        converter.load(path)
    message = str(info.value)
    assert str(path) in message
    for needle in needles:
        assert needle in message, message


def test_not_json_and_missing_weights_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.webnn.json"
    bad.write_text("{nope")
    with pytest.raises(FormatError, match="not valid JSON"):
        converter.load(bad)
    with pytest.raises(FormatError, match="cannot read the weights file"):
        converter.load(_write(tmp_path, _with(lambda d: _bin_constant(d, offset=0, byteLength=24))))


def test_int64_constant_outside_int32_is_unsupported(tmp_path: Path) -> None:
    doc = graph_doc([op("add", ("a", "x"), ("b", "c"), outputs="y")], {"y": "y"},
                    inputs={"x": np.ones(2, np.int64)}, constants={"c": np.array([1, 1 << 40], np.int64)})
    with pytest.raises(UnsupportedError, match="outside the int32 range"):
        converter.load(_write(tmp_path, doc))


def test_weights_are_read_from_the_bin_as_views(tmp_path: Path) -> None:
    c = np.arange(6, dtype=np.float32).reshape(2, 3)
    blob = bytes(16) + c.tobytes()
    path = _write(tmp_path, _with(lambda d: _bin_constant(d, offset=16, byteLength=24)), blob)
    prog = converter.load(path)
    out = converter.run(prog, {"x": np.ones((2, 3), np.float32)})
    np.testing.assert_array_equal(out["y"], c + 1)
    const = next(o for o in prog.main.block.ops if o.type == "const")
    assert isinstance(const.attributes["val"].base, np.ndarray)


_DOCS = [to_graph_doc(load_cases(name)[0]["graph"])[0] for name in op_files()]


def _mutate(doc: dict, data: st.DataObject) -> dict:
    doc = copy.deepcopy(doc)
    ops = doc["operators"]
    target = data.draw(st.sampled_from(ops))
    args = target["arguments"]
    entry = data.draw(st.sampled_from(args))
    key = next(iter(entry))
    junk = st.one_of(st.integers(-3, 70), st.lists(st.integers(0, 9), max_size=5), st.sampled_from(list(doc["inputs"]) + list(doc["constants"]) or ["x"]),
                     st.text(max_size=3), st.booleans(), st.floats(allow_nan=True))
    if key == "options" and entry["options"]:
        opt = data.draw(st.sampled_from(sorted(entry["options"])))
        entry["options"][opt] = data.draw(junk)
    else:
        entry[key] = data.draw(junk)
    return doc


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.data())
def test_damaged_graphs_give_a_program_or_a_converter_error(data: st.DataObject) -> None:
    doc = _mutate(data.draw(st.sampled_from(_DOCS)), data)
    try:
        graph_to_program(graph_from_dict(doc, "<damaged>"))
    except ConverterError:
        pass


def test_an_output_named_like_a_constant_id_keeps_its_name_through_mil(tmp_path: Path) -> None:
    """Constants are named by operand id; an output carrying such a name must not be renamed."""
    x = np.ones((2, 3), np.float32)
    doc = graph_doc([op("add", ("a", "x"), ("b", "c"), outputs="t"), op("relu", ("input", "t"), outputs="u")],
                    {"c": "u", "t": "t"}, inputs={"x": x}, constants={"c": x})
    prog = converter.load(_write(tmp_path, doc))
    out = tmp_path / "m.mlpackage"
    converter.save(prog, out)
    back = converter.load(out)
    assert [v.name for v in back.main.outputs] == ["c", "t"]
    got = converter.run(back, {"x": x})
    np.testing.assert_array_equal(got["c"], np.maximum(x + x, 0))
    np.testing.assert_array_equal(got["t"], x + x)


def test_strided_slice_sizes_are_the_input_window_read() -> None:
    """WebNN's slice ``sizes`` are extents in the input (start + size <= dim); the result holds
    ceil(size / stride) elements per axis (spec 8.9.47; Chromium agrees): start 0, size 4, stride 3 of 7
    values reads [0:4:3] -> 2 values (not 4 strided steps)."""
    from converter.frontends.webnn.graph import graph_from_dict
    from converter.frontends.webnn.to_ir import graph_to_program
    from converter.ir.interpreter import Interpreter

    doc = {"format": "converter.webnn-graph", "version": 1,
           "inputs": {"x": {"descriptor": {"dataType": "float32", "shape": [7]}}}, "constants": {},
           "operators": [{"name": "slice", "arguments": [{"input": "x"}, {"starts": [0]}, {"sizes": [4]},
                                                          {"options": {"strides": [3]}}], "outputs": "y"}],
           "outputs": {"y": "y"}}
    prog = graph_to_program(graph_from_dict(doc, "<strided>"))
    x = np.arange(7, dtype=np.float32)
    np.testing.assert_array_equal(Interpreter(prog).run({"x": x})["y"], x[0:4:3])
