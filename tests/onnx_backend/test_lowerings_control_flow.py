"""cond / while_loop / lists through the ONNX backend, run by onnxruntime. Oracle: the same
computation in plain Python written here, and our interpreter on the same program."""

from __future__ import annotations

import numpy as np
import pytest

from converter.backends.onnx import program_to_onnx
from converter.errors import UnsupportedError

from .helpers import assert_close, program, run_both

X = np.array([0.5, -2.0, 1.25], np.float32)
S = np.array([1.0], np.float32)
CONST = np.array([7.0, 8.0, 9.0], np.float32)


def _cond_program():  # noqa: ANN202
    def body(b, s, x, y):  # noqa: ANN001, ANN202
        pred = b.greater(x=s, y=np.float32(0))

        def then(bb):  # noqa: ANN001, ANN202 - a computed value, an outer value as is, a constant
            return [bb.mul(x=x, y=np.float32(2)), y, bb.const(CONST)]

        def other(bb):  # noqa: ANN001, ANN202
            t = bb.sub(x=x, y=np.float32(1))
            return [t, bb.add(x=y, y=t), bb.mul(x=y, y=np.float32(-3))]

        a, c, d = b.cond(pred, then, other, name="choose")
        return [b.add(x=a, y=np.float32(0.5), name="after"), c, d]

    return program({"s": S, "x": X, "y": X}, body)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_takes_the_arm_python_takes(sign: float) -> None:
    feeds = {"s": (sign * S).astype(np.float32), "x": X, "y": np.array([3.0, -1.0, 4.0], np.float32)}
    prog = _cond_program()
    got, interp = run_both(prog, feeds)
    x, y = feeds["x"], feeds["y"]
    want = [x * 2 + 0.5, y, CONST] if sign > 0 else [x - 1 + 0.5, y + x - 1, y * -3]
    for k, w in zip(interp, want):
        assert_close(got[k], w)
        assert_close(got[k], interp[k])
    assert [n.op_type for n in program_to_onnx(prog).graph.node].count("If") == 1


@pytest.mark.parametrize("n_steps", [8, 0, 2])
def test_counted_while_loop(n_steps: int) -> None:
    def body(b, x):  # noqa: ANN001, ANN202
        def cond(bb, i, acc):  # noqa: ANN001, ANN202
            return bb.less(x=i, y=np.int32(n_steps))

        def step(bb, i, acc):  # noqa: ANN001, ANN202
            return [bb.add(x=i, y=np.int32(2)), bb.add(x=bb.mul(x=acc, y=np.float32(1.5)), y=x)]

        i, acc = b.while_loop([b.const(np.int32(1)), x], cond, step, name="loop")
        return [acc, i]

    prog = program({"x": X}, body)
    got, interp = run_both(prog, {"x": X})
    i, acc = 1, X.copy()
    while i < n_steps:
        i, acc = i + 2, acc * 1.5 + X
    k_acc, k_i = list(interp)
    assert_close(got[k_acc], acc)
    assert int(got[k_i]) == i
    for k in interp:
        assert_close(got[k], interp[k])


def test_data_dependent_while_loop_with_swapped_variables() -> None:
    """(a, c, p, q) <- (c, a + c, q * a, p) until a >= 50."""

    def body(b, a0, c0, p0, q0):  # noqa: ANN001, ANN202
        def cond(bb, a, c, p, q):  # noqa: ANN001, ANN202
            return bb.less(x=a, y=np.float32(50))

        def step(bb, a, c, p, q):  # noqa: ANN001, ANN202
            return [c, bb.add(x=a, y=c), bb.mul(x=q, y=a), p]

        return list(b.while_loop([a0, c0, p0, q0], cond, step, name="fib"))

    feeds = {"a0": np.array([1.0], np.float32), "c0": np.array([0.5], np.float32),
             "p0": np.array([1.0, -0.5], np.float32), "q0": np.array([2.0, 3.0], np.float32)}
    got, interp = run_both(program(feeds, body), feeds)
    a, c, p, q = (v.copy() for v in feeds.values())
    while a[0] < 50:
        a, c, p, q = c, a + c, q * a, p
    for k, w in zip(interp, (a, c, p, q)):
        assert_close(got[k], w)
        assert_close(got[k], interp[k])


def test_list_filled_in_a_loop() -> None:
    """A TensorArray pattern: a dynamic list grown by list_write inside a while_loop, then gathered."""

    def body(b, x):  # noqa: ANN001, ANN202
        ls = b.make_list(init_length=0, elem_shape=(3,), dtype="fp32")

        def cond(bb, i, acc, lst):  # noqa: ANN001, ANN202
            return bb.less(x=i, y=np.int32(4))

        def step(bb, i, acc, lst):  # noqa: ANN001, ANN202
            nxt = bb.add(x=bb.mul(x=acc, y=np.float32(-0.5)), y=x)
            return [bb.add(x=i, y=np.int32(1)), nxt, bb.list_write(ls=lst, index=i, value=nxt)]

        _, _, out = b.while_loop([b.const(np.int32(0)), x, ls], cond, step, name="loop")
        return [b.list_gather(ls=out, indices=np.array([3, 0, 2], np.int32)), b.list_length(ls=out)]

    prog = program({"x": X}, body)
    got, interp = run_both(prog, {"x": X})
    acc, rows = X.copy(), []
    for _ in range(4):
        acc = acc * -0.5 + X
        rows.append(acc)
    k_all, k_len = list(interp)
    assert_close(got[k_all], np.stack([rows[3], rows[0], rows[2]]))
    assert int(got[k_len]) == 4 and got[k_len].dtype == np.int32
    for k in interp:
        assert_close(got[k], interp[k])


def test_list_gap_reads_zeros_and_scatter() -> None:
    v = np.stack([X * 3, -X])

    def body(b, x, v):  # noqa: ANN001, ANN202
        ls = b.make_list(init_length=1, elem_shape=(3,), dtype="fp32")
        ls = b.list_write(ls=ls, index=np.int32(2), value=x)
        ls = b.list_scatter(ls=ls, indices=np.array([4, 0], np.int32), value=v)
        return [b.list_gather(ls=ls, indices=np.array([0, 1, 2, 3, 4], np.int32)), b.list_read(ls=ls, index=np.int32(2))]

    prog = program({"x": X, "v": v}, body)
    got, interp = run_both(prog, {"x": X, "v": v})
    z = np.zeros(3, np.float32)
    k_all, k_read = list(interp)
    assert_close(got[k_all], np.stack([-X, z, X, z, X * 3]))
    assert_close(got[k_read], X)
    for k in interp:
        assert_close(got[k], interp[k])


def test_an_unlowerable_op_inside_a_branch_is_named() -> None:
    def body(b, s, x):  # noqa: ANN001, ANN202
        pred = b.greater(x=s, y=np.float32(0))

        def then(bb):  # noqa: ANN001, ANN202 - a list of symbolic element shape has no dense form
            ls = bb.make_list(init_length=1, elem_shape=(2, "W"), dtype="fp32", name="symbolic_list")
            return [bb.list_length(ls=ls)]

        (r,) = b.cond(pred, then, lambda bb: [bb.const(np.int32(0))], name="choose")
        return [r]

    feeds = {"s": S, "x": np.ones((2, 2), np.float32)}
    with pytest.raises(UnsupportedError, match="cond 'choose'.*make_list 'symbolic_list'.*static element shape"):
        program_to_onnx(program(feeds, body))
