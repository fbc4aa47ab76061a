"""Pooling: avg_pool, max_pool, l2_pool over 1 to 3 spatial dims of ``[N, C, *spatial]``.

Windows follow conv's rules (see conv.Window); pooling has no dilations but has ceil_mode,
which lets the last window hang over the end of the padded input. Kernels compute in fp32.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..opdef import EvalArgs, InferArgs, register
from ..types import TensorType, Type
from ._util import as_int_list
from .conv import SpatialDefaults, Window, read_window


class _Pool(SpatialDefaults):
    """Shared window reading and shape inference."""

    max_spatial = 3

    def _window(self, a: InferArgs | EvalArgs, n_spatial: int) -> Window:
        kernel = as_int_list(a.value("kernel_sizes"))
        if len(kernel) != n_spatial or any(k < 1 for k in kernel):
            raise a.fail(f"kernel_sizes must hold {n_spatial} positive sizes, got {kernel}")
        ceil_mode = bool(np.asarray(a.value("ceil_mode")).reshape(-1)[0])
        win = read_window(a, tuple(kernel), dilations=False, ceil_mode=ceil_mode)
        if ceil_mode:
            if n_spatial > 2:
                raise a.fail("ceil_mode is only defined for 1-d and 2-d pooling")
            if win.pad_type in ("same", "same_lower"):
                raise a.fail(f"ceil_mode needs pad_type 'valid' or 'custom', got '{win.pad_type}'")
            if any(b != e for b, e in win.custom_pad):
                raise a.fail(f"ceil_mode needs symmetric padding, got {[list(p) for p in win.custom_pad]}")
        return win

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        if x.shape is None:
            return [TensorType(x.dtype, None)]
        n_spatial = len(x.shape) - 2
        if not 1 <= n_spatial <= self.max_spatial:
            raise a.fail(f"{self.op_type} takes 1 to {self.max_spatial} spatial dims, x has shape {list(x.shape)}")
        win = self._window(a, n_spatial)
        return [TensorType(x.dtype, tuple(x.shape[:2]) + win.out_dims(a, tuple(x.shape[2:])))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = np.asarray(a["x"])
        win = self._window(a, x.ndim - 2)
        with np.errstate(all="ignore"):  # inf and NaN propagate as IEEE says
            y = self.pool(a, x.astype(np.float32), win)
        return [y.astype(a.out_types[0].dtype.storage)]

    def pool(self, a: EvalArgs, x: np.ndarray, win: Window) -> np.ndarray:
        raise NotImplementedError


def _window_sum(xp: np.ndarray, win: Window, outs: tuple[int, ...]) -> np.ndarray:
    total = np.zeros(xp.shape[:2] + outs, np.float32)
    for _, window in win.taps(outs):
        total += xp[window]
    return total


@register
class MaxPool(_Pool):
    """Maximum over each window; padding never wins (it is -inf), NaN propagates."""

    op_type = "max_pool"

    def pool(self, a: EvalArgs, x: np.ndarray, win: Window) -> np.ndarray:
        xp, outs = win.padded(x, -np.inf)
        y = np.full(x.shape[:2] + outs, -np.inf, np.float32)
        for _, window in win.taps(outs):
            y = np.maximum(y, xp[window])
        return y


@register
class AvgPool(_Pool):
    """Mean over each window. The divisor counts the explicit padding unless
    exclude_padding_from_average; it never counts the overhang ceil_mode adds (as PyTorch).
    """

    op_type = "avg_pool"

    def pool(self, a: EvalArgs, x: np.ndarray, win: Window) -> np.ndarray:
        xp, outs = win.padded(x, 0.0)
        exclude = bool(np.asarray(a["exclude_padding_from_average"]).reshape(-1)[0])
        # 1 where a position counts towards the divisor: the input, plus the explicit padding
        # when it is averaged in; the ceil_mode overhang (added by padded()) never counts.
        region = tuple(slice(b if exclude else 0, b + n + (0 if exclude else e))
                       for n, (b, e) in zip(x.shape[2:], win.pads(x.shape[2:])))
        counted = np.zeros((1, 1) + xp.shape[2:], np.float32)
        counted[(Ellipsis,) + region] = 1.0
        count = _window_sum(counted, win, outs)
        return _window_sum(xp, win, outs) / np.maximum(count, 1.0)


@register
class L2Pool(_Pool):
    """Square root of the sum of squares over each window (padding adds zeros); 1-d and 2-d only."""

    op_type = "l2_pool"
    max_spatial = 2

    def pool(self, a: EvalArgs, x: np.ndarray, win: Window) -> np.ndarray:
        xp, outs = win.padded(x * x, 0.0)
        return np.sqrt(_window_sum(xp, win, outs))
