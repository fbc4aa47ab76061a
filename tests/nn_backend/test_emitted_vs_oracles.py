"""Issue 10's independent oracles on every model the shared-model tests convert:

1. onnxruntime: each emitted NeuralNetwork model that onnxmltools can convert to ONNX gives, in
   onnxruntime, the outputs our interpreter computes on the SOURCE model (1e-4 x max(1, |ref|)).
   onnxmltools reads classic (rank-5) layers only, so most ND models are out of its reach: the
   models it judges are pinned in ``ONNX_JUDGED`` (a model leaving or joining the list fails the
   test, so coverage never changes silently).
2. coremltools: on each ML program, coremltools' own ``ct.convert(program,
   convert_to="neuralnetwork")``, read and run by our NeuralNetwork frontend, agrees with our
   emitted model (same tolerance); coremltools refuses programs with ops above iOS15 (the programs
   it converts are pinned in ``COREMLTOOLS_JUDGED``).
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

#: the emitted models onnxmltools converts and onnxruntime runs (the rest: onnxmltools has no shape
#: calculator for ND layers such as expandDims, squeeze, transpose, concatND, ...)
ONNX_JUDGED = frozenset({
    "real/1aee5979_identity.mlmodel", "real/49719a08_keras_model.mlmodel", "real/56e485a2_my_network_image.mlmodel",
    "real/5f22b2cb_my_network_image.mlmodel", "real/88ce411d_Image2Image.mlmodel",
    "real/cdceb1a6_my_network_image_ct4.mlmodel",
})
#: the ML programs coremltools converts to NeuralNetwork (the other two hold ops above iOS15)
COREMLTOOLS_JUDGED = frozenset(f"torch/{m}.mlpackage" for m in (
    "cnn_bn_mlprogram", "cnn_bn_mlprogram_fp16", "gru_bidirectional_mlprogram", "gru_bidirectional_mlprogram_fp16",
    "lstm_mlprogram", "lstm_mlprogram_fp16", "mlp_export_mlprogram", "mlp_mlprogram", "mlp_mlprogram_fp16",
    "transformer_encoder_layer_export_mlprogram", "transformer_encoder_layer_mlprogram",
    "transformer_encoder_layer_mlprogram_fp16"))


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
        assert model_id(path) not in ONNX_JUDGED, f"onnxruntime no longer judges it: {got.reason}"
        return
    assert model_id(path) in ONNX_JUDGED, "onnxruntime now judges it: add it to ONNX_JUDGED"
    _compare(got, {k: v for k, v in want.items() if k in got}, "onnxruntime")


@pytest.mark.parametrize("path", [p for p in MLPROGRAM_PACKAGES if package_id(p) not in REFUSED_PROGRAMS],
                         ids=package_id)
def test_coremltools_own_neuralnetwork_agrees_with_ours(path: Path, tmp_path: Path) -> None:
    theirs = coremltools_nn(path, tmp_path / "theirs.mlmodel")
    if isinstance(theirs, Unavailable):
        assert package_id(path) not in COREMLTOOLS_JUDGED, f"coremltools no longer converts it: {theirs.reason}"
        return
    assert package_id(path) in COREMLTOOLS_JUDGED, "coremltools now converts it: add it to COREMLTOOLS_JUDGED"
    ours = tmp_path / "ours.mlmodel"
    try:
        _quiet_convert(path, ours)
    except UnsupportedError as e:
        pytest.fail(f"coremltools converts it but we refuse it: {e}")
    a, b = converter.load(ours), converter.load(theirs)
    feeds = random_feeds(converter.load(path))
    _compare(converter.run(a, feeds), converter.run(b, feeds), "coremltools' NeuralNetwork vs ours")
