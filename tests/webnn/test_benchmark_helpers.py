"""benchmarks/webnn.py's helpers that decide what its numbers mean (no browser, ~3 s):

- the ONNX export it gives ONNX Runtime Web computes what the torch model computes (oracle:
  onnxruntime on CPU running the exported file, against torch's own output);
- the one-op model whose first session starts ORT-Web's runtime is a valid ONNX model (onnx's checker,
  onnxruntime's Relu);
- "backend not available" is said only for a converter without the WebNN backend or its options, never
  for a real conversion failure (which must be reported as one).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import webnn as bench  # noqa: E402

from converter.errors import FormatError, UnsupportedError  # noqa: E402


def test_the_onnx_export_computes_what_torch_computes(tmp_path: Path) -> None:
    onnxruntime = pytest.importorskip("onnxruntime")
    torch = pytest.importorskip("torch")
    spec = bench.ModelSpec("tiny", "ResNet, one block per stage, width 4", (1, 1, 1, 1), 4, 3, 16)
    module = bench.torch_module(spec)
    x = np.random.default_rng(0).standard_normal(spec.shape).astype(np.float32)
    bench.export_onnx(module, torch.from_numpy(x), tmp_path / "model.onnx")
    with torch.no_grad():
        expected = module(torch.from_numpy(x)).numpy()
    session = onnxruntime.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == [bench.INPUT]
    (got,) = session.run([bench.OUTPUT], {bench.INPUT: x})
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_the_one_op_model_is_valid(tmp_path: Path) -> None:
    onnxruntime = pytest.importorskip("onnxruntime")
    bench.write_tiny_onnx(tmp_path / "tiny.onnx")
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8)
    (y,) = onnxruntime.InferenceSession(str(tmp_path / "tiny.onnx"), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})
    np.testing.assert_array_equal(y, np.maximum(x, 0))


def test_backend_not_available_only_for_a_missing_backend_or_option() -> None:
    assert bench.unavailable_reason(UnsupportedError("unknown output format 'webnn' (supported: mil)"))
    assert bench.unavailable_reason(TypeError("convert() got an unexpected keyword argument 'layout'"))
    assert bench.unavailable_reason(UnsupportedError("op 'foo' (type lstm): no WebNN form")) is None
    assert bench.unavailable_reason(FormatError("model.mlpackage: truncated")) is None
    assert bench.unavailable_reason(TypeError("unsupported operand type(s)")) is None


def test_the_command_line_refuses_an_unknown_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.parse_args(["--models", "small,resnet18", "--no-ort"]).models == ["small", "resnet18"]
    with pytest.raises(SystemExit):
        bench.parse_args(["--models", "resnet50"])
    assert "choose from small, resnet18, resnet34" in capsys.readouterr().err
