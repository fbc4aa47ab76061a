"""Lowerings of IR ops to ONNX nodes, one module per op family (see registry.py for the contract).

A family module registers its lowerings on import; add one line to `_FAMILIES` per new module.
"""

from __future__ import annotations

from .registry import (
    DEFAULT_OPSET,
    LOWERINGS,
    MAX_OPSET,
    MIN_OPSET,
    UNSUPPORTED,
    Lowering,
    lowering,
    onnx_entry,
    select,
    unsupported,
)

_FAMILIES = (
    "elementwise",
    "activation",
    "cast",
    "linalg",
    "conv",
    "normalize",
    "reduce",
    "shape",
    "indexing",
    "recurrent",
    "quant",
    "resize",
    "classify",
    "random",
    "control_flow",
    "resample",
    "state",
    "detection",
    "quantized_conv",
)


def load_all() -> None:
    """Import every family module (each registers its lowerings on import)."""
    import importlib

    for name in _FAMILIES:
        importlib.import_module(f"{__name__}.{name}")


__all__ = ["DEFAULT_OPSET", "LOWERINGS", "MAX_OPSET", "MIN_OPSET", "UNSUPPORTED", "Lowering", "load_all", "lowering",
           "onnx_entry", "select", "unsupported"]
