"""The default pipeline, and every pass of `PASSES` alone, on every shared model that runs (the
NeuralNetwork models that load and the ML programs): the verifier passes after each pass, the
optimized program computes bit-identical outputs to the program as loaded when only exact rules
fired (within float rounding when a fusion marked ``exact=False`` did: `rounding_bound`).

For the default pipeline also: the torch-derived models still match torch's own outputs (the
oracle; tolerances as in tests/nn_models/test_torch.py and tests/mil/test_shared_models.py), and
coremltools' MIL loader (which re-runs its type inference on every op) reads the optimized
program once written.

Each pass alone (run as ``--passes NAME`` runs it: to a fixed point): the cases are every (model,
pass) pair, made at collection time from `PASSES`, so a pass registered later is covered without
touching this file. The pairs on the few models the interpreter takes seconds to run (`HEAVY`)
are in the slow tier, the rest in the default tier: together the full product.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import converter
from converter.ir.clone import clone_program
from converter.ir.core import Program
from converter.passes.pipelines import PASSES, all_rules

from ..mil.helpers import MLPROGRAM_PACKAGES, CoremltoolsLoader, torch_conversions
from ..mil.helpers import random_feeds as mil_random_feeds
from ..nn_models.shared import RUNS, TORCH, feeds_for, max_abs_error, model_id, torch_record

FP32_TOLERANCE = 1e-4
FP16_TOLERANCE = 2.0**-9  # see tests/mil/test_shared_models.py::test_torch_reference

@pytest.fixture(scope="module")
def ct_loader() -> CoremltoolsLoader:
    pytest.importorskip("coremltools")
    return CoremltoolsLoader()


def _torch_reference(path: Path) -> tuple[list[str], list[np.ndarray], float] | None:
    """(output names, torch's outputs, tolerance) of a torch-derived model, else None."""
    if path.parent != TORCH:
        return None
    if path.suffix == ".mlmodel":
        name, record = torch_record(path)
        tol = FP32_TOLERANCE
    else:
        found = [(n, k, c) for n, k, c in torch_conversions() if c["path"] == model_id(path)]
        (name, kind, record), = found
        tol = FP16_TOLERANCE if kind == "mlprogram_fp16" else FP32_TOLERANCE
    with np.load(TORCH / f"{name}.torch_outputs.npz") as data:
        refs = [data[f"output_{i}"] for i in range(len(data.files))]
    return list(record["outputs"]), refs, tol


def _feeds(path: Path, prog: Program) -> dict[str, Any]:
    if path.suffix == ".mlmodel":
        return feeds_for(path, prog)
    if path.parent == TORCH:
        name = next(n for n, _, c in torch_conversions() if c["path"] == model_id(path))
        with np.load(TORCH / f"{name}.inputs.npz") as data:  # by position: export variants rename inputs
            return {v.name: data[k] for v, k in zip(prog.main.inputs, data.files)}
    return mil_random_feeds(prog)


MODELS = RUNS + MLPROGRAM_PACKAGES
RULES = all_rules()
#: passes that trade size for a flat program (unrolled loops are larger than the loop)
EXPANDING = {"unroll_control_flow"}


def rounding_bound(want: Any) -> float:
    """What a fusion that rounds differently (a rule with ``exact=False``: conv + batch_norm folded
    into the weights, ...) may change: a few units of the output dtype's precision relative to
    the output's scale. Exact rules must leave outputs bit-identical."""
    a = np.asarray(want)
    if a.dtype.kind != "f":
        return 0.0
    rel = 1e-5 if a.dtype.itemsize >= 4 else 2.0**-8
    return rel * max(1.0, float(np.max(np.abs(a[np.isfinite(a)]), initial=0.0)))


@pytest.fixture(autouse=True)
def _quiet_notes(recwarn: pytest.WarningsRecorder) -> None:
    """Conversion notes (a feature renamed on writing) are expected here, not the subject."""


@pytest.mark.parametrize("path", MODELS, ids=model_id)
def test_default_pipeline_keeps_outputs(path: Path, tmp_path: Path, ct_loader: CoremltoolsLoader) -> None:
    prog = converter.load(path)
    feeds = _feeds(path, prog)
    want = converter.run(prog, feeds)
    optimized, _ = clone_program(prog)
    stats = converter.optimize(optimized, verify=True)  # the verifier before and after each pass
    got = converter.run(optimized, feeds)
    assert list(got) == list(want)
    inexact = sorted(n for n in stats.rewrites() if not RULES[n].exact)
    for name in want:
        bound = rounding_bound(want[name]) if inexact else 0.0
        assert max_abs_error(got[name], want[name]) <= bound, f"output {name} changed ({stats.rewrites()})"
    ref = _torch_reference(path)
    if ref is not None:
        names, refs, tol = ref
        for out_name, r in zip(names, refs):
            err = max_abs_error(np.asarray(got[out_name]).reshape(r.shape), r)
            assert err <= tol * max(1.0, float(np.max(np.abs(r)))), f"{out_name}: {err:.3g} from torch"
    assert stats.passes[-1].ops_after <= stats.passes[0].ops_before
    ct_loader.load(converter.save(optimized, tmp_path / "optimized.mlpackage"))


# The models whose interpreter runs take seconds (measured with --durations on the shared 2-core
# machine: each pass alone costs one run of the model, and these take 1.5-13 s each; every other
# model takes well under 0.5 s). Their (model, pass) pairs are the slow tier.
HEAVY = {"real/9de70cc9_DeepLabV3Int8LUT.mlmodel", "real/799a4a00_model_cpm.mlmodel",
         "real/9f7cf8e5_model_hourglass.mlmodel", "real/8dbda0d2_SqueezeNetInt8LUT.mlmodel",
         "real/7485461f_SqueezeNetFP16.mlmodel"}


def _pass_cases() -> list[Any]:
    """Every (model, pass) pair, model by model (consecutive cases share the model's reference run)."""
    cases = []
    for path in MODELS:
        marks = [pytest.mark.slow] if model_id(path) in HEAVY else []
        cases += [pytest.param(path, name, marks=marks, id=f"{model_id(path)}-{name}") for name in PASSES]
    return cases


@lru_cache(maxsize=1)
def _loaded(path: Path) -> tuple[Program, dict[str, Any], dict[str, Any]]:
    """(the program as loaded, its feeds, its outputs): once per model, each test works on a clone."""
    prog = converter.load(path)
    feeds = _feeds(path, prog)
    return prog, feeds, converter.run(prog, feeds)


def test_heavy_models_are_shared_models() -> None:
    assert HEAVY <= {model_id(p) for p in MODELS}


@pytest.mark.parametrize(("path", "pass_name"), _pass_cases())
def test_each_pass_alone_keeps_outputs(path: Path, pass_name: str) -> None:
    loaded, feeds, want = _loaded(path)
    prog, _ = clone_program(loaded)
    stats = converter.optimize(prog, pass_name, verify=True)  # the verifier before and after each run
    got = converter.run(prog, feeds)
    assert list(got) == list(want)
    inexact = sorted(n for n in stats.rewrites() if not RULES[n].exact)
    for name in want:
        bound = rounding_bound(want[name]) if inexact else 0.0
        assert max_abs_error(got[name], want[name]) <= bound, f"output {name} changed ({stats.rewrites()})"
    if pass_name not in EXPANDING:
        assert stats.passes[-1].ops_after <= stats.passes[0].ops_before
