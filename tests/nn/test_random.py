"""randomNormal/Uniform/Bernoulli {Like, Static, Dynamic} and categoricalDistribution.

No oracle reproduces Core ML's random streams, so these tests check what the spec defines: the
output shape (an input's, a static one, a run-time shape vector; [..., numSamples] for the
categorical) and the distribution, with statistics of many draws against the formulas written
here (mean and variance of N(mean, stdDev^2); the range, mean and CDF of U[minVal, maxVal); the
frequency of 1s of Bernoulli(prob); the class frequencies of softmax(logits / temperature)). A
fixed non-negative seed gives the same draws on every run and through MIL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import converter
from converter.errors import FormatError, UnsupportedError

from .common import builder, convert_and_run, flexible, load_spec, through_mil

# NeuralNetwork layer kinds this module's models exercise (tests/nn_models/coverage.py checks them)
KINDS_COVERED = {
    "categoricalDistribution",
    "randomBernoulliDynamic",
    "randomBernoulliLike",
    "randomBernoulliStatic",
    "randomNormalDynamic",
    "randomNormalLike",
    "randomNormalStatic",
    "randomUniformDynamic",
    "randomUniformLike",
    "randomUniformStatic",
}

N = (100, 200)  # 20000 draws per distribution
Z = 5.0  # bounds of the statistical checks, in standard errors: never crossed by chance here


def normal_checks(x: np.ndarray, mean: float, std: float) -> None:
    n = x.size
    assert abs(x.mean() - mean) < Z * std / np.sqrt(n)
    # var of the sample variance of a normal: 2 sigma^4 / (n - 1)
    assert abs(x.var(ddof=1) - std**2) < Z * std**2 * np.sqrt(2 / (n - 1))
    # the normal CDF at mean +- 1 std: 0.1587, 0.8413
    for k, p in ((-1, 0.158655), (1, 0.841345)):
        frac = float((x < mean + k * std).mean())
        assert abs(frac - p) < Z * np.sqrt(p * (1 - p) / n)


def uniform_checks(x: np.ndarray, low: float, high: float) -> None:
    n = x.size
    assert x.min() >= low and x.max() < high
    width = high - low
    assert abs(x.mean() - (low + high) / 2) < Z * width / np.sqrt(12 * n)
    for q in (0.1, 0.25, 0.5, 0.9):  # CDF (t - low) / width
        frac = float((x < low + q * width).mean())
        assert abs(frac - q) < Z * np.sqrt(q * (1 - q) / n)


def bernoulli_checks(x: np.ndarray, prob: float) -> None:
    assert set(np.unique(x)) <= {0.0, 1.0}
    assert abs(float(x.mean()) - prob) < Z * np.sqrt(prob * (1 - prob) / x.size) + 1e-12


def _spec(add: Any, inputs: dict[str, tuple[int, ...]]) -> Any:
    b = builder(inputs, ("y",), nd=True)
    add(b)
    return b.spec


KINDS = {
    "normal": (lambda b, v, inp, name, seed: getattr(b, f"add_random_normal_{v}")(
        name, inp, "y", mean=1.5, stddev=0.75, seed=seed), lambda y: normal_checks(y, 1.5, 0.75)),
    "uniform": (lambda b, v, inp, name, seed: getattr(b, f"add_random_uniform_{v}")(
        name, inp, "y", minval=-2.0, maxval=3.0, seed=seed), lambda y: uniform_checks(y, -2.0, 3.0)),
    "bernoulli": (lambda b, v, inp, name, seed: getattr(b, f"add_random_bernoulli_{v}")(
        name, inp, "y", prob=0.3, seed=seed), lambda y: bernoulli_checks(y, 0.3)),
}


def _model(kind: str, variant: str, seed: int) -> tuple[Any, dict[str, np.ndarray]]:
    add, _ = KINDS[kind]
    if variant == "like":
        spec = _spec(lambda b: add(b, "like", "x", "r", seed), {"x": N})
        return spec, {"x": np.full(N, np.nan, np.float32)}  # the values of x are ignored
    if variant == "static":
        b = builder({"unused": (1,)}, ("y",), nd=True)
        params = {"normal": {"mean": 1.5, "stddev": 0.75}, "uniform": {"minval": -2.0, "maxval": 3.0},
                  "bernoulli": {"prob": 0.3}}[kind]
        getattr(b, f"add_random_{kind}_static")("r", "y", list(N), seed=seed, **params)
        return b.spec, {"unused": np.zeros(1, np.float32)}
    spec = _spec(lambda b: add(b, "dynamic", ["shape"], "r", seed), {"shape": (2,)})
    return spec, {"shape": np.array(N, np.float32)}


@pytest.mark.parametrize("variant", ["like", "static", "dynamic"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_random_fill(kind: str, variant: str, tmp_path: Path):
    spec, feeds = _model(kind, variant, seed=11)
    outs, prog = convert_and_run(spec, feeds, tmp_path)  # seed >= 0: identical through MIL
    y = np.asarray(outs["y"])
    assert y.shape == N and y.dtype == np.float32
    KINDS[kind][1](y.astype(np.float64))
    assert {op.type for op in prog.walk()} >= {f"random_{kind}"}
    again = converter.run(prog, feeds)
    np.testing.assert_array_equal(np.asarray(again["y"]), y)  # a seed gives the same draws every run


def test_like_takes_the_shape_of_any_rank_and_dynamic_shape_is_read_at_run_time(tmp_path: Path):
    spec = _spec(lambda b: b.add_random_uniform_like("r", "x", "y", minval=0.0, maxval=1.0, seed=1), {"x": (2, 3, 4)})
    outs, _ = convert_and_run(spec, {"x": np.zeros((2, 3, 4), np.float32)}, tmp_path)
    assert np.asarray(outs["y"]).shape == (2, 3, 4)
    flexible(spec, "x", [1, 1, 1], [4, 5, 6])
    prog = load_spec(spec, tmp_path)  # a flexible input: the shape is read at run time
    for shape in ((1, 5, 2), (4, 1, 6)):
        assert np.asarray(converter.run(prog, {"x": np.zeros(shape, np.float32)})["y"]).shape == shape
    through_mil(prog, {"x": np.zeros((2, 2, 2), np.float32)}, tmp_path)
    spec = _spec(lambda b: b.add_random_normal_dynamic("r", ["shape"], "y", mean=0.0, stddev=1.0, seed=1),
                 {"shape": (3,)})
    prog = load_spec(spec, tmp_path)
    for shape in ((1, 2, 3), (4, 1, 5)):
        assert np.asarray(converter.run(prog, {"shape": np.array(shape, np.float32)})["y"]).shape == shape


def test_seeds(tmp_path: Path):
    """Equal seeds, equal draws; different seeds, different draws; seed -1 (unseeded) still has
    the distribution (its draws need not survive MIL)."""

    def spec(seeds: tuple[int, int]) -> Any:
        b = builder({"x": N}, ("a", "c"), nd=True)
        b.add_random_normal_like("ra", "x", "a", mean=0.0, stddev=1.0, seed=seeds[0])
        b.add_random_normal_like("rc", "x", "c", mean=0.0, stddev=1.0, seed=seeds[1])
        return b.spec

    feeds = {"x": np.zeros(N, np.float32)}
    same = converter.run(load_spec(spec((5, 5)), tmp_path), feeds)
    np.testing.assert_array_equal(same["a"], same["c"])
    diff = converter.run(load_spec(spec((5, 6)), tmp_path), feeds)
    assert not np.array_equal(diff["a"], diff["c"])
    prog = load_spec(spec((-1, -1)), tmp_path)
    outs = converter.run(prog, feeds)
    for k in ("a", "c"):
        normal_checks(np.asarray(outs[k], np.float64), 0.0, 1.0)
    through_mil(prog, feeds, tmp_path, same=lambda name, got, want: normal_checks(np.asarray(got, np.float64),
                                                                                     0.0, 1.0))


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def frequency_checks(samples: np.ndarray, p: np.ndarray) -> None:
    """``samples`` [..., n] of class indices drawn from the distributions ``p`` [..., K]."""
    k = p.shape[-1]
    assert np.array_equal(samples, np.round(samples)) and samples.min() >= 0 and samples.max() < k
    n = samples.shape[-1]
    for idx in np.ndindex(p.shape[:-1]):
        counts = np.bincount(samples[idx].astype(np.int64), minlength=k)
        for c in range(k):
            q = p[idx][c]
            assert abs(counts[c] / n - q) < Z * np.sqrt(q * (1 - q) / n) + 1e-12, (idx, c, counts, p[idx])


@pytest.mark.parametrize("is_logits, temperature", [(True, 1.0), (True, 2.5), (False, 1.0), (False, 0.5)])
def test_categorical_distribution(is_logits: bool, temperature: float, tmp_path: Path):
    rng = np.random.default_rng(0)
    if is_logits:
        x = rng.standard_normal((2, 3, 4)).astype(np.float32)
        p = _softmax(x.astype(np.float64) / temperature)
    else:
        x = rng.uniform(0.0, 1.0, (2, 3, 4)).astype(np.float32)
        x[0, 0, 1] = 0.0  # probability 0: log(max(0, eps)) keeps it finite and (practically) never drawn
        x = x / x.sum(axis=-1, keepdims=True)
        p = _softmax(np.log(np.maximum(x.astype(np.float64), 1e-10)) / temperature)  # = x^(1/T), normalised
    n = 4000
    spec = _spec(lambda b: b.add_categorical_distribution("cat", "x", "y", num_samples=n, is_logits=is_logits,
                                                          temperature=temperature, seed=3), {"x": x.shape})
    outs, _ = convert_and_run(spec, {"x": x}, tmp_path)
    y = np.asarray(outs["y"])
    assert y.shape == (2, 3, n) and y.dtype == np.float32
    frequency_checks(y, p)
    if not is_logits:
        assert not np.any(y[0, 0] == 1)


def test_categorical_unset_eps_and_temperature(tmp_path: Path):
    """eps and temperature left 0 take their defaults (1e-10, 1.0), not 0."""
    x = np.array([[0.7, 0.2, 0.1, 0.0]], np.float32)
    b = builder({"x": x.shape}, ("y",), nd=True)
    layer = b.add_categorical_distribution("cat", "x", "y", num_samples=5000, is_logits=False, seed=4)
    layer.categoricalDistribution.eps = 0.0
    layer.categoricalDistribution.temperature = 0.0
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    frequency_checks(np.asarray(outs["y"]), x.astype(np.float64))


@pytest.mark.parametrize("what, add, error, message", [
    ("empty static shape", lambda b: b.add_random_normal_static("r", "y", [], seed=1), FormatError, "outputShape"),
    ("no samples", lambda b: b.add_categorical_distribution("r", "x", "y", num_samples=0), FormatError,
     "numSamples"),
    ("probability above 1", lambda b: b.add_random_bernoulli_like("r", "x", "y", prob=1.5), FormatError, "prob"),
    ("64-bit seed", lambda b: b.add_random_uniform_like("r", "x", "y", seed=2**40), UnsupportedError, "seed"),
    ("dynamic shape of rank 2", lambda b: b.add_random_uniform_dynamic("r", ["x"], "y"), FormatError, "vector"),
])
def test_malformed_layer(what: str, add: Any, error: type, message: str, tmp_path: Path):
    b = builder({"x": (2, 3)}, ("y",), nd=True)
    add(b)
    with pytest.raises(error) as err:
        load_spec(b.spec, tmp_path)
    assert err.value.op == "r", what
    assert message in str(err.value)
