"""Seeded fuzzing of the readers, for a bounded time: mutants of the shared models (truncations,
bit flips, insertions, protobuf field rewrites, Manifest.json and weight.bin edits:
tests/hostile/mutate.py) each go through what ``converter convert --check`` does, in a child
process limited to 10 s and 1 GiB (loops cut at 1,000 iterations and tensors at 64 MiB:
harness.FUZZ_*). Each must end in success or a converter error; a crash, a hang, more than 1 GiB or a refused
allocation fails the test with the seed and the mutations, which ``python tools/fuzz.py --replay
SEED`` runs again.

Mutants of the ONNX models the onnx package ships go the same way (``tools/fuzz.py --pool onnx``).

SLOW: runs for CONVERTER_FUZZ_SECONDS (default 60 s; ONNX: CONVERTER_ONNX_FUZZ_SECONDS, default
half that), seeds 0, 1, 2, ... in order, so CI runs the same mutants every time (as many as the
machine gets through). Longer runs: tools/fuzz.py.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from tests.hostile.harness import FUZZ_LOOP_LIMIT, FUZZ_TENSOR_BYTES, FUZZ_TIME_LIMIT, Harness, problems
from tests.hostile.mutate import make_mutant, onnx_sources, sources

FUZZ_SECONDS = float(os.environ.get("CONVERTER_FUZZ_SECONDS", "60"))
#: ONNX mutants (of the 140 models the onnx package ships for its backend tests) get half that
ONNX_FUZZ_SECONDS = float(os.environ.get("CONVERTER_ONNX_FUZZ_SECONDS", str(FUZZ_SECONDS / 2)))


@pytest.mark.slow
def test_mutants_of_the_shared_models_end_in_success_or_a_converter_error(tmp_path: Path, shared_dir: Path) -> None:
    _fuzz(tmp_path, sources(), FUZZ_SECONDS, "tools/fuzz.py --replay SEED")


@pytest.mark.slow
def test_mutants_of_onnx_models_end_in_success_or_a_converter_error(tmp_path: Path) -> None:
    """The same for ONNX files: protobuf-aware mutations with onnx's ModelProto descriptors, and
    byte-level ones, of the small models the onnx package ships (about 4 mutants a second)."""
    _fuzz(tmp_path, onnx_sources(), ONNX_FUZZ_SECONDS, "tools/fuzz.py --pool onnx --replay SEED")


def _fuzz(tmp_path: Path, pool: list[str], seconds: float, replay: str) -> None:
    assert pool, "no models to mutate"
    findings, outcomes = [], {"ok": 0, "error": 0}
    end = time.monotonic() + seconds
    seed = 0
    with Harness() as h:
        while time.monotonic() < end:
            m = make_mutant(seed, pool)
            folder = tmp_path / str(seed)
            folder.mkdir()
            r = h.library(m.write(folder), time_limit=FUZZ_TIME_LIMIT, loop_limit=FUZZ_LOOP_LIMIT,
                          tensor_limit=FUZZ_TENSOR_BYTES)
            shutil.rmtree(folder)
            wrong = problems(r)
            if wrong:
                findings.append(f"{m.describe()}\n    {'; '.join(wrong)}: {r.describe()[:1500]}")
            else:
                outcomes[r.outcome] += 1
            seed += 1
    print(f"fuzz: {seed} mutants in {seconds:.0f} s: {outcomes['ok']} converted and checked, "
          f"{outcomes['error']} converter errors, {len(findings)} findings")
    assert seed >= min(50, seconds), f"only {seed} mutants ran in {seconds} s"
    assert not findings, f"{len(findings)} of {seed} mutants failed (replay: {replay}):\n" + "\n".join(findings)
