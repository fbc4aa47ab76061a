"""Coverage of the fusion patterns (issue 8): every rule of the fusion passes fires on some
sprinkle of tests/passes/patterns/, so the random-program property test
(tests/passes/test_random_fusions.py) exercises every fusion, not only the ones its patterns
happen to reach.

Each sprinkle is drawn a fixed number of times on a one-input program (the input is the
sprinkle's ``x``), at iOS15 (the random programs' opset) and at iOS17 (quantize/dequantize, which
the ``quantize(dequantize(q))`` pattern needs, exist from iOS17 only), and the default pipeline
runs on it; the rewrite counts say which rules fired. Deterministic: hypothesis draws with
``derandomize=True`` and no example database (the same examples every run for a given hypothesis
version), generation only.
"""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import converter
from converter.ir.builder import new_program
from converter.ir.types import tensor
from converter.passes.pipelines import PASSES

from .patterns import Sprinkle, all_sprinkles

#: the passes whose every rule a pattern must reach
FUSION_PASSES = ("fuse_conv", "fuse_activations", "fuse_normalizations")
#: static shapes with several factorizations (layouts of the patterns), within conv.py's MAX_ELEMENTS
SHAPES = ([2, 3], [2, 6], [4, 6])
OPSETS = ("iOS15", "iOS17")
EXAMPLES_PER_SPRINKLE = 80  # the rarest rule fires 5 times at 80 (hypothesis 6.x); about 10 s


def _fired_by(sprinkle: Sprinkle) -> set[str]:
    """The rules that fired on some of ``EXAMPLES_PER_SPRINKLE`` programs holding ``sprinkle``."""
    fired: set[str] = set()

    @settings(derandomize=True, database=None, max_examples=EXAMPLES_PER_SPRINKLE, phases=[Phase.generate],
              deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def draw_once(data) -> None:
        shape = data.draw(st.sampled_from(SHAPES))
        opset = data.draw(st.sampled_from(OPSETS))

        def body(b, x):
            y = sprinkle.make(b, x, data.draw)
            return x if y is None else y

        prog = new_program({"x": tensor("fp32", shape)}, body, opset=opset)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            stats = converter.optimize(prog, verify=True)
        fired.update(name for name, n in stats.rewrites().items() if n)

    draw_once()
    return fired


@pytest.fixture(scope="module")
def fired() -> set[str]:
    out: set[str] = set()
    for sprinkle in all_sprinkles():
        out |= _fired_by(sprinkle)
    return out


@pytest.mark.parametrize("rule", [r.name for p in FUSION_PASSES for r in PASSES[p]().rules])
def test_some_pattern_fires_rule(rule: str, fired: set[str]) -> None:
    assert rule in fired, f"no pattern of tests/passes/patterns/ makes {rule} fire"
