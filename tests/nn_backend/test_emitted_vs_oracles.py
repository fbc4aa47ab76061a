"""Issue 10's independent oracles on every model the shared-model tests convert:

1. onnxruntime: each emitted NeuralNetwork model that onnxmltools can convert to ONNX gives, in
   onnxruntime, the outputs our interpreter computes on the SOURCE model (1e-4 x max(1, |ref|)).
   onnxmltools reads classic (rank-5) layers only, so many ND models are out of its reach: those
   are skipped with its reason (``pytest -rs`` lists them).
2. coremltools: on each ML program, coremltools' own ``ct.convert(program,
   convert_to="neuralnetwork")``, read and run by our NeuralNetwork frontend, agrees with our
   emitted model (same tolerance); coremltools refuses programs with ops above iOS15.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import converter
from converter.errors import UnsupportedError

from ..mil.helpers import MLPROGRAM_PACKAGES, random_feeds
from ..mil.helpers import model_id as package_id
from ..nn_models.shared import RUNS, feeds_for, model_id
from .oracles import Unavailable, coremltools_nn, onnxruntime_run
from .test_shared_models import REFUSED_PROGRAMS, TOLERANCE, _max_error


def _quiet_convert(src: Path, out: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        converter.convert(src, to="neuralnetwork", out=out)


def _compare(got: dict, want: dict, what: str) -> None:
    for name, ref in want.items():
        if isinstance(ref, dict) or np.asarray(ref).dtype.kind not in "fiub":
            continue  # classifier labels / probability dicts: compared by the round-trip tests
        err = _max_error(got[name], ref)
        assert err <= TOLERANCE, f"{what}: output '{name}' off by {err:.3g} x max(1, |ref|)"


@pytest.mark.parametrize("path", RUNS, ids=model_id)
def test_onnxruntime_runs_the_emitted_model_like_the_source(path: Path, tmp_path: Path) -> None:
    source = converter.load(path)
    out = tmp_path / "m.mlmodel"
    _quiet_convert(path, out)
    feeds = feeds_for(path, source)
    want = converter.run(source, feeds)
    got = onnxruntime_run(out, feeds, like=want)
    if isinstance(got, Unavailable):
        pytest.skip(f"onnxmltools/onnxruntime cannot judge it: {got.reason[:200]}")
    _compare(got, {k: v for k, v in want.items() if k in got}, "onnxruntime")


@pytest.mark.parametrize("path", [p for p in MLPROGRAM_PACKAGES if package_id(p) not in REFUSED_PROGRAMS],
                         ids=package_id)
def test_coremltools_own_neuralnetwork_agrees_with_ours(path: Path, tmp_path: Path) -> None:
    theirs = coremltools_nn(path, tmp_path / "theirs.mlmodel")
    if isinstance(theirs, Unavailable):
        pytest.skip(f"coremltools does not convert it: {theirs.reason[:200]}")
    ours = tmp_path / "ours.mlmodel"
    try:
        _quiet_convert(path, ours)
    except UnsupportedError as e:
        pytest.fail(f"coremltools converts it but we refuse it: {e}")
    a, b = converter.load(ours), converter.load(theirs)
    feeds = random_feeds(converter.load(path))
    _compare(converter.run(a, feeds), converter.run(b, feeds), "coremltools' NeuralNetwork vs ours")
