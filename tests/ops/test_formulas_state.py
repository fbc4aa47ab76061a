"""State ops (iOS18), checked against the MIL definitions.

- read_state: the output is a copy of the tensor the state holds at that point of the program.
- coreml_update_state: writes ``value`` into the state and returns ``value``; later reads, and
  later runs of the program on the same state, see it.

No oracle applies: onnxruntime and torch have no notion of Core ML model state.
"""

from __future__ import annotations

import numpy as np
import pytest

from converter.errors import TypeInferenceError, UnsupportedError
from converter.ir.interpreter import run
from converter.ir.opdef import get_opdef
from converter.ir.runtime import StateCell

from .harness import Case, build_program, run_case

FORMULA_CHECKED = {
    "read_state": "no oracle models Core ML state; checked as 'a copy of the current state value'",
    "coreml_update_state": "no oracle models Core ML state; checked as 'write value, return value'",
}


@pytest.mark.parametrize("dt", [np.float16, np.float32, np.int32, np.bool_])
def test_read_state_returns_a_copy(dt):
    cell = StateCell((np.arange(6) % 3).astype(dt).reshape(2, 3))
    before = cell.value.copy()
    (out,) = run_case(Case("read_state", {"input": cell}, opset="iOS18"))
    assert out.dtype == before.dtype and np.array_equal(out, before)
    out[...] = 0
    assert np.array_equal(cell.value, before)


def _accumulate(b, state):
    """acc = read(state) + 1; update(state, acc); return (acc, read(state))."""
    acc = b.add(x=b.read_state(input=state), y=np.float32(1.0))
    written = b.coreml_update_state(state=state, value=acc)
    return [written, b.read_state(input=state)]


def test_update_then_read_sees_the_new_value():
    cell = StateCell(np.zeros((2, 2), np.float32))
    prog, feeds = build_program(Case("coreml_update_state", {"state": cell}, build=_accumulate, opset="iOS18"))
    for step in (1.0, 2.0, 3.0):  # the state persists across runs (predictions)
        written, read_back = run(prog, feeds).values()
        assert np.array_equal(written, np.full((2, 2), step, np.float32))
        assert np.array_equal(read_back, written) and np.array_equal(cell.value, written)


def test_update_stores_a_copy_of_value():
    cell = StateCell(np.zeros(3, np.int32))
    value = np.array([4, 5, 6], np.int32)
    (out,) = run_case(Case("coreml_update_state", {"state": cell, "value": value}, opset="iOS18"))
    assert np.array_equal(out, value) and np.array_equal(cell.value, value)
    out[...] = -1
    assert np.array_equal(cell.value, [4, 5, 6])


def test_update_rejects_a_value_of_another_type():
    cell = StateCell(np.zeros((2, 3), np.float16))
    for value in (np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float16)):
        with pytest.raises(TypeInferenceError):
            build_program(Case("coreml_update_state", {"state": cell, "value": value}, opset="iOS18"))


@pytest.mark.parametrize("op", ["read_state", "coreml_update_state"])
def test_state_ops_exist_from_ios18(op: str):
    with pytest.raises(UnsupportedError):
        get_opdef(op, "iOS17")
    assert get_opdef(op, "iOS18").signature.since == "iOS18"
