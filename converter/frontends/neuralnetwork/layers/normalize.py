"""Normalization, softmax and reduction layers: batchnorm, mvn, l2normalize, lrn, softmax, softmaxND,
layerNormalization, the legacy reduce, and the N-D reductions reduceL1 ... reduceLogSumExp.

Axes are counted from the end (C = -3, H = -2, W = -1) and every axis before -3 is batch, so the
rank-5 [Seq, Batch, C, H, W] tensors of legacy networks and the N-D tensors of later ones follow one
rule. A parameter left at 0 is read as: batchnorm epsilon 1e-5; mvn, l2normalize and reduce LOGSUM
epsilon 1e-6; lrn k 1. The spec gives no default for these fields (its comments are silent; the
values are this converter's choice, near coremltools' builder defaults: 1e-5 for batchnorm, mvn
and l2normalize, 1e-6 for reduce, k 1.0), so a model that writes its epsilon is unaffected.

MIL's batch_norm and instance_norm take the channel axis 1 of [N, C, H, W]: they are used where x
is that, or becomes it by adding or removing one unit axis; other shapes (a flexible sequence axis)
get the same formula from reductions and elementwise ops.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ....formats.proto import NeuralNetwork_pb2
from ....ir.core import Value
from ....ir.types import is_static_dim
from ..context import LayerContext
from ..registry import lowers

_F32 = np.float32


def _input_of_rank(ctx: LayerContext, low: int) -> tuple[Value, tuple]:
    ctx.expect_inputs(1)
    x = ctx.input()
    shape = ctx.shape(x)
    if len(shape) < low:
        raise ctx.fail(f"input must have rank >= {low}, has rank {len(shape)}")
    return x, shape


def _has_nchw_view(shape: tuple) -> bool:
    """Whether x is [N, C, H, W] up to one unit axis: rank 4, rank 3, or rank 5 with a unit axis 0."""
    return len(shape) in (3, 4) or (len(shape) == 5 and is_static_dim(shape[0]) and int(shape[0]) == 1)


def _in_nchw(ctx: LayerContext, x: Value, op: Callable[[Value, str], Value]) -> Value:
    """``op`` (channel axis 1 of a rank-4 input) applied to x seen as [N, C, H, W] (see
    _has_nchw_view): a unit batch axis added to rank 3, the unit axis 0 of rank 5 removed."""
    rank = len(ctx.shape(x))
    b, n = ctx.b, ctx.name
    if rank == 4:
        return op(x, n)
    if rank == 3:
        y = op(b.expand_dims(x=x, axes=[0], name=f"{n}_nchw"), f"{n}_op")
        return b.squeeze(x=y, axes=[0], name=n)
    y = op(b.squeeze(x=x, axes=[0], name=f"{n}_nchw"), f"{n}_op")
    return b.expand_dims(x=y, axes=[0], name=n)


def _centered_variance(ctx: LayerContext, x: Value, axes: list[int], name: str) -> tuple[Value, Value]:
    """x - mean and the population variance over ``axes`` (kept as unit axes)."""
    b = ctx.b
    mean = b.reduce_mean(x=x, axes=axes, keep_dims=True, name=f"{name}_mean")
    centered = b.sub(x=x, y=mean, name=f"{name}_centered")
    square = b.mul(x=centered, y=centered, name=f"{name}_square")
    return centered, b.reduce_mean(x=square, axes=axes, keep_dims=True, name=f"{name}_variance")


# ---------------------------------------------------------------------------------------------
# batchnorm, mvn, l2normalize, lrn, layerNormalization


@lowers("batchnorm")
def batchnorm(ctx: LayerContext) -> Value:
    """``gamma * (x - mean) / sqrt(var + epsilon) + beta`` per channel (axis -3). With
    ``computeMeanVar`` the statistics come from the input: per instance and channel over H, W
    (``instanceNormalization``), or per channel over every other axis (the whole batch); the
    ``mean``/``variance`` parameters are then ignored."""
    p = ctx.params
    x, shape = _input_of_rank(ctx, 3)
    c = int(p.channels)
    if c <= 0:
        raise ctx.fail(f"channels must be positive, is {c}", field="channels")
    if is_static_dim(shape[-3]) and int(shape[-3]) != c:
        raise ctx.fail(f"input has {shape[-3]} channels (axis -3), the layer declares {c}", field="channels")
    eps = _F32(p.epsilon or 1e-5)
    b, n = ctx.b, ctx.name
    rank = len(shape)
    nchw = _has_nchw_view(shape)
    if p.computeMeanVar and p.instanceNormalization and nchw:
        gamma, beta = ctx.weight(p.gamma, (c,), "gamma"), ctx.weight(p.beta, (c,), "beta")
        return _in_nchw(ctx, x, lambda v, name: b.instance_norm(x=v, gamma=gamma, beta=beta, epsilon=eps, name=name))
    if p.computeMeanVar:
        # per instance over H, W, or per channel over every other axis (the whole batch)
        axes = [-2, -1] if p.instanceNormalization else [i for i in range(rank) if i != rank - 3]
        centered, var = _centered_variance(ctx, x, axes, n)
        normalized = b.mul(x=centered, y=b.rsqrt(x=var, epsilon=eps, name=f"{n}_rstd"), name=f"{n}_normalized")
        gamma = ctx.weight_array(p.gamma, (c,), "gamma").reshape(c, 1, 1)
        beta = ctx.weight_array(p.beta, (c,), "beta").reshape(c, 1, 1)
        return b.add(x=b.mul(x=normalized, y=gamma, name=f"{n}_scaled"), y=beta, name=n)
    if nchw:
        params = {k: ctx.weight(getattr(p, k), (c,), k) for k in ("mean", "variance", "gamma", "beta")}
        return _in_nchw(ctx, x, lambda v, name: b.batch_norm(x=v, **params, epsilon=eps, name=name))
    # other leading axes: the same formula as one scale and one shift per channel
    mean, var, gamma, beta = (ctx.weight_array(getattr(p, k), (c,), k).astype(np.float64)
                              for k in ("mean", "variance", "gamma", "beta"))
    scale = gamma / np.sqrt(var + float(eps))
    shift = beta - mean * scale
    scaled = b.mul(x=x, y=scale.astype(_F32).reshape(c, 1, 1), name=f"{n}_scaled")
    return b.add(x=scaled, y=shift.astype(_F32).reshape(c, 1, 1), name=n)


@lowers("mvn")
def mvn(ctx: LayerContext) -> Value:
    """``x - mean``, divided by ``sqrt(var) + epsilon`` when ``normalizeVariance``; statistics per
    channel over H, W, or over C, H, W together (``acrossChannels``); leading axes are batch.
    The spec does not place epsilon; this is Caffe's MVN (the layer's origin) and ONNX's."""
    p = ctx.params
    x, _ = _input_of_rank(ctx, 3)
    b, n = ctx.b, ctx.name
    axes = [-3, -2, -1] if p.acrossChannels else [-2, -1]
    if not p.normalizeVariance:
        mean = b.reduce_mean(x=x, axes=axes, keep_dims=True, name=f"{n}_mean")
        return b.sub(x=x, y=mean, name=n)
    centered, var = _centered_variance(ctx, x, axes, n)
    std = b.add(x=b.sqrt(x=var, name=f"{n}_std"), y=_F32(p.epsilon or 1e-6), name=f"{n}_std_eps")
    return b.real_div(x=centered, y=std, name=n)


@lowers("l2normalize")
def l2normalize(ctx: LayerContext) -> Value:
    """``x / sqrt(sum(x**2) + epsilon)``, the sum over C, H, W (axes -3..-1) of each batch item."""
    x, _ = _input_of_rank(ctx, 3)
    return ctx.b.l2_norm(x=x, epsilon=_F32(ctx.params.epsilon or 1e-6), name=ctx.name)


@lowers("lrn")
def lrn(ctx: LayerContext) -> Value:
    """``x / (k + alpha / localSize * sum(x**2 over localSize channels))**beta``: the divisor is
    localSize, as in MIL's local_response_norm and the N-D spec text (an older text says C)."""
    p = ctx.params
    x, _ = _input_of_rank(ctx, 3)
    size = int(p.localSize)
    if size < 1:
        raise ctx.fail(f"localSize must be >= 1, is {size}", field="localSize")
    if p.k < 0:
        raise ctx.fail(f"k must be positive, is {p.k}", field="k")
    return ctx.b.local_response_norm(x=x, size=np.int32(size), alpha=_F32(p.alpha), beta=_F32(p.beta),
                                     k=_F32(p.k or 1.0), name=ctx.name)


@lowers("layerNormalization")
def layer_normalization(ctx: LayerContext) -> Value:
    """``gamma * (x - mean) / sqrt(var + eps) + beta`` over the last len(normalizedShape) axes."""
    p = ctx.params
    norm = [int(d) for d in p.normalizedShape]
    if not norm or any(d <= 0 for d in norm):
        raise ctx.fail(f"normalizedShape must be a non-empty list of positive sizes, is {norm}",
                       field="normalizedShape")
    x, shape = _input_of_rank(ctx, len(norm))
    tail = shape[len(shape) - len(norm):]
    if any(is_static_dim(d) and int(d) != want for d, want in zip(tail, norm)):
        raise ctx.fail(f"input's last axes {list(tail)} differ from normalizedShape {norm}", field="normalizedShape")
    return ctx.b.layer_norm(x=x, axes=list(range(-len(norm), 0)), gamma=ctx.weight(p.gamma, norm, "gamma"),
                            beta=ctx.weight(p.beta, norm, "beta"), epsilon=_F32(p.eps), name=ctx.name)


# ---------------------------------------------------------------------------------------------
# softmax


@lowers("softmax")
def softmax(ctx: LayerContext) -> Value:
    """Softmax over the channel axis, -3."""
    x, _ = _input_of_rank(ctx, 3)
    return ctx.b.softmax(x=x, axis=-3, name=ctx.name)


@lowers("softmaxND")
def softmax_nd(ctx: LayerContext) -> Value:
    """Softmax over ``axis`` (negative counts from the end)."""
    x, shape = _input_of_rank(ctx, 1)
    axis = int(ctx.params.axis)
    if not -len(shape) <= axis < len(shape):
        raise ctx.fail(f"axis {axis} is out of range for rank {len(shape)}", field="axis")
    return ctx.b.softmax(x=x, axis=axis, name=ctx.name)


# ---------------------------------------------------------------------------------------------
# reductions

_R = NeuralNetwork_pb2.ReduceLayerParams
_LEGACY_AXES = {_R.CHW: [-3, -2, -1], _R.HW: [-2, -1], _R.C: [-3], _R.H: [-2], _R.W: [-1]}
_LEGACY_OPS = {_R.SUM: "reduce_sum", _R.AVG: "reduce_mean", _R.PROD: "reduce_prod",
               _R.SUMSQUARE: "reduce_sum_square", _R.L1: "reduce_l1_norm", _R.L2: "reduce_l2_norm",
               _R.MAX: "reduce_max", _R.MIN: "reduce_min"}


@lowers("reduce")
def reduce(ctx: LayerContext) -> Value:
    """Reduction over CHW, HW, C, H or W (axes from the end), reduced axes kept as 1. LOGSUM is
    ``sum(log(x + epsilon))`` (the spec's formula, not log(sum(x))); ARGMAX (one axis only) gives
    the index of the first maximum as a float."""
    p = ctx.params
    if p.axis not in _LEGACY_AXES:
        raise ctx.fail(f"unknown reduce axis {p.axis}", field="axis")
    axes = _LEGACY_AXES[p.axis]
    x, _ = _input_of_rank(ctx, -min(axes))
    b, n = ctx.b, ctx.name
    if p.mode == _R.ARGMAX:
        if len(axes) != 1:
            raise ctx.fail(f"ARGMAX reduces one axis (C, H or W), not {_R.ReduceAxis.Name(p.axis)}", field="axis")
        index = b.reduce_argmax(x=x, axis=axes[0], keep_dims=True, name=f"{n}_index")
        return b.cast(x=index, dtype="fp32", name=n)
    if p.mode == _R.LOGSUM:
        logs = b.log(x=x, epsilon=_F32(p.epsilon or 1e-6), name=f"{n}_log")
        return b.reduce_sum(x=logs, axes=axes, keep_dims=True, name=n)
    if p.mode not in _LEGACY_OPS:
        raise ctx.fail(f"unknown reduce mode {p.mode}", field="mode")
    return getattr(b, _LEGACY_OPS[p.mode])(x=x, axes=axes, keep_dims=True, name=n)


_ND_OPS = {"reduceL1": "reduce_l1_norm", "reduceL2": "reduce_l2_norm", "reduceMax": "reduce_max",
           "reduceMin": "reduce_min", "reduceSum": "reduce_sum", "reduceProd": "reduce_prod",
           "reduceMean": "reduce_mean", "reduceLogSum": "reduce_log_sum", "reduceSumSquare": "reduce_sum_square",
           "reduceLogSumExp": "reduce_log_sum_exp"}


@lowers(*_ND_OPS)
def reduce_nd(ctx: LayerContext) -> Value:
    """Reduction over ``axes`` (every axis with ``reduceAll``), squeezed unless ``keepDims``. A
    reduction to a scalar has shape [1] (NeuralNetwork tensors have rank >= 1). logSum is
    log(sum(x)). Empty axes without reduceAll name no reduction: rejected, as coremltools does."""
    p = ctx.params
    x, shape = _input_of_rank(ctx, 1)
    rank = len(shape)
    b, n = ctx.b, ctx.name
    if p.reduceAll:
        axes, reduced = None, rank
    else:
        axes = [int(a) for a in p.axes]
        if not axes:
            raise ctx.fail("axes is empty and reduceAll is false", field="axes")
        if any(not -rank <= a < rank for a in axes):
            raise ctx.fail(f"axes {axes} out of range for rank {rank}", field="axes")
        if len({a % rank for a in axes}) != len(axes):
            raise ctx.fail(f"axes {axes} repeat an axis", field="axes")
        reduced = len(axes)
    op = getattr(b, _ND_OPS[ctx.kind])
    if p.keepDims or reduced < rank:
        return op(x=x, axes=axes, keep_dims=bool(p.keepDims), name=n)
    scalar = op(x=x, axes=axes, keep_dims=False, name=f"{n}_scalar")
    return b.reshape(x=scalar, shape=[1], name=n)
