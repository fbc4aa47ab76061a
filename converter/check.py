"""Checking a conversion: run the source and the converted program on the same random inputs.

``random_feeds`` makes inputs an app could pass (images as H x W x 3 uint8, flexible dimensions at
a size inside their bounds); ``compare`` runs both programs and reports the largest difference of
each output (dict outputs, e.g. classifier probabilities, compared per key).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .formats import description as desc
from .ir.core import Function, Program
from .ir.types import Symbol, TensorType, is_static_dim


def _size(d: Any) -> int:
    if is_static_dim(d):
        return int(d)
    assert isinstance(d, Symbol)
    if d.choices:
        return d.choices[0]
    return max(d.lower, min(d.upper or 4, 4))


def random_feeds(fn: Function, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    feeds: dict[str, Any] = {}
    for v in fn.inputs:
        t = v.type
        if not isinstance(t, TensorType) or t.shape is None:
            raise ValueError(f"cannot make a random value for input '{v.name}' of type {t}")
        shape = [_size(d) for d in t.shape]
        info = fn.input_info.get(v.name)
        ft = desc.feature_from_bytes(info.feature_type) if info is not None else None
        index_range = info.extra.get("index_range") if info is not None else None
        if index_range:
            feeds[v.name] = rng.integers(0, index_range, shape).astype(t.dtype.storage)
        elif ft is not None and desc.feature_kind(ft) == "imageType":
            h, w = shape[-2], shape[-1]
            img_shape = (h, w) if desc.image_channels(ft) == 1 else (h, w, 3)
            feeds[v.name] = rng.integers(0, 256, img_shape, dtype=np.uint8)
        elif t.dtype.is_float:
            feeds[v.name] = rng.standard_normal(shape).astype(t.dtype.storage)
        elif t.dtype.name == "bool":
            feeds[v.name] = rng.integers(0, 2, shape).astype(bool)
        elif t.dtype.is_int:
            feeds[v.name] = rng.integers(0, 4, shape).astype(t.dtype.storage)
        else:
            raise ValueError(f"cannot make a random value for input '{v.name}' of type {t}")
    return feeds


def difference(a: Any, b: Any) -> float:
    """Largest absolute difference between two outputs (inf when shapes or keys disagree)."""
    if isinstance(a, dict) or isinstance(b, dict):
        if not (isinstance(a, dict) and isinstance(b, dict)) or list(a) != list(b):
            return float("inf")
        return max((difference(np.asarray(a[k]), np.asarray(b[k])) for k in a), default=0.0)
    x, y = np.asarray(a), np.asarray(b)
    if x.shape != y.shape:
        return float("inf")
    if x.dtype.kind in "USO" or y.dtype.kind in "USO":
        return 0.0 if np.array_equal(x, y) else float("inf")
    if x.size == 0:
        return 0.0
    xf, yf = x.astype(np.float64), y.astype(np.float64)
    both_nan = np.isnan(xf) & np.isnan(yf)
    diff = np.where(both_nan | (xf == yf), 0.0, np.abs(xf - yf))
    return float(np.nanmax(np.where(np.isnan(diff), np.inf, diff)))


def compare(source: Program, converted: Program, *, seed: int = 0) -> dict[str, float]:
    """{output name: largest absolute difference} on one random input."""
    from .api import run

    feeds = random_feeds(source.main, seed)
    a = run(source, feeds)
    b = run(converted, feeds)
    return {k: difference(a[k], b.get(k)) if k in b else float("inf") for k in a}
