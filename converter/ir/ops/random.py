"""Random sampling: random_bernoulli, random_categorical, random_normal, random_uniform.

Core ML's random streams are not reproducible outside Core ML; these kernels draw from numpy's
PCG64 instead. What the IR guarantees is the distribution, the shape and dtype, and determinism:
a non-negative ``seed`` gives the same values on every run, ``seed = -1`` (the default) a stream
fixed per interpreter seed and the op's stream key, which renames and rewrites do not change
(``EvalArgs.rng``, `converter.ir.rng`). The ops carry the "random" trait, not
"pure": two draws with equal inputs are different values and must not be merged or folded.
Samples are drawn in fp32 and rounded to the output dtype (fp16 or fp32).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..opdef import EvalArgs, InferArgs, OpDef, register
from ..types import DType, TensorType, Type, fp32, is_static_dim

RANDOM = frozenset({"random"})


def _seed(a: EvalArgs) -> int | None:
    return int(np.asarray(a.value("seed")))


def _param_dtype(a: InferArgs, *names: str) -> DType:
    """The output dtype: that of the distribution parameters given (they share one), else fp32."""
    given = [a.tensor_type(n).dtype for n in names if a.has(n)]
    return given[0] if given else fp32


class _ShapedDistribution(OpDef):
    """Output shape from the run-time ``shape`` vector: exact when it is a constant."""

    traits = RANDOM
    params: tuple[str, ...] = ()

    def infer(self, a: InferArgs) -> list[Type]:
        dt = _param_dtype(a, *self.params)
        t = a.tensor_type("shape")
        if t.shape is not None and len(t.shape) != 1:
            raise a.fail(f"shape must be a vector, got shape {list(t.shape)}")
        value = a.value("shape")
        if value is not None:
            dims = [int(d) for d in np.asarray(value).reshape(-1)]
            if any(d < 0 for d in dims):
                raise a.fail(f"shape {dims} has a negative size")
            return [TensorType(dt, tuple(dims))]
        if t.shape is None or not is_static_dim(t.shape[0]):
            return [TensorType(dt, None)]
        return [TensorType(dt, tuple(a.new_symbol() for _ in range(int(t.shape[0]))))]

    def sample(self, a: EvalArgs, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        raise NotImplementedError

    def evaluate(self, a: EvalArgs) -> list[Any]:
        shape = tuple(int(d) for d in np.asarray(a["shape"]).reshape(-1))
        out = self.sample(a, a.rng(_seed(a)), shape)
        return [np.asarray(out).astype(a.out_types[0].dtype.storage)]


def _scalar(a: EvalArgs, name: str) -> np.float32:
    return np.float32(np.asarray(a.value(name), np.float32).reshape(-1)[0])


@register
class RandomBernoulli(_ShapedDistribution):
    """1 with probability ``prob``, else 0."""

    op_type = "random_bernoulli"
    params = ("prob",)

    def sample(self, a: EvalArgs, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        return rng.random(shape, dtype=np.float32) < _scalar(a, "prob")


@register
class RandomNormal(_ShapedDistribution):
    """Normal(``mean``, ``stddev``)."""

    op_type = "random_normal"
    params = ("mean", "stddev")

    def sample(self, a: EvalArgs, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        return rng.standard_normal(shape, dtype=np.float32) * _scalar(a, "stddev") + _scalar(a, "mean")


@register
class RandomUniform(_ShapedDistribution):
    """Uniform on ``[low, high)``; ``low`` when they are equal.

    Rounding to fp16 could reach ``high``; such values are moved one ulp below it.
    """

    op_type = "random_uniform"
    params = ("low", "high")

    def sample(self, a: EvalArgs, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        low, high = _scalar(a, "low"), _scalar(a, "high")
        out = (low + (high - low) * rng.random(shape, dtype=np.float32)).astype(a.out_types[0].dtype.storage)
        if high > low:
            top = np.nextafter(np.asarray(high, out.dtype), np.asarray(low, out.dtype))
            out = np.minimum(out, top)
        return out


@register
class RandomCategorical(OpDef):
    """``size`` draws (with replacement) of a class index per distribution on ``x``'s last axis.

    ``mode="logits"``: ``x`` holds log-probabilities (softmax gives the distribution);
    ``mode="probs"``: ``x`` holds probabilities, normalised here (MIL takes their log, then softmax).
    The indices come back in ``x``'s float dtype, shape ``x.shape[:-1] + [size]``.
    """

    op_type = "random_categorical"
    traits = RANDOM

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        mode = str(np.asarray(a.value("mode")))
        if mode not in ("logits", "probs"):
            raise a.fail(f"mode must be 'logits' or 'probs', got '{mode}'")
        size = int(np.asarray(a.value("size")))
        if size < 1:
            raise a.fail(f"size must be >= 1, got {size}")
        if x.shape is None:
            return [TensorType(x.dtype, None)]
        if len(x.shape) < 1:
            raise a.fail("x must have rank >= 1")
        return [TensorType(x.dtype, tuple(x.shape[:-1]) + (size,))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = np.asarray(a["x"], np.float64)
        if str(np.asarray(a.value("mode"))) == "logits":
            p = np.exp(x - x.max(axis=-1, keepdims=True))
        else:
            p = x
        cdf = np.cumsum(p, axis=-1)
        cdf = cdf / cdf[..., -1:]
        size = int(np.asarray(a.value("size")))
        u = a.rng(_seed(a)).random(x.shape[:-1] + (size,))
        # index = number of cdf entries <= u, capped at the last class (u < 1 = cdf[-1])
        idx = (u[..., :, None] >= cdf[..., None, :]).sum(axis=-1)
        idx = np.minimum(idx, x.shape[-1] - 1)
        return [idx.astype(a.out_types[0].dtype.storage)]
