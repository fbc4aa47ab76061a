"""Dead code elimination removes unused pure ops (transitively, inside nested blocks too) and keeps
everything that reaches an output or has effects."""

import numpy as np

from converter.ir.builder import new_program
from converter.ir.interpreter import run
from converter.ir.types import tensor
from converter.ir.verify import verify
from converter.passes.dce import DeadCodeElimination


def test_removes_dead_chains_and_keeps_live_ops():
    def body(b, x):
        y = b.relu(x=x, name="live")
        dead = b.mul(x=b.add(x=y, y=np.float32(1), name="dead1"), y=np.float32(2), name="dead2")
        assert dead.uses == []
        (c,) = b.cond(b.less(x=np.float32(0), y=np.float32(1)),
                      lambda t: [t.sub(x=y, y=t.exp(x=y, name="dead_inner"), name="live_inner")],
                      lambda f: [y])
        return [c]

    prog = new_program({"x": tensor("fp32", [3])}, body)
    x = np.array([-1.0, 0.5, 2.0], np.float32)
    before = run(prog, {"x": x})
    assert DeadCodeElimination().run(prog).modified
    verify(prog)
    names = {op.name for op in prog.walk()}
    assert {"dead1", "dead2"}.isdisjoint(names)
    assert {"live", "live_inner", "dead_inner"} <= names  # dead_inner is used by live_inner
    np.testing.assert_array_equal(run(prog, {"x": x})["cond"], before["cond"])
    assert not DeadCodeElimination().run(prog).modified

