"""Pooling: avg_pool, max_pool, l2_pool over 1 to 3 spatial dims of ``[N, C, *spatial]``.

Windows follow conv's rules (see conv.Window); pooling has no dilations but has ceil_mode,
which lets the last window hang over the end of the padded input. Kernels compute in fp32.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
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


def _few_outputs(win: Window, outs: tuple[int, ...]) -> bool:
    """Whether to loop over output positions rather than kernel taps: a window larger than the
    output (global pooling; a crafted kernel of 10^6 taps over a padded 4 x 4 input, which would
    loop a million times) is reduced once per output position, over the part of the input it
    covers, without padding the input at all."""
    return math.prod(int(k) for k in win.kernel) > math.prod(outs)


def _output_windows(win: Window, sizes: tuple[int, ...], outs: tuple[int, ...], *, exclude: bool = True
                    ) -> Iterator[tuple[tuple[int, ...], tuple[slice, ...], int]]:
    """For each output position: its index, the slice of the (unpadded) input its window covers,
    and how many cells of the window the average divides by (the input cells; with ``exclude``
    false also the explicit padding, never the ceil_mode overhang)."""
    pads = win.pads(sizes)
    per_dim = []
    for i, (n, (before, after)) in enumerate(zip(sizes, pads)):
        k, stride = int(win.kernel[i]), win.strides[i]
        dim = []
        for o in range(outs[i]):
            start = o * stride - before
            lo, hi = max(start, 0), min(start + k, n)
            counted = (hi - lo) if exclude else min(start + k, n + after) - max(start, -before)
            dim.append((slice(lo, max(lo, hi)), max(counted, 0)))
        per_dim.append(dim)
    for index in np.ndindex(*outs):
        picked = [per_dim[i][o] for i, o in enumerate(index)]
        yield index, tuple(sl for sl, _ in picked), math.prod(c for _, c in picked)


def _reduce_by_output(x: np.ndarray, win: Window, outs: tuple[int, ...], empty: float, reduce: Any,
                      exclude: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(``reduce`` of each window's input cells, or ``empty`` for a window of padding only; the
    average's divisor per output position)."""
    y = np.full(x.shape[:2] + outs, empty, np.float32)
    counts = np.ones(outs, np.float32)
    axes = tuple(range(2, x.ndim))
    for index, region, count in _output_windows(win, x.shape[2:], outs, exclude=exclude):
        part = x[(slice(None), slice(None)) + region]
        if part.size:
            y[(slice(None), slice(None)) + index] = reduce(part, axis=axes)
        counts[index] = count
    return y, counts


@register
class MaxPool(_Pool):
    """Maximum over each window; padding never wins (it is -inf), NaN propagates."""

    op_type = "max_pool"

    def pool(self, a: EvalArgs, x: np.ndarray, win: Window) -> np.ndarray:
        outs = win.out_sizes(x.shape[2:])
        if _few_outputs(win, outs):
            return _reduce_by_output(x, win, outs, -np.inf, np.max)[0]
        xp, outs = win.padded(x, -np.inf, a.check_intermediate)
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
        exclude = bool(np.asarray(a["exclude_padding_from_average"]).reshape(-1)[0])
        outs = win.out_sizes(x.shape[2:])
        if _few_outputs(win, outs):
            total, count = _reduce_by_output(x, win, outs, 0.0, np.sum, exclude)
            return total / np.maximum(count, 1.0)
        xp, outs = win.padded(x, 0.0, a.check_intermediate)
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
        outs = win.out_sizes(x.shape[2:])
        if _few_outputs(win, outs):
            return np.sqrt(_reduce_by_output(x * x, win, outs, 0.0, np.sum)[0])
        xp, outs = win.padded(x * x, 0.0, a.check_intermediate)
        return np.sqrt(_window_sum(xp, win, outs))
