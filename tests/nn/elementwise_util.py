"""Harness of the NeuralNetwork layer tests: build a model with coremltools' NeuralNetworkBuilder,
convert and run it, convert the result to MIL and check that nothing changed and that
coremltools' MIL proto loader accepts the package."""

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
def quiet_coremltools() -> Any:
    """coremltools, imported once (it takes seconds) and quietly."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.getLogger("coremltools").setLevel(logging.ERROR)
        import coremltools as ct
        from coremltools.converters.mil.frontend.milproto import load  # noqa: F401
        from coremltools.models.neural_network import NeuralNetworkBuilder  # noqa: F401
    return ct


def builder(inputs: Mapping[str, tuple[int, ...]], outputs: tuple[str, ...] = ("y",), *, nd: bool = False) -> Any:
    """A NeuralNetworkBuilder with fp32 array inputs; ``nd``: exact (ND) shape mapping, spec 4,
    else the legacy rank-5 mapping, spec 1."""
    quiet_coremltools()
    from coremltools.models import datatypes
    from coremltools.models.neural_network import NeuralNetworkBuilder

    return NeuralNetworkBuilder([(k, datatypes.Array(*s)) for k, s in inputs.items()],
                                [(o, None) for o in outputs], disable_rank5_shape_mapping=nd)


def coremltools_accepts(package: Path) -> None:
    """coremltools' MIL proto loader (which re-runs its type inference on every op) loads ``package``."""
    ct = quiet_coremltools()
    from coremltools.converters.mil.frontend.milproto.load import load

    data = (package / "Data" / "com.apple.CoreML" / "model.mlmodel").read_bytes()
    spec = ct.proto.Model_pb2.Model()
    spec.ParseFromString(data)
    load(spec, spec.specificationVersion, str(package / "Data" / "com.apple.CoreML" / "weights"))


def convert_and_run(spec: Any, feeds: Mapping[str, np.ndarray], tmp_path: Path) -> tuple[dict[str, Any], Program]:
    """Outputs of the converted NeuralNetwork ``spec`` on ``feeds``, after checking that its MIL
    form (saved, loaded again) gives bit-identical outputs and is accepted by coremltools."""
    src = tmp_path / "model.mlmodel"
    src.write_bytes(spec.SerializeToString())
    prog = converter.load(src)
    outs = converter.run(prog, feeds)
    package = converter.save(prog, tmp_path / "model.mlpackage")
    again = converter.run(converter.load(package), feeds)
    assert list(again) == list(outs)
    for name, value in outs.items():
        np.testing.assert_array_equal(again[name], value, err_msg=f"output '{name}' changed through MIL")
    coremltools_accepts(package)
    return outs, prog


def onnx_oracle(spec: Any, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Outputs of onnxruntime on the ONNX form onnxmltools makes of ``spec``."""
    from tests.oracles import onnxmltools_oracle

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = onnxmltools_oracle.to_onnx(spec.SerializeToString())
    return onnxmltools_oracle.run(model, feeds)


def ulp_error(got: np.ndarray, want: np.ndarray) -> float:
    """The largest distance between fp32 results and float64 references, in fp32 ulps of the
    reference (NaN must match NaN, infinities must be equal)."""
    got = np.asarray(got, np.float32)
    want = np.asarray(want, np.float64)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), "NaN positions differ"
    inf = np.isinf(want)
    assert np.array_equal(got[inf], want[inf].astype(np.float32)), "infinities differ"
    ok = ~nan & ~inf
    ulp = np.spacing(np.abs(want[ok]).astype(np.float32)).astype(np.float64)
    return float(np.max(np.abs(got[ok] - want[ok]) / ulp, initial=0.0))
