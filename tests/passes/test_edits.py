"""Batched edits (converter/passes/edits.py): removing an op with nested blocks releases every
use held inside them."""

from __future__ import annotations

import numpy as np

from converter.ir.builder import new_program
from converter.ir.core import Op
from converter.ir.types import tensor
from converter.passes.edits import Edits


def test_removing_a_cond_releases_the_uses_of_every_op_in_its_blocks() -> None:
    """Regression: the nested ops were detached before their blocks released their uses, and the
    release walks the block's op list, which skips detached ops: only the first op of each block
    let go of its inputs, so ``x`` kept uses by removed ops (and dead_code then refused to remove
    an op it had found dead)."""
    def body(b, x):
        (c,) = b.cond(b.const(np.bool_(True)),
                      lambda t: [t.mul(x=t.exp(x=x, name="first"), y=x, name="second")],
                      lambda f: [f.sin(x=f.cos(x=x, name="third"), name="fourth")], name="c")
        return [c, b.relu(x=x, name="r")]

    prog = new_program({"x": tensor("fp32", [2])}, body)
    fn = prog.main
    x = fn.inputs[0]
    cond = next(op for op in fn.walk() if op.type == "cond")
    fn.block.set_outputs([fn.outputs[1]])
    edits = Edits()
    edits.remove(cond)
    edits.apply()
    assert [u.user.name for u in x.uses if isinstance(u.user, Op)] == ["r"]
    assert [op.name for op in fn.block.ops if op.type != "const"] == ["r"]
