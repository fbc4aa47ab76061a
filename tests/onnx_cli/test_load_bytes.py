"""``converter.load(data)`` tells the bytes of an ONNX model from those of a .mlmodel (the README
says both load): an ONNX model's bytes load through the ONNX frontend, every shared .mlmodel still
through Core ML's."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort

import converter
from converter.frontends.onnx import looks_like_onnx

from ..conftest import MODELS
from .models import mlp, torch_cnn


def test_onnx_bytes_and_model_proto_load(tmp_path):
    path = torch_cnn(tmp_path / "cnn.onnx")
    data = path.read_bytes()
    x = np.random.default_rng(2).standard_normal((1, 3, 16, 16)).astype(np.float32)
    want = ort.InferenceSession(data).run(None, {"image": x})[0]
    for src in (data, bytearray(data), memoryview(data), onnx.load_from_string(data)):
        got = converter.run(converter.load(src), {"image": x})["probs"]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_core_ml_bytes_are_not_taken_for_onnx(tmp_path):
    models = sorted(MODELS.rglob("*.mlmodel"))
    assert len(models) > 20
    assert not [p for p in models if looks_like_onnx(p.read_bytes())]
    assert looks_like_onnx(mlp(tmp_path / "m.onnx").read_bytes())
    assert not looks_like_onnx(b"\x08\x01\x3a")  # truncated: a graph field with no length
