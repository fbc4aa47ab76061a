"""Normalization: batch_norm, instance_norm, l2_norm, layer_norm, local_response_norm.

All kernels compute in fp32 (fp16 inputs and fp16/fp32 parameters alike) and round to the input
dtype once at the end. Since iOS17 the parameters may have another float dtype than ``x`` (type
domain U); the output always has ``x``'s dtype. Variances are population variances (divide by N),
and ``epsilon`` is added inside the square root.

Rank limits: infer() enforces the lower bounds the MIL docs give (the semantics need those
axes). Upper bounds are enforced only for ``batch_norm`` (coremltools' frontends never emit more
than rank 5); ``instance_norm`` (documented <= 4) is emitted by coremltools for 3-D instance norms
and ``local_response_norm`` (documented <= 4) is tested by it at rank 5 on device.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..opdef import EvalArgs, InferArgs, OpDef, register
from ..shapes import ShapeError, normalize_axes
from ..types import TensorType, Type, dims_compatible
from ._util import as_int_list

_F32 = np.float32


def _scalar(a: EvalArgs, name: str) -> float:
    return float(np.asarray(a.value(name), dtype=np.float64).reshape(-1)[0])


def _need_rank(a: InferArgs, x: TensorType, low: int, high: int | None = None) -> None:
    if x.shape is None:
        return
    rank = len(x.shape)
    if rank < low or (high is not None and rank > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise a.fail(f"{a.op.type} needs an input of rank {bound}, got rank {rank}")


def _check_channel_params(a: InferArgs, x: TensorType, names: tuple[str, ...]) -> None:
    """Per-channel parameters are 1-D of length C = x.shape[1]."""
    channels = x.shape[1] if x.shape is not None else None
    for name in names:
        if not a.has(name):
            continue
        t = a.tensor_type(name)
        if t.shape is None:
            continue
        if len(t.shape) != 1:
            raise a.fail(f"'{name}' must be 1-D [C], got shape {list(t.shape)}")
        if channels is not None and not dims_compatible(t.shape[0], channels):
            raise a.fail(f"'{name}' has {t.shape[0]} entries but x has {channels} channels")


def _per_channel(a: EvalArgs, name: str, rank: int) -> np.ndarray | None:
    """A [C] parameter reshaped to broadcast against [N, C, *D]; None when absent."""
    v = a.value(name)
    if v is None:
        return None
    return np.asarray(v, dtype=_F32).reshape((1, -1) + (1,) * (rank - 2))


def _scale_shift(y: np.ndarray, gamma: np.ndarray | None, beta: np.ndarray | None) -> np.ndarray:
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y


def _normalize(x: np.ndarray, axes: tuple[int, ...], eps: float) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) over ``axes``, population variance."""
    mean = np.mean(x, axis=axes, keepdims=True)
    centered = x - mean
    var = np.mean(centered * centered, axis=axes, keepdims=True)
    return centered / np.sqrt(var + _F32(eps))


@register
class BatchNorm(OpDef):
    """``gamma * (x - mean) / sqrt(variance + epsilon) + beta`` per channel (axis 1) of [N, C, *D].

    MIL documents 3 <= rank <= 5 (coremltools' torch frontend rejects other ranks and expands rank 2
    to 3 before emitting it); both bounds are enforced.
    """

    op_type = "batch_norm"

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        _need_rank(a, x, 3, 5)
        _check_channel_params(a, x, ("mean", "variance", "gamma", "beta"))
        return [x]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = a["x"]
        rank = x.ndim
        mean = _per_channel(a, "mean", rank)
        var = _per_channel(a, "variance", rank)
        with np.errstate(all="ignore"):
            y = (x.astype(_F32) - mean) / np.sqrt(var + _F32(_scalar(a, "epsilon")))
            y = _scale_shift(y, _per_channel(a, "gamma", rank), _per_channel(a, "beta", rank))
        return [y.astype(x.dtype)]


@register
class InstanceNorm(OpDef):
    """Normalize each (n, c) slice of [N, C, *D] over its spatial dims, then per-channel gamma/beta.

    MIL documents 3 <= rank <= 4; rank >= 3 is enforced (see module docstring).
    """

    op_type = "instance_norm"

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        _need_rank(a, x, 3)
        _check_channel_params(a, x, ("gamma", "beta"))
        return [x]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = a["x"]
        rank = x.ndim
        with np.errstate(all="ignore"):
            y = _normalize(x.astype(_F32), tuple(range(2, rank)), _scalar(a, "epsilon"))
            y = _scale_shift(y, _per_channel(a, "gamma", rank), _per_channel(a, "beta", rank))
        return [y.astype(x.dtype)]


@register
class L2Norm(OpDef):
    """``x / sqrt(sum(x**2) + epsilon)`` over the last three dims; leading dims are batch.

    MIL's l2_norm takes no axes: for x of shape [*B, D1, D2, D3] (rank >= 3) each of the prod(B)
    slices [D1, D2, D3] is normalized on its own (a rank-3 input is one slice). ``epsilon`` is
    added to the sum of squares, not max()-clamped as in torch's F.normalize.
    """

    op_type = "l2_norm"

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        _need_rank(a, x, 3)
        return [x]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = a["x"]
        xf = x.astype(_F32)
        with np.errstate(all="ignore"):
            ss = np.sum(xf * xf, axis=(-3, -2, -1), keepdims=True)
            y = xf / np.sqrt(ss + _F32(_scalar(a, "epsilon")))
        return [y.astype(x.dtype)]


@register
class LayerNorm(OpDef):
    """Normalize over ``axes`` (default: all), then ``gamma``/``beta`` of shape x.shape[sorted axes].

    An empty ``axes`` normalizes single elements: the result is ``beta`` (0 without it).
    """

    op_type = "layer_norm"

    def default_axes(self, a: InferArgs | EvalArgs) -> list[int] | None:
        t = a.type("x")
        rank = t.rank if isinstance(t, TensorType) else None
        return None if rank is None else list(range(rank))

    def _axes(self, a: InferArgs | EvalArgs, rank: int) -> list[int]:
        try:
            return sorted(normalize_axes(as_int_list(a.value("axes")), rank))
        except ShapeError as e:
            raise a.fail(str(e)) from None

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        if x.shape is None or a.value("axes") is None:
            return [x]
        axes = self._axes(a, len(x.shape))
        normalized = [x.shape[i] for i in axes]
        for name in ("gamma", "beta"):
            if not a.has(name):
                continue
            shape = a.tensor_type(name).shape
            if shape is not None and (
                len(shape) != len(normalized) or not all(map(dims_compatible, shape, normalized))
            ):
                raise a.fail(f"'{name}' must have shape {[str(d) for d in normalized]} "
                             f"(x's dims at the normalized axes), got {list(shape)}")
        return [x]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = a["x"]
        axes = self._axes(a, x.ndim)
        bshape = tuple(d if i in axes else 1 for i, d in enumerate(x.shape))
        with np.errstate(all="ignore"):
            y = _normalize(x.astype(_F32), tuple(axes), _scalar(a, "epsilon"))
            params = [a.value(n) for n in ("gamma", "beta")]
            y = _scale_shift(y, *(None if p is None else np.asarray(p, _F32).reshape(bshape) for p in params))
        return [y.astype(x.dtype)]


@register
class LocalResponseNorm(OpDef):
    """``x / (k + alpha / size * sum(x[c']**2))**beta`` over a window of ``size`` channels.

    The channel axis is -3 and every dim before it is batch (rank >= 3), as in the NeuralNetwork
    LRN layer that MIL's op lowers to unchanged. MIL documents [n, C, *D]; for rank 4 both agree,
    and for rank 3 the expected values of coremltools' on-device smoke test (shape [1, 3, 2],
    sizes 2 and 3) only fit axis -3. The window for channel c is [c - size // 2, c + (size - 1) // 2]
    clipped to the channels (MPSCNNCrossChannelNormalization's documented window and torch's);
    ONNX LRN's differs for even sizes.
    """

    op_type = "local_response_norm"

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        _need_rank(a, x, 3)
        size = a.value("size")
        if size is not None and int(np.asarray(size)) < 1:
            raise a.fail(f"size must be >= 1, got {int(np.asarray(size))}")
        return [x]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = a["x"]
        size = int(np.asarray(a.value("size")))
        sq = np.moveaxis(x.astype(_F32), -3, 0) ** 2  # channels first
        channels = sq.shape[0]
        window = np.zeros_like(sq)
        # offsets of a channel count or more add nothing: only those below it are visited (a window of
        # 2^31 channels would otherwise loop 2^31 times)
        for offset in range(max(-(size // 2), -channels), min((size - 1) // 2, channels) + 1):
            lo, hi = max(0, -offset), min(channels, channels - offset)  # c with c + offset in range
            if lo < hi:
                window[lo:hi] += sq[lo + offset:hi + offset]
        alpha, beta, k = (_F32(_scalar(a, n)) for n in ("alpha", "beta", "k"))
        with np.errstate(all="ignore"):
            y = x.astype(_F32) / np.power(k + alpha / _F32(size) * np.moveaxis(window, 0, -3), beta)
        return [y.astype(x.dtype)]
