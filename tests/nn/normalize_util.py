"""Helpers of the normalize/linear layer tests: models from coremltools' NeuralNetworkBuilder or
raw protos, conversion and run, the MIL round trip with coremltools' MIL loader as a reader,
and the onnxmltools + onnxruntime oracle."""

from __future__ import annotations

import functools
import logging
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

import converter
from converter.ir.core import Program


@functools.lru_cache(maxsize=1)
def coremltools() -> Any:
    """coremltools, imported once (it takes seconds) and quietly."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.getLogger("coremltools").setLevel(logging.ERROR)
        import coremltools as ct
        from coremltools.converters.mil.frontend.milproto import load  # noqa: F401
        from coremltools.models.neural_network import NeuralNetworkBuilder  # noqa: F401
    return ct


def builder(inputs: Mapping[str, tuple[int, ...]], outputs: tuple[str, ...] = ("y",), *, nd: bool = False) -> Any:
    """A NeuralNetworkBuilder with array inputs; ``nd``: exact (N-D) shape mapping, spec 4; else
    the legacy rank-5 mapping, spec 1."""
    coremltools()
    from coremltools.models import datatypes
    from coremltools.models.neural_network import NeuralNetworkBuilder

    return NeuralNetworkBuilder([(k, datatypes.Array(*s)) for k, s in inputs.items()],
                                [(o, None) for o in outputs], disable_rank5_shape_mapping=nd)


def last_layer(b: Any) -> Any:
    return b.spec.neuralNetwork.layers[-1]


def load(spec: Any, tmp_path: Path) -> Program:
    src = tmp_path / "model.mlmodel"
    src.write_bytes(spec.SerializeToString())
    return converter.load(src)


def coremltools_accepts(package: Path) -> None:
    """coremltools' MIL proto loader (it re-runs its own type inference on every op) loads ``package``."""
    ct = coremltools()
    from coremltools.converters.mil.frontend.milproto.load import load as load_milproto

    data = (package / "Data" / "com.apple.CoreML" / "model.mlmodel").read_bytes()
    spec = ct.proto.Model_pb2.Model()
    spec.ParseFromString(data)
    load_milproto(spec, spec.specificationVersion, str(package / "Data" / "com.apple.CoreML" / "weights"))


def convert_and_run(spec: Any, feeds: Mapping[str, np.ndarray], tmp_path: Path) -> tuple[dict[str, Any], Program]:
    """Outputs of the converted ``spec`` on ``feeds``, after checking that its MIL form (saved and
    loaded again) gives bit-identical outputs and that coremltools' loader accepts the package."""
    prog = load(spec, tmp_path)
    outs = converter.run(prog, feeds)
    package = converter.save(prog, tmp_path / "model.mlpackage")
    again = converter.run(converter.load(package), feeds)
    assert list(again) == list(outs)
    for name, value in outs.items():
        np.testing.assert_array_equal(again[name], value, err_msg=f"output '{name}' changed through MIL")
    coremltools_accepts(package)
    return outs, prog


def onnx_oracle(spec: Any, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Outputs of onnxruntime on the ONNX model onnxmltools makes of ``spec``."""
    from tests.oracles import onnxmltools_oracle

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = onnxmltools_oracle.to_onnx(spec.SerializeToString())
    return onnxmltools_oracle.run(model, feeds)


def close(got: Any, want: Any, *, rtol: float = 1e-5, atol: float = 1e-5, shape: bool = True) -> None:
    """``got`` equals ``want`` within tolerance; with ``shape`` their shapes must match too, else
    only their element counts (rank-5 results against [N, C, H, W] oracles)."""
    got, want = np.asarray(got), np.asarray(want, dtype=np.float64)
    if shape:
        assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    else:
        assert got.size == want.size, f"size {got.size} != {want.size}"
        want = want.reshape(got.shape)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=atol)
