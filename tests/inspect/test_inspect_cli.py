"""``converter inspect`` through click's runner and a real subprocess: the report, --json against
the documented schema, --ir read back by the IR parser, --graph files that parse, and bad input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from converter.ir.census import op_count
from converter.ir.text import parse_program

from ..cli.helpers import digest, invoke, one_error_line
from ..conftest import REPO
from ..optimize.counting import ct_load, ct_op_count
from .helpers import (
    CLASSIFIER,
    DEEPLAB,
    ENUMERATED,
    FLEXIBLE,
    FP16_PROGRAM,
    LOOP,
    ML_CLASSIFIER,
    PIPELINE,
    REFUSED,
    ct_spec,
    schema,
    write_webnn_graph,
)


def _subprocess(*args: object) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "cli", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=300)


def test_text_report_of_an_image_model_in_a_subprocess():
    r = _subprocess("inspect", DEEPLAB)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "format:      NeuralNetwork, specification version 3" in out
    assert "input  image: image 513 x 513 (W x H) RGB: an H x W x 3 uint8 array" in out
    assert "45 tensors compressed" in out
    assert re.search(r"layers:\s+218 NeuralNetwork layers: activation 105, convolution 55", out)


def test_classifier_labels_are_printed():
    labels = list(ct_spec(CLASSIFIER).neuralNetworkClassifier.stringClassLabels.vector)
    r = invoke("inspect", CLASSIFIER)
    assert r.exit_code == 0, r.output
    assert f"classifier:  {len(labels)} string labels: {', '.join(labels)}" in r.output


@pytest.mark.parametrize("model", [DEEPLAB, CLASSIFIER, FLEXIBLE, ENUMERATED, FP16_PROGRAM, ML_CLASSIFIER, PIPELINE,
                                   LOOP, REFUSED, "webnn"])
def test_json_follows_the_documented_schema(model, tmp_path: Path):
    if model == "webnn":
        model = write_webnn_graph(tmp_path)
    r = invoke("inspect", model, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    jsonschema.Draft202012Validator.check_schema(schema())
    jsonschema.validate(doc, schema(), cls=jsonschema.Draft202012Validator)
    assert doc["file"] == str(model)


def test_json_in_a_subprocess_has_coremltools_op_count():
    r = _subprocess("inspect", FP16_PROGRAM, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["ops"]["total"] == ct_op_count(ct_load(FP16_PROGRAM)) == doc["functions"][0]["ops"]
    assert doc["format"] == "mlProgram" and doc["parameters"]["stored"]["fp16"]["bytes"] > 0


def test_flexible_shapes_and_enumerated_sizes_are_printed():
    assert "input  x: multiArray float32 3 x 4..32 x 4..32" in invoke("inspect", FLEXIBLE).output
    assert "one of 16 x 16, 24 x 32 (W x H)" in invoke("inspect", ENUMERATED).output


def test_pipeline_stages_and_webnn(tmp_path: Path):
    out = invoke("inspect", PIPELINE).output
    assert "format:      pipeline, specification version 1" in out and "stages:      NeuralNetwork -> NeuralNetwork" in out
    r = _subprocess("inspect", write_webnn_graph(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "format:      WebNN" in r.stdout and "input  x: tensor float32 2 x 3" in r.stdout


def test_ir_text_parses_back():
    r = invoke("inspect", FP16_PROGRAM, "--ir")
    assert r.exit_code == 0, r.output
    prog = parse_program(r.output)
    assert op_count(prog) == ct_op_count(ct_load(FP16_PROGRAM))


def test_ir_of_one_function(tmp_path: Path):
    r = invoke("inspect", LOOP, "--ir", "--function", "main")
    assert r.exit_code == 0 and parse_program(r.output).functions.keys() == {"main"}
    line = one_error_line(invoke("inspect", LOOP, "--ir", "--function", "nope"))
    assert "no function 'nope' (the model has main)" in line


def _dot_nodes(text: str) -> dict[str, str]:
    """{node id: kind} from the node statements of a DOT file (``id [attr=..., ...];``)."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^\s*(\w+) \[label=.*?shape=(\w+)", text, re.M)}


def test_graph_dot_has_one_node_per_op(tmp_path: Path):
    out = tmp_path / "g.dot"
    r = invoke("inspect", FP16_PROGRAM, "--graph", out)
    assert r.exit_code == 0, r.output
    text = out.read_text()
    nodes = _dot_nodes(text)
    ops = [n for n, shape in nodes.items() if shape == "box"]
    assert len(ops) == ct_op_count(ct_load(FP16_PROGRAM))
    edges = re.findall(r"^\s*(\w+) -> (\w+)", text, re.M)
    assert edges and all(a in nodes and b in nodes for a, b in edges)
    assert text.startswith("digraph") and text.rstrip().endswith("}")
    assert text.count("{") == text.count("}")


def test_graph_of_nested_blocks_has_clusters(tmp_path: Path):
    out = tmp_path / "loop.dot"
    assert invoke("inspect", LOOP, "--graph", out).exit_code == 0
    text = out.read_text()
    assert "subgraph cluster_" in text
    assert len([s for s in _dot_nodes(text).values() if s == "box"]) == sum(
        json.loads(invoke("inspect", LOOP, "--json").output)["ops"]["histogram"].values())


def test_graph_svg_and_html_of_a_large_model(tmp_path: Path):
    svg, page = tmp_path / "d.svg", tmp_path / "d.html"
    assert invoke("inspect", DEEPLAB, "--graph", svg).exit_code == 0
    root = ET.parse(svg).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    doc = json.loads(invoke("inspect", DEEPLAB, "--json").output)
    ops = doc["ops"]["total"]
    rects = root.findall(f".//{ns}rect")
    assert len(rects) == ops + 2  # plus the input and the output
    assert svg.stat().st_size < 2_000_000
    r = _subprocess("inspect", DEEPLAB, "--graph", page)
    assert r.returncode == 0, r.stderr
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "<svg" in html and "513 x 513" in html
    assert "<script" not in html and not re.search(r"(src|href)=", html)  # nothing fetched


def test_graph_through_graphviz_when_installed(tmp_path: Path, monkeypatch):
    """The graphviz package draws when it works; when its dot program is missing, the layout here does."""
    import types

    drawn = []

    class Source:
        def __init__(self, dot: str) -> None:
            drawn.append(dot)

        def pipe(self, format: str) -> bytes:  # noqa: A002 - graphviz's name
            return b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"><g id="graphviz"/></svg>'

    monkeypatch.setitem(sys.modules, "graphviz", types.SimpleNamespace(Source=Source))
    assert invoke("inspect", PIPELINE, "--graph", tmp_path / "a.svg").exit_code == 0
    assert (tmp_path / "a.svg").read_text().startswith('<svg xmlns="http://www.w3.org/2000/svg"><g id="graphviz"/>')
    assert drawn and drawn[0].startswith("digraph")

    def broken(self, format: str) -> bytes:  # noqa: A002
        raise OSError("failed to execute PosixPath('dot')")

    monkeypatch.setattr(Source, "pipe", broken)
    assert invoke("inspect", PIPELINE, "--graph", tmp_path / "b.svg").exit_code == 0
    assert 'id="graphviz"' not in (tmp_path / "b.svg").read_text()
    ET.parse(tmp_path / "b.svg")


def test_graph_never_replaces_a_file_unless_asked(tmp_path: Path):
    out = tmp_path / "g.dot"
    out.write_text("mine")
    line = one_error_line(invoke("inspect", PIPELINE, "--graph", out))
    assert "g.dot" in line and "--overwrite" in line and out.read_text() == "mine"
    assert invoke("inspect", PIPELINE, "--graph", out, "--overwrite").exit_code == 0
    assert out.read_text().startswith("digraph")
    line = one_error_line(invoke("inspect", PIPELINE, "--graph", tmp_path / "g.png"))
    assert ".dot, .svg, .html" in line and not (tmp_path / "g.png").exists()


def test_refused_model_is_described_and_its_graph_refused(tmp_path: Path):
    r = invoke("inspect", REFUSED)
    assert r.exit_code == 0, r.output
    assert "refused:     only neural networks can be converted" in r.output and "treeEnsembleClassifier" in r.output
    line = one_error_line(invoke("inspect", REFUSED, "--graph", tmp_path / "g.dot"))
    assert "--ir and --graph need the model read into the IR" in line
    assert not (tmp_path / "g.dot").exists()


def test_bad_input_is_one_error_line(tmp_path: Path):
    missing = tmp_path / "nope.mlmodel"
    assert "no such file or directory" in one_error_line(invoke("inspect", missing))
    text = tmp_path / "notes.mlmodel"
    text.write_text("not a model\n")
    before = digest(text)
    assert "notes.mlmodel" in one_error_line(invoke("inspect", text))
    corrupt = tmp_path / "corrupt.mlmodel"
    corrupt.write_bytes(DEEPLAB.read_bytes()[:5000])
    assert "corrupt.mlmodel" in one_error_line(invoke("inspect", corrupt))
    folder = tmp_path / "folder"
    folder.mkdir()
    assert "not an .mlpackage" in one_error_line(invoke("inspect", folder))
    assert digest(text) == before
    r = _subprocess("inspect", missing)
    assert r.returncode == 2 and r.stderr.startswith("error: ") and "Traceback" not in r.stderr


def test_readme_example_is_what_inspect_prints(tmp_path: Path, monkeypatch):
    readme = (REPO / "README.md").read_text()
    block = readme.split("$ converter inspect Classifier.mlmodel\n", 1)[1].split("```", 1)[0]
    (tmp_path / "Classifier.mlmodel").write_bytes(CLASSIFIER.read_bytes())
    monkeypatch.chdir(tmp_path)
    r = invoke("inspect", "Classifier.mlmodel")
    assert r.exit_code == 0 and r.output == block


def test_names_from_the_model_reach_the_terminal_escaped(tmp_path: Path):
    """Feature, layer and metadata strings holding an OSC sequence, a newline or a bidi control."""
    from ..cli.test_terminal_injection import EVIL_IN, EVIL_OUT, OSC, RAW
    from ..nn.common import builder

    b = builder({EVIL_IN: (3,)}, [EVIL_OUT], nd=True)
    b.add_activation(f"relu{OSC}\n", "RELU", EVIL_IN, EVIL_OUT)
    b.spec.description.metadata.author = f"me{OSC}\u202e"
    b.spec.description.metadata.userDefined[f"k{OSC}"] = "v\nw"
    path = tmp_path / "evil.mlmodel"
    path.write_bytes(b.spec.SerializeToString())
    for args in ((), ("--json",), ("--ir",), ("--graph", tmp_path / "g.html")):
        r = invoke("inspect", path, *args)
        assert r.exit_code == 0, r.output
        assert not RAW.search(r.output), (args, r.output)
    assert "author:      me\\x1b]0;pwned\\x07\\u202e" in invoke("inspect", path).output
    assert json.loads(invoke("inspect", path, "--json").output)["metadata"]["author"] == f"me{OSC}\u202e"
    page = (tmp_path / "g.html").read_text()
    assert not RAW.search(page.replace("\n", " "))


def test_ir_with_graph_keeps_stdout_parseable(tmp_path: Path):
    r = invoke("inspect", PIPELINE, "--ir", "--graph", tmp_path / "g.dot")
    assert r.exit_code == 0 and (tmp_path / "g.dot").is_file()
    assert op_count(parse_program(r.stdout)) == json.loads(invoke("inspect", PIPELINE, "--json").output)["ops"]["total"]
    assert r.stderr == f"wrote {tmp_path / 'g.dot'}\n"


def test_a_graph_too_large_to_draw_is_refused_as_svg_but_the_page_has_the_report(tmp_path: Path, monkeypatch):
    from converter import dataflow_graph

    monkeypatch.setattr(dataflow_graph, "MAX_DRAWN_NODES", 10)
    line = one_error_line(invoke("inspect", DEEPLAB, "--graph", tmp_path / "g.svg"))
    assert "more than the 10 drawn here" in line and "--graph OUT.dot" in line and not (tmp_path / "g.svg").exists()
    assert invoke("inspect", DEEPLAB, "--graph", tmp_path / "g.html").exit_code == 0
    page = (tmp_path / "g.html").read_text()
    assert "Not drawn: the graph has 381 nodes" in page and "513 x 513" in page and "<svg" not in page
