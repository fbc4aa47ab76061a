"""Property: random programs with the decomposed forms the fusion rules rewrite written into them
(tests/passes/patterns/) keep their outputs, within the tolerances of the patterns used, through
the default pipeline with the verifier after every pass; and every pattern names a rule that
exists."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import converter
from converter.ir.clone import clone_program
from converter.ir.core import Program
from converter.ir.interpreter import run
from converter.ir.types import TensorType
from converter.ir.verify import verify
from converter.passes.pipelines import PASSES, all_rules

from ..ir.test_random_programs import programs
from .patterns import Sprinkle, all_sprinkles
from .test_random_programs import builder_after, redirect_uses

SPRINKLES = all_sprinkles()


@st.composite
def with_fusion_patterns(draw) -> tuple[Program, dict, list[Sprinkle]]:
    prog, feeds = draw(programs())
    used: list[Sprinkle] = []
    ops = [op for op in prog.walk() if op.type != "const" and not op.blocks and op.outputs
           and isinstance(op.outputs[0].type, TensorType) and op.outputs[0].type.dtype.name == "fp32"]
    if not ops or not SPRINKLES:
        return prog, feeds, used
    for op in draw(st.lists(st.sampled_from(ops), min_size=1, max_size=4)):
        x = op.outputs[0]
        sprinkle = draw(st.sampled_from(SPRINKLES))
        b = builder_after(op)
        before = set(b.block.ops)
        y = sprinkle.make(b, x, draw)
        if y is None:
            continue
        assert y.type == x.type, f"{sprinkle.name}: {y.type} for {x.type}"
        new_ops = {inner for op in set(b.block.ops) - before for inner in op.walk()}  # nested blocks too
        redirect_uses(x, y, new_ops, draw(st.integers(1, 255)))
        used.append(sprinkle)
    verify(prog)
    return prog, feeds, used


def test_every_pattern_names_a_rule_or_pass() -> None:
    names = set(all_rules()) | set(PASSES)
    missing = sorted({s.fires for s in SPRINKLES} - names)
    assert not missing, f"patterns for rules that do not exist: {missing}"


@pytest.mark.skipif(not SPRINKLES, reason="no fusion patterns yet")
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(with_fusion_patterns())
def test_default_pipeline_keeps_random_programs_with_fusion_patterns(case) -> None:
    prog, feeds, used = case
    optimized, _ = clone_program(prog)
    converter.optimize(optimized, verify=True)
    want, got = run(prog, feeds), run(optimized, feeds)
    rtol = max((s.rtol for s in used), default=0.0)
    atol = max((s.atol for s in used), default=0.0)
    assert list(got) == list(want)
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape
        if rtol == 0 and atol == 0:
            np.testing.assert_array_equal(got[k], want[k])
        else:
            np.testing.assert_allclose(got[k], want[k], rtol=rtol, atol=atol)
