"""Programs that are not one stateless function: a multifunction program is refused unless the
function to export is named (an ONNX model holds one graph); a state program runs in onnxruntime
with the state carried in its StateCell as the interpreter carries it. Oracles: numpy written here
(relu, the linear with a ones weight, the state's running sum) and the interpreter."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import converter
from converter.backends.onnx import program_to_onnx
from converter.errors import UnsupportedError
from converter.ir.builder import new_program
from converter.ir.runtime import StateCell
from converter.ir.types import StateType, TensorType, dtype

from ..mil.helpers import multifunction_program
from .helpers import run_onnx


def test_multifunction_program_is_refused_naming_the_functions() -> None:
    prog = multifunction_program()
    with pytest.raises(UnsupportedError, match=r"2 functions \(main, second\).*function=NAME"):
        program_to_onnx(prog)
    with pytest.raises(UnsupportedError, match=r"no function 'third' \(it has main, second\)"):
        program_to_onnx(prog, function="third")


def test_multifunction_program_exports_the_named_function(tmp_path: Path) -> None:
    prog = multifunction_program()
    y = np.array([0.5, -1.0, 2.25, 3.0], np.float32)
    second = program_to_onnx(prog, function="second")
    assert [i.name for i in second.graph.input] == ["y"] and [o.name for o in second.graph.output] == ["l"]
    assert run_onnx_function(prog, "second", {"y": y})["l"].reshape(-1).tolist() == [y.sum()] * 12
    x = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -0.5]], np.float32)
    np.testing.assert_array_equal(run_onnx_function(prog, "main", {"x": x})["r"], np.maximum(x, 0))
    out = converter.save(prog, tmp_path / "second.onnx", to="onnx", function="second")
    assert Path(out).is_file()
    with pytest.raises(UnsupportedError, match="2 functions"):
        converter.save(prog, tmp_path / "any.onnx", to="onnx")
    assert not (tmp_path / "any.onnx").exists()


def run_onnx_function(prog, function: str, feeds):  # noqa: ANN001, ANN201
    import onnxruntime as ort

    model = program_to_onnx(prog, function=function)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def test_one_function_program_not_named_main() -> None:
    x = np.array([1.5, -2.0], np.float32)
    prog = new_program([("x", TensorType(dtype("fp32"), (2,)))], lambda b, x: [b.relu(x=x, name="r")],
                       function="infer")
    np.testing.assert_array_equal(run_onnx(prog, {"x": x})["r"], [1.5, 0.0])


def _state_program():  # noqa: ANN202
    t = TensorType(dtype("fp32"), (2, 3))

    def body(b, acc, x):  # noqa: ANN001, ANN202
        total = b.add(x=b.read_state(input=acc), y=x)
        b.coreml_update_state(state=acc, value=total)
        return [b.mul(x=total, y=np.float32(-0.5), name="half")]

    return new_program([("acc", StateType(t)), ("x", t)], body, opset="iOS18")


def test_state_program_runs_in_onnxruntime_carrying_the_state_cell() -> None:
    """Was a raw TypeError (the StateCell fed to onnxruntime as an array)."""
    prog = _state_program()
    start = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 4.0]], np.float32)
    xs = [np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5, np.full((2, 3), 0.75, np.float32)]
    cells = {rt: StateCell(start.copy()) for rt in ("onnxruntime", "interpreter")}
    running = start.copy()
    for x in xs:
        running = running + x
        for rt, cell in cells.items():
            got = converter.run(prog, {"acc": cell, "x": x}, runtime=rt)
            np.testing.assert_array_equal(got["half"], running * -0.5)
            np.testing.assert_array_equal(cell.value, running)
