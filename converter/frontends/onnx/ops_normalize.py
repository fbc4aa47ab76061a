"""LRN, GroupNormalization, RMSNormalization, MeanVarianceNormalization, LpNormalization.

Written out in reductions where MIL's ops normalize other axes or differ in form:

- LRN: MIL's ``local_response_norm`` sums the window ``[c - size//2, c + (size-1)//2]``; ONNX's is
  ``[c - floor((size-1)/2), c + ceil((size-1)/2)]``. They agree for odd sizes; for even sizes
  ONNX's window is MIL's on the channel-reversed input, so the op runs between two ``reverse``.
  MIL's channel axis is -3: inputs of rank other than 4 are reshaped to [N, C, prod(rest), 1].
- GroupNormalization: mean and variance over each group of channels ([N, G, -1]); scale and bias
  per channel (opset 21) or, at opset 18, per group (a scale of G values covers the channels of its
  group). ``stash_type`` 1 (fp32) computes an fp16 input in fp32.
- RMSNormalization: x / sqrt(mean(x^2 over axes [axis, rank)) + epsilon) * scale.
- MeanVarianceNormalization: (x - mean) / (sqrt(E[x^2] - mean^2) + 1e-9) as ONNX's function body.
- LpNormalization: x / (sum |x|^p)^(1/p) along ``axis`` (p 1 or 2), 0 where the norm is 0.
"""

from __future__ import annotations

import numpy as np

from ...ir.core import Value
from ...ir.types import is_static_dim
from .context import FLOATS, Ctx, Node, normalize_axis
from .registry import onnx_op
from .shape_util import dims, reshape_to


def _in_fp32(ctx: Ctx, x: Value, stash: bool = True) -> tuple[Value, str]:
    dt = x.type.dtype.name
    return (ctx.b.cast(x=x, dtype="fp32") if stash and dt == "fp16" else x), dt


def _back(ctx: Ctx, y: Value, dt: str) -> Value:
    return y if y.type.dtype.name == dt else ctx.b.cast(x=y, dtype=dt)


def _same_dtype(ctx: Ctx, v: Value, like: Value) -> Value:
    return v if v.type.dtype == like.type.dtype else ctx.b.cast(x=v, dtype=like.type.dtype.name)


@onnx_op("LRN", versions=(1, 13))
def lrn(ctx: Ctx, node: Node) -> list[Value]:
    b = ctx.b
    x = ctx.input(0, FLOATS)
    size = int(ctx.required_attr("size"))
    if size < 1:
        raise ctx.format_error(f"size must be >= 1, got {size}")
    shape = dims(x)
    if len(shape) < 3:
        raise ctx.format_error(f"input must have rank >= 3, has {len(shape)}")
    y = x if len(shape) == 4 else reshape_to(ctx, x, [shape[0], shape[1], -1, 1])
    if size % 2 == 0:
        y = b.reverse(x=y, axes=[1])
    y = b.local_response_norm(x=y, size=np.int32(size), alpha=ctx.const(float(ctx.attr("alpha", 1e-4)), y),
                              beta=ctx.const(float(ctx.attr("beta", 0.75)), y),
                              k=ctx.const(float(ctx.attr("bias", 1.0)), y))
    if size % 2 == 0:
        y = b.reverse(x=y, axes=[1])
    return [y if len(shape) == 4 else reshape_to(ctx, y, shape)]


def _channel_param(ctx: Ctx, p: Value, rank: int) -> Value:
    """A [C] vector shaped [C, 1, ...] to broadcast over [N, C, ...]."""
    return ctx.b.reshape(x=p, shape=np.asarray([-1] + [1] * (rank - 2), np.int32))


@onnx_op("GroupNormalization", versions=(18, 21))
def group_normalization(ctx: Ctx, node: Node) -> list[Value]:
    b = ctx.b
    x0 = ctx.input(0, FLOATS)
    groups = int(ctx.required_attr("num_groups"))
    eps = float(ctx.attr("epsilon", 1e-5))
    stash = int(ctx.attr("stash_type", 1) or 1) == 1
    x, dt = _in_fp32(ctx, x0, stash)
    shape = dims(x)
    if len(shape) < 3:
        raise ctx.format_error(f"input must have rank >= 3, has {len(shape)}")
    channels = shape[1]
    if not is_static_dim(channels) or channels % groups:
        raise ctx.unsupported(f"{channels} channels in {groups} groups: the channel count must be a known multiple")
    grouped = reshape_to(ctx, x, [shape[0], groups, -1])
    mean = b.reduce_mean(x=grouped, axes=[2], keep_dims=True)
    centered = b.sub(x=grouped, y=mean)
    var = b.reduce_mean(x=b.mul(x=centered, y=centered), axes=[2], keep_dims=True)
    y = reshape_to(ctx, b.mul(x=centered, y=b.rsqrt(x=var, epsilon=ctx.const(eps, var))), shape)
    scale, bias = _same_dtype(ctx, ctx.input(1, FLOATS), y), _same_dtype(ctx, ctx.input(2, FLOATS), y)
    if node.version == 18:
        scale, bias = (_per_channel(ctx, p, groups, channels) for p in (scale, bias))
    y = b.add(x=b.mul(x=y, y=_channel_param(ctx, scale, len(shape))), y=_channel_param(ctx, bias, len(shape)))
    return [_back(ctx, y, dt)]


def _per_channel(ctx: Ctx, p: Value, groups: int, channels: int) -> Value:
    """Opset 18 gives scale and bias per group: each covers the channels of its group."""
    n = dims(p)[0]
    if n == channels:
        return p
    if n != groups:
        raise ctx.format_error(f"scale and bias must hold {groups} (per group) values, hold {n}")
    tiled = ctx.b.tile(x=ctx.b.expand_dims(x=p, axes=[1]), reps=[1, channels // groups])
    return ctx.b.reshape(x=tiled, shape=np.asarray([channels], np.int32))


@onnx_op("RMSNormalization", versions=(23, 23))
def rms_normalization(ctx: Ctx, node: Node) -> list[Value]:
    b = ctx.b
    x0 = ctx.input(0, FLOATS)
    stash = int(ctx.attr("stash_type", 1) or 1) == 1
    x, dt = _in_fp32(ctx, x0, stash)
    rank = ctx.rank(x)
    axis = normalize_axis(ctx, int(ctx.attr("axis", -1)), rank)
    ms = b.reduce_mean(x=b.mul(x=x, y=x), axes=list(range(axis, rank)), keep_dims=True)
    y = b.mul(x=x, y=b.rsqrt(x=ms, epsilon=ctx.const(float(ctx.attr("epsilon", 1e-5)), ms)))
    y = _back(ctx, y, dt)
    return [b.mul(x=y, y=_same_dtype(ctx, ctx.input(1, FLOATS), y))]


@onnx_op("MeanVarianceNormalization", versions=(9, 13))
def mean_variance_normalization(ctx: Ctx, node: Node) -> list[Value]:
    b = ctx.b
    x = ctx.input(0, FLOATS)
    rank = ctx.rank(x)
    axes = sorted({normalize_axis(ctx, int(a), rank) for a in ctx.attr("axes", [0, 2, 3])})
    mean = b.reduce_mean(x=x, axes=axes, keep_dims=True)
    var = b.sub(x=b.reduce_mean(x=b.mul(x=x, y=x), axes=axes, keep_dims=True), y=b.mul(x=mean, y=mean))
    std = b.add(x=b.sqrt(x=var), y=ctx.const(1e-9, x))
    return [b.real_div(x=b.sub(x=x, y=mean), y=std)]


@onnx_op("LpNormalization", versions=(1, 22))
def lp_normalization(ctx: Ctx, node: Node) -> list[Value]:
    b = ctx.b
    x = ctx.input(0, FLOATS)
    axis = normalize_axis(ctx, int(ctx.attr("axis", -1)), ctx.rank(x))
    p = int(ctx.attr("p", 2))
    if p == 1:
        norm = b.reduce_l1_norm(x=x, axes=[axis], keep_dims=True)
    elif p == 2:
        norm = b.reduce_l2_norm(x=x, axes=[axis], keep_dims=True)
    else:
        raise ctx.format_error(f"p must be 1 or 2, not {p}")
    zero = ctx.const(0.0, x)
    is_zero = b.equal(x=norm, y=zero)
    safe = b.select(cond=is_zero, a=ctx.const(1.0, x), b=norm)
    return [b.select(cond=is_zero, a=zero, b=b.real_div(x=x, y=safe))]
