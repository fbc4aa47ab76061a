"""Rank-0 constants stay rank 0 in the ONNX model (np.ascontiguousarray would make them [1]: a
Gather with such an index keeps the gathered axis, a Clip bound is no longer a scalar)."""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from converter.backends.onnx import program_to_onnx
from converter.backends.onnx.emitter import OnnxEmitter

from .helpers import program


def test_scalar_initializers_have_rank_0() -> None:
    prog = program({"x": np.zeros(3, np.float32)}, lambda b, x: b.relu(x=x))
    e = OnnxEmitter(prog.main, 21)
    names = [e.scalar(1.5, "fp32"), e.constant(np.asarray(7, np.int64)), e.constant(np.float32(2.0))]
    by_name = {t.name: numpy_helper.to_array(t) for t in e.initializers}
    assert [by_name[n].shape for n in names] == [(), (), ()]


def test_rank0_const_value_keeps_its_shape() -> None:
    x = np.array([1.0, -2.0, 3.0], np.float32)
    prog = program({"x": x}, lambda b, x: b.add(x=x, y=np.float32(0.25)))
    model = program_to_onnx(prog)
    assert all(len(t.dims) == 0 for t in model.graph.initializer)
