"""model.d.ts (issue 9): TypeScript declarations of model.js. No TypeScript compiler is available
offline here (`npx --no-install tsc` finds none), so this is a structural check: every export of
model.js is declared, the ``inputs``/``outputs``/``Feeds``/``Results`` members are exactly the
module's feature names (each a JSON string literal, so hostile names stay one line and exact) with
the typed array of their data type, and the classifier's label output appears in ``Results``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import converter

from .browser_client import module_features
from .hostile import HOSTILE, hostile_classifier, hostile_network

ARRAYS = {"float32": "Float32Array", "float16": "Float16Array", "int32": "Int32Array", "uint8": "Uint8Array"}
_BLOCK = re.compile(r"^export (?:declare const (\w+): |type (\w+) = )\{$")


def blocks(dts: str) -> dict[str, list[tuple[str, str]]]:
    """name -> [(member key, rest of the line)] of each multi-line object type of model.d.ts."""
    found: dict[str, list[tuple[str, str]]] = {}
    current = None
    for line in dts.splitlines():
        m = _BLOCK.match(line)
        if m:
            current = m.group(1) or m.group(2)
            found[current] = []
        elif line in ("};", "}"):
            current = None
        elif current is not None:
            text = line.strip().removeprefix("readonly ")
            key, end = json.JSONDecoder().raw_decode(text)
            rest = text[end:]
            assert rest.startswith(": ") and rest.endswith(";"), line
            found[current].append((key, rest[2:-1]))
    return found


@pytest.fixture(autouse=True)
def _quiet_notes(recwarn: pytest.WarningsRecorder) -> None:
    """Conversion notes are not the subject here."""


def test_declarations_match_the_module_for_hostile_names(tmp_path: Path) -> None:
    out = tmp_path / "net"
    converter.convert(hostile_network(HOSTILE), to="webnn", out=out)
    dts = (out / "model.d.ts").read_text(encoding="utf-8")
    js = (out / "model.js").read_text(encoding="utf-8")
    exported = set(re.findall(r"^export (?:const|async function|function) (\w+)", js, re.M))
    declared = set(re.findall(r"^export declare (?:const|function) (\w+)", dts, re.M))
    assert exported == declared == {"inputs", "outputs", "labels", "classifier", "build", "load", "run"}
    b = blocks(dts)
    inputs, outputs = module_features(out, "inputs"), module_features(out, "outputs")
    assert [k for k, _ in b["inputs"]] == list(inputs) == HOSTILE
    assert [k for k, _ in b["outputs"]] == list(outputs)
    assert all(t == '{ readonly dataType: "float32"; readonly shape: readonly number[] }' for _, t in b["inputs"])
    assert b["Feeds"] == [(k, ARRAYS[d["dataType"]]) for k, d in inputs.items()]
    assert b["Results"] == [(k, ARRAYS[d["dataType"]]) for k, d in outputs.items()]
    assert "export declare const labels: null;" in dts and "export declare const classifier: null;" in dts


def test_declarations_of_a_classifier(tmp_path: Path) -> None:
    prog, _ = hostile_classifier("x", HOSTILE[6], HOSTILE[3], ["a", "b"], op_name="m")
    out = tmp_path / "cls"
    converter.convert(prog, to="webnn", out=out)
    b = blocks((out / "model.d.ts").read_text(encoding="utf-8"))
    assert b["Results"] == [(HOSTILE[6], "Float32Array"), (HOSTILE[3], "string | number")]
    assert b["Feeds"] == [("x", "Float32Array")]
