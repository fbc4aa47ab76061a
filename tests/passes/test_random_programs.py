"""Property: the default pipeline keeps random programs (nested cond / while_loop blocks, exact
no-ops and repeated ops among arithmetic: the generator of tests/ir/test_random_programs.py) valid
after every pass, and their outputs bit-identical."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings

import converter
from converter.ir.clone import clone_program
from converter.ir.interpreter import run

from ..ir.test_random_programs import programs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs())
def test_default_pipeline_keeps_random_programs(case) -> None:
    prog, feeds = case
    optimized, _ = clone_program(prog)
    converter.optimize(optimized, verify=True)
    want, got = run(prog, feeds), run(optimized, feeds)
    assert list(got) == list(want)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
        assert got[k].dtype == want[k].dtype
