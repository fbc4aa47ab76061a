"""Harness shared by the recurrent, random and control-flow layer tests: models built with
coremltools' NeuralNetworkBuilder are converted and run; each converted program is also written as
MIL, loaded again (same outputs) and handed to coremltools' MIL proto loader."""

from __future__ import annotations

import functools
import logging
import warnings
from collections.abc import Callable, Mapping
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


def builder(inputs: Mapping[str, tuple[int, ...]], outputs: tuple[str, ...], *, nd: bool = False) -> Any:
    """A NeuralNetworkBuilder; ``nd``: exact (ND) shape mapping (spec 4), else legacy rank 5 (spec 1)."""
    coremltools()
    from coremltools.models import datatypes
    from coremltools.models.neural_network import NeuralNetworkBuilder

    return NeuralNetworkBuilder([(k, datatypes.Array(*s)) for k, s in inputs.items()],
                                [(o, None) for o in outputs], disable_rank5_shape_mapping=nd)


def load_spec(spec: Any, tmp_path: Path, name: str = "model") -> Program:
    src = tmp_path / f"{name}.mlmodel"
    src.write_bytes(spec.SerializeToString())
    return converter.load(src)


def coremltools_accepts(package: Path) -> None:
    """coremltools' MIL proto loader (which re-runs its type inference on every op) loads ``package``."""
    ct = coremltools()
    from coremltools.converters.mil.frontend.milproto.load import load

    data = (package / "Data" / "com.apple.CoreML" / "model.mlmodel").read_bytes()
    spec = ct.proto.Model_pb2.Model()
    spec.ParseFromString(data)
    load(spec, spec.specificationVersion, str(package / "Data" / "com.apple.CoreML" / "weights"))


def through_mil(prog: Program, feeds: Mapping[str, np.ndarray], tmp_path: Path,
                same: Callable[[str, Any, Any], None] | None = None, *, renamed_ok: bool = False) -> dict[str, Any]:
    """Write ``prog`` as MIL, check coremltools loads it and that the reloaded program gives the
    same outputs (bit-identical unless ``same`` compares them); returns the reloaded outputs.
    ``renamed_ok``: the MIL form may rename outputs (a model declaring one output twice)."""
    package = converter.save(prog, tmp_path / "model.mlpackage")
    coremltools_accepts(package)
    outs = converter.run(prog, feeds)
    again = converter.run(converter.load(package), feeds)
    if renamed_ok:
        outs = {k: v for k, v in outs.items() if k in again}
    assert list(again) == list(outs) or renamed_ok
    for name, value in outs.items():
        if same is None:
            np.testing.assert_array_equal(again[name], value, err_msg=f"output '{name}' changed through MIL")
        else:
            same(name, again[name], value)
    return again


def convert_and_run(spec: Any, feeds: Mapping[str, np.ndarray], tmp_path: Path) -> tuple[dict[str, Any], Program]:
    """Outputs of the converted ``spec`` on ``feeds``, its MIL round trip checked."""
    prog = load_spec(spec, tmp_path)
    outs = converter.run(prog, feeds)
    through_mil(prog, feeds, tmp_path)
    return outs, prog


def op_types(prog: Program) -> set[str]:
    return {op.type for op in prog.walk()}


# -- onnxmltools + onnxruntime -------------------------------------------------------------------


def to_onnx(spec: Any) -> Any:
    from tests.oracles import onnxmltools_oracle

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return onnxmltools_oracle.to_onnx(spec.SerializeToString())


def run_onnx(model: Any, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """onnxruntime on ``model`` (recurrent initial states, which onnxmltools gives a zero
    initializer, are fed too: onnxruntime lists them as overridable initializers)."""
    from tests.oracles import onnxmltools_oracle

    return onnxmltools_oracle.run(model, feeds)
