"""Normalizations and softmax: BatchNormalization (inference), InstanceNormalization,
LayerNormalization, Softmax, LogSoftmax.

The IR ops (batch_norm, instance_norm, layer_norm, softmax) are used where their constraints hold
(constant parameters, rank 3-5 for batch_norm, gamma/beta of the normalized shape); otherwise the
ONNX formula is written in IR ops. Softmax/LogSoftmax before opset 13 flatten the input to 2-D at
``axis`` and normalize each row (the coerced-2D semantics); from 13 they take one axis.
LogSoftmax is ``x - log_sum_exp(x)`` (stable: the IR reduction shifts by the maximum).
"""

from __future__ import annotations

import numpy as np

from ...ir.core import Value
from .context import FLOATS, Ctx, Node, normalize_axis
from .registry import onnx_op


def _per_channel(ctx: Ctx, v: Value, rank: int) -> Value:
    """A [C] parameter reshaped to [C, 1, ...] to broadcast over [N, C, *spatial]."""
    return ctx.b.reshape(x=v, shape=np.array([-1] + [1] * (rank - 2), np.int32))


def _fit(ctx: Ctx, v: Value, like: Value) -> Value:
    return v if v.type.dtype == like.type.dtype else ctx.b.cast(x=v, dtype=like.type.dtype.name)


@onnx_op("BatchNormalization", versions=(6, 15))
def batch_norm(ctx: Ctx, node: Node) -> list[Value | None]:
    """Inference only. Before opset 9: ``spatial`` must be 1 (per-channel statistics); opset 6
    trains unless ``is_test``; opset 7 trains when it has the running-statistics outputs."""
    training = (int(ctx.attr("training_mode", 0)) if node.version >= 14 else
                not int(ctx.attr("is_test", 0)) if node.version == 6 else
                node.version == 7 and len([o for o in node.outputs if o]) > 1)
    if training:
        raise ctx.unsupported("training mode (batch statistics and running-mean updates)")
    if node.version < 9 and not int(ctx.attr("spatial", 1)):
        raise ctx.unsupported("spatial=0 (statistics per activation, not per channel)")
    b = ctx.b
    x = ctx.input(0, FLOATS)
    rank = ctx.rank(x)
    eps = float(ctx.attr("epsilon", 1e-5))
    params = [_fit(ctx, ctx.input(i, FLOATS), x) for i in range(1, 5)]  # scale, B, mean, var
    scale, bias, mean, var = params
    if 3 <= rank <= 5 and all(ctx.const_input(i) is not None for i in range(1, 5)):
        return [b.batch_norm(x=x, mean=mean, variance=var, gamma=scale, beta=bias, epsilon=ctx.const(eps, x))]
    if rank < 2:
        raise ctx.format_error(f"the input must have rank >= 2, has {rank}")
    scale, bias, mean, var = (_per_channel(ctx, p, rank) for p in params)
    inv = b.real_div(x=scale, y=b.sqrt(x=b.add(x=var, y=ctx.const(eps, x))))
    return [b.add(x=b.mul(x=b.sub(x=x, y=mean), y=inv), y=bias)]


@onnx_op("InstanceNormalization", versions=(6, 22))
def instance_norm(ctx: Ctx, node: Node) -> list[Value]:
    b = ctx.b
    x = ctx.input(0, FLOATS)
    rank = ctx.rank(x)
    if rank < 3:
        raise ctx.format_error(f"the input must have rank >= 3, has {rank}")
    eps = float(ctx.attr("epsilon", 1e-5))
    scale, bias = _fit(ctx, ctx.input(1, FLOATS), x), _fit(ctx, ctx.input(2, FLOATS), x)
    if rank == 4 and ctx.const_input(1) is not None and ctx.const_input(2) is not None:
        return [b.instance_norm(x=x, gamma=scale, beta=bias, epsilon=ctx.const(eps, x))]
    axes = list(range(2, rank))
    centered = b.sub(x=x, y=b.reduce_mean(x=x, axes=axes, keep_dims=True))
    var = b.reduce_mean(x=b.mul(x=centered, y=centered), axes=axes, keep_dims=True)
    normed = b.real_div(x=centered, y=b.sqrt(x=b.add(x=var, y=ctx.const(eps, x))))
    return [b.add(x=b.mul(x=normed, y=_per_channel(ctx, scale, rank)), y=_per_channel(ctx, bias, rank))]


@onnx_op("LayerNormalization", versions=(17, 17))
def layer_norm(ctx: Ctx, node: Node) -> list[Value | None]:
    b = ctx.b
    x = ctx.input(0, FLOATS)
    rank = ctx.rank(x)
    axis = normalize_axis(ctx, int(ctx.attr("axis", -1)), rank)
    axes = list(range(axis, rank))
    eps = float(ctx.attr("epsilon", 1e-5))
    scale = _fit(ctx, ctx.input(1, FLOATS), x)
    bias = _fit(ctx, ctx.input(2, FLOATS), x) if ctx.has(2) else None
    wants_stats = any(len(node.outputs) > i and node.outputs[i] for i in (1, 2))
    normalized_shape = tuple(x.type.shape[axis:])
    if (not wants_stats and ctx.const_input(1) is not None and (bias is None or ctx.const_input(2) is not None)
            and tuple(scale.type.shape) == normalized_shape
            and (bias is None or tuple(bias.type.shape) == normalized_shape)):
        return [b.layer_norm(x=x, axes=axes, gamma=scale, beta=bias, epsilon=ctx.const(eps, x))]
    compute = x
    stash = int(ctx.attr("stash_type", 1))
    if stash == 1 and x.type.dtype.name == "fp16":
        compute = b.cast(x=x, dtype="fp32")  # statistics in fp32, as stash_type asks
    mean = b.reduce_mean(x=compute, axes=axes, keep_dims=True)
    centered = b.sub(x=compute, y=mean)
    var = b.reduce_mean(x=b.mul(x=centered, y=centered), axes=axes, keep_dims=True)
    inv_std = b.real_div(x=ctx.const(1.0, var), y=b.sqrt(x=b.add(x=var, y=ctx.const(eps, var))))
    normed = b.mul(x=centered, y=inv_std)
    if normed.type.dtype != x.type.dtype:
        normed = b.cast(x=normed, dtype=x.type.dtype.name)
    y = b.mul(x=normed, y=scale)
    if bias is not None:
        y = b.add(x=y, y=bias)
    return [y, mean, inv_std]


def _softmax_like(ctx: Ctx, node: Node, log: bool) -> Value:
    b = ctx.b
    x = ctx.input(0, FLOATS)
    rank = ctx.rank(x)
    axis = normalize_axis(ctx, int(ctx.attr("axis", -1 if node.version >= 13 else 1)), rank)

    def normalize(v: Value, ax: int) -> Value:
        if log:
            return b.sub(x=v, y=b.reduce_log_sum_exp(x=v, axes=[ax], keep_dims=True))
        return b.softmax(x=v, axis=ax)

    if node.version >= 13 or axis == rank - 1:
        return normalize(x, axis)
    static = ctx.static_shape(x)  # coerce to 2-D: [prod(dims[:axis]), prod(dims[axis:])]
    if static is not None:
        flat = b.reshape(x=x, shape=np.array([int(np.prod(static[:axis])), int(np.prod(static[axis:]))], np.int32))
    else:
        flat = b.flatten2d(x=x, axis=axis)
    out = normalize(flat, 1)
    return b.reshape(x=out, shape=np.array(static, np.int32) if static is not None else b.shape(x=x))


@onnx_op("Softmax", versions=(1, 13))
def softmax(ctx: Ctx, node: Node) -> list[Value]:
    return [_softmax_like(ctx, node, log=False)]


@onnx_op("LogSoftmax", versions=(1, 13))
def log_softmax(ctx: Ctx, node: Node) -> list[Value]:
    return [_softmax_like(ctx, node, log=True)]
