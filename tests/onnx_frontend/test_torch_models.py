"""torch models exported with ``torch.onnx.export`` (random weights) convert ONNX -> ``.mlpackage``:
our interpreter on the package matches onnxruntime on the original ONNX model, and coremltools' MIL
loader (which re-runs its own type inference on every op) accepts the package.

Each model is exported twice: with the TorchScript exporter (``dynamo=False``, opset 17, the form
most ONNX files in the wild have) and with torch's default exporter (``dynamo=True``, through
onnxscript), which emits different op patterns for the same layers.
"""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from torch import nn

import converter
from converter.ir.interpreter import run
from tests.mil.helpers import CoremltoolsLoader

torch.manual_seed(0)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNetish(nn.Module):
    """ResNet-18's layout (stem, max pool, 4 stages of 2 basic blocks, global pool, fc), narrower."""

    def __init__(self, width: int = 8, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        stages, cin = [], width
        for i, cout in enumerate((width, 2 * width, 4 * width, 8 * width)):
            stages += [BasicBlock(cin, cout, 1 if i == 0 else 2), BasicBlock(cout, cout, 1)]
            cin = cout
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stages(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


class MobileNetV3Block(nn.Module):
    """An inverted residual with squeeze-and-excitation and hard-swish (MobileNetV3's bneck)."""

    def __init__(self, c: int = 16, expand: int = 64, k: int = 5) -> None:
        super().__init__()
        self.expand = nn.Sequential(nn.Conv2d(c, expand, 1, bias=False), nn.BatchNorm2d(expand), nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(expand, expand, k, 1, k // 2, groups=expand, bias=False),
                                nn.BatchNorm2d(expand), nn.Hardswish())
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(expand, expand // 4, 1), nn.ReLU(),
                                nn.Conv2d(expand // 4, expand, 1), nn.Hardsigmoid())
        self.project = nn.Sequential(nn.Conv2d(expand, c, 1, bias=False), nn.BatchNorm2d(c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dw(self.expand(x))
        y = y * self.se(y)
        return x + self.project(y)


class TinyEncoder(nn.Module):
    """Token embedding + learned positions + 2 transformer encoder layers (multi-head attention,
    GELU feed-forward, layer norm) + a classifier head on the mean token."""

    def __init__(self, vocab: int = 50, d: int = 32, heads: int = 4, seq: int = 12) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, seq, d) * 0.1)
        layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=64, dropout=0.0, activation="gelu",
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(d, 3)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.encoder(self.embed(tokens) + self.pos)
        return self.head(h.mean(dim=1))


class LSTMTagger(nn.Module):
    """Embedding -> bidirectional LSTM -> per-token tag scores (log-softmax)."""

    def __init__(self, vocab: int = 40, d: int = 16, hidden: int = 24, tags: int = 5) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, hidden, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, tags)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(self.embed(tokens))
        return torch.log_softmax(self.out(h), dim=-1)


def _image(n: int = 1, c: int = 3, size: int = 32) -> torch.Tensor:
    return torch.randn(n, c, size, size)


def _tokens(vocab: int, seq: int) -> torch.Tensor:
    return torch.randint(0, vocab, (2, seq), generator=torch.Generator().manual_seed(1))


MODELS = {
    "resnet18ish": (ResNetish, lambda: _image(1, 3, 64)),
    "mobilenetv3_block": (MobileNetV3Block, lambda: _image(1, 16, 20)),
    "transformer_encoder": (TinyEncoder, lambda: _tokens(50, 12)),
    "lstm_tagger": (LSTMTagger, lambda: _tokens(40, 9)),
}


def _export(module: nn.Module, example: torch.Tensor, dynamo: bool) -> onnx.ModelProto:
    module.eval()
    # the fused encoder kernel torch uses in eval mode has no TorchScript export: the plain layers do
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            if dynamo:
                program = torch.onnx.export(module, (example,), dynamo=True, input_names=["x"],
                                            output_names=["y"], verbose=False)
                return program.model_proto
            f = io.BytesIO()
            torch.onnx.export(module, (example,), f, dynamo=False, opset_version=17, input_names=["x"],
                              output_names=["y"])
            return onnx.load_from_string(f.getvalue())
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)


def _randomize_batch_norms(module: nn.Module) -> None:
    """Non-trivial running statistics and affine parameters (fresh ones are 0/1: a swapped mean and
    variance would go unnoticed)."""
    g = torch.Generator().manual_seed(2)
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_features, generator=g) * 0.1)


def exported_case(name: str, dynamo: bool = False) -> tuple[nn.Module, torch.Tensor, onnx.ModelProto, dict, np.ndarray]:
    """Model ``name`` of `MODELS` (batch norms randomized), exported to ONNX: (module, example input,
    ONNX model, feeds by input name, onnxruntime's output on the ONNX model: the oracle)."""
    make, example_fn = MODELS[name]
    module = make()
    _randomize_batch_norms(module)
    example = example_fn()
    model = _export(module, example, dynamo)
    feeds = {model.graph.input[0].name: example.numpy()}
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return module, example, model, feeds, session.run(None, feeds)[0]


@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
@pytest.mark.parametrize("name", list(MODELS))
def test_torch_export_converts_to_mlpackage(name: str, dynamo: bool, tmp_path: Path) -> None:
    module, example, model, feeds, want = exported_case(name, dynamo)
    with torch.no_grad():
        np.testing.assert_allclose(want, module(example).numpy(), rtol=1e-4, atol=1e-5)  # the export itself

    out = tmp_path / f"{name}.mlpackage"
    converter.convert(model, to="mil", out=out)
    got = run(converter.load(out), feeds)
    (value,) = got.values()
    np.testing.assert_allclose(value, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))

    CoremltoolsLoader().load(out)  # raises if coremltools' loader or type inference rejects it
