"""Canonicalization patterns (exact): a cast to the dtype the value already has."""

from __future__ import annotations

from converter.ir.builder import Builder
from converter.ir.core import Value

from . import Sprinkle


def _cast_same(b: Builder, x: Value, draw) -> Value:
    return b.cast(x=x, dtype="fp32")


SPRINKLES = [Sprinkle("cast to its own dtype", _cast_same, fires="cast_same_dtype")]
