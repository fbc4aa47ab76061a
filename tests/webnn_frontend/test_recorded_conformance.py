"""Each conformance op file's richest case (most options) written as model.js, recorded by the Node
recorder and converted: the outputs are bit-identical to the same case read directly as a graph
document (which test_conformance checks against the WPT expected values). Proves the recorder
records these methods, their options and constants faithfully."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from .conformance import load_cases, op_files, to_graph_doc
from .modules import run_doc, run_recorded

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


def _richest(op: str) -> dict:
    def score(case: dict) -> int:
        return sum(len(a.get("options", {})) for o in case["graph"]["operators"] for a in o["arguments"])
    return max(load_cases(op), key=score)


@pytest.mark.parametrize("op", op_files())
def test_recorded_case_matches_the_direct_route(op: str, tmp_path: Path) -> None:
    doc, feeds = to_graph_doc(_richest(op)["graph"])
    direct = run_doc(doc, feeds)
    recorded = run_recorded(doc, feeds, tmp_path)
    assert direct.keys() == recorded.keys()
    for name in direct:
        np.testing.assert_array_equal(np.asarray(recorded[name]), np.asarray(direct[name]))
