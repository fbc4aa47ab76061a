"""The activation layers (layers/activation.py: activation, clampedReLU) against the spec's formulas.

Oracle: the formula of each activation as NeuralNetwork.proto writes it, in float64 numpy here.
Parameters are set by field name on the layer message (not through coremltools' builder, whose
positional ``params`` would be one more thing to trust), and the two parameters of a
two-parameter activation always differ, in both orders, so a lowering that reads one where it
should read the other fails (tools/mutate_nn_lowerings.py checks that).

Issue 7: a review swapped alpha and beta in the scaledTanh and clampedReLU lowerings and the suite
stayed green; these tests are what catches that now.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.nn_models.coverage import oracle_checks

from .common import builder, compare_with_oracle, convert_and_run, onnx_oracle

RNG = np.random.default_rng(7)
X = RNG.uniform(-4.0, 4.0, (3, 4, 5)).astype(np.float32)


def _run(set_params: Callable[[Any], None], tmp: Path, *, nd: bool) -> np.ndarray:
    """Our conversion of a one-layer network on ``X``; ``set_params`` fills the layer message."""
    nn = builder({"x": X.shape}, nd=nd)
    nn.add_activation("act", "RELU", "x", "y")  # replaced by set_params
    layer = nn.spec.neuralNetwork.layers[-1]
    set_params(layer)
    if layer.WhichOneof("layer") == "clampedReLU":
        nn.spec.specificationVersion = max(nn.spec.specificationVersion, 5)  # iOS 14
    outs, _ = convert_and_run(nn.spec, {"x": X}, tmp)
    return outs["y"]


# alpha, beta: distinct, and each pair also in the other order
PARAMS = [(1.7, 0.4), (0.4, 1.7)]


@oracle_checks("activation.scaledTanh")
@pytest.mark.parametrize("nd", [False, True], ids=["rank5", "nd"])
@pytest.mark.parametrize(("alpha", "beta"), PARAMS)
def test_scaled_tanh(alpha: float, beta: float, nd: bool, tmp_path: Path) -> None:
    """The spec: f(x) = alpha tanh(beta x)."""
    def set_params(layer: Any) -> None:
        layer.activation.scaledTanh.alpha = alpha
        layer.activation.scaledTanh.beta = beta

    got = _run(set_params, tmp_path, nd=nd)
    want = np.float32(alpha) * np.tanh(np.float32(beta) * X.astype(np.float64))
    compare_with_oracle(got, want, oracle="spec formula", rtol=1e-6, atol=1e-6, match="size")


@oracle_checks("clampedReLU")
@pytest.mark.parametrize(("alpha", "beta"), [(0.3, 1.5), (1.5, 0.3), (0.5, -0.25)])
def test_clamped_relu(alpha: float, beta: float, tmp_path: Path) -> None:
    """The spec: f(x) = min(beta, x) for x >= 0, min(beta, alpha x) for x < 0 (a negative beta
    included: it caps both branches)."""
    def set_params(layer: Any) -> None:
        layer.clampedReLU.alpha = alpha
        layer.clampedReLU.beta = beta

    got = _run(set_params, tmp_path, nd=True)
    x = X.astype(np.float64)
    a, b = np.float32(alpha), np.float32(beta)
    want = np.where(x >= 0, np.minimum(b, x), np.minimum(b, a * x))
    compare_with_oracle(got, want, oracle="spec formula", rtol=1e-6, atol=1e-6)


# -- per-channel and parameterless activations: PReLU, parametricSoftplus, softsign, softplus -----
#
# Oracles: onnxruntime on onnxmltools' ONNX form (classic rank-5 networks) where onnxmltools is
# right, torch otherwise. Per-channel parameters hold distinct values per channel (a lowering that
# laid them over another axis, or swapped two of them, fails), and the single-value form is
# checked too ("If length is 1, same value is used for all channels").

C = 3
ALPHAS = np.array([0.25, -0.5, 1.5], np.float32)  # distinct, one negative
BETAS = np.array([0.75, 2.0, -1.25], np.float32)


def _channel_run(mode: str, params: Any, shape: tuple[int, ...], tmp: Path, *,
                 nd: bool) -> tuple[Any, np.ndarray, np.ndarray]:
    """(spec, input, our output) of one coremltools-built activation layer on a random input of ``shape``."""
    x = RNG.uniform(-3.0, 3.0, shape).astype(np.float32)
    nn = builder({"x": shape}, nd=nd)
    nn.add_activation("act", mode, "x", "y", params=params)
    outs, _ = convert_and_run(nn.spec, {"x": x}, tmp)
    return nn.spec, x, outs["y"]


def _torch_channels(x: np.ndarray) -> Any:
    """``x`` of shape [..., C, H, W] as a float64 torch tensor [N, C, H, W] (torch's channel axis is 1)."""
    import torch

    return torch.from_numpy(x.astype(np.float64).reshape((-1, *x.shape[-3:])))


@oracle_checks("activation.PReLU")
@pytest.mark.parametrize("alpha", [ALPHAS, ALPHAS[1:2]], ids=["per-channel", "single"])
@pytest.mark.parametrize(("shape", "nd"), [((C, 4, 5), False), ((2, C, 4, 5), True), ((2, 2, C, 1, 4), True)],
                         ids=["rank5", "nd4", "nd5"])
def test_prelu_against_torch(alpha: np.ndarray, shape: tuple[int, ...], nd: bool, tmp_path: Path) -> None:
    """The spec: f(x_i) = x_i if x_i >= 0 else alpha_i x_i, i over axis -3 ("C"); alpha of length C
    or 1. Oracle: torch.nn.functional.prelu (its weight is per channel of axis 1, or one value)."""
    import torch

    spec, x, got = _channel_run("PRELU", alpha, shape, tmp_path, nd=nd)
    want = torch.nn.functional.prelu(_torch_channels(x), torch.from_numpy(alpha.astype(np.float64))).numpy()
    compare_with_oracle(got, want, oracle="torch", rtol=1e-6, atol=1e-7, match="size")
    if alpha.size == 1 and not nd:
        # onnxmltools gets the single-value form right: a second, independent oracle
        compare_with_oracle(got, onnx_oracle(spec, {"x": x})["y"], oracle="onnxruntime", rtol=1e-6, atol=1e-7,
                            match="size")


def test_prelu_per_channel_onnxmltools_defect(tmp_path: Path) -> None:
    """onnxmltools' known defect: its PRelu slope is [1, C], which ONNX broadcasts over the last two
    axes (H, W), not over C. With W == C it runs and is wrong, so torch is the oracle above."""
    import torch

    spec, x, got = _channel_run("PRELU", ALPHAS, (C, 2, C), tmp_path, nd=False)
    want = torch.nn.functional.prelu(_torch_channels(x), torch.from_numpy(ALPHAS.astype(np.float64))).numpy()
    compare_with_oracle(got, want, oracle="torch", rtol=1e-6, atol=1e-7, match="size")
    theirs = onnx_oracle(spec, {"x": x})["y"].reshape(got.shape)
    assert not np.allclose(theirs, got, rtol=1e-3)
    np.testing.assert_allclose(theirs, np.where(x >= 0, x, ALPHAS.reshape(1, 1, C) * x), rtol=1e-6)  # over W


_SOFTPLUS_PARAMS = {  # (alpha, beta): both per channel, and each one single with the other per channel
    "both-per-channel": (ALPHAS, BETAS), "single-alpha": (ALPHAS[2:], BETAS), "single-beta": (ALPHAS, BETAS[:1]),
    "both-single": (ALPHAS[:1], BETAS[1:2])}


@oracle_checks("activation.parametricSoftplus")
@pytest.mark.parametrize("which", list(_SOFTPLUS_PARAMS))
def test_parametric_softplus_rank5_against_onnx(which: str, tmp_path: Path) -> None:
    """The spec: f(x_i) = alpha_i log(1 + e^(beta_i x_i)), i over C; alpha and beta of length C or 1.
    onnxmltools writes it as Mul/Exp/Add/Log/Mul with [C, 1, 1] (or [1]) parameters: onnxruntime."""
    alpha, beta = _SOFTPLUS_PARAMS[which]
    spec, x, got = _channel_run("PARAMETRICSOFTPLUS", [alpha, beta], (C, 4, 5), tmp_path, nd=False)
    compare_with_oracle(got, onnx_oracle(spec, {"x": x})["y"], oracle="onnxruntime", rtol=2e-6, atol=1e-6,
                        match="size")


@oracle_checks("activation.parametricSoftplus")
@pytest.mark.parametrize("which", ["both-per-channel", "single-alpha"])
def test_parametric_softplus_nd_against_torch(which: str, tmp_path: Path) -> None:
    """ND rank 5 [B, S, C, H, W]: the channel axis is -3. Oracle: torch's softplus (log(1 + e^v),
    with its default beta = 1 and no threshold shortcut at these magnitudes) of beta_i x, times alpha_i."""
    import torch

    alpha, beta = _SOFTPLUS_PARAMS[which]
    _, x, got = _channel_run("PARAMETRICSOFTPLUS", [alpha, beta], (2, 2, C, 2, 3), tmp_path, nd=True)
    t = _torch_channels(x)

    def per_c(v: np.ndarray) -> Any:  # [C] or [1] -> [1, C, 1, 1] (a single value repeated)
        return torch.from_numpy(np.resize(v, C).astype(np.float64)).reshape(1, C, 1, 1)

    want = per_c(alpha) * torch.nn.functional.softplus(per_c(beta) * t, threshold=100.0)
    compare_with_oracle(got, want.numpy(), oracle="torch", rtol=2e-6, atol=1e-6, match="size")


def _parameterless(mode: str, torch_fn: Callable[[Any], Any], tmp: Path) -> None:
    """Oracles: onnxruntime (onnxmltools writes the ONNX op of the same name) on a rank-5 network,
    torch on an ND one."""
    import torch

    spec, x, got = _channel_run(mode, None, (C, 4, 5), tmp, nd=False)
    compare_with_oracle(got, onnx_oracle(spec, {"x": x})["y"], oracle="onnxruntime", rtol=2e-6, atol=1e-7,
                        match="size")
    _, x, got = _channel_run(mode, None, (2, 7), tmp, nd=True)
    compare_with_oracle(got, torch_fn(torch.from_numpy(x.astype(np.float64))).numpy(), oracle="torch", rtol=2e-6,
                        atol=1e-7)


@oracle_checks("activation.softsign")
def test_softsign_against_onnx_and_torch(tmp_path: Path) -> None:
    """The spec: f(x) = x / (1 + |x|)."""
    import torch

    _parameterless("SOFTSIGN", torch.nn.functional.softsign, tmp_path)


@oracle_checks("activation.softplus")
def test_softplus_against_onnx_and_torch(tmp_path: Path) -> None:
    """The spec: f(x) = log(1 + e^x)."""
    import torch

    _parameterless("SOFTPLUS", torch.nn.functional.softplus, tmp_path)
