"""l2_norm and local_response_norm, decomposed into reductions, a constant band matmul and
elementwise ops (formulas: converter/ir/ops/norm.py). Both work in the operand's own layout."""

from __future__ import annotations

import numpy as np

from ....ir.core import Op
from ..emitter import GraphEmitter, LoweringError
from ._common import float_scalar, out, physical_axis, reshape
from .registry import lowering


def _float_input(e: GraphEmitter, op: Op):  # noqa: ANN202 - an Operand
    x = e.any(op.inputs["x"])
    if not x.dtype.startswith("float"):
        raise LoweringError(f"{op.type} of {x.dtype} tensors has no WebNN form")
    return x


@lowering("l2_norm", kind="decomposed", note="x / sqrt(reduceSumSquare(x over the last three axes) + epsilon)")
def _l2_norm(e: GraphEmitter, op: Op) -> None:
    x = _float_input(e, op)
    rank = x.rank
    axes = sorted(physical_axis(x, a) for a in range(rank - 3, rank))
    kept = [1 if i in axes else d for i, d in enumerate(x.shape)]
    ss = e.emit("reduceSumSquare", x, shape=kept, dtype=x.dtype, perm=x.perm, axes=axes, keepDimensions=True)
    eps = float_scalar(e.param(op, "epsilon"))
    if eps != 0.0:
        ss = e.emit("add", ss, e.scalar(eps, x.dtype), shape=kept, dtype=x.dtype, perm=x.perm)
    norm = e.emit("sqrt", ss, shape=kept, dtype=x.dtype, perm=x.perm)
    e.bind(out(op), e.emit("div", x, norm, shape=x.shape, dtype=x.dtype, perm=x.perm))


def lrn_window(channels: int, size: int) -> np.ndarray:
    """[C, C] 0/1 matrix: ``band[c, c2]`` is 1 when channel c2 is in channel c's window
    ``[c - size // 2, c + (size - 1) // 2]``."""
    c = np.arange(channels)
    offset = c[None, :] - c[:, None]
    return ((offset >= -(size // 2)) & (offset <= (size - 1) // 2)).astype(np.float32)


@lowering("local_response_norm", kind="decomposed",
          note="x / pow(k + alpha / size * S, beta), S the window sum of squares over the channel axis (-3) as a "
               "matmul with a constant 0/1 band matrix")
def _lrn(e: GraphEmitter, op: Op) -> None:
    x = _float_input(e, op)
    size = int(float_scalar(e.const_param(op, "size")))
    alpha, beta, k = (float_scalar(e.const_param(op, n)) for n in ("alpha", "beta", "k"))
    pc = physical_axis(x, x.rank - 3)
    channels = x.shape[pc]
    band = lrn_window(channels, size)
    sq = e.emit("mul", x, x, shape=x.shape, dtype=x.dtype, perm=x.perm)
    if pc == x.rank - 1:  # channels last (NHWC): S[..., c] = sum_c2 sq[..., c2] band[c, c2]
        lead = int(np.prod(x.shape[:-1], dtype=np.int64))
        s2 = e.emit("matmul", reshape(e, sq, [lead, channels]), e.constant(band.T, x.dtype),
                    shape=[lead, channels], dtype=x.dtype)
    else:  # S[b, c, r] = sum_c2 band[c, c2] sq[b, c2, r]
        before = int(np.prod(x.shape[:pc], dtype=np.int64))
        after = int(np.prod(x.shape[pc + 1:], dtype=np.int64))
        s2 = e.emit("matmul", e.constant(band[None], x.dtype), reshape(e, sq, [before, channels, after]),
                    shape=[before, channels, after], dtype=x.dtype)
    s = reshape(e, s2, x.shape)
    base = e.emit("linear", s, shape=x.shape, dtype=x.dtype, alpha=alpha / size, beta=k)
    denom = e.emit("pow", base, e.scalar(beta, x.dtype), shape=x.shape, dtype=x.dtype)
    e.bind(out(op), e.emit("div", x, denom, shape=x.shape, dtype=x.dtype, perm=x.perm))
