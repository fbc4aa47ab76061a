"""Activations in the real browser, both layouts, against torch.nn.functional or numpy formulas
written from the MIL spec (converter/ir/ops/activation.py docstrings). Under nhwc the operands come
from a conv (`conv_stem`), so per-channel parameters and softmax axes must follow the layout."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from converter.ir.builder import new_program
from converter.ir.types import tensor

from .browser_client import WebnnBrowser
from .helpers import conv_stem, rand, run_webnn

LAYOUTS = ["nchw", "nhwc"]
X_SHAPE = (1, 3, 4, 5)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_activations_and_their_parameters(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    x = rand(X_SHAPE, 1, -4.0, 4.0)
    x[0, 0, 0, :3] = [0.5, 0.49, 0.51]                  # thresholded_relu keeps x == alpha (0.5)
    x3 = rand((2, 3, 6), 2, -3.0, 3.0)
    slope = np.array([0.1, -0.3, 2.0], np.float32)
    sp_alpha, sp_beta = np.array([0.5, 1.5, 3.0], np.float32), np.array([2.0, 0.25, -1.0], np.float32)
    f32 = np.float32

    def body(b, x, x3):  # noqa: ANN001, ANN202
        s = conv_stem(b, x, 3)
        return [
            b.leaky_relu(x=s, alpha=f32(0.15), name="leaky_relu"), b.elu(x=s, alpha=f32(0.7), name="elu"),
            b.relu6(x=s, name="relu6"), b.sigmoid_hard(x=s, alpha=f32(0.3), beta=f32(0.6), name="hard_sigmoid"),
            b.linear_activation(x=s, alpha=f32(-1.5), beta=f32(0.25), name="linear"),
            b.softplus(x=s, name="softplus"), b.silu(x=s, name="silu"),
            b.thresholded_relu(x=s, alpha=f32(0.5), name="thresholded_relu"),
            b.gelu(x=s, mode="EXACT", name="gelu_exact"), b.gelu(x=s, mode="TANH_APPROXIMATION", name="gelu_tanh"),
            b.gelu(x=s, mode="SIGMOID_APPROXIMATION", name="gelu_sigmoid"),
            b.prelu(x=s, alpha=slope, name="prelu"), b.prelu(x=x3, alpha=slope, name="prelu3"),
            b.softplus_parametric(x=s, alpha=sp_alpha, beta=sp_beta, name="softplus_parametric"),
            b.softmax(x=s, axis=-3, name="softmax_c"), b.softmax(x=s, axis=-1, name="softmax_w"),
            b.softmax(x=s, axis=2, name="softmax_h"), b.softmax(x=x3, axis=-2, name="softmax3")]

    prog = new_program({"x": tensor("fp32", X_SHAPE), "x3": tensor("fp32", [2, 3, 6])}, body)
    out = run_webnn(webnn_browser, prog, {"x": x, "x3": x3}, tmp_path / "m", layout=layout)
    t, t3, ch = torch.from_numpy(x), torch.from_numpy(x3), (1, 3, 1, 1)
    xd = x.astype(np.float64)
    refs = {
        "leaky_relu": F.leaky_relu(t, 0.15), "elu": F.elu(t, 0.7), "relu6": F.relu6(t),
        "hard_sigmoid": np.minimum(np.maximum(0.3 * xd + 0.6, 0), 1), "linear": -1.5 * xd + 0.25,
        "softplus": F.softplus(t), "silu": F.silu(t), "thresholded_relu": np.where(xd < 0.5, 0, xd),
        "gelu_exact": F.gelu(t), "gelu_tanh": F.gelu(t, approximate="tanh"),
        "gelu_sigmoid": xd / (1 + np.exp(-1.702 * xd)),
        "prelu": F.prelu(t, torch.from_numpy(slope)), "prelu3": F.prelu(t3, torch.from_numpy(slope)),
        "softplus_parametric": sp_alpha.reshape(ch) * np.log1p(np.exp(sp_beta.reshape(ch) * xd)),
        "softmax_c": F.softmax(t, 1), "softmax_w": F.softmax(t, 3), "softmax_h": F.softmax(t, 2),
        "softmax3": F.softmax(t3, 1)}
    for name, ref in refs.items():
        ref = ref.numpy() if isinstance(ref, torch.Tensor) else ref
        assert out[name].shape == ref.shape, name
        np.testing.assert_allclose(out[name], ref, rtol=1e-5, atol=2e-6, err_msg=name)
    assert out["thresholded_relu"][0, 0, 0, 0] == 0.5 and out["thresholded_relu"][0, 0, 0, 1] == 0


def test_softplus_of_large_inputs(webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    """log(1 + e^x) is x for large x (Chromium's own softplus saturated at 88.38)."""
    x = np.array([-1000.0, -30.0, -1.0, 0.0, 2.0, 30.0, 88.0, 89.0, 100.0, 1000.0], np.float32).reshape(1, 2, 5)
    alpha, beta = np.array([0.5, 2.0], np.float32), np.array([3.0, 0.5], np.float32)
    prog = new_program({"x": tensor("fp32", [1, 2, 5])}, lambda b, x: [
        b.softplus(x=x, name="sp"), b.softplus_parametric(x=x, alpha=alpha, beta=beta, name="spp")])
    out = run_webnn(webnn_browser, prog, {"x": x}, tmp_path / "m")
    t = torch.from_numpy(x).double()
    np.testing.assert_allclose(out["sp"], F.softplus(t).numpy(), rtol=1e-6, atol=1e-7)
    ref = alpha.reshape(1, 2, 1) * F.softplus(t * torch.from_numpy(beta).double().reshape(1, 2, 1)).numpy()
    np.testing.assert_allclose(out["spp"], ref, rtol=1e-6, atol=1e-7)
