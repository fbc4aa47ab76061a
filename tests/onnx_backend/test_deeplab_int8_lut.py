"""End to end: DeepLabV3 and SqueezeNet with 8-bit LUT weights (NeuralNetwork .mlmodel files) exported to ONNX.

converter.load -> converter.save(to="onnx") -> onnx.checker full check -> onnxruntime, compared
with our interpreter on the same input (the model's output is the per-pixel argmax, int32: every
pixel must agree). The palettized weights stay palettized (uint8 indices gathered from their
256-entry tables), so the file is about a quarter of the dense fp32 weights. The DeepLabV3 test
takes ~8 s idle (the interpreter run dominates): marked slow."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import converter
from converter.errors import UnsupportedError

MODEL = Path(__file__).resolve().parents[2] / "../shared/data/models/real/9de70cc9_DeepLabV3Int8LUT.mlmodel"


@pytest.mark.slow  # about 8 s idle: one 513x513 DeepLabV3 run in the reference interpreter
@pytest.mark.skipif(not MODEL.exists(), reason="shared model data not present")
def test_deeplab_int8_lut_exports_and_matches_the_interpreter(tmp_path: Path) -> None:
    program = converter.load(str(MODEL))
    out = tmp_path / "deeplab.onnx"
    try:
        converter.save(program, str(out), to="onnx")
    except UnsupportedError as err:  # on a branch without the conv/shape/reduce lowerings
        pytest.skip(f"needs lowerings of other op families: {str(err)[:300]}")
    model = onnx.load(str(out))
    onnx.checker.check_model(model, full_check=True)
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("Gather") >= 45 and "DequantizeLinear" not in ops  # 45 LUT weights as Gathers
    assert out.stat().st_size < 4_000_000  # dense fp32 weights alone would take ~8 MB
    x = (np.random.default_rng(0).random((1, 3, 513, 513), np.float32) * 255).astype(np.float32)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    sess = ort.InferenceSession(str(out), options, providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {"image": x})
    want = converter.run(program, {"image": x})["semanticPredictions"]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


SQUEEZENET = MODEL.parent / "8dbda0d2_SqueezeNetInt8LUT.mlmodel"


@pytest.mark.skipif(not SQUEEZENET.exists(), reason="shared model data not present")
@pytest.mark.parametrize("form", ["tensor", "zipmap"])
def test_squeezenet_int8_lut_classifier(form: str) -> None:
    """A palettized classifier (1000 ImageNet labels, 3 of them duplicated): the label and every
    probability, read by label, agree with the interpreter's dict (duplicates: the last wins in both)."""
    from converter.backends.onnx import program_to_onnx
    from converter.ir.ops.classify import class_labels

    program = converter.load(str(SQUEEZENET))
    try:
        model = program_to_onnx(program, classifier=form)
    except UnsupportedError as err:
        pytest.skip(f"needs lowerings of other op families: {str(err)[:300]}")
    (image,) = program.main.inputs
    x = (np.random.default_rng(1).random([int(d) for d in image.type.shape], np.float32) * 255).astype(np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {image.name: x})))
    want = converter.run(program, {image.name: x})
    assert got["classLabel"].item() == want["classLabel"].item()
    (op,) = [o for o in program.main.block.ops if o.type == "classify"]
    labels = class_labels(op.inputs["classes"].const_val)
    probs = dict(zip(labels, got["classLabelProbs"])) if form == "tensor" else got["classLabelProbs"][0]
    assert set(probs) == set(want["classLabelProbs"])
    assert max(abs(probs[k] - v) for k, v in want["classLabelProbs"].items()) < 1e-4
