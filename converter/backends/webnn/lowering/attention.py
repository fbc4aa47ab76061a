"""einsum (the two equations MIL has) and scaled_dot_product_attention, through matmul."""

from __future__ import annotations

import numpy as np

from ....ir.core import Op
from ..emitter import GraphEmitter, LoweringError, Operand
from ._common import broadcast_shape, cast, out, reshape
from .registry import lowering


def _swap_last3(rank: int) -> list[int]:
    """The permutation swapping axes -3 and -2."""
    perm = list(range(rank))
    perm[-3], perm[-2] = perm[-2], perm[-3]
    return perm


def _transposed(e: GraphEmitter, x: Operand, perm: list[int]) -> Operand:
    return e.emit("transpose", x, shape=[x.shape[p] for p in perm], dtype=x.dtype, permutation=perm)


@lowering("einsum", kind="decomposed",
          note="'nchw,nwhu->nchu' / 'chw,whr->chr': axes -3 and -2 swapped on both sides, matmul (B and H "
               "broadcast), swapped back")
def _einsum(e: GraphEmitter, op: Op) -> None:
    xv, yv = op.inputs["values"]
    rank = len(e.shape(xv))
    perm = _swap_last3(rank)
    x, y = e.get(xv, perm), e.get(yv, perm)  # [..., h, c, k], [..., h, k, u]
    if not x.dtype.startswith("float"):
        raise LoweringError("integer einsum has no WebNN form")
    shape = [*broadcast_shape(x.shape[:-2], y.shape[:-2]), x.shape[-2], y.shape[-1]]
    z = e.emit("matmul", x, y, shape=shape, dtype=x.dtype)
    e.bind(out(op), _transposed(e, z, perm))


@lowering("scaled_dot_product_attention", kind="decomposed",
          note="softmax(matmul(q, k^T) / sqrt(E) + mask) @ v; a bool mask as where(mask, 0, -inf)")
def _sdpa(e: GraphEmitter, op: Op) -> None:
    q, v = e.get(op.inputs["query"]), e.get(op.inputs["value"])
    if not q.dtype.startswith("float"):
        raise LoweringError("integer attention has no WebNN form")
    rank = q.rank
    perm = list(range(rank))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    kt = e.get(op.inputs["key"], perm)  # a constant key is transposed at conversion time
    s_shape = [*q.shape[:-1], kt.shape[-1]]
    scores = e.emit("matmul", q, kt, shape=s_shape, dtype=q.dtype)
    scores = e.emit("div", scores, e.scalar(float(np.float32(np.sqrt(q.shape[-1]))), q.dtype), shape=s_shape,
                    dtype=q.dtype)
    if "attn_mask" in op.inputs:
        mv = op.inputs["attn_mask"]
        mask = e.get(mv)
        if mv.type.dtype.name == "bool":  # type: ignore[union-attr]
            add = e.emit("where", cast(e, mask, "uint8"), e.scalar(0.0, q.dtype), e.scalar(-np.inf, q.dtype),
                         shape=mask.shape, dtype=q.dtype)
        else:
            add = cast(e, mask, q.dtype)
        if add.rank < rank:
            add = reshape(e, add, (1,) * (rank - add.rank) + add.shape)
        scores = e.emit("add", scores, add, shape=broadcast_shape(s_shape, add.shape), dtype=q.dtype)
        s_shape = list(broadcast_shape(s_shape, add.shape))
    weights = e.emit("softmax", scores, rank - 1, shape=s_shape, dtype=q.dtype)
    y = e.emit("matmul", weights, v, shape=[*s_shape[:-1], v.shape[-1]], dtype=q.dtype)
    e.bind(out(op), reshape(e, y, e.shape(out(op))))
