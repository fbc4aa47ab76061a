"""Each conformance op file's richest case (most options) written as model.js, recorded by the Node
recorder and converted: the outputs are bit-identical to the same case read directly as a graph
document (which test_conformance checks against the WPT expected values). Proves the recorder
records these methods, their options and constants faithfully (and, through the descriptors it
writes, that its spec shape inference agrees with the IR mapping). The cases are merged into a few
graphs (ids prefixed per case) so that Node starts a few times, not once per op."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from .conformance import load_cases, op_files, to_graph_doc
from .modules import run_doc, run_recorded

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
GROUPS = 4


def _richest(op: str) -> dict:
    def score(case: dict) -> int:
        return sum(len(a.get("options", {})) for o in case["graph"]["operators"] for a in o["arguments"])
    return max(load_cases(op), key=score)


def _prefixed(doc: dict, p: str) -> dict:
    """``doc`` with every operand id and name prefixed by ``p``."""
    ids = set(doc["inputs"]) | set(doc["constants"]) | {o for op in doc["operators"]
                                                        for o in (op["outputs"] if isinstance(op["outputs"], list) else [op["outputs"]])}

    def ref(v: object) -> object:
        if isinstance(v, str) and v in ids:
            return p + v
        if isinstance(v, list):
            return [ref(x) for x in v]
        if isinstance(v, dict):
            return {k: ref(x) for k, x in v.items()}
        return v

    return {
        "inputs": {p + k: dict(v, name=p + v.get("name", k)) for k, v in doc["inputs"].items()},
        "constants": {p + k: v for k, v in doc["constants"].items()},
        "operators": [dict(op, arguments=[{k: ref(v)} for a in op["arguments"] for k, v in a.items()],
                           outputs=ref(op["outputs"])) for op in doc["operators"]],
        "outputs": {p + k: p + v for k, v in doc["outputs"].items()},
    }


@pytest.mark.parametrize("group", range(GROUPS))
def test_recorded_cases_match_the_direct_route(group: int, tmp_path: Path) -> None:
    names = op_files()[group::GROUPS]
    merged: dict = {}
    feeds: dict[str, np.ndarray] = {}
    for i, name in enumerate(names):
        doc, case_feeds = to_graph_doc(_richest(name)["graph"])
        part = _prefixed(doc, f"{i}.")
        if not merged:
            merged = dict(doc, inputs={}, constants={}, operators=[], outputs={})
        for key in ("inputs", "constants", "outputs"):
            merged[key].update(part[key])
        merged["operators"] += part["operators"]
        feeds.update({f"{i}.{k}": v for k, v in case_feeds.items()})
    direct = run_doc(merged, feeds)
    recorded = run_recorded(merged, feeds, tmp_path)
    assert direct.keys() == recorded.keys() == merged["outputs"].keys()
    for name in direct:
        np.testing.assert_array_equal(np.asarray(recorded[name]), np.asarray(direct[name]), err_msg=name)
