"""Run IR programs through the NeuralNetwork backend: write the .mlmodel, read it back with the
NeuralNetwork frontend and run it in the interpreter. The oracle is what the test compares the
outputs with (numpy formulas written in the test from the op's definition, torch, onnxruntime):
this path only carries the values through the layers we wrote."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

import converter
from converter.formats.model_file import read_model_file
from converter.ir.builder import new_program
from converter.ir.core import Program
from converter.ir.types import TensorType, dtype_of_array


def program(feeds: Mapping[str, np.ndarray], body: Callable[..., Any], opset: str = "iOS15") -> Program:
    """``body(builder, *inputs)`` over inputs shaped and typed like ``feeds``."""
    types = [(name, TensorType(dtype_of_array(a), a.shape)) for name, a in feeds.items()]
    return new_program(types, body, opset=opset)


def run_nn(prog: Program, feeds: Mapping[str, np.ndarray], path: Path, *, passes: str = "none",
           **options: Any) -> dict[str, np.ndarray]:
    """Write ``prog`` as a NeuralNetwork model at ``path`` (no pass pipeline by default: the lowering
    itself is under test), read it back and run it on ``feeds``."""
    converter.convert(prog, to="neuralnetwork", out=path, passes=passes, overwrite=True, **options)
    return converter.run(converter.load(path), dict(feeds))


def layer_kinds(path: Path) -> Counter[str]:
    """How many layers of each kind the model at ``path`` has (nested networks included)."""
    model = read_model_file(path).model
    network = getattr(model, model.WhichOneof("Type"))
    kinds: Counter[str] = Counter()

    def walk(nn: Any) -> None:
        for layer in nn.layers:
            kind = layer.WhichOneof("layer")
            kinds[kind] += 1
            if kind == "branch":
                walk(layer.branch.ifBranch)
                walk(layer.branch.elseBranch)
            elif kind == "loop":
                walk(layer.loop.conditionNetwork)
                walk(layer.loop.bodyNetwork)

    walk(network)
    return kinds


def assert_close(got: Any, want: Any, bound: float = 1e-5) -> None:
    """Within ``bound`` x max(1, |want|) (the layers compute in fp32)."""
    want = np.asarray(want, np.float64)
    got = np.asarray(got, np.float64).reshape(want.shape)
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    err = float(np.max(np.abs(got - want), initial=0.0))
    assert err <= bound * scale, f"max abs error {err:.3g} > {bound:.3g} x {scale:.3g}"
