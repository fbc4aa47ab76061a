"""Helpers of the normalize/linear layer tests only (the shared harness is tests/nn/common.py)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .common import check_close

# ``got`` equals ``want`` within tolerance, compared in float64; ``match="size"`` compares only the
# element counts (rank-5 results against [N, C, H, W] oracles).
close = functools.partial(check_close, rtol=1e-5, atol=1e-5, want_dtype=np.float64)


def last_layer(b: Any) -> Any:
    return b.spec.neuralNetwork.layers[-1]
