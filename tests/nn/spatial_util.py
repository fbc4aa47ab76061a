"""Model building and checking for the spatial-layer tests: one-layer NeuralNetwork models built with
coremltools' builder (layers filled in as protobuf, for full control of every field), converted,
run, written as a MIL program, read back, run again and read by coremltools' MIL proto loader."""

from __future__ import annotations

import functools
import logging
import warnings
from pathlib import Path
from typing import Any

import numpy as np

import converter


@functools.lru_cache(maxsize=1)
def _coremltools() -> Any:
    """coremltools (imported once: it takes seconds and logs loudly)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.getLogger("coremltools").setLevel(logging.ERROR)
        import coremltools
        from coremltools.converters.mil.frontend.milproto import load  # noqa: F401
        from coremltools.models.neural_network import NeuralNetworkBuilder, flexible_shape_utils  # noqa: F401
    return coremltools


class Model:
    """A NeuralNetwork model under construction: inputs, outputs, layers as protobuf messages."""

    def __init__(self, inputs: dict[str, tuple[int, ...]], outputs: list[str], *, nd: bool = False,
                 spec_version: int | None = None) -> None:
        ct = _coremltools()
        from coremltools.models import datatypes
        from coremltools.models.neural_network import NeuralNetworkBuilder

        self.builder = NeuralNetworkBuilder([(n, datatypes.Array(*s)) for n, s in inputs.items()],
                                            [(o, None) for o in outputs], disable_rank5_shape_mapping=nd)
        self.spec = self.builder.spec
        if spec_version is not None:
            self.spec.specificationVersion = spec_version
        self.nn = ct.proto.NeuralNetwork_pb2

    def layer(self, kind: str, inputs: list[str], outputs: list[str], name: str = "L") -> Any:
        """Append a layer of ``kind`` and return its (empty) params message."""
        layer = self.builder.nn_spec.layers.add()
        layer.name = name
        layer.input.extend(inputs)
        layer.output.extend(outputs)
        params = getattr(layer, kind)
        params.SetInParent()
        return params

    def flexible(self, name: str, lower: list[int], upper: list[int]) -> None:
        from coremltools.models.neural_network import flexible_shape_utils

        flexible_shape_utils.set_multiarray_ndshape_range(self.spec, name, lower_bounds=lower, upper_bounds=upper)

    def bytes(self) -> bytes:
        return self.spec.SerializeToString()


def weights(wp: Any, values: np.ndarray) -> None:
    """Fill a WeightParams with fp32 values (row-major)."""
    wp.floatValue.extend(np.asarray(values, np.float32).reshape(-1).tolist())


def border(ba: Any, pads: list[tuple[int, int]]) -> None:
    """Fill a BorderAmounts with [(top, bottom), (left, right)]."""
    for start, end in pads:
        e = ba.borderAmounts.add()
        e.startEdgeSize, e.endEdgeSize = start, end


def load(model: Model, tmp: Path) -> converter.Program:
    path = tmp / "m.mlmodel"
    path.write_bytes(model.bytes())
    return converter.load(path)


def run(model: Model, feeds: dict[str, np.ndarray], tmp: Path, *,
        coremltools_loads: bool = True) -> dict[str, np.ndarray]:
    """Convert and run ``model``; the MIL program written from it must give identical outputs and
    be accepted by coremltools' MIL proto loader (which re-runs its type inference on every op),
    unless ``coremltools_loads`` is False (for a known disagreement of that type inference)."""
    prog = load(model, tmp)
    out = converter.run(prog, feeds)
    package = tmp / "m.mlpackage"
    converter.save(prog, package)
    again = converter.run(converter.load(package), feeds)
    assert list(again) == list(out)
    for k in out:
        np.testing.assert_array_equal(again[k], out[k], err_msg=f"output '{k}' changed through the MIL program")
    if not coremltools_loads:
        return out
    ct = _coremltools()
    from coremltools.converters.mil.frontend.milproto.load import load as milproto_load

    data = package / "Data" / "com.apple.CoreML"
    spec = ct.proto.Model_pb2.Model()
    spec.ParseFromString((data / "model.mlmodel").read_bytes())
    milproto_load(spec, spec.specificationVersion, str(data / "weights"))
    return out


def onnx_reference(model: Model, feeds: dict[str, np.ndarray], output: str) -> np.ndarray:
    """The output as onnxmltools + onnxruntime compute it (classic rank-5 layers only)."""
    from tests.oracles import onnxmltools_oracle as oo

    return oo.run(oo.to_onnx(model.bytes()), feeds)[output]


def close(actual: np.ndarray, expected: np.ndarray, *, atol: float = 1e-5, rtol: float = 1e-5) -> None:
    """Same values up to fp32 rounding (``atol`` relative to the largest magnitude, at least 1);
    ``expected`` may carry extra size-1 axes (rank-5 or ONNX layouts)."""
    actual = np.asarray(actual)
    expected = np.asarray(expected, np.float32)
    if expected.shape != actual.shape:
        squeezed = [tuple(d for d in a.shape if d != 1) for a in (actual, expected)]
        assert squeezed[0] == squeezed[1], f"shape {actual.shape}, expected {expected.shape}"
        expected = expected.reshape(actual.shape)
    scale = max(1.0, float(np.max(np.abs(expected)))) if expected.size else 1.0
    np.testing.assert_allclose(actual, expected, atol=atol * scale, rtol=rtol)
