"""ONNX's own operator test suite (node tests + the shipped pytorch-converted, pytorch-operator and
simple model tests) through ONNX -> IR -> interpreter; the oracle is the expected outputs ONNX's
authors ship with each case (onnx's tolerances). See node_suite.py; per-operator report:
``python benchmarks/onnx_node_tests.py``.

Pinned: every case in passing_cases.txt still passes (a regression names the case), and the pass
count does not drop below the list's length. After adding ops: ``python benchmarks/onnx_node_tests.py
--write-passing`` (the list is sorted, one case a line). Runs ~2,000 tiny models (a few seconds).
"""

from __future__ import annotations

import pytest

from .node_suite import PASSING_LIST, Summary, all_cases, run_case


@pytest.fixture(scope="module")
def cases():
    return all_cases()


@pytest.fixture(scope="module")
def results(cases):
    return [run_case(c) for c in cases]


def test_every_listed_case_still_passes(results):
    status = {f"{r.suite}/{r.name}": r for r in results}
    listed = [n for n in PASSING_LIST.read_text().split() if n]
    regressed = [f"{n}: {status[n].status}: {status[n].detail}" if n in status else f"{n}: case missing"
                 for n in listed if n not in status or status[n].status != "pass"]
    assert not regressed, "\n".join(regressed)


def test_pass_count_floor(results):
    """The floor is the length of passing_cases.txt (one number to keep, in one place)."""
    s = Summary(results)
    print(s.line())
    floor = len([n for n in PASSING_LIST.read_text().split() if n])
    assert s.count("pass") >= floor, s.line()


def test_no_case_crashes_the_converter(results):
    """Every case ends as pass, fail, or a converter error (never an uncaught Python exception)."""
    crashed = [f"{r.suite}/{r.name}: {r.detail}" for r in results if "crashed" in r.detail]
    assert not crashed, "\n".join(crashed)


def _mil_round_trip_mismatches(cases, results, every: int) -> list[str]:
    """Cases passing ONNX -> IR -> interpreter that do not pass ONNX -> IR -> .mlpackage -> IR ->
    interpreter (every ``every``-th passing case, in a fixed order)."""
    by_name = {f"{c.suite}/{c.name}": c for c in cases}
    passing = sorted(f"{r.suite}/{r.name}" for r in results if r.status == "pass")
    bad = []
    for name in passing[::every]:
        r = run_case(by_name[name], via_mil=True)
        if r.status != "pass":
            bad.append(f"{name}: {r.status}: {r.detail}")
    return bad


def test_mil_package_round_trip_gives_the_same_results_on_a_sample(cases, results):
    """Every 8th passing case (~110) through a written .mlpackage: a few seconds."""
    bad = _mil_round_trip_mismatches(cases, results, 8)
    assert not bad, "\n".join(bad)


@pytest.mark.slow
def test_mil_package_round_trip_gives_the_same_results(cases, results):
    """All passing cases through a written .mlpackage (~30 s: one package write per case)."""
    bad = _mil_round_trip_mismatches(cases, results, 1)
    assert not bad, "\n".join(bad)


def test_issue_targets(results):
    """Issue 12's targets: >= 90% of the cases whose operators are all supported pass, and >= 70% of
    all cases; the second holds even without the passes that bind parameter inputs as constants."""
    s = Summary(results)
    assert s.count("pass", supported_only=True) >= 0.9 * s.supported_total, s.line()
    assert s.count("pass") >= 0.7 * s.total, s.line()
    unfrozen = sum(r.status == "pass" and not r.frozen for r in results)
    assert unfrozen >= 0.7 * s.total, s.line()
