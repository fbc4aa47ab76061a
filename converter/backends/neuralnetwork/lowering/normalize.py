"""Normalizations: batch_norm, instance_norm (``batchnorm``), layer_norm (``layerNormalization``),
l2_norm (``l2normalize``), local_response_norm (``lrn``).

Channel axis: MIL's batch_norm/instance_norm take it at axis 1 of [N, C, *D]; the ``batchnorm`` layer
at axis -3 with every axis before it batch. Rank 4 is the layer as it is; rank 3 gets a unit W
axis (expandDims, squeeze); higher ranks are reshaped to [N, C, prod(D), 1] and back when at most
one dim is symbolic (reshapeStatic takes one -1), and are written otherwise as the formula from
reductions and broadcastable layers.

Epsilons are always written: a 0 in the proto is read as a default (1e-5 batchnorm, 1e-6
l2normalize, k = 1 for lrn, by the NN frontend; the spec gives none), so an IR epsilon of exactly
0 is written as the smallest normal fp32, 2**-126: ``v + 2**-126 == v`` in fp32 for every
|v| >= 2**-102, so the result is the same unless the variance (sum of squares, LRN sum) is below that.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....errors import LoweringError
from ....formats.proto import NeuralNetwork_pb2
from ....ir.core import Op, Value
from ....ir.types import is_static_dim
from ..emitter import NetworkEmitter, op_input, rank, tensor_type
from ._common import same_precision, scalar, single
from .registry import lowering

_TINY = float(np.finfo(np.float32).tiny)


def _explicit(value: Any, what: str) -> float:
    """A parameter the NN frontend reads 0 as a default for: 0 becomes 2**-126 (module docstring)."""
    v = scalar(value, what)
    return v if v != 0 else _TINY


def _channels(x: Value) -> int:
    shape = tensor_type(x).shape
    if shape is None or len(shape) < 2 or not is_static_dim(shape[1]):
        raise LoweringError("the channel dim (axis 1) must be known at conversion time (the layer's channels)")
    return int(shape[1])


def _per_channel(e: NetworkEmitter, op: Op, key: str, channels: int) -> np.ndarray | None:
    """A [C] parameter (a constant), or None when absent."""
    if op_input(op, key) is None:
        return None
    return e.const_array(op.inputs[key], f"'{key}'").reshape(channels)


def _filled(arrays: list[np.ndarray | None], fills: list[tuple[Any, float]]) -> list[np.ndarray]:
    """`same_precision`, then each absent array as (shape, identity value) in that precision (ones
    and zeros are exact in fp16, so defaults do not turn fp16 weights into fp32)."""
    given = same_precision(*arrays)
    dt = next((a.dtype for a in given if a is not None), np.dtype(np.float32))
    return [a if a is not None else np.full(shape, value, dt) for a, (shape, value) in zip(given, fills)]


def _reshape(e: NetworkEmitter, name: str, src: str, target: list[int], dst: str) -> None:
    e.layer("reshapeStatic", name, [src], [dst]).targetShape.extend(target)


def _static_or_minus_one(dims: list[Any]) -> list[int] | None:
    """``dims`` as a reshapeStatic target: static sizes and a -1 for the one symbolic dim; None
    when two or more are symbolic (reshapeStatic infers one size only)."""
    unknown = [i for i, d in enumerate(dims) if not is_static_dim(d)]
    if len(unknown) > 1:
        return None
    return [-1 if not is_static_dim(d) else int(d) for d in dims]


def _as_nchw(e: NetworkEmitter, op: Op, x: Value, emit: Any) -> bool:
    """Run ``emit(src_blob, dst_blob, name)`` (one layer with its channel axis at -3) on x seen as rank 4:
    x itself (rank 4), x with a unit W axis (rank 3), or x reshaped to [N, C, prod(D), 1] (rank
    >= 5, at most one symbolic dim). False (nothing written) when no such view exists."""
    shape = tensor_type(x).shape
    assert shape is not None
    r = len(shape)
    out = op.outputs[0]
    if r == 4:
        emit(e.blob(x), e.define(out), op.name)
        return True
    if r == 3:
        wide, normed = e.fresh(f"{op.name}_nchw"), e.fresh(f"{op.name}_op")
        e.layer("expandDims", f"{op.name}_nchw", [e.blob(x)], [wide]).axes.extend([-1])
        emit(wide, normed, f"{op.name}_op")
        e.layer("squeeze", op.name, [normed], [e.define(out)]).axes.extend([-1])
        return True
    back = _static_or_minus_one(list(shape))
    if back is None:
        return False
    spatial = shape[2:]
    flat = int(np.prod([int(d) for d in spatial])) if all(is_static_dim(d) for d in spatial) else -1
    four = [back[0], back[1], flat, 1]
    wide, normed = e.fresh(f"{op.name}_nchw"), e.fresh(f"{op.name}_op")
    _reshape(e, f"{op.name}_nchw", e.blob(x), four, wide)
    emit(wide, normed, f"{op.name}_op")
    _reshape(e, op.name, normed, back, e.define(out))
    return True


def _batchnorm(e: NetworkEmitter, name: str, src: str, dst: str, channels: int, eps: float,
               gamma: np.ndarray, beta: np.ndarray, stats: tuple[np.ndarray, np.ndarray] | None) -> None:
    """One ``batchnorm`` layer: given mean/variance (``stats``), or instance statistics."""
    params = e.layer("batchnorm", name, [src], [dst])
    params.channels = channels
    params.epsilon = eps
    arrays = same_precision(gamma, beta, *(stats or ()))
    e.weights(params.gamma, arrays[0])
    e.weights(params.beta, arrays[1])
    if stats is None:
        params.computeMeanVar = True
        params.instanceNormalization = True
    else:
        e.weights(params.mean, arrays[2])
        e.weights(params.variance, arrays[3])


@lowering("batch_norm", note="batchnorm (channel axis -3): rank 3 with a unit axis, rank 5 reshaped to rank 4")
def _batch_norm(e: NetworkEmitter, op: Op) -> None:
    x = op.inputs["x"]
    c = _channels(x)
    eps = _explicit(e.const_param(op, "epsilon"), "epsilon")
    mean = e.const_array(op.inputs["mean"], "'mean'").reshape(c)
    var = e.const_array(op.inputs["variance"], "'variance'").reshape(c)
    gamma, beta, mean, var = _filled([_per_channel(e, op, "gamma", c), _per_channel(e, op, "beta", c), mean, var],
                                     [(c, 1.0), (c, 0.0), (c, 0.0), (c, 1.0)])

    def emit(src: str, dst: str, name: str) -> None:
        _batchnorm(e, name, src, dst, c, eps, gamma, beta, (mean, var))

    if _as_nchw(e, op, x, emit):
        return
    # two or more symbolic dims at rank >= 5: x * scale + shift per channel
    r = rank(x)
    eps64 = float(scalar(e.const_param(op, "epsilon"), "epsilon"))
    scale = gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps64)
    shift = beta.astype(np.float64) - mean.astype(np.float64) * scale
    bshape = (c,) + (1,) * (r - 2)
    scaled = e.fresh(f"{op.name}_scaled")
    e.layer("multiplyBroadcastable", f"{op.name}_scaled",
            [e.blob(x), e.load_constant(None, scale.astype(np.float32).reshape(bshape), f"{op.name}_scale")], [scaled])
    e.layer("addBroadcastable", op.name,
            [scaled, e.load_constant(None, shift.astype(np.float32).reshape(bshape), f"{op.name}_shift")],
            [e.define(op.outputs[0])])


@lowering("instance_norm", note="batchnorm with instance statistics (channel axis -3): rank 3 with a unit axis, "
                                "rank >= 5 reshaped to rank 4")
def _instance_norm(e: NetworkEmitter, op: Op) -> None:
    x = op.inputs["x"]
    c = _channels(x)
    eps = scalar(e.const_param(op, "epsilon"), "epsilon")
    given = [_per_channel(e, op, "gamma", c), _per_channel(e, op, "beta", c)]
    gamma, beta = _filled(given, [(c, 1.0), (c, 0.0)])

    def emit(src: str, dst: str, name: str) -> None:
        _batchnorm(e, name, src, dst, c, _explicit(eps, "epsilon"), gamma, beta, None)

    if _as_nchw(e, op, x, emit):
        return
    r = rank(x)
    bshape = [c] + [1] * (r - 2)
    gb = [None if v is None else v.reshape(bshape) for v in given]
    _normalize_by_reductions(e, op, e.blob(x), list(range(2, r)), eps, *gb)


def _normalize_by_reductions(e: NetworkEmitter, op: Op, src: str, axes: list[int], eps: float,
                             gamma: np.ndarray | None, beta: np.ndarray | None) -> None:
    """``(x - mean) * rsqrt(var + eps) * gamma + beta`` over ``axes`` from reduceMean, broadcastable
    arithmetic and unary RSQRT (whose epsilon is read as written, 0 included); gamma/beta are
    shaped to broadcast against x."""
    n = op.name

    def reduce_mean(name: str, blob: str) -> str:
        dst = e.fresh(name)
        params = e.layer("reduceMean", name, [blob], [dst])
        params.axes.extend(axes)
        params.keepDims = True
        return dst

    def binary(kind: str, name: str, a: str, b: str, dst: str | None = None) -> str:
        dst = dst or e.fresh(name)
        e.layer(kind, name, [a, b], [dst])
        return dst

    steps = [("multiplyBroadcastable", gamma, "gamma"), ("addBroadcastable", beta, "beta")]
    steps = [s for s in steps if s[1] is not None]
    mean = reduce_mean(f"{n}_mean", src)
    centered = binary("subtractBroadcastable", f"{n}_centered", src, mean)
    square = binary("multiplyBroadcastable", f"{n}_square", centered, centered)
    var = reduce_mean(f"{n}_variance", square)
    rstd = e.fresh(f"{n}_rstd")
    unary = e.layer("unary", f"{n}_rstd", [var], [rstd])
    unary.type = NeuralNetwork_pb2.UnaryFunctionLayerParams.RSQRT
    unary.scale = 1.0
    unary.epsilon = eps
    out = e.define(op.outputs[0])
    cur = binary("multiplyBroadcastable", f"{n}_normalized", centered, rstd, None if steps else out)
    for i, (kind, array, what) in enumerate(steps):
        const = e.load_constant(None, np.asarray(array), f"{n}_{what}")
        cur = binary(kind, f"{n}_{what}_op", cur, const, out if i == len(steps) - 1 else None)


@lowering("layer_norm", note="layerNormalization over the trailing axes; other axes transposed to the end "
                             "and back; symbolic normalized dims: reductions")
def _layer_norm(e: NetworkEmitter, op: Op) -> None:
    """``layerNormalization`` (spec 4) normalizes the last len(normalizedShape) axes with
    ``sqrt(var + eps)``, exactly MIL's formula (mvn, which coremltools uses, adds eps to the
    standard deviation instead)."""
    x = op.inputs["x"]
    shape = tensor_type(x).shape
    if shape is None:
        raise LoweringError("x has no known rank")
    r = len(shape)
    raw_axes = e.const_param(op, "axes")
    axes = sorted({int(a) % r for a in np.asarray(raw_axes).reshape(-1)}) if r else []
    eps = scalar(e.const_param(op, "epsilon"), "epsilon")
    gamma = e.const(op_input(op, "gamma"))
    beta = e.const(op_input(op, "beta"))
    for key, val in (("gamma", gamma), ("beta", beta)):
        if op_input(op, key) is not None and val is None:
            raise LoweringError(f"'{key}' must be known at conversion time (a layer weight)")
    if not axes:
        _layer_norm_of_single_elements(e, op, eps, gamma, beta)
        return
    known = next((np.asarray(p).shape for p in (gamma, beta) if p is not None), None)
    normalized = [int(shape[a]) if is_static_dim(shape[a]) else (known[i] if known else None)
                  for i, a in enumerate(axes)]
    if any(d is None for d in normalized):  # symbolic dims and no gamma/beta to size them
        _normalize_by_reductions(e, op, e.blob(x), axes, eps, None, None)
        return
    k = len(axes)
    g, b = _filled([None if p is None else np.asarray(p).reshape(normalized) for p in (gamma, beta)],
                   [(normalized, 1.0), (normalized, 0.0)])

    def emit(src: str, dst: str, name: str) -> None:
        params = e.layer("layerNormalization", name, [src], [dst])
        params.normalizedShape.extend(normalized)
        params.eps = eps  # read as written (0 included)
        e.weights(params.gamma, g)
        e.weights(params.beta, b)

    if axes == list(range(r - k, r)):
        emit(e.blob(x), e.define(op.outputs[0]), op.name)
        return
    perm = [i for i in range(r) if i not in axes] + axes
    inverse = [int(i) for i in np.argsort(perm)]
    moved, normed = e.fresh(f"{op.name}_axes_last"), e.fresh(f"{op.name}_op")
    e.layer("transpose", f"{op.name}_axes_last", [e.blob(x)], [moved]).axes.extend(perm)
    emit(moved, normed, f"{op.name}_op")
    e.layer("transpose", op.name, [normed], [e.define(op.outputs[0])]).axes.extend(inverse)


def _layer_norm_of_single_elements(e: NetworkEmitter, op: Op, eps: float, gamma: Any, beta: Any) -> None:
    """Empty ``axes``: every element is its own mean, so the result is ``0 / sqrt(eps)`` (NaN for
    eps = 0, or where x is infinite or NaN) times gamma plus beta: x * 0 * (1 / sqrt(eps))."""
    n = op.name
    with np.errstate(divide="ignore"):
        inv = float(np.float32(1) / np.sqrt(np.float32(eps)))
    zero = e.fresh(f"{n}_centered")
    e.layer("multiply", f"{n}_centered", [e.blob(op.inputs["x"])], [zero]).alpha = 0.0
    steps = [("multiplyBroadcastable", gamma, "gamma"), ("addBroadcastable", beta, "beta")]
    steps = [s for s in steps if s[1] is not None]
    out = e.define(op.outputs[0])
    cur = e.fresh(f"{n}_normalized") if steps else out
    e.layer("multiply", f"{n}_normalized", [zero], [cur]).alpha = inv
    for i, (kind, array, what) in enumerate(steps):
        dst = out if i == len(steps) - 1 else e.fresh(f"{n}_{what}_op")
        e.layer(kind, f"{n}_{what}_op", [cur, e.load_constant(None, np.asarray(array), f"{n}_{what}")], [dst])
        cur = dst


@lowering("l2_norm")
def _l2_norm(e: NetworkEmitter, op: Op) -> None:
    """``x / sqrt(sum(x**2) + eps)`` over the last three axes, the rest batch: the layer's definition."""
    single(e, op, "l2normalize").epsilon = _explicit(e.const_param(op, "epsilon"), "epsilon")


@lowering("local_response_norm")
def _local_response_norm(e: NetworkEmitter, op: Op) -> None:
    """``x / (k + alpha / size * sum(x**2 over size channels))**beta`` on axis -3: the layer's
    parameters one to one (the window of an even size is placed as MIL places it: the NN frontend
    reads the layer back as this op, and coremltools lowers MIL's op to this layer unchanged)."""
    size = int(np.asarray(e.const_param(op, "size")))
    if size < 1:
        raise LoweringError(f"size must be >= 1, got {size}")
    k = scalar(e.const_param(op, "k"), "k")
    if k < 0:
        raise LoweringError(f"k must be >= 0 for the lrn layer, got {k}")
    params = single(e, op, "lrn")
    params.alpha = scalar(e.const_param(op, "alpha"), "alpha")
    params.beta = scalar(e.const_param(op, "beta"), "beta")
    params.localSize = size
    params.k = _explicit(k, "k")
