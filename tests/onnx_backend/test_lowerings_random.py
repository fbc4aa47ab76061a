"""random_* through the ONNX backend, run by onnxruntime. The values cannot match Core ML's or our
interpreter's (different generators): checked are shape, dtype, the distribution (moments and
range of large samples against the parameters, each distinct) and the seed rule (a seeded model
gives the same first run in every session)."""

from __future__ import annotations

import numpy as np
import pytest

from converter.ir.builder import new_program
from converter.ir.types import TensorType, dtype

from .helpers import only, program, run_onnx, session

N = 20000
X = np.zeros(1, np.float32)


def _sample(body, feeds=None, opset: str = "iOS17") -> np.ndarray:  # noqa: ANN001
    feeds = feeds or {"x": X}
    prog = program(feeds, lambda b, *ins: [b.relu(x=ins[0], name="unused"), body(b, *ins)], opset=opset)
    got = run_onnx(prog, feeds)
    return next(v for k, v in got.items() if k != "unused")


@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_random_normal_moments(dt: type) -> None:
    y = _sample(lambda b, x: b.random_normal(shape=np.array([N // 4, 4], np.int32), mean=dt(1.5), stddev=dt(0.25)))
    assert y.shape == (N // 4, 4) and y.dtype == dt
    assert abs(y.astype(np.float64).mean() - 1.5) < 0.01 and abs(y.astype(np.float64).std() - 0.25) < 0.01


@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_random_uniform_range_and_mean(dt: type) -> None:
    y = _sample(lambda b, x: b.random_uniform(shape=np.array([N], np.int32), low=dt(-2.0), high=dt(-1.25)))
    assert y.dtype == dt and y.min() >= -2.0 and y.max() < -1.25
    assert abs(y.astype(np.float64).mean() + 1.625) < 0.01


def test_random_bernoulli_rate() -> None:
    y = _sample(lambda b, x: b.random_bernoulli(shape=np.array([N], np.int32), prob=np.float32(0.3)))
    assert set(np.unique(y)) <= {0.0, 1.0} and abs(y.mean() - 0.3) < 0.015


@pytest.mark.parametrize("mode", ["logits", "probs"])
def test_random_categorical_frequencies(mode: str) -> None:
    p = np.array([0.1, 0.6, 0.3], np.float32)
    x = np.stack([p, p[::-1]])[None]  # [1, 2, 3]: two distributions
    x_in = np.log(x) if mode == "logits" else x * 5  # probs need not be normalised
    y = _sample(lambda b, x: b.random_categorical(x=x, mode=mode, size=N // 4), {"x": x_in.astype(np.float32)})
    assert y.shape == (1, 2, N // 4) and y.dtype == np.float32
    for row, want in zip(y[0], x[0]):
        freq = np.bincount(row.astype(int), minlength=3) / row.size
        np.testing.assert_allclose(freq, want, atol=0.025)


def test_run_time_shape() -> None:
    shape = np.array([3, 5, 2], np.int32)
    prog = program({"s": shape}, lambda b, s: b.random_uniform(shape=s, low=np.float32(4.0), high=np.float32(5.0)))
    y = only(run_onnx(prog, {"s": shape}))
    assert y.shape == (3, 5, 2) and 4.0 <= y.min() and y.max() < 5.0


def test_seeded_model_repeats_its_first_run_per_session() -> None:
    t = TensorType(dtype("fp32"), (1,))
    prog = new_program([("x", t)], lambda b, x: [b.relu(x=x, name="r"), b.random_normal(
        shape=np.array([8], np.int32), seed=np.int32(7), name="n")])
    first = [session(prog).run(["n"], {"x": X})[0] for _ in range(2)]
    np.testing.assert_array_equal(first[0], first[1])
