"""Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare.

``axes`` comes from the attribute (before ReduceSum 13 / the others 18) or the optional input
(after); absent or empty axes reduce every axis, unless ``noop_with_empty_axes`` makes the op an
identity. The IR kernels give ONNX's empty-set results (sum 0, max -inf, log-sum -inf, ...).
"""

from __future__ import annotations

from ...ir.core import Value
from .context import Ctx, Node, normalize_axis
from .registry import onnx_op

_IR = {"ReduceSum": "reduce_sum", "ReduceMean": "reduce_mean", "ReduceMax": "reduce_max", "ReduceMin": "reduce_min",
       "ReduceProd": "reduce_prod", "ReduceL1": "reduce_l1_norm", "ReduceL2": "reduce_l2_norm",
       "ReduceLogSum": "reduce_log_sum", "ReduceLogSumExp": "reduce_log_sum_exp",
       "ReduceSumSquare": "reduce_sum_square"}
#: Schema version from which ``axes`` is an input.
_AXES_INPUT_SINCE = {"ReduceSum": 13}


@onnx_op("ReduceSum", versions=(1, 13))
@onnx_op("ReduceMean", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare", versions=(1, 18))
@onnx_op("ReduceMax", "ReduceMin", versions=(1, 20))
@onnx_op("ReduceLogSum", "ReduceLogSumExp", versions=(1, 28))
def reduce(ctx: Ctx, node: Node) -> list[Value]:
    ir_op = _IR[node.op_type]
    x = ctx.input(0, ctx.accepts(ir_op))
    rank = ctx.rank(x)
    keep = bool(int(ctx.attr("keepdims", 1)))
    if node.version >= _AXES_INPUT_SINCE.get(node.op_type, 18):
        axes = ctx.ints(1, "axes")
        noop = bool(int(ctx.attr("noop_with_empty_axes", 0)))
    else:
        axes = ctx.attr("axes")
        axes = None if axes is None else [int(a) for a in axes]
        noop = False
    if not axes:
        if noop:
            return [ctx.b.identity(x=x)]
        axes = list(range(rank))
    norm = sorted({normalize_axis(ctx, a, rank) for a in axes})
    if len(norm) != len(axes):
        raise ctx.format_error(f"repeated axes {axes}")
    if not norm:  # a scalar: reducing nothing
        return [ctx.b.identity(x=x)]
    out = ctx.b.add_op(ir_op, {"x": x, "axes": norm, "keep_dims": keep}).outputs[0]
    if ctx.input(0).type.dtype.name == "bool":  # bool max/min ran in int32: an empty max is INT_MIN
        out = ctx.b.greater(x=out, y=ctx.const(0, out))
    return [out]
