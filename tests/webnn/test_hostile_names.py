"""Issue 9, "Done when": hostile names (quotes, backslashes, ``</script>``, ``<!--``, U+2028/U+2029,
newlines, NUL, emoji, a 10,000-character name) convert and run in the real browser with the names
unchanged in ``inputs``/``outputs``, and classifier labels unchanged.

Oracles: the Python strings themselves (names read back from the browser's and Node's own parse of
model.js, not from our writer), and numpy formulas written here (relu(x) * 2 + x; softmax(x @ w))
for the values, with the interpreter as a second reference."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import converter
from converter.ir.interpreter import Interpreter

from .browser_client import WebnnBrowser, module_features
from .hostile import HOSTILE, hostile_classifier, hostile_network

# Imports model.js in Node with a recording MLGraphBuilder and prints its exports and the names the
# graph declares (builder.input) and returns (builder.build), as JSON.
_NODE_PROBE = r"""
const [url, binPath] = process.argv.slice(1);
const { readFileSync } = await import("node:fs");
const declared = [];
let built = null;
globalThis.MLGraphBuilder = class {
  constructor() {
    return new Proxy(this, { get: (_, method) => (...args) => {
      if (method === "input") declared.push(args[0]);
      if (method === "build") { built = Object.keys(args[0]); return { graph: true }; }
      return { method };
    } });
  }
};
const m = await import(url);
const bytes = readFileSync(binPath);
await m.build({}, bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
console.log(JSON.stringify({ inputs: Object.keys(m.inputs), outputs: Object.keys(m.outputs), labels: m.labels,
  classifier: m.classifier, declared, built }));
"""


def node_exports(folder: Path) -> dict:
    """model.js imported as an ES module by Node (a syntax error or a broken literal fails here)."""
    if shutil.which("node") is None:
        pytest.fail("node is needed to parse model.js as an ES module", pytrace=False)
    js = (folder / "model.js").resolve()
    done = subprocess.run(["node", "--input-type=module", "-e", _NODE_PROBE, js.as_uri(), str(folder / "model.bin")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(autouse=True)
def _quiet_notes(recwarn: pytest.WarningsRecorder) -> None:
    """Conversion notes are not the subject here."""


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_hostile_feature_and_op_names_are_unchanged_and_run(layout: str, webnn_browser: WebnnBrowser,
                                                            tmp_path: Path) -> None:
    prog = hostile_network(HOSTILE)
    out = tmp_path / "webnn"
    converter.convert(prog, to="webnn", out=out, layout=layout)
    want_outputs = [n + "_out" for n in HOSTILE]
    assert list(module_features(out, "inputs")) == HOSTILE
    assert list(module_features(out, "outputs")) == want_outputs
    probe = node_exports(out)
    assert probe["inputs"] == HOSTILE and probe["declared"] == HOSTILE
    assert probe["outputs"] == want_outputs and probe["built"] == want_outputs
    rng = np.random.default_rng(7)
    feeds = {n: rng.standard_normal((2, 3)).astype(np.float32) for n in HOSTILE}
    # The driver feeds by the names the browser read from model.js and returns outputs by them.
    result = webnn_browser.run(out, feeds)
    assert sorted(result.outputs) == sorted(want_outputs)
    ref = Interpreter(prog).run(feeds, "main")
    for name in HOSTILE:
        x = feeds[name]
        expected = np.maximum(x, 0) * np.float32(2) + x  # exact in float32
        np.testing.assert_array_equal(result.outputs[name + "_out"], expected)
        np.testing.assert_array_equal(ref[name + "_out"], expected)


def test_hostile_classifier_labels_are_unchanged(webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    prog, w = hostile_classifier(HOSTILE[3], HOSTILE[0], HOSTILE[1], HOSTILE, op_name=HOSTILE[4])
    out = tmp_path / "webnn"
    converter.convert(prog, to="webnn", out=out)
    assert module_features(out, "labels") == HOSTILE
    probe = node_exports(out)
    assert probe["labels"] == HOSTILE
    assert probe["classifier"] == {"probabilityOutput": HOSTILE[0], "labelOutput": HOSTILE[1]}
    assert probe["inputs"] == [HOSTILE[3]] and probe["built"] == [HOSTILE[0]]
    x = np.random.default_rng(3).standard_normal((1, 4)).astype(np.float32)
    result = webnn_browser.run(out, {HOSTILE[3]: x})
    logits = x.astype(np.float64) @ w.astype(np.float64)
    softmax = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    np.testing.assert_allclose(result.outputs[HOSTILE[0]], softmax[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", HOSTILE, ids=lambda s: repr(s[:24]))
def test_each_hostile_name_gives_a_module_node_parses(name: str, tmp_path: Path) -> None:
    """One name at a time, as input, op, output and label: model.js imports as an ES module in Node
    and its exports hold the exact strings; model.d.ts and index.html hold no raw breakout text."""
    prog, _ = hostile_classifier(name, name + "_p", name + "_l", [name, name + "2"], op_name=name)
    out = tmp_path / "webnn"
    converter.convert(prog, to="webnn", out=out)
    probe = node_exports(out)
    assert probe["inputs"] == [name] and probe["declared"] == [name]
    assert probe["outputs"] == [name + "_p"] and probe["labels"] == [name, name + "2"]
    for file in ("model.js", "model.d.ts", "index.html"):
        text = (out / file).read_text(encoding="utf-8")
        assert text.isascii(), file  # every non-ASCII character (U+2028, emoji) is escaped
        assert "\x00" not in text
        assert text.count("</script") == (1 if file == "index.html" else 0), file
        assert "<!--" not in text, file


def test_names_of_object_prototype_members_are_ordinary_features(webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    """An object literal's ``"__proto__": v`` sets the prototype instead of adding a key: model.js writes
    that name as a computed key and run() keeps tensors and results in prototype-free objects."""
    from converter.ir.builder import new_program
    from converter.ir.types import tensor

    def body(b, x, y):
        return [b.relu(x=x, name="__proto__"), b.add(x=x, y=y, name="constructor")]

    prog = new_program({"__proto__": tensor("fp32", [3]), "toString": tensor("fp32", [3])}, body)
    prog.main.block.outputs[0].name = "hasOwnProperty"
    converter.convert(prog, to="webnn", out=tmp_path / "web", passes="none")
    assert list(module_features(tmp_path / "web")) == ["__proto__", "toString"]
    x, y = np.array([-1.0, 2.0, -3.0], np.float32), np.array([0.5, 0.5, 0.5], np.float32)
    result = webnn_browser.run(tmp_path / "web", {"__proto__": x, "toString": y})
    np.testing.assert_array_equal(result.outputs["hasOwnProperty"], np.maximum(x, 0))
    np.testing.assert_array_equal(result.outputs["constructor"], x + y)
