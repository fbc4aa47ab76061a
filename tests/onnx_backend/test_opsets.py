"""Opsets 17..21: every IR op with an ONNX form at the default opset has one at every lower opset
the backend writes (a newer ONNX op has a decomposition below it: gelu), and an op whose only
lowering needs a newer opset is refused naming the opset it needs."""

from __future__ import annotations

import numpy as np
import pytest

from converter.backends.onnx import program_to_onnx
from converter.backends.onnx.lowering import LOWERINGS, MAX_OPSET, MIN_OPSET, Lowering, load_all, select
from converter.errors import UnsupportedError

from .helpers import program, run_onnx


def test_every_lowered_op_has_a_form_at_every_opset() -> None:
    load_all()
    missing = {(t, opset) for t in LOWERINGS for opset in range(MIN_OPSET, MAX_OPSET + 1) if select(t, opset) is None}
    assert missing == set()
    gated = {t: [low.min_opset for low in lows] for t, lows in LOWERINGS.items() if lows[0].min_opset > MIN_OPSET}
    assert gated == {"gelu": [20, 17]}


@pytest.mark.parametrize("opset", [17, 18, 19, 20, 21])
def test_gelu_at_every_opset(opset: int) -> None:
    x = np.array([-2.5, -0.75, 0.0, 0.4, 1.25, 3.0], np.float32)
    prog = program({"x": x}, lambda b, x: b.gelu(x=x, mode="EXACT"))
    got = run_onnx(prog, {"x": x}, opset)
    from math import erf, sqrt

    want = [v * 0.5 * (1 + erf(v / sqrt(2))) for v in x.astype(np.float64)]
    np.testing.assert_allclose(next(iter(got.values())), want, rtol=1e-6, atol=1e-6)
    assert ("Gelu" in [n.op_type for n in program_to_onnx(prog, opset=opset).graph.node]) == (opset >= 20)


def test_an_op_needing_a_newer_opset_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The backend's message when the only lowering of an op needs a newer opset than the target."""
    load_all()
    (relu,) = [low for low in LOWERINGS["relu"] if low.min_opset == MIN_OPSET]
    monkeypatch.setitem(LOWERINGS, "relu", [Lowering("relu", relu.kind, relu.fn, relu.note, 20)])
    x = np.array([-1.0, 2.0], np.float32)
    prog = program({"x": x}, lambda b, x: b.relu(x=x, name="r"))
    for opset in (17, 18, 19):
        with pytest.raises(UnsupportedError, match=rf"relu 'r': needs opset 20 \(writing opset {opset}\)"):
            program_to_onnx(prog, opset=opset)
    np.testing.assert_array_equal(run_onnx(prog, {"x": x}, 20)["r"], [0.0, 2.0])


def test_scatter_max_below_opset_18_names_the_opset() -> None:
    data = np.array([[1.0, 5.0, -2.0], [0.5, 3.0, 4.0]], np.float32)
    idx = np.array([[2, 0], [1, 1]], np.int32)
    upd = np.array([[7.0, -1.0], [2.0, 6.0]], np.float32)
    prog = program({"d": data, "u": upd}, lambda b, d, u: b.scatter_along_axis(data=d, indices=idx, updates=u,
                                                                                axis=1, mode="max"))
    with pytest.raises(UnsupportedError, match=r"mode 'max' needs opset 18"):
        program_to_onnx(prog, opset=17)
    got = run_onnx(prog, {"d": data, "u": upd}, 18)
    np.testing.assert_array_equal(next(iter(got.values())), [[1.0, 5.0, 7.0], [0.5, 6.0, 4.0]])
