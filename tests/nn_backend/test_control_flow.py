"""cond -> branch, while_loop -> loop: programs whose outputs are checked against the same
computation in plain Python (the oracle), run through the written model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import converter
from converter.errors import UnsupportedError
from converter.formats.model_file import read_model_file

from .helpers import assert_close, layer_kinds, program, run_nn

X = np.array([0.5, -2.0, 1.25], np.float32)
S = np.array([1.0], np.float32)
CONST = np.array([7.0, 8.0, 9.0], np.float32)


def _cond_program():
    def body(b, s, x, y):
        pred = b.greater(x=s, y=np.float32(0))

        def then(bb):  # a computed value, an outer value as is, a constant
            return [bb.mul(x=x, y=np.float32(2)), y, bb.const(CONST)]

        def other(bb):  # the first result is also read inside the arm: copied out, not written in place
            t = bb.sub(x=x, y=np.float32(1))
            return [t, bb.add(x=y, y=t), bb.mul(x=y, y=np.float32(-3))]

        a, c, d = b.cond(pred, then, other, name="choose")
        return [b.add(x=a, y=np.float32(0.5), name="after"), c, d]

    return program({"s": S, "x": X, "y": X}, body)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_takes_the_arm_python_takes(tmp_path: Path, sign: float) -> None:
    s, x, y = (sign * S).astype(np.float32), X, np.array([3.0, -1.0, 4.0], np.float32)
    path = tmp_path / "m.mlmodel"
    got = list(run_nn(_cond_program(), {"s": s, "x": x, "y": y}, path).values())
    if s[0] > 0:
        want = [x * 2 + 0.5, y, CONST]
    else:
        want = [x - 1 + 0.5, y + x - 1, y * -3]
    for g, w in zip(got, want):
        assert_close(g, w)
    kinds = layer_kinds(path)  # copies: the outer value y, and t; the other results are written in place
    assert kinds["branch"] == 1 and kinds["copy"] == 2


def _counted_loop(n_steps: int, return_counter: bool):
    def body(b, x):
        def cond(bb, i, acc):
            return bb.less(x=i, y=np.int32(n_steps))

        def step(bb, i, acc):
            return [bb.add(x=i, y=np.int32(2)), bb.add(x=bb.mul(x=acc, y=np.float32(1.5)), y=x)]

        i, acc = b.while_loop([b.const(np.int32(1)), x], cond, step, name="loop")
        return [acc, i] if return_counter else [acc]

    return program({"x": X}, body)


def _loop_layer(path: Path):
    model = read_model_file(path).model
    (loop,) = [layer.loop for layer in model.neuralNetwork.layers if layer.WhichOneof("layer") == "loop"]
    return loop


@pytest.mark.parametrize("n_steps", [8, 0])
def test_counted_while_loop_is_a_for_loop(tmp_path: Path, n_steps: int) -> None:
    """The counter is read by nothing but its condition and step: a plain for loop of
    maxLoopIterations, without the counter (what the frontend makes of an NN for loop)."""
    path = tmp_path / "m.mlmodel"
    (got,) = run_nn(_counted_loop(n_steps, False), {"x": X}, path).values()
    i, acc = 1, X.copy()
    while i < n_steps:
        i, acc = i + 2, acc * 1.5 + X
    assert_close(got, acc)
    loop = _loop_layer(path)
    assert loop.maxLoopIterations == (4 if n_steps else 0)  # i = 1, 3, 5, 7
    assert not loop.conditionVar and not loop.conditionNetwork.layers
    assert layer_kinds(path) == {"copy": 2, "loop": 1, "multiply": 1, "addBroadcastable": 1}


def test_counted_while_loop_whose_counter_is_read(tmp_path: Path) -> None:
    path = tmp_path / "m.mlmodel"
    got = list(run_nn(_counted_loop(8, True), {"x": X}, path).values())
    i, acc = 1, X.copy()
    while i < 8:
        i, acc = i + 2, acc * 1.5 + X
    assert_close(got[0], acc)
    assert_close(got[1], i)
    loop = _loop_layer(path)
    assert loop.maxLoopIterations == 4 and loop.conditionVar and loop.conditionNetwork.layers


def test_data_dependent_while_loop_with_swapped_variables(tmp_path: Path) -> None:
    """(a, c, p, q) <- (c, a + c, q * a, p) until a >= 50: the body's results are each other's
    blobs (p and q swap), so the copies back into the loop blobs must not overwrite a value
    another copy still reads."""

    def body(b, a0, c0, p0, q0):
        def cond(bb, a, c, p, q):
            return bb.less(x=a, y=np.float32(50))

        def step(bb, a, c, p, q):
            return [c, bb.add(x=a, y=c), bb.mul(x=q, y=a), p]

        return list(b.while_loop([a0, c0, p0, q0], cond, step, name="fib"))

    feeds = {"a0": np.array([1.0], np.float32), "c0": np.array([0.5], np.float32),
             "p0": np.array([1.0, -0.5], np.float32), "q0": np.array([2.0, 3.0], np.float32)}
    path = tmp_path / "m.mlmodel"
    got = list(run_nn(program(feeds, body), feeds, path).values())
    a, c, p, q = (v.copy() for v in feeds.values())
    while a[0] < 50:
        a, c, p, q = c, a + c, q * a, p
    for g, w in zip(got, (a, c, p, q)):
        assert_close(g, w)
    assert _loop_layer(path).maxLoopIterations == 0  # not a counted loop: the condition alone


def test_an_unlowerable_op_inside_a_branch_is_named(tmp_path: Path) -> None:
    def body(b, s, x):
        pred = b.greater(x=s, y=np.float32(0))
        (r,) = b.cond(pred, lambda bb: [bb.resample(
            x=x, coordinates=np.zeros((1, 1, 1, 2), np.float32), sampling_mode="bilinear", padding_mode="constant",
            padding_value=np.float32(0), coordinates_mode="normalized_minus_one_to_one", align_corners=False)],
                      lambda bb: [x], name="choose")
        return [r]

    feeds = {"s": S, "x": np.ones((1, 1, 2, 2), np.float32)}
    with pytest.raises(UnsupportedError, match="cond 'choose'.*resample"):
        run_nn(program(feeds, body), feeds, tmp_path / "m.mlmodel")


def test_the_shared_loop_model_round_trips_to_its_own_layers(tmp_path: Path) -> None:
    """builder/control_flow_loop.mlmodel (a counted NN loop): NN -> IR -> NN -> IR gives the first
    IR's outputs, with the original's layers (no counter, no condition network)."""
    from ..conftest import MODELS

    src = MODELS / "builder" / "control_flow_loop.mlmodel"
    feeds = dict(np.load(src.with_suffix(".npz")))
    first = converter.load(src)
    out = tmp_path / "m.mlmodel"
    converter.convert(first, to="neuralnetwork", out=out, passes="none")
    want, got = converter.run(first, feeds), converter.run(converter.load(out), feeds)
    assert want.keys() == got.keys()
    for k in want:
        assert_close(got[k], want[k], 1e-6)
    assert layer_kinds(out) == layer_kinds(src)


def test_the_shared_branch_model_round_trips_to_its_own_layers(tmp_path: Path) -> None:
    """builder/control_flow_branch.mlmodel: the frontend's condition test (|c| > 1e-6 of the
    branch's input) goes back into the branch layer; both arms' values match the first IR."""
    from ..conftest import MODELS

    src = MODELS / "builder" / "control_flow_branch.mlmodel"
    stored = dict(np.load(src.with_suffix(".npz")))
    first = converter.load(src)
    out = tmp_path / "m.mlmodel"
    converter.convert(first, to="neuralnetwork", out=out, passes="none")
    second = converter.load(out)
    for cond in (1.0, 0.0, -0.5, 1e-7):
        feeds = {**stored, "cond": np.full_like(stored["cond"], cond)}
        want, got = converter.run(first, feeds), converter.run(second, feeds)
        for k in want:
            assert_close(got[k], want[k], 1e-6)
    assert layer_kinds(out) == layer_kinds(src)


def test_a_loop_inside_a_branch_arm_keeps_its_variable_blob(tmp_path: Path) -> None:
    """An arm's result made by a loop whose variable the body overwrites without reading it: the
    result is copied out (renaming the loop's initial copy would split the variable's blob)."""

    def body(b, s, x):
        def then(bb):
            i, last = bb.while_loop([bb.const(np.float32(0)), x], lambda b2, i, v: b2.less(x=i, y=np.float32(3)),
                                    lambda b2, i, v: [b2.add(x=i, y=np.float32(1)), b2.mul(x=x, y=i)])
            return [last]

        (r,) = b.cond(b.greater(x=s, y=np.float32(0)), then, lambda bb: [bb.mul(x=x, y=np.float32(-1))])
        return [r]

    feeds = {"s": S, "x": X}
    (got,) = run_nn(program(feeds, body), feeds, tmp_path / "m.mlmodel").values()
    assert_close(got, X * 2)  # the last iteration has i = 2
