"""A small CNN exported by torch.onnx.export (Conv + BatchNorm + Relu, MaxPool with ceil_mode,
grouped Conv, Gelu, LayerNorm over a permuted layout, AdaptiveAvgPool, Flatten, Gemm,
LogSoftmax; random weights), with a static and a dynamic batch: ONNX -> IR -> interpreter and
ONNX -> IR -> .mlpackage -> IR -> interpreter match torch (oracle) within fp32 rounding, and
coremltools' MIL loader accepts the package."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

import converter
from converter.frontends.onnx import load_onnx
from converter.ir.interpreter import run

torch = pytest.importorskip("torch")
nn = torch.nn


class SmallCnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2, ceil_mode=True)
        self.c2 = nn.Conv2d(8, 8, (3, 1), padding=(1, 0), groups=4)
        self.ln = nn.LayerNorm(8)
        self.ap = nn.AdaptiveAvgPool2d(4)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn(self.c1(x))))
        x = nn.functional.gelu(self.c2(x))
        x = self.ln(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return torch.log_softmax(self.fc(self.ap(x).flatten(1)), -1)


@pytest.fixture(scope="module")
def model_and_input():
    torch.manual_seed(0)
    m = SmallCnn().eval()
    with torch.no_grad():
        for p in m.parameters():
            p.normal_()
        m.bn.running_mean.normal_()
        m.bn.running_var.uniform_(0.5, 2.0)
    return m, torch.randn(2, 3, 30, 30)


@pytest.mark.parametrize("dynamic", [False, True])
def test_torch_exported_cnn_matches_torch(model_and_input, dynamic, tmp_path):
    m, x = model_and_input
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (x,), f, input_names=["x"], output_names=["y"], opset_version=17, dynamo=False,
                          dynamic_axes={"x": {0: "N"}} if dynamic else None)
    want = m(x).detach().numpy()
    prog = load_onnx(f.getvalue())
    if dynamic:
        assert str(prog.main.inputs[0].type.shape[0]) == "N"
    got = run(prog, {"x": x.numpy()})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    pkg = converter.save(prog, tmp_path / "cnn.mlpackage")
    np.testing.assert_allclose(run(converter.load(pkg), {"x": x.numpy()})["y"], want, rtol=1e-4, atol=1e-4)
    from tests.mil.helpers import CoremltoolsLoader

    CoremltoolsLoader().load(pkg)  # coremltools re-runs its type inference on every op
