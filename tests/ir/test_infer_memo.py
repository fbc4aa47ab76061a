"""The type-inference memo (converter/ir/infer_memo.py) gives each op the types inference would give
it alone: ops that differ only in a parameter value, in a fresh symbol or in constness are told
apart. Each test infers ops twice in a row, so that the second is answered by the memo when it may be."""

from __future__ import annotations

import numpy as np
import pytest

from converter.errors import TypeInferenceError
from converter.ir import infer_memo
from converter.ir.builder import new_program
from converter.ir.types import Symbol, TensorType, dtype

F32 = dtype("fp32")


@pytest.fixture(autouse=True)
def fresh_memo():
    infer_memo.clear()
    yield
    infer_memo.clear()


def _w(*shape):
    return np.arange(np.prod(shape), dtype=np.float32).reshape(shape)


def test_same_types_different_parameter_values_get_their_own_types():
    seen = {}

    def body(b, x):
        for name, stride in (("s1", 1), ("s2", 2), ("s1_again", 1), ("s3", 3)):
            seen[name] = b.conv(x=x, weight=_w(2, 3, 3, 3), strides=[stride, stride], name=name)
        return seen["s3"]

    new_program({"x": TensorType(F32, (1, 3, 12, 12))}, body)
    assert seen["s1"].type.shape == (1, 2, 10, 10)
    assert seen["s2"].type.shape == (1, 2, 5, 5)
    assert seen["s1_again"].type.shape == (1, 2, 10, 10)
    assert seen["s3"].type.shape == (1, 2, 4, 4)


def test_repeated_op_is_answered_from_the_memo():
    calls = []

    def body(b, x):
        y = x
        for _ in range(5):
            y = b.relu(x=y)
        return y

    from converter.ir.opdef import get_opdef

    relu = type(get_opdef("relu", "iOS15"))
    original = relu.infer

    def counting(self, a):
        calls.append(1)
        return original(self, a)

    relu.infer = counting
    try:
        new_program({"x": TensorType(F32, (2, 3))}, body)
    finally:
        relu.infer = original
    assert len(calls) == 1


def test_fresh_symbols_are_not_shared_between_ops():
    outs = []

    def body(b, x):
        for _ in range(2):
            outs.append(b.non_zero(x=x))
        return outs[-1]

    new_program({"x": TensorType(F32, (4, 5))}, body)
    a, b = (v.type.shape[0] for v in outs)
    assert isinstance(a, Symbol) and isinstance(b, Symbol) and a != b


def test_symbolic_results_are_inferred_per_op():
    n = Symbol("N")
    outs = []

    def body(b, x):
        for _ in range(2):
            outs.append(b.conv(x=x, weight=_w(2, 3, 3, 3)))
        return outs[-1]

    new_program({"x": TensorType(F32, (n, 3, 8, 8))}, body)
    assert all(v.type.shape == (n, 2, 6, 6) for v in outs)


def test_constness_is_checked_even_when_the_types_were_seen():
    with pytest.raises(TypeInferenceError, match="compile-time constant"):
        def twice(b, x, s):
            b.conv(x=x, weight=_w(2, 2, 1, 1), strides=np.asarray([1, 1], np.int32))
            return b.conv(x=x, weight=_w(2, 2, 1, 1), strides=s)

        new_program({"x": TensorType(F32, (1, 2, 3, 3)), "s": TensorType(dtype("int32"), (2,))}, twice)


def test_fingerprints_tell_values_and_types_apart():
    fp = infer_memo.fingerprint
    assert fp(1) != fp(1.0) != fp(True)
    assert fp(np.asarray([1, 2], np.int32)) != fp(np.asarray([1, 2], np.int64))
    assert fp(np.asarray([1, 2], np.int32)) != fp(np.asarray([[1, 2]], np.int32))
    assert fp([1, 1]) != fp((1, 1))
    assert fp(np.zeros(10_000, np.float32)) is infer_memo.UNUSABLE
    assert fp(np.asarray(["a"], object)) is infer_memo.UNUSABLE
