"""Helpers of the elementwise layer tests only (the shared harness is tests/nn/common.py)."""

from __future__ import annotations

import numpy as np


def ulp_error(got: np.ndarray, want: np.ndarray) -> float:
    """The largest distance between fp32 results and float64 references, in fp32 ulps of the
    reference (NaN must match NaN, infinities must be equal)."""
    got = np.asarray(got, np.float32)
    want = np.asarray(want, np.float64)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), "NaN positions differ"
    inf = np.isinf(want)
    assert np.array_equal(got[inf], want[inf].astype(np.float32)), "infinities differ"
    ok = ~nan & ~inf
    ulp = np.spacing(np.abs(want[ok]).astype(np.float32)).astype(np.float64)
    return float(np.max(np.abs(got[ok] - want[ok]) / ulp, initial=0.0))
