"""MatMul and Gemm.

MatMul has numpy's semantics (1-D operands promoted and the added dim removed; batch dims
broadcast), as the IR matmul. Gemm is ``alpha * A' @ B' + beta * C`` (C broadcast to the
result, as ONNX's unidirectional rule allows), with the scalings skipped when they are 1.
"""

from __future__ import annotations

from ...ir.core import Value
from .context import NUMERIC, Ctx, Node
from .registry import onnx_op


def _same_dtype(ctx: Ctx, x: Value, y: Value) -> Value:
    return y if y.type.dtype == x.type.dtype else ctx.b.cast(x=y, dtype=x.type.dtype.name)


@onnx_op("MatMul", versions=(1, 13))
def matmul(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, NUMERIC)
    return [ctx.b.matmul(x=x, y=_same_dtype(ctx, x, ctx.input(1, NUMERIC)))]


@onnx_op("Gemm", versions=(6, 13))
def gemm(ctx: Ctx, node: Node) -> list[Value]:
    b = ctx.b
    a = ctx.input(0, NUMERIC)
    bm = _same_dtype(ctx, a, ctx.input(1, NUMERIC))
    if ctx.rank(a) != 2 or ctx.rank(bm) != 2:
        raise ctx.format_error(f"A and B must be 2-D, got ranks {ctx.rank(a)} and {ctx.rank(bm)}")
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    y = b.matmul(x=a, y=bm, transpose_x=bool(ctx.attr("transA", 0)), transpose_y=bool(ctx.attr("transB", 0)))
    if alpha != 1.0:
        y = b.mul(x=y, y=ctx.const(alpha, y))
    c = ctx.optional_input(2, NUMERIC)
    if c is not None and beta != 0.0:
        c = _same_dtype(ctx, y, c)
        if beta != 1.0:
            c = b.mul(x=c, y=ctx.const(beta, c))
        y = b.add(x=y, y=c)
    return [y]
