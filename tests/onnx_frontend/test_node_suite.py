"""ONNX's own operator test suite (node tests + the shipped pytorch-converted, pytorch-operator and
simple model tests) through ONNX -> IR -> interpreter; the oracle is the expected outputs ONNX's
authors ship with each case (onnx's tolerances). See node_suite.py; per-operator report:
``python benchmarks/onnx_node_tests.py``.

Pinned: every case in passing_cases.txt still passes (a regression names the case), and the pass
count does not drop below the floor. Runs ~2,000 tiny models (a few seconds).
"""

from __future__ import annotations

import pytest

from .node_suite import PASSING_LIST, Summary, all_cases, run_case

#: Measured pass count when the floor was last raised (keep in step with passing_cases.txt).
PASS_FLOOR = 482


@pytest.fixture(scope="module")
def results():
    return [run_case(c) for c in all_cases()]


def test_every_listed_case_still_passes(results):
    status = {f"{r.suite}/{r.name}": r for r in results}
    listed = [n for n in PASSING_LIST.read_text().split() if n]
    regressed = [f"{n}: {status[n].status}: {status[n].detail}" if n in status else f"{n}: case missing"
                 for n in listed if n not in status or status[n].status != "pass"]
    assert not regressed, "\n".join(regressed)


def test_pass_count_floor(results):
    s = Summary(results)
    print(s.line())
    assert s.count("pass") >= PASS_FLOOR, s.line()


def test_no_case_crashes_the_converter(results):
    """Every case ends as pass, fail, or a converter error (never an uncaught Python exception)."""
    crashed = [f"{r.suite}/{r.name}: {r.detail}" for r in results if "crashed" in r.detail]
    assert not crashed, "\n".join(crashed)
