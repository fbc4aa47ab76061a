"""matmul by a constant matrix followed by adding a constant vector -> linear.

    %w = const() [val=W: [K, N]]                  (transpose_y=True: W is [N, K])
    %y = matmul(x=%x, y=%w)
    %c = const() [val=c: [N], or [1, .., 1, N], or a scalar]
    %z = add(x=%y, y=%c)      (either order)      ->      %z = linear(x=%x, weight=W^T [N, K], bias=c [N])

linear computes ``x @ weight^T + bias`` with a constant 2-D weight ``[Dout, Din]``; so the matmul's
constant must be its ``y`` (2-D), ``transpose_x`` unset (linear has no such flag), and the added
constant must broadcast along the last dim only (a constant that varies along another dim, or
widens the result, is no bias). Not bit-exact: linear rounds once (``acc + c``) where matmul then
add round twice; every converter does this (coremltools: ``fuse_matmul_weight_bias``).
"""

from __future__ import annotations

import numpy as np

from ...ir.builder import Builder
from ...ir.types import TensorType
from ..rewrite import Match, const, op, rule, var
from ._common import flag, per_channel


def _bias(m: Match) -> np.ndarray | str:
    out = m.root.outputs[0]
    t = out.type
    if not isinstance(t, TensorType) or t.shape is None:
        return f"the rank of '{out.name}' is unknown"
    return per_channel(m.value("c"), out, last=True)


def _check(m: Match) -> str | None:
    mm = m.op("mm")
    if flag(mm, "transpose_x"):
        return "transpose_x is set: linear has no such flag"
    w = np.asarray(m.value("w"))
    if w.ndim != 2:
        return f"the constant operand has shape {list(w.shape)}; linear's weight is 2-D"
    x = m["x"].type
    if not isinstance(x, TensorType) or x.shape is None or len(x.shape) < 1:
        return "the rank of x is unknown"
    c = _bias(m)
    if isinstance(c, str):
        return c
    if not np.array_equal(np.asarray(c).astype(w.dtype).astype(c.dtype), c, equal_nan=c.dtype.kind == "f"):
        return f"the added constant ({c.dtype}) does not fit the weight's dtype ({w.dtype}), which linear's bias takes"
    return None


@rule(op.add(x=op.matmul("mm", x=var("x"), y=const("w")), y=const("c")), check=_check, exact=False)
def fuse_matmul_add_linear(b: Builder, m: Match):
    """``matmul(x, W) + c -> linear(x, W^T, c)`` (module docstring)."""
    w = np.asarray(m.value("w"))
    weight = w if flag(m.op("mm"), "transpose_y") else np.ascontiguousarray(w.T)
    c = _bias(m)
    assert not isinstance(c, str)
    return b.linear(x=m["x"], weight=b.const(weight), bias=b.const(np.asarray(c).astype(w.dtype)))


RULES = [fuse_matmul_add_linear]
