"""Helpers of the shape layer tests only (the shared harness is tests/nn/common.py)."""

from __future__ import annotations

from typing import Any


def layer(spec: Any, name: str) -> Any:
    """The NeuralNetworkLayer ``name`` of a built spec (to set fields the builder cannot)."""
    return next(lay for lay in spec.neuralNetwork.layers if lay.name == name)
