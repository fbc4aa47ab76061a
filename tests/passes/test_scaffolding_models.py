"""remove_scaffolding alone on every shared NeuralNetwork model that runs: the program verifies
after it, computes bit-identical outputs (every rewrite only moves ops across reshapes of unit
axes: the same arithmetic on the same elements), and never has more ops than before. The torch-
derived models' outputs are also held to torch's (tests/optimize/test_migrated_counts.py does it
for the full pipeline)."""

from __future__ import annotations

from pathlib import Path

import pytest

import converter
from converter.ir.clone import clone_program
from converter.ir.verify import verify
from converter.passes.scaffolding import RemoveScaffolding

from ..nn_models.shared import RUNS, feeds_for, max_abs_error, model_id
from ..optimize.counting import op_count


@pytest.fixture(autouse=True)
def _quiet_notes(recwarn: pytest.WarningsRecorder) -> None:
    """Conversion notes are expected here, not the subject."""


@pytest.mark.parametrize("path", RUNS, ids=model_id)
def test_remove_scaffolding_alone_keeps_outputs(path: Path) -> None:
    prog = converter.load(path)
    feeds = feeds_for(path, prog)
    want = converter.run(prog, feeds)
    lowered, _ = clone_program(prog)
    result = RemoveScaffolding().run(lowered)
    verify(lowered)
    got = converter.run(lowered, feeds)
    assert list(got) == list(want)
    for name in want:
        assert max_abs_error(got[name], want[name]) == 0.0, f"output {name} changed ({result.stats})"
    assert op_count(lowered) <= op_count(prog), result.stats
