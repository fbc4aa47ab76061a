"""``converter inspect m.onnx``: the file's own facts (checked against onnx's reading of the same
file), inputs and outputs as the file declares them, --json against the documented schema,
--ir and --graph through the frontend, a refused model still described, external data counted
from tensor headers without being read."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import jsonschema
import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from converter.ir.text import parse_program

from ..cli.helpers import invoke, one_error_line
from ..inspect.helpers import schema
from .models import cli_subprocess, int_gather, mlp, refused, torch_cnn


def _json(path: Path) -> dict:
    r = invoke("inspect", path, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, schema(), cls=jsonschema.Draft202012Validator)
    return doc


def test_text_report_names_what_the_file_declares(tmp_path):
    r = invoke("inspect", mlp(tmp_path / "m.onnx"))
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "format:      ONNX, IR version" in out and "opsets ai.onnx 17" in out
    assert "producer:    tests 7.1" in out
    assert "input  x: tensor float32 batch x 4" in out  # the dim_param name, not a range
    assert "output y: tensor float32 batch x 3" in out
    assert "onnx ops:    3 nodes (nested graphs included): Add 1, MatMul 1, Relu 1" in out
    assert "initializers: 2 tensors, 60 B" in out
    assert "author:      Ada" in out and "license:     MIT" in out and "metadata:    task = demo" in out
    assert "ops:         3 (const excluded" in out  # the program as read into the IR


def test_json_facts_match_onnx_reading_of_the_file(tmp_path):
    path = torch_cnn(tmp_path / "cnn.onnx")
    doc = _json(path)
    m = onnx.load(str(path))
    o = doc["onnx"]
    assert doc["format"] == "ONNX" and doc["refusal"] is None and doc["specification_version"] is None
    assert o["ir_version"] == m.ir_version
    assert o["opset_imports"] == {(i.domain or "ai.onnx"): i.version for i in m.opset_import}
    assert (o["producer_name"], o["producer_version"]) == (m.producer_name, m.producer_version) == \
        ("pytorch", o["producer_version"])
    assert o["op_histogram"]["histogram"] == dict(Counter(n.op_type for n in m.graph.node))
    arrays = [numpy_helper.to_array(t) for t in m.graph.initializer]
    assert o["initializers"]["count"] == len(arrays)
    assert o["initializers"]["bytes"] == sum(a.nbytes for a in arrays)
    assert o["initializers"]["by_dtype"]["float"]["elements"] == sum(a.size for a in arrays if a.dtype == np.float32)
    fn = doc["functions"][0]
    assert fn["inputs"][0]["name"] == "image" and fn["inputs"][0]["shape"] == [{"param": "N"}, 3, 16, 16]
    assert fn["inputs"][0]["shape_text"] == "N x 3 x 16 x 16"
    assert fn["outputs"][0]["shape"] == [{"param": "N"}, 5]
    assert doc["ops"]["total"] > 0 and doc["parameters"]["count"] > 0


def test_int64_features_are_shown_as_the_file_declares_them(tmp_path):
    doc = _json(int_gather(tmp_path / "g.onnx"))
    fn = doc["functions"][0]
    assert [(f["name"], f["dtype"], f["shape"]) for f in fn["inputs"]] == [("idx", "int64", [3])]
    assert [(f["name"], f["dtype"], f["shape"]) for f in fn["outputs"]] == [("y", "float32", [3, 4]),
                                                                           ("count", "int64", [])]


@pytest.mark.parametrize("external", [False, True])
def test_a_refused_model_is_still_described(tmp_path, external):
    path = refused(tmp_path / "r.onnx", external=external)
    r = invoke("inspect", path)
    assert r.exit_code == 0, r.output
    assert "refused:     1 unsupported ONNX op type(s): com.example::Frobnicate" in r.stdout
    assert "onnx ops:    2 nodes (nested graphs included): MatMul 1, com.example::Frobnicate 1" in r.stdout
    assert "input  x: tensor float32 N x 300" in r.stdout
    doc = _json(path)
    assert doc["ops"]["total"] == 0 and doc["parameters"] is None
    init = doc["onnx"]["initializers"]
    assert init["bytes"] == 300 * 300 * 4
    assert init["external_bytes"] == (300 * 300 * 4 if external else 0)
    assert init["external_files"] == (["r.onnx.data"] if external else [])
    err = one_error_line(invoke("inspect", path, "--ir"))
    assert "--ir and --graph need the model read into the IR" in err and "Frobnicate" in err


def test_external_data_is_counted_without_being_read(tmp_path):
    """The sizes come from the tensor headers: with the data file gone, the report is the same."""
    path = refused(tmp_path / "r.onnx", external=True)
    before = _json(path)["onnx"]
    (tmp_path / "r.onnx.data").unlink()
    assert _json(path)["onnx"] == before


def test_ir_and_graph_through_the_frontend(tmp_path):
    path = mlp(tmp_path / "m.onnx")
    r = invoke("inspect", path, "--ir")
    assert r.exit_code == 0, r.output
    prog = parse_program(r.stdout)
    assert [v.name for v in prog.main.inputs] == ["x"] and [op.type for op in prog.main.walk()
                                                           if op.type != "const"] == ["matmul", "add", "relu"]
    r = invoke("inspect", path, "--graph", tmp_path / "g.svg")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "g.svg").read_text().lstrip().startswith("<")


def test_not_an_onnx_model_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\xff\xfe not protobuf at all")
    err = one_error_line(invoke("inspect", bad))
    assert "bad.onnx" in err and "not an ONNX model" in err


def test_inspect_in_a_subprocess(tmp_path):
    path = mlp(tmp_path / "m.onnx")
    r = cli_subprocess("inspect", path, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, schema(), cls=jsonschema.Draft202012Validator)
    assert doc["metadata"]["user_defined"] == {"author": "Ada", "license": "MIT", "task": "demo"}
    assert doc["metadata"]["short_description"] == "a small MLP" and doc["metadata"]["version"] == "3"
