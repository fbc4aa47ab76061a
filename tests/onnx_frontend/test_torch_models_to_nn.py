"""The issue's torch models, exported by torch.onnx.export, convert ONNX -> NeuralNetwork
(``.mlmodel``, ND layers): the written model, read back by our NeuralNetwork frontend and run by our
interpreter, matches onnxruntime on the original ONNX model. (ONNX -> ML program:
test_torch_models.py; ONNX -> WebNN in the real browser: tests/webnn/test_from_onnx.py.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import converter
from converter.ir.interpreter import run

from .test_torch_models import MODELS, exported_case


@pytest.mark.parametrize("name", list(MODELS))
def test_torch_export_converts_to_neuralnetwork(name: str, tmp_path: Path) -> None:
    _, _, model, feeds, want = exported_case(name)

    out = tmp_path / f"{name}.mlmodel"
    converter.convert(model, to="neuralnetwork", out=out)
    (got,) = run(converter.load(out), feeds).values()
    np.testing.assert_allclose(np.asarray(got).reshape(want.shape), want, rtol=1e-4,
                               atol=1e-4 * max(1.0, float(np.abs(want).max())))
