"""randomNormal/Uniform/Bernoulli {Like, Static, Dynamic} and categoricalDistribution.

No oracle reproduces Core ML's random streams, so the oracle is statistical: what the spec defines
(NeuralNetwork.proto: "mean: mean of the normal distribution. stdDev: standard deviation of the
normal distribution"; "minVal: lower bound on the range of random values for the uniform
distribution. maxVal: upper bound"; "prob: probability of a 1 event"; categoricalDistribution:
"numSamples: number of samples to draw. isLogits: true if the inputs are logits, false if the
inputs are probabilities", output [D_1 .. D_(R-1), numSamples]) written here as the distribution's
CDF, moments and class probabilities, and compared with many draws (20000 per fill):

- Kolmogorov-Smirnov (scipy.stats.kstest) against N(mean, stdDev^2) and U[minVal, maxVal], a
  binomial test for Bernoulli(prob), a chi-square test of the class counts for the categorical;
  each must not reject at P_MIN = 1e-6;
- the sample mean and variance (and the Bernoulli / class frequencies) within Z = 5 standard
  errors of the spec's values (compare_with_oracle, "spec formula").

Why these bounds: the seeds are fixed, so every run draws the same numbers and the tests cannot be
flaky; the bounds say how unlikely it is that a correct sampler with some other seed fails (about
6e-7 per statistic, 1e-6 per test), while every parameter mix-up moves a statistic by tens to
hundreds of standard errors (noted at each test): mean <-> stdDev, minVal <-> maxVal (refused:
the lower bound above the upper one), two sizes of a static shape, numSamples <-> seed, eps <->
temperature. A fixed non-negative seed gives the same draws on every run and through MIL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

import converter
from converter.errors import FormatError, UnsupportedError
from tests.nn_models.coverage import oracle_checks

from .common import builder, compare_with_oracle, convert_and_run, flexible, load_spec, through_mil

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

N = (100, 200)  # 20000 draws per distribution; the two sizes differ (a swap of them changes the shape)
Z = 5.0  # bounds of the moment checks, in standard errors (two-sided 5.7e-7 by chance)
P_MIN = 1e-6  # smallest p-value of a goodness-of-fit test that passes
VARIANTS = ("like", "static", "dynamic")


def within(name: str, got: float, want: float, se: float) -> None:
    """A sample statistic within Z standard errors of the spec's value (an oracle comparison)."""
    compare_with_oracle(np.float64(got), np.float64(want), oracle="spec formula", rtol=0.0, atol=Z * se,
                        err_msg=f"{name}: {got} vs {want} (standard error {se})")


def fits(name: str, pvalue: float) -> None:
    assert pvalue > P_MIN, f"{name}: the draws do not fit the spec's distribution (p = {pvalue:.3g})"


def normal_checks(x: np.ndarray, mean: float, std: float) -> None:
    """N(mean, std^2): KS against its CDF; mean (se std/sqrt(n)) and variance (the sample variance
    of a normal has variance 2 std^4 / (n - 1))."""
    x = np.asarray(x, np.float64).reshape(-1)
    n = x.size
    fits("normal", stats.kstest(x, stats.norm(loc=mean, scale=std).cdf).pvalue)
    within("mean", x.mean(), mean, std / np.sqrt(n))
    within("variance", x.var(ddof=1), std**2, std**2 * np.sqrt(2 / (n - 1)))


def uniform_checks(x: np.ndarray, low: float, high: float) -> None:
    """U[low, high): every draw in range; KS against its CDF; mean (se width / sqrt(12 n)) and
    variance width^2 / 12 (se width^2 / sqrt(180 n): the fourth central moment is width^4 / 80)."""
    x = np.asarray(x, np.float64).reshape(-1)
    n, width = x.size, high - low
    assert x.min() >= low and x.max() < high, (x.min(), x.max(), low, high)
    fits("uniform", stats.kstest(x, stats.uniform(loc=low, scale=width).cdf).pvalue)
    within("mean", x.mean(), (low + high) / 2, width / np.sqrt(12 * n))
    within("variance", x.var(ddof=1), width**2 / 12, width**2 / np.sqrt(180 * n))


def bernoulli_checks(x: np.ndarray, prob: float) -> None:
    """Bernoulli(prob): only 0 and 1; the count of 1s binomial(n, prob)."""
    x = np.asarray(x, np.float64).reshape(-1)
    assert set(np.unique(x)) <= {0.0, 1.0}
    ones = int(x.sum())
    fits("bernoulli", stats.binomtest(ones, x.size, prob).pvalue)
    within("frequency of 1", ones / x.size, prob, np.sqrt(prob * (1 - prob) / x.size))


def _fill_model(kind: str, variant: str, params: dict[str, float], seed: int) -> tuple[Any, dict[str, np.ndarray]]:
    """A network whose output y is one ``kind`` fill of shape N: the shape of an input (like), a
    static shape, or a run-time shape vector (dynamic)."""
    if variant == "like":
        b = builder({"x": N}, ("y",), nd=True)
        getattr(b, f"add_random_{kind}_like")("r", "x", "y", seed=seed, **params)
        feeds = {"x": np.full(N, np.nan, np.float32)}  # the values of x are ignored
    elif variant == "static":
        b = builder({"unused": (1,)}, ("y",), nd=True)
        getattr(b, f"add_random_{kind}_static")("r", "y", list(N), seed=seed, **params)
        feeds = {"unused": np.zeros(1, np.float32)}
    else:
        b = builder({"shape": (2,)}, ("y",), nd=True)
        getattr(b, f"add_random_{kind}_dynamic")("r", ["shape"], "y", seed=seed, **params)
        feeds = {"shape": np.array(N, np.float32)}
    return b.spec, feeds


# builder keyword (the NN field) -> the MIL op's input (coremltools' MIL docs: random_uniform "low:
# Lower boundary of the output interval (inclusive)", "high: Upper boundary ... (exclusive)")
MIL_INPUT = {"mean": "mean", "stddev": "stddev", "minval": "low", "maxval": "high", "prob": "prob"}


def _draws(kind: str, variant: str, params: dict[str, float], tmp: Path, seed: int = 11) -> np.ndarray:
    """The fill our conversion draws (shape N, fp32), checked to be the same on a second run.

    The MIL op must also receive each parameter under its MIL name: U[low, high) and U[high, low)
    cannot be told apart by their draws, but MIL leaves random_uniform with high < low undefined
    ("If high < low, the results are officially undefined and may eventually raise an error"), so
    a program passing maxVal as low would be wrong on Core ML whatever our interpreter draws."""
    spec, feeds = _fill_model(kind, variant, params, seed)
    outs, prog = convert_and_run(spec, feeds, tmp)  # seed >= 0: identical through MIL
    y = np.asarray(outs["y"])
    assert y.shape == N and y.dtype == np.float32
    (op,) = [op for op in prog.walk() if op.type == f"random_{kind}"]
    for key, value in {**params, "seed": seed}.items():
        got = np.asarray(op.inputs[MIL_INPUT.get(key, key)].const_val)
        assert got == np.asarray(value, got.dtype), f"MIL {op.type} {MIL_INPUT.get(key, key)} = {got}, not {value}"
    np.testing.assert_array_equal(np.asarray(converter.run(prog, feeds)["y"]), y)  # same seed, same draws
    return y


@oracle_checks("randomNormalLike", "randomNormalStatic", "randomNormalDynamic")
def test_random_normal_distribution(tmp_path: Path):
    """N(mean, stdDev^2) for each variant; mean and stdDev differ, both orders of magnitude apart
    from a swap's effect: (1.5, 0.75) swapped moves the mean by 140 standard errors; (-1.25, 0.5)
    swapped is a negative stdDev (refused)."""
    for variant, (mean, std) in zip(VARIANTS, [(1.5, 0.75), (-1.25, 0.5), (1.5, 0.75)]):
        normal_checks(_draws("normal", variant, {"mean": mean, "stddev": std}, tmp_path), mean, std)


@oracle_checks("randomUniformLike", "randomUniformStatic", "randomUniformDynamic")
def test_random_uniform_distribution(tmp_path: Path):
    """U[minVal, maxVal) for each variant (minVal < maxVal: swapped, the lower bound is above the
    upper one, which the conversion refuses: test_uniform_bounds_out_of_order)."""
    for variant, (low, high) in zip(VARIANTS, [(-2.0, 3.0), (0.5, 0.75), (-2.0, 3.0)]):
        uniform_checks(_draws("uniform", variant, {"minval": low, "maxval": high}, tmp_path), low, high)


@oracle_checks("randomBernoulliLike", "randomBernoulliStatic", "randomBernoulliDynamic")
def test_random_bernoulli_distribution(tmp_path: Path):
    """Bernoulli(prob) for each variant: 0.3 and 0.85 (far apart: 100 standard errors)."""
    for variant, prob in zip(VARIANTS, [0.3, 0.85, 0.3]):
        bernoulli_checks(_draws("bernoulli", variant, {"prob": prob}, tmp_path), prob)


@pytest.mark.parametrize("kind, params, value", [("normal", {"mean": -0.5, "stddev": 0.0}, -0.5),
                                                  ("uniform", {"minval": 1.25, "maxval": 1.25}, 1.25),
                                                  ("bernoulli", {"prob": 0.0}, 0.0),
                                                  ("bernoulli", {"prob": 1.0}, 1.0)])
def test_degenerate_distributions(kind: str, params: dict[str, float], value: float, tmp_path: Path):
    """A normal with stdDev 0 is its mean; a uniform with minVal = maxVal that value (MIL's
    random_uniform: "When high == low, values of low will be returned"); prob 0 and 1 are constant."""
    y = _draws(kind, "static", params, tmp_path)
    np.testing.assert_array_equal(y, np.full(N, value, np.float32))


@pytest.mark.parametrize("kind, params, field", [
    ("uniform", {"minval": 3.0, "maxval": -2.0}, "minVal"),
    ("uniform", {"minval": float("nan"), "maxval": 1.0}, "minVal"),
    ("normal", {"mean": 0.0, "stddev": -1.0}, "stdDev"),
])
@pytest.mark.parametrize("variant", VARIANTS)
def test_bounds_that_contradict_the_spec_are_refused(kind: str, params: dict[str, float], field: str, variant: str,
                                                     tmp_path: Path):
    """minVal above maxVal (the spec: "lower bound" / "upper bound"; MIL's random_uniform says "If
    high < low, the results are officially undefined") and a negative stdDev are malformed layers:
    a FormatError naming the layer and the field, not a program with undefined results."""
    spec, _ = _fill_model(kind, variant, params, seed=1)
    with pytest.raises(FormatError) as err:
        load_spec(spec, tmp_path)
    assert err.value.op == "r" and field in str(err.value), str(err.value)


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


def _spec(add: Any, inputs: dict[str, tuple[int, ...]]) -> Any:
    b = builder(inputs, ("y",), nd=True)
    add(b)
    return b.spec


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def frequency_checks(samples: np.ndarray, p: np.ndarray) -> None:
    """``samples`` [..., n] of class indices drawn from the distributions ``p`` [..., K]: class
    indices only; per distribution a chi-square test of the class counts (classes of probability
    below 1e-9 must not be drawn at all) and each class frequency within Z standard errors."""
    k = p.shape[-1]
    assert np.array_equal(samples, np.round(samples)) and samples.min() >= 0 and samples.max() < k
    n = samples.shape[-1]
    for idx in np.ndindex(p.shape[:-1]):
        counts = np.bincount(samples[idx].astype(np.int64), minlength=k)
        drawn = p[idx] > 1e-9
        assert not counts[~drawn].any(), (idx, counts, p[idx])
        expected = p[idx][drawn] / p[idx][drawn].sum() * n
        fits(f"classes of {idx}", stats.chisquare(counts[drawn], expected).pvalue)
        for c in range(k):
            q = p[idx][c]
            within(f"frequency of class {c} in {idx}", counts[c] / n, q, np.sqrt(q * (1 - q) / n) + 1e-12)


@oracle_checks("categoricalDistribution")
@pytest.mark.parametrize("is_logits, temperature, eps", [(True, 1.0, 1e-10), (True, 2.5, 0.25), (False, 1.0, 1e-10),
                                                         (False, 0.5, 1e-4)])
def test_categorical_distribution(is_logits: bool, temperature: float, eps: float, tmp_path: Path):
    """numSamples class indices per distribution on the last axis, from softmax(x / temperature)
    for logits and from x^(1/temperature) normalised (softmax(log x / temperature)) for
    probabilities. The spec names temperature and eps without a formula: temperature here is the
    usual one of a categorical softmax (logits divided by it), and eps (1e-10 by default) only
    keeps log x finite for a zero probability; the eps used with probabilities (1e-4) is far below
    every non-zero probability, so the expectation does not depend on how eps enters (max(x, eps)
    or x + eps): a zero-probability class is (practically) never drawn. Swaps: isLogits changes
    the distribution; eps <-> temperature makes temperature 1e-4 (one class only) or scales the
    logits 4x (temperature 0.25); numSamples (4000) <-> seed (3) changes the output shape."""
    rng = np.random.default_rng(0)
    if is_logits:
        x = rng.standard_normal((2, 3, 4)).astype(np.float32) * 2
        p = _softmax(x.astype(np.float64) / temperature)
    else:
        x = rng.uniform(0.2, 1.0, (2, 3, 4)).astype(np.float32)
        x[0, 0, 1] = 0.0  # probability 0
        x = x / x.sum(axis=-1, keepdims=True)
        p = np.where(x > 0, x.astype(np.float64), 0.0) ** (1 / temperature)
        p = p / p.sum(axis=-1, keepdims=True)
    n = 4000
    spec = _spec(lambda b: b.add_categorical_distribution("cat", "x", "y", num_samples=n, is_logits=is_logits,
                                                          eps=eps, temperature=temperature, seed=3), {"x": x.shape})
    layer = spec.neuralNetwork.layers[-1].categoricalDistribution
    assert (layer.numSamples, layer.isLogits, layer.seed) == (n, is_logits, 3)
    assert (layer.eps, layer.temperature) == (np.float32(eps), np.float32(temperature))
    outs, _ = convert_and_run(spec, {"x": x}, tmp_path)
    y = np.asarray(outs["y"])
    assert y.shape == (2, 3, n) and y.dtype == np.float32
    frequency_checks(y, p)
    if not is_logits:
        assert not np.any(y[0, 0] == 1)


def test_categorical_unset_eps_and_temperature(tmp_path: Path):
    """eps and temperature left 0 take their defaults (the spec's comments: "eps: default value is
    1e-10. temperature: default value is 1.0."), not 0."""
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
