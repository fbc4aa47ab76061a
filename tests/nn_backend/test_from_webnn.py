"""WebNN -> NeuralNetwork (issue 10): every WebNN conformance graph read by the WebNN frontend is
written as a NeuralNetwork model, read back by the NeuralNetwork frontend and run; its outputs must
match the conformance vector's expected outputs (the oracle: WPT's expected values, under the WPT
harness's tolerances, as in tests/webnn_frontend).

What the NeuralNetwork format cannot express is accounted for, case by case, by rule:
- a scalar (rank-0) result comes back with shape [1] (NeuralNetwork arrays have rank >= 1): its
  values are compared as they are;
- integers beyond 2**24 in magnitude are not exact (every blob is fp32 at run time): a case whose
  expected integers go beyond that may differ, and is counted apart; a 64-bit feed beyond the int32
  range (the IR holds int64 as int32) is refused by the runner, naming the input, and skipped here;
- a graph with a run-time conv_transpose weight is refused (`REFUSALS`).
Everything else must convert and match: 1667 of the 1676 cases when this was written, 7 with
integers beyond 2**24, 2 refused.
"""

from __future__ import annotations

import copy
import warnings
from pathlib import Path

import numpy as np
import pytest

import converter
from converter.errors import EvaluationError, UnsupportedError

from ..webnn_frontend.conformance import case_program, compare_outputs, expected_array, load_cases, op_files

FP32_EXACT = 2**24
#: why a graph may be refused (a substring of the error)
REFUSALS = ("a run-time conv_transpose weight has no NeuralNetwork form",)


def _big_integers(case: dict) -> bool:
    for exp in case["graph"]["expectedOutputs"].values():
        arr = expected_array(exp["data"], exp["descriptor"])
        if arr.dtype.kind in "iu" and arr.size and np.max(np.abs(arr.astype(np.float64))) > FP32_EXACT:
            return True
    return False


def _as_declared(case: dict, outs: dict) -> dict:
    """Scalars declared [1] by the NeuralNetwork model, in the case's rank-0 form."""
    fixed = dict(outs)
    for name, exp in case["graph"]["expectedOutputs"].items():
        got = np.asarray(outs[name])
        if exp["descriptor"]["shape"] == [] and got.shape == (1,):
            fixed[name] = got.reshape(())
    return fixed


@pytest.mark.parametrize("op", op_files())
def test_webnn_conformance_graphs_through_neuralnetwork(op: str, tmp_path: Path) -> None:
    wrong, refused = {}, {}
    for i, case in enumerate(load_cases(op)):
        prog, feeds = case_program(copy.deepcopy(case))
        out = tmp_path / f"{i}.mlmodel"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                converter.convert(prog, to="neuralnetwork", out=out)
        except UnsupportedError as e:
            if not any(r in str(e) for r in REFUSALS):
                refused[case["name"]] = str(e)[:300]
            continue
        try:
            got = converter.run(converter.load(out), feeds)
        except EvaluationError as e:
            # a 64-bit feed beyond int32 (the IR's int64): refused by name rather than wrapped
            assert "does not fit the input's type int32" in str(e), str(e)
            continue
        why = compare_outputs(case, _as_declared(case, got))
        if why is not None and not _big_integers(case):
            wrong[case["name"]] = why
    assert not refused, f"refused for a reason not in REFUSALS: {refused}"
    assert not wrong, f"converted but wrong: {wrong}"
