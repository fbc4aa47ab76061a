"""The builder-method table (ops.json, which both the recorder and the reader check calls against)
against the spec text: in each method's section of ../shared/spec/webnn-api.txt, the members of its
options dictionary ("name, of type ...", support-limit members aside) are exactly the table's option
keys (plus MLOperatorOptions' label)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from converter.frontends.webnn.signatures import TABLE_PATH

SPEC = (Path(__file__).resolve().parents[2] / ".." / "shared" / "spec" / "webnn-api.txt").resolve()
TABLE = json.loads(TABLE_PATH.read_text())["ops"]
#: Sections that define several methods, by a word of their title.
GROUPED = {"argMin": "argMin/argMax", "argMax": "argMin/argMax", "averagePool2d": "Pooling",
           "l2Pool2d": "Pooling", "maxPool2d": "Pooling", "gatherElements": "gather"}  # MLGatherOptions


def _sections() -> dict[str, str]:
    text = SPEC.read_text()
    heads = list(re.finditer(r"^8\.9\.\d+(?:\.\d+)?\. (.+)$", text, re.M))
    return {m.group(1).strip(): text[m.end(): heads[i + 1].start() if i + 1 < len(heads) else len(text)]
            for i, m in enumerate(heads)}


def _section_of(method: str, sections: dict[str, str]) -> str | None:
    key = GROUPED.get(method, method)
    if method.startswith("reduce"):
        key = "Reduction operations"
    for title, body in sections.items():
        if title == key or title.startswith(key):
            return body
    return None


@pytest.mark.parametrize("method", sorted(m for m, rec in TABLE.items() if rec["options"]))
def test_option_keys_are_the_spec_dictionary_members(method: str) -> None:
    body = _section_of(method, _sections())
    assert body is not None, f"no spec section for {method}"
    members = set(re.findall(r"(\w+), of type\s*(?=\S)(?!ML\w*Limits\b)", body))
    members -= {"input", "output"}  # support-limit members of other shapes
    assert set(TABLE[method]["options"]) <= members, set(TABLE[method]["options"]) - members
    if method in GROUPED or method.startswith("reduce"):
        return  # a shared section: its members are the union
    assert members <= set(TABLE[method]["options"]), members - set(TABLE[method]["options"])


_ELEMENTWISE = {"Element-wise binary operations": ("add", "sub", "mul", "div", "max", "min", "pow"),
                "Element-wise logical operations": ("equal", "notEqual", "greater", "greaterOrEqual", "lesser",
                                                    "lesserOrEqual", "logicalNot", "logicalAnd", "logicalOr",
                                                    "logicalXor", "isNaN", "isInfinite"),
                "Element-wise unary operations": ("abs", "ceil", "cos", "erf", "exp", "floor", "identity", "log",
                                                  "neg", "reciprocal", "roundEven", "sign", "sin", "sqrt", "tan"),
                # the shipped text runs prelu's heading into the end of the averagePool2d section
                "averagePool2d": ("prelu",)}


@pytest.mark.parametrize("method", sorted(TABLE))
def test_positional_parameters_are_named_as_in_the_spec(method: str) -> None:
    sections = _sections()
    title = next((t for t, methods in _ELEMENTWISE.items() if method in methods), None)
    body = sections[title] if title else _section_of(method, sections)
    assert body is not None, f"no spec section for {method}"
    for name, _ in TABLE[method]["args"]:
        assert re.search(rf"(?:^|[\s-]){name}: ", body), f"{method}: no parameter '{name}' in the spec section"
