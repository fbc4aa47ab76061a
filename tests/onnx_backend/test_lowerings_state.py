"""States through the ONNX backend: a state S is the graph input S (its value when the prediction
starts) and the graph output S_out (its value at the end). Oracle: the update written here in
numpy, carried across two predictions, and our interpreter with a StateCell run twice."""

from __future__ import annotations

import numpy as np
import pytest

import converter
from converter.backends.onnx import program_to_onnx
from converter.errors import UnsupportedError
from converter.ir.builder import new_program
from converter.ir.runtime import StateCell
from converter.ir.types import StateType, TensorType, dtype

from .helpers import session

T = TensorType(dtype("fp32"), (2, 3))


def _program(write_twice: bool = False):  # noqa: ANN202
    def body(b, cache, x):  # noqa: ANN001, ANN202
        old = b.read_state(input=cache, name="old")
        new = b.add(x=old, y=x, name="summed")
        b.coreml_update_state(state=cache, value=new, name="update")
        if write_twice:
            b.coreml_update_state(state=cache, value=b.mul(x=new, y=np.float32(3.0)), name="again")
        seen = b.read_state(input=cache, name="seen")  # reads the value written last
        return [b.mul(x=seen, y=np.float32(2.0), name="out")]

    return new_program([("cache", StateType(T)), ("x", T)], body, opset="iOS18")


@pytest.mark.parametrize("write_twice", [False, True])
def test_state_is_an_input_output_pair_carried_across_runs(write_twice: bool) -> None:
    prog = _program(write_twice)
    model = program_to_onnx(prog)
    assert [i.name for i in model.graph.input] == ["cache", "x"]
    assert [o.name for o in model.graph.output] == ["cache_out", "out"]
    sess = session(prog)
    x1, x2 = np.full((2, 3), 0.5, np.float32), np.arange(6, dtype=np.float32).reshape(2, 3)
    state = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    cell = StateCell(state.copy())
    k = 3.0 if write_twice else 1.0
    for x in (x1, x2):
        cache_out, out = sess.run(["cache_out", "out"], {"cache": state, "x": x})
        want_state = (state + x) * k
        np.testing.assert_allclose(cache_out, want_state, rtol=1e-6)
        np.testing.assert_allclose(out, want_state * 2, rtol=1e-6)
        ref = converter.run(prog, {"cache": cell, "x": x})
        np.testing.assert_allclose(out, ref["out"], rtol=1e-6)
        np.testing.assert_allclose(cell.value, cache_out, rtol=1e-6)
        state = cache_out


def test_read_only_state_is_passed_through() -> None:
    prog = new_program([("cache", StateType(T))], lambda b, c: [b.relu(x=b.read_state(input=c), name="r")],
                       opset="iOS18")
    s = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    cache_out, r = session(prog).run(["cache_out", "r"], {"cache": s})
    np.testing.assert_array_equal(cache_out, s)
    np.testing.assert_array_equal(r, np.maximum(s, 0))


def test_state_written_inside_a_cond_is_refused() -> None:
    def body(b, cache, x):  # noqa: ANN001, ANN202
        pred = b.greater(x=b.const(np.float32(1.0)), y=b.const(np.float32(0.0)))

        def then(bb):  # noqa: ANN001, ANN202
            return [bb.coreml_update_state(state=cache, value=x, name="inner")]

        (r,) = b.cond(pred, then, lambda bb: [x], name="maybe")
        return [b.relu(x=r, name="r")]

    prog = new_program([("cache", StateType(T)), ("x", T)], body, opset="iOS18")
    with pytest.raises(UnsupportedError, match="coreml_update_state 'inner'.*control-flow block"):
        program_to_onnx(prog)


def test_state_output_name_is_fixed_and_a_collision_is_refused() -> None:
    from converter.backends.onnx.lowering.state import state_output_name

    assert state_output_name("cache") == "cache_out"
    prog = new_program([("cache", StateType(T))], lambda b, c: [b.relu(x=b.read_state(input=c), name="cache_out")],
                       opset="iOS18")
    with pytest.raises(UnsupportedError, match="state 'cache' is written to the output 'cache_out'"):
        program_to_onnx(prog)
