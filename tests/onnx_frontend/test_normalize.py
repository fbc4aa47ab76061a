"""LRN, GroupNormalization, RMSNormalization, MeanVarianceNormalization, LpNormalization against
onnxruntime on random inputs (even LRN sizes, where ONNX's window differs from MIL's; uneven
groups and per-channel scales; axes not at the end), plus the node-suite cases pinned."""

from __future__ import annotations

import numpy as np
import pytest

from converter.frontends.onnx import load_onnx
from converter.ir.interpreter import run

from .family_oracles import node_suite_results, one_node_model, ort_check


def _r(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _lrn_formula(x, size, alpha, beta, bias):
    """The spec's formula: square_sum[n, c] = sum(x[n, i]^2) for i in [c - floor((size - 1) / 2),
    c + ceil((size - 1) / 2)] within the channels; y = x / (bias + alpha / size * square_sum)^beta."""
    sq = x.astype(np.float64) ** 2
    out = np.empty_like(sq)
    channels = x.shape[1]
    for c in range(channels):
        lo, hi = max(0, c - (size - 1) // 2), min(channels - 1, c + -(-(size - 1) // 2))
        out[:, c] = sq[:, lo:hi + 1].sum(axis=1)
    return (x / (bias + alpha / size * out) ** beta).astype(np.float32)


LRN_ATTRS = {"alpha": 0.3, "beta": 0.6, "bias": 1.7}


@pytest.mark.parametrize("size", [1, 3, 5])
def test_lrn_odd_sizes_vs_onnxruntime(size):
    ort_check("LRN", [_r(2, 7, 3, 4, seed=size)], {"size": size, **LRN_ATTRS}, opset=13)


@pytest.mark.parametrize("size", [1, 2, 3, 4, 6])
@pytest.mark.parametrize("shape", [(2, 7, 3, 4), (2, 6, 5), (1, 5, 2, 3, 2)])
def test_lrn_window_for_even_sizes_and_other_ranks(size, shape):
    """onnxruntime takes odd sizes and rank 4 only: the spec's formula written here is the oracle."""
    x = _r(*shape, seed=size)
    model, feeds = one_node_model("LRN", [x], {"size": size, **LRN_ATTRS}, opset=13)
    got = run(load_onnx(model), feeds)["y0"]
    np.testing.assert_allclose(got, _lrn_formula(x, size, **LRN_ATTRS), rtol=1e-5, atol=1e-6)


def test_group_normalization_per_channel_scale():
    x = _r(2, 6, 3, 4, seed=1)
    ort_check("GroupNormalization", [x, _r(6, seed=2), _r(6, seed=3)], {"num_groups": 3, "epsilon": 0.01},
              opset=21)


@pytest.mark.parametrize("axis", [-1, -2, 1])
def test_rms_normalization(axis):
    x = _r(2, 3, 4, 5, seed=4)
    scale = _r(*x.shape[axis:], seed=5)
    ort_check("RMSNormalization", [x, scale], {"axis": axis, "epsilon": 0.05}, opset=23)


def test_mean_variance_normalization_axes():
    ort_check("MeanVarianceNormalization", [_r(2, 3, 4, 5, seed=6)], {"axes": [0, 3]}, opset=13)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_lp_normalization(p, axis):
    x = _r(3, 4, 5, seed=7)
    x[0, :, 0] = 0  # a zero vector along some axes: 0, not NaN
    ort_check("LpNormalization", [x], {"p": p, "axis": axis}, opset=21)


OPS = {"LRN", "GroupNormalization", "RMSNormalization", "MeanVarianceNormalization", "LpNormalization"}
#: test_mvn: onnx's own shape inference fails on its function body when 'axes' is absent (in the loader).
NOT_PASSING = {"test_mvn"}


def test_node_suite_cases_pass():
    res = {n: r for n, r in node_suite_results(OPS).items() if "expanded" not in n and set(r.ops) & OPS}
    bad = {n: f"{r.status}: {r.detail}" for n, r in res.items() if n not in NOT_PASSING and r.status != "pass"}
    assert not bad
    assert len(res) >= 30
