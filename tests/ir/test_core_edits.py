"""The op list of a block (a linked list behind an ordered view), use-lists as ordered sets and the
per-function name scope: order, length, editing while iterating, and names freed by removal.

The oracle for order is a plain Python list edited the same way (a model of what the block must
hold); hypothesis drives random edit sequences against it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converter.ir.builder import Builder, new_program
from converter.ir.core import Block, Op, Use
from converter.ir.opdef import get_opdef
from converter.ir.types import tensor
from converter.ir.verify import verify


def _op(name: str) -> Op:
    return Op("relu", get_opdef("relu", "iOS15"), name=name)


def _names(block: Block) -> list[str]:
    return [op.name for op in block.ops]


def test_append_insert_remove_keep_order_and_length():
    b = Block()
    a, c = b.append(_op("a")), b.append(_op("c"))
    b.insert_before(c, _op("b"))
    b.insert_after(c, _op("d"))
    b.prepend(_op("start"))
    b.insert(2, _op("a2"))
    assert _names(b) == ["start", "a", "a2", "b", "c", "d"]
    assert len(b.ops) == 6 and bool(b.ops)
    assert [op.name for op in reversed(b.ops)] == ["d", "c", "b", "a2", "a", "start"]
    assert b.ops[0].name == "start" and b.ops[-1].name == "d" and b.ops[3].name == "b"
    assert [op.name for op in b.ops[1:3]] == ["a", "a2"]
    assert b.ops.index(c) == 4 and c in b.ops
    assert a.next_op.name == "a2" and c.prev_op.name == "b" and b.first_op.name == "start"
    b.remove_op(a)
    assert a not in b.ops and a.block is None and a.next_op is None
    assert _names(b) == ["start", "a2", "b", "c", "d"] and len(b.ops) == 5
    with pytest.raises(ValueError, match="not in this block"):
        b.remove_op(a)
    with pytest.raises(ValueError, match="already in a block"):
        b.append(c)
    with pytest.raises(ValueError, match="anchor"):
        b.insert_before(a, _op("x"))
    assert b.ops == list(b.ops)


def test_assigning_ops_relinks_and_detaches_the_rest():
    b = Block()
    ops = [b.append(_op(n)) for n in "abcd"]
    b.ops = [ops[3], ops[1], ops[0]]
    assert _names(b) == ["d", "b", "a"] and len(b.ops) == 3
    assert ops[2].block is None
    with pytest.raises(ValueError, match="twice"):
        b.ops = [ops[0], ops[0]]
    other = Block()
    with pytest.raises(ValueError, match="another block"):
        other.ops = [ops[0]]


def test_iteration_visits_ops_inserted_after_the_current_one():
    b = Block()
    for n in "abc":
        b.append(_op(n))
    seen = []
    for op in b.ops:
        seen.append(op.name)
        if op.name in "ab" and len(op.name) == 1:
            b.insert_after(op, _op(op.name + "+"))
            b.insert_before(op, _op(op.name + "-"))  # before: not visited
    assert seen == ["a", "a+", "b", "b+", "c"]
    assert _names(b) == ["a-", "a", "a+", "b-", "b", "b+", "c"]


def test_iteration_survives_removing_the_current_op_and_others():
    b = Block()
    for n in "abcdef":
        b.append(_op(n))
    seen = []
    for op in b.ops:
        seen.append(op.name)
        if op.name == "b":
            b.remove_op(op)  # the current op
        if op.name == "c":
            b.remove_op(op.next_op)  # d, not yet visited
            b.remove_op(op)
            b.remove_op(b.ops.first)  # a, already visited
    assert seen == ["a", "b", "c", "e", "f"]
    assert _names(b) == ["e", "f"] and len(b.ops) == 2


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["append", "before", "after", "remove", "prepend"]),
                          st.integers(0, 10**6)), max_size=60))
def test_random_edits_match_a_list_model(edits):
    b = Block()
    model: list[Op] = []
    for i, (kind, r) in enumerate(edits):
        op = _op(f"o{i}")
        if kind == "append" or not model:
            b.append(op)
            model.append(op)
            continue
        j = r % len(model)
        anchor = model[j]
        if kind == "before":
            b.insert_before(anchor, op)
            model.insert(j, op)
        elif kind == "after":
            b.insert_after(anchor, op)
            model.insert(j + 1, op)
        elif kind == "prepend":
            b.prepend(op)
            model.insert(0, op)
        else:
            b.remove_op(anchor)
            model.pop(j)
        assert len(b.ops) == len(model)
    assert list(b.ops) == model
    assert list(reversed(b.ops)) == model[::-1]
    assert b.first_op is (model[0] if model else None) and b.last_op is (model[-1] if model else None)


def test_use_lists_are_ordered_sets_with_constant_time_removal():
    def body(b, x):
        y = b.relu(x=x, name="y")
        u1 = b.add(x=y, y=y, name="u1")
        u2 = b.mul(x=y, y=x, name="u2")
        return [u1, u2, y]

    prog = new_program({"x": tensor("fp32", [2])}, body)
    fn = prog.main
    y = next(v for v in fn.values() if v.name == "y")
    ops = {op.name: op for op in fn.walk()}
    assert y.uses == [Use(ops["u1"], "x", 0), Use(ops["u1"], "y", 0), Use(ops["u2"], "x", 0), Use(fn.block, "", 2)]
    ops["u1"].set_input("x", fn.inputs[0])
    assert list(y.uses) == [Use(ops["u1"], "y", 0), Use(ops["u2"], "x", 0), Use(fn.block, "", 2)]
    assert Use(ops["u2"], "x", 0) in y.uses and len(y.uses) == 3
    with pytest.raises(ValueError):
        y.uses.remove(Use(ops["u1"], "x", 0))
    verify(prog)


def test_builder_shares_one_name_scope_per_function_and_removal_frees_names():
    def body(b, x):
        return [b.relu(x=b.relu(x=x, name="r"), name="s")]

    prog = new_program({"x": tensor("fp32", [2])}, body)
    fn = prog.main
    b1 = Builder(fn.block, insert_before=fn.block.last_op)
    b2 = Builder(fn.block)
    assert b1.names is b2.names is fn.names  # built once, shared: creating a builder is O(1)
    r = fn.block.first_op
    t = b1.tanh(x=r.outputs[0], name="r")
    assert t.name == "r_0"  # taken by the live op
    s = fn.block.last_op
    t.producer.outputs[0].replace_all_uses_with(r.outputs[0])
    fn.block.remove_op(t.producer)
    assert b2.tanh(x=s.outputs[0], name="r_0").name == "r_0"  # freed by the removal
    s.outputs[0].name = "renamed"
    assert b2.relu(x=s.outputs[0], name="s").name == "s"  # the rename freed "s"
    assert b2.relu(x=s.outputs[0], name="renamed").name == "renamed_0"
    verify(prog)


def test_removing_a_cond_frees_the_names_of_its_nested_values():
    def body(b, x):
        (c,) = b.cond(b.less(x=np.float32(0), y=np.float32(1), name="p"),
                      lambda t: [t.exp(x=x, name="inner")], lambda f: [x], name="c")
        return [x]

    prog = new_program({"x": tensor("fp32", [2])}, body)
    fn = prog.main
    b = Builder(fn.block)
    assert b.exp(x=fn.inputs[0], name="inner").name == "inner_0"
    cond = next(op for op in fn.block.ops if op.type == "cond")
    fn.block.remove_op(cond)
    assert b.exp(x=fn.inputs[0], name="inner").name == "inner"
    assert b.exp(x=fn.inputs[0], name="c").name == "c"


def test_assigning_ops_rebuilds_the_name_scope():
    prog = new_program({"x": tensor("fp32", [2])}, lambda b, x: [b.relu(x=b.relu(x=x, name="a"), name="b")])
    fn = prog.main
    scope = fn.names
    first = fn.block.first_op
    first.outputs[0].replace_all_uses_with(fn.inputs[0])
    fn.block.ops = [op for op in fn.block.ops if op is not first]
    assert fn._names is None and fn.names is not scope
    assert Builder(fn.block).relu(x=fn.inputs[0], name="a").name == "a"
