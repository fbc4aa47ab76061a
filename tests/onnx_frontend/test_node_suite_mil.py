"""ONNX's operator test suite through ONNX -> IR -> MIL ``.mlpackage`` -> IR -> interpreter.

The issue's Done-when: the cases that pass ONNX -> IR -> interpreter (passing_cases.txt, pinned by
test_node_suite.py) give the same results after a round trip through a saved ML program. The
oracle stays the expected outputs ONNX's authors ship with each case (onnx's tolerances), so this
checks that the MIL writer and reader keep every program the ONNX frontend builds.

Inputs and outputs are matched by position: the MIL writer renames a feature whose ONNX name is
not a MIL identifier (``0`` -> ``_0``, with a ConversionWarning saying apps must use the new name).

A case may also be *refused* by the MIL writer with an UnsupportedError, for limits of the Core
ML model interface (not of the program): a feature (graph input or output) of dtype bool / int8 /
uint8 / int16 / uint16 (multiArray features hold fp16/fp32/fp64/int32 only) or a rank-0 input
(Core ML inputs have rank >= 1). Those reasons are the only ones allowed (`INTERFACE_LIMITS`);
any other refusal, error or wrong value fails the test naming the case. ~400 packages are
written and read: ~7 s on one core.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np

from converter.errors import UnsupportedError

from .node_suite import PASSING_LIST, Case, _compare, _plain, all_cases

#: What the MIL writer may refuse: limits of Core ML's model interface (features), not of MIL.
INTERFACE_LIMITS = re.compile(r"multiArray features cannot hold (bool|u?int8|u?int16)|"
                              r"is a scalar: Core ML model inputs have rank >= 1")
#: Measured number of passing cases that survive the round trip (raise it when it grows).
SURVIVE_FLOOR = 264


def run_case_through_mil(case: Case, workdir: Path) -> tuple[str, str]:
    """(status, detail) of the case through ONNX -> IR -> .mlpackage -> IR -> interpreter;
    status is "pass", "refused" (UnsupportedError from the MIL writer), or "fail"."""
    import converter
    from converter.frontends.onnx import load_onnx
    from converter.ir.interpreter import run

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prog = load_onnx(case.model)
            path = converter.save(prog, workdir / f"{case.name}.mlpackage", to="mil")
            back = converter.load(path)
    except UnsupportedError as e:
        return "refused", e.message
    except Exception as e:  # noqa: BLE001 - a failure to report with the case name
        return "fail", f"save/load: {type(e).__name__}: {e}"[:400]
    graph = case.model.graph
    init = {t.name for t in graph.initializer}
    n_in = len([vi for vi in graph.input if vi.name not in init])
    fn = back.functions["main"]
    in_names = [v.name for v in fn.block.inputs]
    out_names = [v.name for v in fn.block.outputs]
    if len(in_names) != n_in or len(out_names) != len(graph.output):
        return "fail", f"features changed: inputs {in_names}, outputs {out_names}"
    for k, (inputs, outputs) in enumerate(case.data_sets):
        feeds = {name: _plain(x) for name, x in zip(in_names, inputs)}
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                got = run(back, feeds)
        except Exception as e:  # noqa: BLE001
            return "fail", f"run: {type(e).__name__}: {e}"[:400]
        for name, want in zip(out_names, outputs):
            why = _compare(got[name], _plain(want), case.rtol, case.atol)
            if why:
                return "fail", f"data set {k}, output '{name}': {why}"
    return "pass", ""


def test_passing_cases_survive_the_mil_round_trip(tmp_path):
    listed = {n for n in PASSING_LIST.read_text().split() if n}
    cases = [c for c in all_cases() if f"{c.suite}/{c.name}" in listed]
    results = {f"{c.suite}/{c.name}": run_case_through_mil(c, tmp_path) for c in cases}
    bad = {k: d for k, (s, d) in results.items() if s == "fail" or (s == "refused" and not INTERFACE_LIMITS.search(d))}
    survived = sum(s == "pass" for s, _ in results.values())
    print(f"{survived}/{len(cases)} passing cases survive the MIL round trip; "
          f"{sum(s == 'refused' for s, _ in results.values())} refused for Core ML interface limits")
    assert not bad, "\n".join(f"{k}: {v}" for k, v in sorted(bad.items()))
    assert survived >= SURVIVE_FLOOR
