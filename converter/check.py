"""Checking a conversion, the older interface: ``compare`` gives the largest absolute difference per
output. New code calls `converter.verify.verify`, which also judges each output against a
tolerance; ``random_feeds`` and ``difference`` live there and are re-exported here for callers."""

from __future__ import annotations

from .ir.core import Program
from .verify import difference, random_feeds, verify

__all__ = ["compare", "difference", "random_feeds"]


def compare(source: Program, converted: Program, *, seed: int = 0, source_file: str | None = None,
            converted_file: str | None = None, max_loop_iterations: int | None = None,
            max_tensor_bytes: int | None = None) -> dict[str, float]:
    """{source output name: largest absolute difference} on one random input (`verify`'s pairing:
    by name, then by position). An output the converted program lacks counts as ``inf``."""
    report = verify(source, converted, seed=seed, source_file=source_file, converted_file=converted_file,
                    max_loop_iterations=max_loop_iterations, max_tensor_bytes=max_tensor_bytes)
    return {o.name: o.max_abs_error for o in report.outputs}
