"""Registry cases: constants and control flow."""

import numpy as np

from converter.ir.types import scalar
from tests.ops.harness import Case


def _cond(b, x, flag):
    return list(b.cond(flag, lambda t: [t.mul(x=x, y=2.0)], lambda f: [f.sub(x=x, y=1.0)]))


def _loop(b, x):
    i0 = b.const(np.int32(0))
    _, acc = b.while_loop(
        [i0, x],
        lambda c, i, acc: c.less(x=i, y=3),
        lambda c, i, acc: [c.add(x=i, y=1), c.mul(x=acc, y=1.5)],
    )
    return acc


CASES = [
    Case("const", build=lambda b: b.const(np.arange(6, dtype=np.float32).reshape(2, 3))),
    Case("_const_symbolic", build=lambda b: b.add_op("_const_symbolic", {}, attributes={"val": np.int32(3)},
                                                     output_types=[scalar("int32")]).outputs[0]),
    Case("cond", inputs={"x": np.ones((2, 3), np.float32), "flag": np.array(True)}, build=_cond, id="true"),
    Case("cond", inputs={"x": np.ones((2, 3), np.float32), "flag": np.array(False)}, build=_cond, id="false"),
    Case("while_loop", inputs={"x": np.ones((2, 3), np.float32)}, build=_loop),
]
