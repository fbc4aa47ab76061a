"""Issue 9, round trip: for every shared model that converts to WebNN, source -> WebNN (model.js +
model.bin) -> WebNN frontend (the module run under Node with our recording MLGraphBuilder) -> IR ->
MIL .mlpackage -> IR -> interpreter matches the interpreter on the source, in both layouts.

This is a round-trip check of our own two directions (the browser tests are the oracle for the
backend, the conformance vectors for the frontend). Bound: fp32 1e-4 x max(1, |ref|) (the paths
compute the same ops, reordered only where WebNN's forms differ: gemm, NHWC transposes, decomposed
pools and resizes); fp16 programs 2^-7 x max(1, |ref|) as in test_shared_models.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import converter
from converter.ir.interpreter import Interpreter
from converter.runtime_io import adapt_feeds

from ..nn_models.shared import model_id
from ..passes.test_models import HEAVY, MODELS, _feeds
from .browser_client import module_features
from .helpers import computes_in_fp16
from .test_shared_models import REFUSED

FP32_BOUND = 1e-4
FP16_BOUND = 2.0**-7


def _cases() -> list:
    cases = []
    for path in MODELS:
        if model_id(path) in REFUSED:
            continue
        marks = [pytest.mark.slow] if model_id(path) in HEAVY else []
        cases += [pytest.param(path, layout, marks=marks, id=f"{model_id(path)}-{layout}") for layout in ("nchw", "nhwc")]
    return cases


@pytest.fixture(autouse=True)
def _quiet_notes(recwarn: pytest.WarningsRecorder) -> None:
    """Conversion notes are not the subject here."""


@pytest.mark.parametrize(("path", "layout"), _cases())
def test_source_to_webnn_to_mlpackage_matches_the_source(path: Path, layout: str, tmp_path: Path) -> None:
    source = converter.load(path)
    ir_feeds = adapt_feeds(source.main, _feeds(path, source))
    shapes = {v.name: list(np.shape(ir_feeds[v.name])) for v in source.main.inputs if v.name in ir_feeds}
    web = tmp_path / "web"
    converter.convert(source, to="webnn", out=web, layout=layout, input_shapes=shapes)
    read_back = converter.load(web / "model.js")
    package = converter.save(read_back, tmp_path / "round_trip.mlpackage")
    final = converter.load(package)
    inputs = module_features(web, "inputs")
    assert len(final.main.inputs) == len(inputs)  # by position: MIL makes names valid identifiers ('0' -> '_0')
    want = Interpreter(source).run(ir_feeds, source.main.name)
    got_by_position = Interpreter(final).run({v.name: np.asarray(ir_feeds[n]) for v, n in zip(final.main.inputs, inputs)},
                                             final.main.name)
    got = dict(zip(module_features(web, "outputs"), got_by_position.values()))
    bound = FP16_BOUND if computes_in_fp16(source) else FP32_BOUND
    labels = module_features(web, "labels")
    outputs = module_features(web, "outputs")
    for name, value in want.items():
        if name not in outputs:
            continue  # a classifier's label, which model.js maps from the probabilities
        if isinstance(value, dict):
            by_label = dict(zip(labels, np.asarray(got[name]).reshape(-1)))  # a repeated label keeps its last value
            got_v, want_v = np.asarray([by_label[k] for k in value]), np.asarray(list(value.values()))
        else:
            got_v, want_v = np.asarray(got[name], np.float64), np.asarray(value, np.float64)
        want_v = want_v.astype(np.float64)
        got_v = got_v.astype(np.float64).reshape(want_v.shape)
        scale = max(1.0, float(np.max(np.abs(want_v), initial=0.0)))
        err = float(np.max(np.abs(got_v - want_v), initial=0.0))
        assert err <= bound * scale, f"{name}: {err:.3g} > {bound:.3g} x {scale:.3g}"
