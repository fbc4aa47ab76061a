"""benchmarks/mil_to_nn.py's pure helpers (no timing, ~1 s):

- the chain source has the op count asked for (ops other than const), made of conv/relu/add blocks
  on a small-channel input;
- "not available" is said for an UnsupportedError only (our converter without the backend, or an op
  it cannot lower), never for another failure, which must be reported as one;
- the verdicts: speed-up = coremltools' time / ours, our peak over the weight bytes, and the report
  prints an unavailable side as "not available: <reason>".
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import mil_to_nn as bench  # noqa: E402

from converter.errors import FormatError, UnsupportedError  # noqa: E402


def test_the_chain_has_the_ops_asked_for() -> None:
    prog = bench.chain_program(30)
    counts = Counter(op.type for op in prog.walk() if op.type != "const")
    assert counts == {"conv": 10, "relu": 10, "add": 10}
    (fn,) = prog.functions.values()
    assert [list(v.type.shape) for v in fn.block.inputs] == [[1, bench.CHAIN_CHANNELS, bench.CHAIN_SIDE, bench.CHAIN_SIDE]]


def test_not_available_only_for_unsupported() -> None:
    assert bench.unavailable_reason(UnsupportedError("unknown output format 'neuralnetwork'")) == \
        "UnsupportedError: unknown output format 'neuralnetwork'"
    assert bench.unavailable_reason(FormatError("bad weight offset")) is None
    assert bench.unavailable_reason(ValueError("boom")) is None


def test_verdicts_and_report() -> None:
    record = {"source": "chain", "ops": 12, "weight_bytes": 2 * 2**20, "repeat": 1,
              "coremltools": {"seconds": 24.0, "cpu_s": 23.0, "peak_mb": 300.0, "increase_mb": 10.0,
                              "written_bytes": 10, "layers": 12},
              "ours": {"seconds": 1.5, "cpu_s": 1.5, "peak_mb": 120.0, "increase_mb": 2.5,
                       "written_bytes": 10, "layers": 12}}
    assert bench.verdicts(record) == {"speedup": 16.0, "peak_over_weights": 60.0, "increase_over_weights": 1.25}
    unavailable = {**record, "ours": {"unavailable": "UnsupportedError: unknown output format"}}
    assert bench.verdicts(unavailable) == {}
    assert any("ours        not available: UnsupportedError" in line for line in bench.report_lines(unavailable))
