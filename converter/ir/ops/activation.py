"""Activation functions: relu family, sigmoid family, tanh/softplus/softsign variants, gelu, prelu
and softmax.

Numerics as in ``elementwise_unary``: float64 computation rounded once to x's dtype. Where MIL's
documentation and coremltools' constant folding disagree, the documentation wins and the
docstring says so. Selections written ``where(cond, a, b)`` keep NaN inputs NaN (every branch
of these formulas propagates NaN).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from ..opdef import EvalArgs, InferArgs, register
from ..shapes import ShapeError, normalize_axis
from .elementwise_unary import UnaryOp, erf, require_scalar, string_param, unary, widen


def sigmoid(x: np.ndarray) -> np.ndarray:
    """The logistic function (shared with the recurrent ops); overflow of exp(-x) gives 0, not a warning."""
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _softplus(x: np.ndarray) -> np.ndarray:
    """``log(1 + e^x)`` without overflow: ``max(x, 0) + log1p(e^-|x|)``."""
    return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))


unary("relu", lambda x: np.maximum(x, 0.0), "``max(x, 0)``.", module=__name__)
unary("relu6", lambda x: np.minimum(np.maximum(x, 0.0), 6.0), "``min(max(x, 0), 6)``.", module=__name__)
unary("sigmoid", sigmoid, "``1 / (1 + e^-x)``.", module=__name__)
unary("silu", lambda x: x * sigmoid(x), "``x * sigmoid(x)`` (SiLU / swish); NaN at -inf, as in torch.", module=__name__)
unary("softplus", _softplus, "``log(1 + e^x)``.", module=__name__)
unary("softsign", lambda x: x / (1.0 + np.abs(x)), "``x / (1 + |x|)``; NaN at +-inf, as the formula gives.", module=__name__)


# -------------------------------------------------------------------------------------------------
# Scalar alpha / beta


class _AlphaBeta(UnaryOp):
    """An activation with scalar parameters ``alpha`` (and ``beta``)."""

    scalar_params: ClassVar[tuple[str, ...]] = ("alpha", "beta")

    def compute(self, x: np.ndarray, a: EvalArgs) -> np.ndarray:
        return self.formula(x, *(widen(a[n]) for n in self.scalar_params))

    def formula(self, x: np.ndarray, *params: np.ndarray) -> np.ndarray:
        raise NotImplementedError


@register
class ClampedRelu(_AlphaBeta):
    """``min(beta, x)`` for x >= 0, else ``min(beta, alpha * x)``.

    This is the documented formula. coremltools folds constants as
    ``min(max(x, 0), beta) + min(min(x, 0) * alpha, beta)``, which agrees only for beta >= 0.
    """

    op_type = "clamped_relu"

    def formula(self, x: np.ndarray, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
        return np.minimum(np.where(x >= 0, x, alpha * x), beta)


@register
class Elu(_AlphaBeta):
    """``x`` for x > 0, else ``alpha * (e^x - 1)``."""

    op_type = "elu"
    scalar_params = ("alpha",)

    def formula(self, x: np.ndarray, alpha: np.ndarray) -> np.ndarray:
        return np.where(x > 0, x, alpha * np.expm1(x))


@register
class LeakyRelu(_AlphaBeta):
    """``x`` for x >= 0, else ``alpha * x``."""

    op_type = "leaky_relu"
    scalar_params = ("alpha",)

    def formula(self, x: np.ndarray, alpha: np.ndarray) -> np.ndarray:
        return np.where(x >= 0, x, alpha * x)


@register
class LinearActivation(_AlphaBeta):
    """``alpha * x + beta``."""

    op_type = "linear_activation"

    def formula(self, x: np.ndarray, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
        return alpha * x + beta


@register
class ScaledTanh(_AlphaBeta):
    """``alpha * tanh(beta * x)``."""

    op_type = "scaled_tanh"

    def formula(self, x: np.ndarray, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
        return alpha * np.tanh(beta * x)


@register
class SigmoidHard(_AlphaBeta):
    """``min(max(alpha * x + beta, 0), 1)``."""

    op_type = "sigmoid_hard"

    def formula(self, x: np.ndarray, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
        return np.minimum(np.maximum(alpha * x + beta, 0.0), 1.0)


@register
class ThresholdedRelu(_AlphaBeta):
    """``x`` for x >= alpha, else 0 (MIL keeps x == alpha; ONNX ThresholdedRelu does not).

    Written as "0 where x < alpha" so NaN stays NaN, as in coremltools' constant folding.
    """

    op_type = "thresholded_relu"
    scalar_params = ("alpha",)

    def formula(self, x: np.ndarray, alpha: np.ndarray) -> np.ndarray:
        return np.where(x < alpha, 0.0, x)


# -------------------------------------------------------------------------------------------------
# gelu


_GELU_MODES = ("EXACT", "TANH_APPROXIMATION", "SIGMOID_APPROXIMATION")


@register
class Gelu(UnaryOp):
    """Gaussian error linear unit, by ``mode``:

    - EXACT: ``0.5 x (1 + erf(x / sqrt(2)))``
    - TANH_APPROXIMATION: ``0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))``
    - SIGMOID_APPROXIMATION: ``x sigmoid(1.702 x)``
    """

    op_type = "gelu"

    def check(self, a: InferArgs) -> None:
        mode = string_param(a, "mode")
        if mode is None:
            raise a.fail("'mode' must be a compile-time constant string")
        if mode not in _GELU_MODES:
            raise a.fail(f"unknown gelu mode '{mode}' (one of: {', '.join(_GELU_MODES)})")

    def compute(self, x: np.ndarray, a: EvalArgs) -> np.ndarray:
        mode = string_param(a, "mode")
        if mode == "TANH_APPROXIMATION":
            return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
        if mode == "SIGMOID_APPROXIMATION":
            return x * sigmoid(1.702 * x)
        return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


# -------------------------------------------------------------------------------------------------
# Per-channel parameters (axis 1): not "elementwise", the parameters are bound to a layout axis


class _PerChannel(UnaryOp):
    """Parameters ``channel_params`` are rank-1 tensors of length C = x.shape[1]."""

    traits = frozenset({"pure"})
    channel_params: ClassVar[tuple[str, ...]] = ()
    min_rank: ClassVar[int] = 3
    max_rank: ClassVar[int | None] = None

    def check(self, a: InferArgs) -> None:
        x = a.tensor_type("x")
        if x.shape is not None:
            rank = len(x.shape)
            if rank < self.min_rank or (self.max_rank is not None and rank > self.max_rank):
                allowed = f"{self.min_rank}..{self.max_rank}" if self.max_rank else f">= {self.min_rank}"
                raise a.fail(f"x must have rank {allowed}, got rank {rank}")
        for name in self.channel_params:
            p = a.tensor_type(name)
            if p.shape is None:
                continue
            if len(p.shape) != 1:
                raise a.fail(f"'{name}' must be rank 1 (one value per channel), got shape {list(p.shape)}")
            c = None if x.shape is None else x.shape[1]
            n = p.shape[0]
            if isinstance(c, int) and isinstance(n, int) and c != n:
                raise a.fail(f"'{name}' has {n} values for {c} channels (x.shape[1])")

    @staticmethod
    def per_channel(p: Any, rank: int) -> np.ndarray:
        """A rank-1 parameter shaped (C, 1, ..., 1) to broadcast along axis 1 of a rank-``rank`` x."""
        return widen(p).reshape((-1,) + (1,) * (rank - 2))


@register
class Prelu(_PerChannel):
    """``x`` for x > 0, else ``alpha[c] * x`` with c the index on axis 1; x has rank 3, 4 or 5.

    coremltools also rejects rank 3 and 5 inputs whose alpha values differ (a Core ML runtime
    limit, not a semantic one); that is left to the Core ML backends.
    """

    op_type = "prelu"
    channel_params = ("alpha",)
    max_rank = 5

    def compute(self, x: np.ndarray, a: EvalArgs) -> np.ndarray:
        alpha = self.per_channel(a["alpha"], x.ndim)
        return np.where(x > 0, x, alpha * x)


@register
class SoftplusParametric(_PerChannel):
    """``alpha[c] * log(1 + e^(beta[c] * x))`` with c the index on axis 1; x has rank >= 3."""

    op_type = "softplus_parametric"
    channel_params = ("alpha", "beta")

    def compute(self, x: np.ndarray, a: EvalArgs) -> np.ndarray:
        alpha = self.per_channel(a["alpha"], x.ndim)
        beta = self.per_channel(a["beta"], x.ndim)
        return alpha * _softplus(beta * x)


# -------------------------------------------------------------------------------------------------
# softmax


@register
class Softmax(UnaryOp):
    """``exp(x) / sum(exp(x), axis)``, computed as ``exp(x - max) / sum(exp(x - max))``.

    A slice holding +inf, or only -inf, gives NaN (inf - inf), as in onnxruntime.
    """

    op_type = "softmax"
    traits = frozenset({"pure"})

    def check(self, a: InferArgs) -> None:
        require_scalar(a, "axis")
        axis, rank = a.value("axis"), a.rank("x")
        if axis is None:
            raise a.fail("'axis' must be a compile-time constant")
        if rank is not None:
            try:
                normalize_axis(int(axis), rank)
            except ShapeError as e:
                raise a.fail(str(e)) from None

    def compute(self, x: np.ndarray, a: EvalArgs) -> np.ndarray:
        axis = normalize_axis(int(a["axis"]), x.ndim)
        if x.size == 0:
            return x
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e / np.sum(e, axis=axis, keepdims=True)
