"""Random ops draw from a stream keyed by something renames and rewrites cannot change: renaming an
op keeps its draws, two random ops with equal parameters draw differently, and a program keeps its
draws through clone, the text form, and a save/load through an .mlpackage (where the key is not
written: coremltools' loader accepts the file). An op's own seed >= 0 still decides alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import converter
from converter.ir.builder import new_program
from converter.ir.clone import clone_program
from converter.ir.core import Op
from converter.ir.interpreter import run
from converter.ir.rng import RNG_KEY
from converter.ir.text import parse_program, print_program
from converter.ir.types import tensor

SHAPE = np.array([3, 4], np.int32)


def _two_normals(b, x):
    a = b.random_normal(shape=SHAPE, mean=0.0, stddev=1.0, name="noise_a")
    c = b.random_normal(shape=SHAPE, mean=0.0, stddev=1.0, name="noise_b")
    return [b.add(x=x, y=a, name="out_a"), b.add(x=x, y=c, name="out_b")]


def _prog():
    return new_program({"x": tensor("fp32", (3, 4))}, _two_normals)


FEEDS = {"x": np.zeros((3, 4), np.float32)}


def _draws(prog):
    out = run(prog, FEEDS)
    return [out[v.name] for v in prog.main.outputs]


def _random_ops(prog):
    return [op for op in prog.main.walk() if op.type == "random_normal"]


def test_renaming_an_op_keeps_its_draws():
    prog = _prog()
    before = _draws(prog)
    for op in _random_ops(prog):
        op.name = op.name + "_renamed"
        op.outputs[0].name = op.name
    after = _draws(prog)
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)


def test_equal_random_ops_draw_differently_and_seeds_still_decide():
    a, b = _draws(_prog())
    assert not np.array_equal(a, b)
    assert len({op.attributes[RNG_KEY] for op in _random_ops(_prog())}) == 2

    def seeded(bld, x):
        return [bld.add(x=x, y=bld.random_uniform(shape=SHAPE, seed=7, name=n), name=f"o{n}") for n in ("u", "v")]

    prog = new_program({"x": tensor("fp32", (3, 4))}, seeded)
    first, second = _draws(prog)
    np.testing.assert_array_equal(first, second)  # the same seed: the same values, as in Core ML
    np.testing.assert_array_equal(first, run(prog, FEEDS, seed=123)["ou"])  # the interpreter seed has no say


def test_a_rewritten_copy_of_the_op_keeps_its_draws():
    prog = _prog()
    before = _draws(prog)
    old = _random_ops(prog)[0]
    block = old.block
    new = Op(old.type, old.opdef, dict(old.inputs), name="rebuilt", attributes=old.attributes)
    new.create_outputs([old.outputs[0].type], ["rebuilt"])
    block.insert_before(old, new)
    old.outputs[0].replace_all_uses_with(new.outputs[0])
    block.remove_op(old)
    np.testing.assert_array_equal(_draws(prog)[0], before[0])


def test_clone_and_text_form_keep_the_draws():
    prog = _prog()
    want = _draws(prog)
    cloned, _ = clone_program(prog)
    text = print_program(prog)
    assert f"{RNG_KEY}=" in text
    parsed = parse_program(text)
    for got in (_draws(cloned), _draws(parsed)):
        for a, b in zip(want, got):
            np.testing.assert_array_equal(a, b)


def test_load_save_load_keeps_the_draws_and_writes_no_key(tmp_path: Path):
    from tests.mil.helpers import CoremltoolsLoader

    prog = _prog()
    for op in _random_ops(prog):  # renamed before saving: the file has the new names
        op.name = "r_" + op.name
    want = _draws(prog)
    first = converter.load(converter.save(prog, tmp_path / "a.mlpackage"))
    second = converter.load(converter.save(first, tmp_path / "b.mlpackage"))
    for loaded in (first, second):
        for a, b in zip(want, _draws(loaded)):
            np.testing.assert_array_equal(a, b)
    model = (tmp_path / "b.mlpackage" / "Data" / "com.apple.CoreML" / "model.mlmodel").read_bytes()
    assert RNG_KEY.encode() not in model
    CoremltoolsLoader().load(tmp_path / "b.mlpackage")


def test_ops_without_a_key_fall_back_to_their_name():
    prog = _prog()
    for op in _random_ops(prog):
        del op.attributes[RNG_KEY]
    a, b = _draws(prog)
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(a, _draws(prog)[0])
