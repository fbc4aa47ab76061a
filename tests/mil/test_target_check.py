"""The MIL writer checks each op once against the default target, and never skips a failing op."""

from __future__ import annotations

import numpy as np
import pytest

import converter
from converter.backends.mil import _default_target_and_checked, default_target
from converter.errors import UnsupportedError
from converter.ir.builder import new_program
from converter.ir.types import tensor


def _relu_program():
    def body(b, x, n):
        return [b.relu(x=x, name="r"), b.add(x=n, y=np.int32(1), name="n1")]

    return new_program({"x": tensor("fp32", [2, 3]), "n": tensor("int32", [2])}, body)


def test_ops_checked_at_the_default_target_are_listed():
    prog = _relu_program()
    target, checked = _default_target_and_checked(prog)
    assert target == default_target(prog) == "iOS15"
    assert {op.name for op in checked if op.type != "const"} == {"r", "n1"}


def test_an_op_no_opset_accepts_is_still_refused_with_the_default_target(tmp_path):
    prog = _relu_program()
    relu = next(op for op in prog.walk() if op.name == "r")
    relu.set_input("x", prog.main.inputs[1])  # an int32 value: relu takes floats in every opset
    _, checked = _default_target_and_checked(prog)
    assert relu not in checked
    with pytest.raises(UnsupportedError, match="relu"):
        converter.save(prog, tmp_path / "bad.mlpackage")
    assert not (tmp_path / "bad.mlpackage").exists()


def test_default_and_explicit_target_write_the_same_program(tmp_path):
    prog = _relu_program()
    a = converter.save(prog, tmp_path / "a.mlpackage")
    b = converter.save(prog, tmp_path / "b.mlpackage", target="iOS15")
    x = {"x": np.arange(6, dtype=np.float32).reshape(2, 3) - 3, "n": np.array([1, 2], np.int32)}
    ra, rb = converter.run(converter.load(a), x), converter.run(converter.load(b), x)
    assert all(np.array_equal(ra[k], rb[k]) for k in ra)
    np.testing.assert_array_equal(ra["r"], np.maximum(x["x"], 0))
