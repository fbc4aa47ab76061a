"""Run IR programs through the ONNX backend: build the ModelProto in memory and run it with
onnxruntime. The oracle is what each test compares with (numpy formulas written in the test from
the op's definition, torch); `run_both` also runs our interpreter on the source program, a
cross-runtime check."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import onnxruntime as ort

import converter
from converter.backends.onnx import program_to_onnx
from converter.ir.builder import new_program
from converter.ir.core import Program
from converter.ir.types import TensorType, dtype_of_array

#: the opset the tests write by default (CONVERTER_ONNX_TEST_OPSET=17 runs them at the lowest one)
OPSET = int(os.environ.get("CONVERTER_ONNX_TEST_OPSET", "21"))


def program(feeds: Mapping[str, np.ndarray], body: Callable[..., Any], opset: str = "iOS17") -> Program:
    """``body(builder, *inputs)`` over inputs shaped and typed like ``feeds``."""
    types = [(name, TensorType(dtype_of_array(a), a.shape)) for name, a in feeds.items()]
    return new_program(types, body, opset=opset)


def session(prog: Program, opset: int | None = None) -> ort.InferenceSession:
    model = program_to_onnx(prog, opset=opset or OPSET)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def run_onnx(prog: Program, feeds: Mapping[str, np.ndarray], opset: int | None = None) -> dict[str, np.ndarray]:
    """The outputs of the emitted model under onnxruntime, by output name."""
    sess = session(prog, opset)
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, dict(feeds))))


def run_both(prog: Program, feeds: Mapping[str, np.ndarray], opset: int | None = None
             ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(onnxruntime on the emitted model, our interpreter on ``prog``)."""
    return run_onnx(prog, feeds, opset), converter.run(prog, dict(feeds))


def only(outputs: Mapping[str, np.ndarray]) -> np.ndarray:
    (value,) = outputs.values()
    return value


def op_types(prog: Program, opset: int | None = None) -> list[str]:
    return [n.op_type for n in program_to_onnx(prog, opset=opset or OPSET).graph.node]


def assert_close(got: Any, want: Any, bound: float = 1e-5) -> None:
    """Within ``bound`` x max(1, |want|); NaN where want is NaN."""
    want = np.asarray(want, np.float64)
    got = np.asarray(got, np.float64).reshape(want.shape)
    assert np.array_equal(np.isnan(got), np.isnan(want)), "NaN positions differ"
    ok = ~np.isnan(want)
    scale = max(1.0, float(np.max(np.abs(want[ok]), initial=0.0)))
    err = float(np.max(np.abs(got[ok] - want[ok]), initial=0.0))
    assert err <= bound * scale, f"max abs error {err:.3g} > {bound:.3g} x {scale:.3g}"
