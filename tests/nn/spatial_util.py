"""Model building for the spatial-layer tests: one-layer NeuralNetwork models built with coremltools'
builder (layers filled in as protobuf, for full control of every field). Conversion, the MIL round
trip and the oracle are the shared harness of tests/nn/common.py."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .common import builder, check_close, quiet_coremltools


class Model:
    """A NeuralNetwork model under construction: inputs, outputs, layers as protobuf messages."""

    def __init__(self, inputs: dict[str, tuple[int, ...]], outputs: list[str], *, nd: bool = False,
                 spec_version: int | None = None) -> None:
        self.builder = builder(inputs, outputs, nd=nd)
        self.spec = self.builder.spec
        if spec_version is not None:
            self.spec.specificationVersion = spec_version
        self.nn = quiet_coremltools().proto.NeuralNetwork_pb2

    def layer(self, kind: str, inputs: list[str], outputs: list[str], name: str = "L") -> Any:
        """Append a layer of ``kind`` and return its (empty) params message."""
        layer = self.builder.nn_spec.layers.add()
        layer.name = name
        layer.input.extend(inputs)
        layer.output.extend(outputs)
        params = getattr(layer, kind)
        params.SetInParent()
        return params


def weights(wp: Any, values: np.ndarray) -> None:
    """Fill a WeightParams with fp32 values (row-major)."""
    wp.floatValue.extend(np.asarray(values, np.float32).reshape(-1).tolist())


def border(ba: Any, pads: list[tuple[int, int]]) -> None:
    """Fill a BorderAmounts with [(top, bottom), (left, right)]."""
    for start, end in pads:
        e = ba.borderAmounts.add()
        e.startEdgeSize, e.endEdgeSize = start, end


# Same values up to fp32 rounding (``atol`` relative to the largest magnitude, at least 1);
# ``expected`` may carry extra size-1 axes (rank-5 or ONNX layouts).
close = functools.partial(check_close, rtol=1e-5, atol=1e-5, match="squeezed", want_dtype=np.float32,
                          atol_scaled=True)
