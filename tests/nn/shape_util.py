"""Helpers for test_shape.py: build NeuralNetwork models with coremltools' builder, convert and run
them, and check the MIL round trip (our MIL writer and reader, and coremltools' MIL proto loader,
which re-runs its own type inference on every op we emit)."""

from __future__ import annotations

import functools
import itertools
import logging
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import converter

_counter = itertools.count()


@functools.lru_cache(maxsize=1)
def _coremltools() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.getLogger("coremltools").setLevel(logging.ERROR)
        import coremltools.models.datatypes as datatypes
        from coremltools.models.neural_network import NeuralNetworkBuilder, flexible_shape_utils
    return NeuralNetworkBuilder, datatypes, flexible_shape_utils


@functools.lru_cache(maxsize=1)
def ct_loader() -> Any:
    from tests.mil.helpers import CoremltoolsLoader

    return CoremltoolsLoader()


def builder(inputs: Sequence[tuple[str, Sequence[int]]], outputs: Sequence[str], *, nd: bool = False) -> Any:
    """A NeuralNetworkBuilder: rank-5 mapping (spec <= 3 semantics) unless ``nd``."""
    nnb, datatypes, _ = _coremltools()
    return nnb([(n, datatypes.Array(*s)) for n, s in inputs], [(n, None) for n in outputs],
               disable_rank5_shape_mapping=nd)


def flexible(spec: Any, name: str, lower: Sequence[int], upper: Sequence[int]) -> None:
    """Give ND input ``name`` a shape range (its dims become symbols in our IR)."""
    _coremltools()[2].set_multiarray_ndshape_range(spec, name, list(lower), list(upper))


def layer(spec: Any, name: str) -> Any:
    """The NeuralNetworkLayer ``name`` of a built spec (to set fields the builder cannot)."""
    return next(lay for lay in spec.neuralNetwork.layers if lay.name == name)


def convert_run(spec: Any, feeds: dict[str, np.ndarray], tmp: Path) -> dict[str, np.ndarray]:
    """Outputs of our conversion of ``spec`` on ``feeds``; the same outputs, bit for bit, after a
    MIL round trip; and coremltools loads the package."""
    d = tmp / f"m{next(_counter)}"
    d.mkdir()
    path = d / "m.mlmodel"
    path.write_bytes(spec.SerializeToString())
    prog = converter.load(path)
    out = converter.run(prog, feeds)
    pkg = converter.save(prog, d / "m.mlpackage")
    again = converter.run(converter.load(pkg), feeds)
    assert list(again) == list(out)
    for k, v in out.items():
        a, b = np.asarray(v), np.asarray(again[k])
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), f"{k} changed through MIL"
    ct_loader().load(Path(pkg))
    return out


def op_types(spec: Any, tmp: Path) -> set[str]:
    """The IR op types our conversion of ``spec`` uses."""
    d = tmp / f"m{next(_counter)}"
    d.mkdir()
    path = d / "m.mlmodel"
    path.write_bytes(spec.SerializeToString())
    return {op.type for op in converter.load(path).walk()}


def load_error(spec: Any, tmp: Path) -> Exception:
    """The converter error that loading ``spec`` raises."""
    d = tmp / f"m{next(_counter)}"
    d.mkdir()
    path = d / "m.mlmodel"
    path.write_bytes(spec.SerializeToString())
    try:
        converter.load(path)
    except converter.ConverterError as e:
        return e
    raise AssertionError("the model loaded without error")


def onnx_oracle(spec: Any, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """onnxmltools + onnxruntime outputs for a classic (rank-5) model."""
    from tests.oracles import onnxmltools_oracle as oo

    return oo.run(oo.to_onnx(spec.SerializeToString()), feeds)
