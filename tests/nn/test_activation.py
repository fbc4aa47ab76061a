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

from .common import builder, compare_with_oracle, convert_and_run

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
