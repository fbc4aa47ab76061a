"""ONNX losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, written in IR ops.

The IR has no loss op. Both follow the ONNX formula: ``loss[n, d...] = -x[n, t[n, d...], d...]
* weight[t[n, d...]]``, 0 where ``t == ignore_index`` (the target is replaced by 0 before
gathering, so an ignored target may lie outside ``[0, C)``); ``sum`` adds every element,
``mean`` divides the sum by the sum of the weights picked (the count of targets not ignored when
there are no weights). SoftmaxCrossEntropyLoss applies it to ``log_softmax(scores, axis=1)``
(computed as ``x - max - log(sum(exp(x - max)))``, which stays finite for large scores) and also
returns that log-probability tensor.
"""

from __future__ import annotations

from ...ir.core import Value
from .context import FLOATS, Ctx, Node
from .registry import onnx_op

_REDUCTIONS = ("none", "sum", "mean")


def nll(ctx: Ctx, x: Value, target: Value, weight: Value | None) -> Value:
    """The loss of log-probabilities ``x`` [N, C, d...] against class indices ``target`` [N, d...]."""
    b = ctx.b
    reduction = ctx.attr("reduction", "mean")
    if reduction not in _REDUCTIONS:
        raise ctx.format_error(f"reduction must be one of {', '.join(_REDUCTIONS)}, not '{reduction}'")
    ignore_index = ctx.attr("ignore_index")
    ignored = None
    if ignore_index is not None:
        ignored = b.equal(x=target, y=ctx.const(int(ignore_index), target))
        target = b.select(cond=ignored, a=ctx.const(0, target), b=target)
    picked = b.squeeze(x=b.gather_along_axis(x=x, indices=b.expand_dims(x=target, axes=[1]), axis=1), axes=[1])
    loss = b.mul(x=picked, y=ctx.const(-1.0, picked))
    w = None
    if weight is not None:
        if weight.type.dtype != x.type.dtype:
            weight = b.cast(x=weight, dtype=x.type.dtype.name)
        w = b.gather(x=weight, indices=target, axis=0)
        loss = b.mul(x=loss, y=w)
    zero = ctx.const(0.0, loss)
    if ignored is not None:
        loss = b.select(cond=ignored, a=zero, b=loss)
        w = b.select(cond=ignored, a=zero, b=w if w is not None else ctx.const(1.0, loss))
    if reduction == "none":
        return loss
    total = b.reduce_sum(x=loss, keep_dims=False)
    if reduction == "sum":
        return total
    if w is None:
        return b.reduce_mean(x=loss, keep_dims=False)
    return b.real_div(x=total, y=b.reduce_sum(x=w, keep_dims=False))


def _check_rank(ctx: Ctx, x: Value) -> None:
    if x.type.shape is None or len(x.type.shape) < 2:
        raise ctx.unsupported("the input must have a known rank >= 2 ([N, C, d...])")


@onnx_op("NegativeLogLikelihoodLoss", versions=(12, 22))
def negative_log_likelihood_loss(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, FLOATS)
    _check_rank(ctx, x)
    return [nll(ctx, x, ctx.input(1, ("int32",)), ctx.optional_input(2, FLOATS))]


def log_softmax(ctx: Ctx, x: Value, axis: int) -> Value:
    b = ctx.b
    shifted = b.sub(x=x, y=b.reduce_max(x=x, axes=[axis], keep_dims=True))
    return b.sub(x=shifted, y=b.log(x=b.reduce_sum(x=b.exp(x=shifted), axes=[axis], keep_dims=True)))


@onnx_op("SoftmaxCrossEntropyLoss", versions=(12, 13))
def softmax_cross_entropy_loss(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, FLOATS)
    _check_rank(ctx, x)
    log_prob = log_softmax(ctx, x, 1)
    return [nll(ctx, log_prob, ctx.input(1, ("int32",)), ctx.optional_input(2, FLOATS)), log_prob]
