"""Issue 9: a sample of the WebNN conformance vectors (web-platform-tests, ../shared/data/webnn-conformance)
runs in the real browser through our whole path: the case's graph -> WebNN frontend -> IR -> WebNN
backend (model.js, model.bin) -> Chromium 153's WebNN, compared with the expected outputs under the
case's own tolerance (the WPT harness's ULP/ATOL budgets, tests/webnn_frontend/conformance.py).

The sample: the first `PER_OP` cases of every operator file (all of them where a file has fewer),
run as one test per case. Cases that cannot pass are listed in `KNOWN` with the reason; the test
asserts the number that pass is at least `MINIMUM_PASSING`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import converter
from converter.errors import UnsupportedError

from ..webnn_frontend.conformance import case_program, compare_outputs, load_cases, op_files
from .browser_client import DTYPES, BrowserError, WebnnBrowser, module_features

PER_OP = 4
MINIMUM_PASSING = 200

#: case id -> why it does not pass in the browser (an UnsupportedError at conversion, or Chromium's answer)
_RUNTIME_SCATTER = "indices must be known at conversion time"  # Chromium scatters by constant indices only
KNOWN: dict[str, str] = {
    **{f"scatterND-{i}": _RUNTIME_SCATTER for i in range(4)},
    **{f"scatterElements-{i}": _RUNTIME_SCATTER for i in (0, 2)},
}


def _sample() -> list:
    cases = []
    for op in op_files():
        cases += [pytest.param(op, i, id=f"{op}-{i}") for i in range(min(PER_OP, len(load_cases(op))))]
    return cases


SAMPLE = _sample()
_results: dict[str, str | None] = {}


def _run_case(browser: WebnnBrowser, case: dict, folder: Path) -> str | None:
    prog, feeds = case_program(case)
    try:
        converter.convert(prog, to="webnn", out=folder, passes="none")
    except UnsupportedError as e:
        return f"unsupported: {e.message}"
    inputs = module_features(folder, "inputs")
    try:
        result = browser.run(folder, {n: np.asarray(feeds[n]).astype(DTYPES[d["dataType"]]) for n, d in inputs.items()})
    except BrowserError as e:
        return f"browser: {e}"
    return compare_outputs(case, result.outputs)


@pytest.mark.parametrize(("op", "index"), [p.values for p in SAMPLE], ids=[p.id for p in SAMPLE])
def test_conformance_case_in_the_browser(op: str, index: int, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    case = load_cases(op)[index]
    why = _run_case(webnn_browser, case, tmp_path / "case")
    key = f"{op}-{index}"
    _results[key] = why
    if key in KNOWN:
        assert why is not None, f"{key} passes now: remove it from KNOWN"
        assert KNOWN[key] in why
        return
    assert why is None, why


def test_the_sample_is_large_enough() -> None:
    assert len(SAMPLE) - len(KNOWN) >= MINIMUM_PASSING
