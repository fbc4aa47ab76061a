"""Lowerings of IR ops to NeuralNetwork layers, one module per op family."""

from __future__ import annotations

from .registry import LOWERINGS, UNSUPPORTED, Lowering, lowering, neuralnetwork_entry, unsupported

_FAMILIES = ("elementwise", "activation", "cast", "shape", "indexing", "conv", "pool", "spatial", "resize",
             "linalg", "normalize", "reduce", "recurrent", "control_flow", "attention", "quant", "random",
             "misc")


def load_all() -> None:
    """Import every family module (each registers its lowerings on import)."""
    import importlib

    for name in _FAMILIES:
        importlib.import_module(f"{__name__}.{name}")


__all__ = ["LOWERINGS", "UNSUPPORTED", "Lowering", "load_all", "lowering", "neuralnetwork_entry", "unsupported"]
