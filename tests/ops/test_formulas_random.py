"""Random ops, checked against their distributions' formulas.

No oracle can reproduce Core ML's random number streams (nor do torch's or onnxruntime's match
each other), so these ops are checked on what the MIL spec defines:

- random_bernoulli: P(1) = prob, so mean = prob and variance = prob * (1 - prob).
- random_normal: mean and standard deviation; the fraction within one stddev (0.6827).
- random_uniform: support [low, high), mean (low + high) / 2, variance (high - low)^2 / 12.
- random_categorical: class frequencies = softmax(logits) or probs / sum(probs); a class of
  probability 0 is never drawn; shape x.shape[:-1] + [size].

plus shapes, dtypes and determinism: a seed >= 0 gives the same values on every run, seed -1
follows the interpreter's seed. Sample moments are compared within 6 standard errors.
"""

from __future__ import annotations

import numpy as np
import pytest

from converter.ir.interpreter import run

from .harness import Case, build_program, run_op

FORMULA_CHECKED = {
    "random_bernoulli": "Core ML's random stream is not reproducible; checked on mean p and variance p(1-p)",
    "random_categorical": "Core ML's random stream is not reproducible; checked on class frequencies vs softmax/probs",
    "random_normal": "Core ML's random stream is not reproducible; checked on mean, stddev and the 1-sigma mass",
    "random_uniform": "Core ML's random stream is not reproducible; checked on support, mean and variance",
}

N = (200, 500)  # 100k samples
_SHAPE = np.array(N, np.int32)


def _within(sample_stat: float, expected: float, std_err: float, what: str) -> None:
    assert abs(sample_stat - expected) <= 6 * std_err, f"{what}: {sample_stat} vs {expected} (se {std_err})"


@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("prob", [0.0, 0.2, 0.5, 0.93, 1.0])
def test_random_bernoulli_moments(prob: float, dt):
    out = run_op("random_bernoulli", params={"shape": _SHAPE, "prob": dt(prob), "seed": 11})[0]
    assert out.dtype == dt and out.shape == N
    assert set(np.unique(out)) <= {0.0, 1.0}
    n = out.size
    mean = float(out.astype(np.float64).mean())
    _within(mean, prob, np.sqrt(prob * (1 - prob) / n) + 1e-12, "bernoulli mean")
    _within(float(out.astype(np.float64).var()), prob * (1 - prob), 2 / np.sqrt(n), "bernoulli variance")


@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("mean,std", [(0.0, 1.0), (3.0, 0.5), (-10.0, 4.0)])
def test_random_normal_moments(mean: float, std: float, dt):
    out = run_op("random_normal", params={"shape": _SHAPE, "mean": dt(mean), "stddev": dt(std), "seed": 2})[0]
    assert out.dtype == dt and out.shape == N
    x = out.astype(np.float64)
    n = x.size
    _within(float(x.mean()), mean, std / np.sqrt(n), "normal mean")
    _within(float(x.std()), std, std / np.sqrt(2 * n) + std * 1e-3 * (dt == np.float16), "normal stddev")
    _within(float((np.abs(x - mean) < std).mean()), 0.682689, np.sqrt(0.6827 * 0.3173 / n), "normal 1-sigma mass")


@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("low,high", [(0.0, 1.0), (-2.0, 6.0), (100.0, 104.0)])
def test_random_uniform_moments(low: float, high: float, dt):
    out = run_op("random_uniform", params={"shape": _SHAPE, "low": dt(low), "high": dt(high), "seed": 3})[0]
    assert out.dtype == dt and out.shape == N
    assert out.min() >= dt(low) and out.max() < dt(high)
    x = out.astype(np.float64)
    width = high - low
    _within(float(x.mean()), (low + high) / 2, width / np.sqrt(12 * x.size) + width * 1e-3 * (dt == np.float16),
            "uniform mean")
    _within(float(x.var()), width**2 / 12, width**2 / np.sqrt(x.size), "uniform variance")


def test_random_uniform_equal_bounds_gives_low():
    out = run_op("random_uniform", params={"shape": np.array([7], np.int32), "low": 2.5, "high": 2.5})[0]
    assert (out == 2.5).all()


@pytest.mark.parametrize("mode", ["logits", "probs"])
@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_random_categorical_frequencies(mode: str, dt):
    p = np.array([[0.1, 0.0, 0.6, 0.3], [0.25, 0.25, 0.25, 0.25]])
    with np.errstate(divide="ignore"):
        x = (np.log(p) if mode == "logits" else p * 7.0).astype(dt)  # probs need not sum to 1
    size = 40000
    out = run_op("random_categorical", {"x": x}, {"mode": mode, "size": size, "seed": 4})[0]
    assert out.dtype == dt and out.shape == (2, size)
    for row in range(2):
        counts = np.bincount(out[row].astype(np.int64), minlength=4)
        assert counts.size == 4
        freq = counts / size
        for k in range(4):
            _within(float(freq[k]), p[row, k], np.sqrt(p[row, k] * (1 - p[row, k]) / size) + 1e-12,
                    f"class {k} of row {row}")
    assert (out[0] != 1).all()  # probability 0 is never drawn


def test_random_categorical_shape_keeps_leading_dims():
    x = np.zeros((2, 3, 5), np.float32)
    out = run_op("random_categorical", {"x": x}, {"size": 6})[0]
    assert out.shape == (2, 3, 6) and ((0 <= out) & (out < 5)).all() and (out == np.round(out)).all()


@pytest.mark.parametrize("op,params", [
    ("random_bernoulli", {"prob": 0.5}), ("random_normal", {}), ("random_uniform", {}),
])
def test_random_determinism(op: str, params: dict):
    """seed >= 0: fixed values; seed -1: fixed per interpreter seed, different across seeds."""
    shape = np.array([64], np.int32)
    a = run_op(op, params={"shape": shape, "seed": 9, **params})[0]
    b = run_op(op, params={"shape": shape, "seed": 9, **params})[0]
    c = run_op(op, params={"shape": shape, "seed": 10, **params})[0]
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    prog, feeds = build_program(Case(op, params={"shape": shape, **params}))
    r1, r2, r3 = (next(iter(run(prog, feeds, seed=s).values())) for s in (0, 0, 1))
    assert np.array_equal(r1, r2) and not np.array_equal(r1, r3)


def test_random_categorical_determinism():
    x = np.zeros((3, 10), np.float32)
    a, b, c = (run_op("random_categorical", {"x": x}, {"size": 20, "seed": s})[0] for s in (5, 5, 6))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_random_shape_from_runtime_input():
    """A computed ``shape`` gives a tensor of that shape; inference knows only the rank."""
    case = Case("random_normal", {"shape": np.array([3, 1, 2], np.int32)})
    prog, feeds = build_program(case)
    out_type = prog.main.outputs[0].type
    assert out_type.rank == 3 and not out_type.is_static
    assert next(iter(run(prog, feeds).values())).shape == (3, 1, 2)
