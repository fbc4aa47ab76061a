"""Property: the default pipeline keeps random programs valid after every pass and their outputs
bit-identical. The programs are those of tests/ir/test_random_programs.py (arithmetic, nested
cond / while_loop blocks), with the patterns the passes rewrite written into them afterwards
(``with_patterns``): exact no-ops after random values (``x + -0.0`` in either operand order,
``x * 1``, a reshape to the same shape, a reshape chain) that some of the value's users then read,
and ops repeated on the same inputs; in nested blocks too. Rule writers: add the patterns of a new rule to
``_NOOPS`` (exact identities only, so that outputs stay bit-identical) or a generator of their own.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import converter
from converter.ir.builder import Builder
from converter.ir.clone import clone_program
from converter.ir.core import Op, Program, Value
from converter.ir.interpreter import run
from converter.ir.types import TensorType, is_static_shape
from converter.ir.verify import verify

from ..ir.test_random_programs import programs


def _add_zero(b: Builder, x: Value, swap: bool) -> Value:
    zero = b.const(np.float32(-0.0))  # x + -0.0 is x for every x, -0.0 included
    return b.add(x=zero, y=x) if swap else b.add(x=x, y=zero)


def _mul_one(b: Builder, x: Value, swap: bool) -> Value:
    one = b.const(np.float32(1.0))
    return b.mul(x=one, y=x) if swap else b.mul(x=x, y=one)


def _reshape(b: Builder, x: Value, swap: bool) -> Value:
    return b.reshape(x=x, shape=np.array(x.type.shape, np.int32))


def _reshape_chain(b: Builder, x: Value, swap: bool) -> Value:
    flat = b.reshape(x=x, shape=np.array([-1], np.int32))
    return b.reshape(x=flat, shape=np.array(x.type.shape, np.int32))


_NOOPS: list[tuple[Callable[[Builder, Value, bool], Value], bool]] = [
    (_add_zero, False), (_mul_one, False), (_reshape, True), (_reshape_chain, True)]  # (make, needs a static shape)


def builder_after(op: Op) -> Builder:
    """A builder inserting right after ``op``, in its block."""
    assert op.block is not None
    return Builder(op.block, insert_before=op.next_op)


def redirect_uses(v: Value, new: Value, skip: set[Op], mask: int) -> None:
    """Make the uses of ``v`` that ``mask`` selects (use i: bit i % 8) read ``new``, except uses by
    the ops of ``skip`` (those that compute ``new`` from ``v``)."""
    for i, use in enumerate(list(v.uses)):
        user = use.user
        if not isinstance(user, Op) or user in skip or not mask >> (i % 8) & 1:
            continue
        arg = user.inputs[use.key]
        if isinstance(arg, tuple):
            user.set_input(use.key, tuple(new if j == use.index else a for j, a in enumerate(arg)))
        else:
            user.set_input(use.key, new)


@st.composite
def with_patterns(draw) -> tuple[Program, dict]:
    prog, feeds = draw(programs())
    ops = list(prog.walk())  # nested blocks too: a no-op goes right after its value, in its block
    candidates = [op for op in ops if op.type != "const" and not op.blocks and op.outputs
                  and isinstance(op.outputs[0].type, TensorType) and op.outputs[0].type.dtype.name == "fp32"]
    for op in draw(st.lists(st.sampled_from(candidates), max_size=4)) if candidates else []:
        x = op.outputs[0]
        noops = [make for make, static in _NOOPS if not static or (is_static_shape(x.type.shape) and x.type.shape)]
        make = draw(st.sampled_from(noops))
        y = make(builder_after(op), x, draw(st.booleans()))
        inner = _first_reader(y, x)
        redirect_uses(x, y, {inner}, draw(st.integers(0, 255)))
    pure = [op for op in ops if op.type in ("add", "sub", "mul", "maximum", "minimum", "real_div")]
    for op in draw(st.lists(st.sampled_from(pure), max_size=3)) if pure else []:
        b = builder_after(op)
        twin = b.add_op(op.type, dict(op.inputs)).outputs[0]
        redirect_uses(op.outputs[0], twin, {twin.producer}, draw(st.integers(0, 255)))
    verify(prog)
    return prog, feeds


def _first_reader(y: Value, x: Value) -> Op:
    """The op of the no-op chain ending at ``y`` that reads ``x``."""
    op = y.producer
    while not any(v is x for v in op.input_values()):
        op = next(v.producer for v in op.input_values() if v.producer is not None and v.producer.type != "const")
    return op


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(with_patterns())
def test_default_pipeline_keeps_random_programs(case) -> None:
    prog, feeds = case
    optimized, _ = clone_program(prog)
    converter.optimize(optimized, verify=True)
    want, got = run(prog, feeds), run(optimized, feeds)
    assert list(got) == list(want)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
        assert got[k].dtype == want[k].dtype
