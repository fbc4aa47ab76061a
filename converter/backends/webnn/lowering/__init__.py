"""Lowerings of IR ops to MLGraphBuilder calls, one module per op family."""

from __future__ import annotations

from .registry import LOWERINGS, UNSUPPORTED, Lowering, lowering, unsupported, webnn_entry

_FAMILIES = ("elementwise", "activation", "shape", "reduce", "nn", "recurrent", "resize", "normalize", "indexing", "math",
             "attention", "quant", "scatter", "control_flow")


def load_all() -> None:
    """Import every family module (each registers its lowerings on import)."""
    import importlib

    for name in _FAMILIES:
        importlib.import_module(f"{__name__}.{name}")


__all__ = ["LOWERINGS", "UNSUPPORTED", "Lowering", "load_all", "lowering", "unsupported", "webnn_entry"]
