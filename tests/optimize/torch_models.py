"""The torch modules behind the optimization baselines (issue 8): each is written the way such
models are usually written, so the raw MIL program coremltools makes of it holds the patterns a
default pipeline is expected to clean up (batch norms after convs, linear layers as matmul + add,
gelu and layer_norm both as torch ops and spelled out by hand, shape arithmetic of reshapes, an
LSTM's sequence plumbing).

Only torch is needed here; turning these into MIL programs is `sources.py`'s job.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 - torch's own convention


class ConvBnRelu(nn.Module):
    def __init__(self, cin: int, cout: int, *, bias: bool, stride: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, stride, 1, bias=bias)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


class CnnBn(nn.Module):
    """Three conv-bn-relu blocks (with and without conv bias), max and average pooling, a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.b1 = ConvBnRelu(3, 16, bias=True)
        self.b2 = ConvBnRelu(16, 32, bias=False)
        self.b3 = ConvBnRelu(32, 32, bias=False, stride=2)
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(self.b1(x), 2)
        x = self.b3(self.b2(x))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.head(x)


class TransformerBlock(nn.Module):
    """A pre-norm transformer block as GPT-style models write it: one qkv projection split into
    heads with reshape/transpose, scaled dot-product attention by matmul + softmax, an output
    projection, residual adds, and a gelu MLP."""

    def __init__(self, d: int = 32, heads: int = 4, ff: int = 64) -> None:
        super().__init__()
        self.heads, self.d = heads, d
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.ln1(x)).split(self.d, dim=-1)
        # unflatten / flatten: coremltools writes them as shape arithmetic (shape, slice, concat)
        q, k, v = (z.unflatten(-1, (self.heads, -1)).transpose(1, 2) for z in (q, k, v))
        att = torch.softmax((q @ k.transpose(-2, -1)) / math.sqrt(self.d // self.heads), dim=-1)
        y = (att @ v).transpose(1, 2).flatten(2)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class LstmModel(nn.Module):
    """A two-layer batch-first LSTM over a sequence, a linear head on the last step."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(8, 16, num_layers=2, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(x)
        return self.head(y[:, -1, :])


def gelu_exact_by_hand(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def gelu_tanh_by_hand(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3))))


def layer_norm_by_hand(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    mean = x.mean(-1, keepdim=True)
    centered = x - mean
    var = (centered * centered).mean(-1, keepdim=True)
    return centered * torch.rsqrt(var + eps) * gamma + beta


class GeluLayerNorm(nn.Module):
    """gelu (exact and tanh) and layer_norm twice each: as torch ops (coremltools maps them to one
    op) and spelled out by hand (a default pipeline should fuse them back into one op)."""

    def __init__(self, d: int = 24) -> None:
        super().__init__()
        self.fc = nn.ModuleList(nn.Linear(d, d) for _ in range(5))
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.gamma = nn.Parameter(torch.rand(d) + 0.5)
        self.beta = nn.Parameter(torch.randn(d) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.ln1(F.gelu(self.fc[0](x)))
        x = self.ln2(F.gelu(self.fc[1](x), approximate="tanh"))
        x = layer_norm_by_hand(gelu_exact_by_hand(self.fc[2](x)), self.gamma, self.beta)
        x = gelu_tanh_by_hand(self.fc[3](x))
        return self.fc[4](x)


class BasicBlock(nn.Module):
    """torchvision's ResNet basic block: conv3x3-bn-relu-conv3x3-bn, residual add (1x1 conv + bn on
    the skip path where the shape changes), relu."""

    def __init__(self, cin: int, c: int, stride: int) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, c, 3, stride, 1, bias=False), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c)
        self.down = (nn.Sequential(nn.Conv2d(cin, c, 1, stride, bias=False), nn.BatchNorm2d(c))
                     if stride != 1 or cin != c else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    """torchvision's ResNet layout with basic blocks (``layers`` = [3, 4, 6, 3] is ResNet-34) at a
    reduced width: stem conv7x7/2-bn-relu-maxpool, four stages, global average pool, linear head."""

    def __init__(self, layers: tuple[int, ...] = (3, 4, 6, 3), width: int = 16, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        blocks: list[nn.Module] = []
        cin = width
        for stage, n in enumerate(layers):
            c = width * 2**stage
            for j in range(n):
                blocks.append(BasicBlock(cin, c, 2 if j == 0 and stage > 0 else 1))
                cin = c
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def randomize_batch_norms(module: nn.Module, generator: torch.Generator) -> None:
    """Give every batch norm non-trivial running statistics and affine parameters (fresh ones are
    mean 0, variance 1, gamma 1, beta 0: a fusion that dropped them would go unnoticed)."""
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            n = m.num_features
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(n, generator=generator) * 0.1)
                m.running_var.copy_(torch.rand(n, generator=generator) + 0.5)
                m.weight.copy_(torch.rand(n, generator=generator) + 0.5)
                m.bias.copy_(torch.randn(n, generator=generator) * 0.1)
