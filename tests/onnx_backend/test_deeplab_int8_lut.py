"""End to end: DeepLabV3 with 8-bit LUT weights (a NeuralNetwork .mlmodel) exported to ONNX.

converter.load -> converter.save(to="onnx") -> onnx.checker full check -> onnxruntime, compared
with our interpreter on the same input (the model's output is the per-pixel argmax, int32: every
pixel must agree). The palettized weights stay palettized (uint8 indices gathered from their
256-entry tables), so the file is about a quarter of the dense fp32 weights. Takes ~8 s (the
interpreter run dominates)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import converter
from converter.errors import UnsupportedError

MODEL = Path(__file__).resolve().parents[2] / "../shared/data/models/real/9de70cc9_DeepLabV3Int8LUT.mlmodel"


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
