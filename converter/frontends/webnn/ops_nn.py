"""WebNN convolution, pooling, normalization and resampling ops as IR ops.

Layouts: the IR's conv/pool ops are channels-first with ``oihw`` (conv) / ``iohw`` (transposed
conv) weights, so an ``nhwc`` input or another filter layout becomes IR transposes (of constants
they fold away). Normalizations are written as the spec's formulas in IR ops, because WebNN's
scale/bias/mean/variance may be graph inputs while the IR's fused norm ops want constants.
resample2d is written as per-axis gathers (and a lerp): the spec's coordinate rule (half-pixel with
``scale = outputSize / inputSize`` even when ``scales`` are given, nearest ``ceil(c - 0.5)``, i.e.
ties rounded down) matches none of the IR's resize ops in every case. (Chromium 153 rounds nearest
ties up instead: it and the spec differ where ``(o + 0.5) * in / out`` is a whole number.)
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ...ir.core import Value
from .context import Ctx
from .graph import Operator
from .registry import maps

FLOATS = ("fp32", "fp16")
NHWC_TO_NCHW = (0, 3, 1, 2)
NCHW_TO_NHWC = (0, 2, 3, 1)
#: filter layout -> the permutation that makes it the IR's layout (oihw for conv, iohw for transposed)
CONV_FILTER_PERM = {"oihw": None, "hwio": (3, 2, 0, 1), "ohwi": (0, 3, 1, 2), "ihwo": (3, 0, 1, 2)}
CONV_TRANSPOSE_FILTER_PERM = {"iohw": None, "hwoi": (3, 2, 0, 1), "ohwi": (3, 0, 1, 2)}


def _perm(ctx: Ctx, x: Value, perm: tuple[int, ...] | None) -> Value:
    return x if perm is None else ctx.b.transpose(x=x, perm=np.asarray(perm, np.int32))


def _hw(op: Operator, key: str, default: list[int]) -> list[int]:
    return list(op.options.get(key, default))


@maps("conv2d")
def conv2d(ctx: Ctx, op: Operator) -> list[Value]:
    nhwc = op.options.get("inputLayout", "nchw") == "nhwc"
    x = _perm(ctx, ctx.operand(op.args["input"], FLOATS), NHWC_TO_NCHW if nhwc else None)
    w = _perm(ctx, ctx.operand(op.args["filter"], FLOATS), CONV_FILTER_PERM[op.options.get("filterLayout", "oihw")])
    inputs = {"x": x, "weight": w, "strides": _hw(op, "strides", [1, 1]), "dilations": _hw(op, "dilations", [1, 1]),
              "pad_type": "custom", "pad": _hw(op, "padding", [0, 0, 0, 0]), "groups": op.options.get("groups", 1)}
    if "bias" in op.options:
        inputs["bias"] = ctx.operand(op.options["bias"], FLOATS)
    y = ctx.b.add_op("conv", inputs).outputs[0]
    return [_perm(ctx, y, NCHW_TO_NHWC if nhwc else None)]


@maps("convTranspose2d")
def conv_transpose2d(ctx: Ctx, op: Operator) -> list[Value]:
    nhwc = op.options.get("inputLayout", "nchw") == "nhwc"
    x = _perm(ctx, ctx.operand(op.args["input"], FLOATS), NHWC_TO_NCHW if nhwc else None)
    w = _perm(ctx, ctx.operand(op.args["filter"], FLOATS),
              CONV_TRANSPOSE_FILTER_PERM[op.options.get("filterLayout", "iohw")])
    n, _, ih, iw = ctx.shape(x)
    _, og, kh, kw = ctx.shape(w)
    groups = op.options.get("groups", 1)
    strides, dil = _hw(op, "strides", [1, 1]), _hw(op, "dilations", [1, 1])
    pad = _hw(op, "padding", [0, 0, 0, 0])
    if "outputSizes" in op.options:
        out = _hw(op, "outputSizes", [])
    else:
        opad = _hw(op, "outputPadding", [0, 0])
        out = [(i - 1) * s + (k - 1) * d + 1 - pb - pe + op_
               for i, s, k, d, pb, pe, op_ in zip((ih, iw), strides, (kh, kw), dil, pad[0::2], pad[1::2], opad)]
    inputs = {"x": x, "weight": w, "strides": strides, "dilations": dil, "pad_type": "custom", "pad": pad,
              "groups": groups, "output_shape": np.asarray([n, og * groups, *out], np.int32)}
    if "bias" in op.options:
        inputs["bias"] = ctx.operand(op.options["bias"], FLOATS)
    y = ctx.b.add_op("conv_transpose", inputs).outputs[0]
    return [_perm(ctx, y, NCHW_TO_NHWC if nhwc else None)]


_POOLS = {"averagePool2d": "avg_pool", "maxPool2d": "max_pool", "l2Pool2d": "l2_pool"}


@maps(*_POOLS)
def pool2d(ctx: Ctx, op: Operator) -> list[Value]:
    """Output sizes per the spec: ``floor`` (default) or ``ceil`` of ``1 + (n - k + b + e) / s``, or
    ``outputSizes``; average pooling averages the input cells of a window (padding excluded)."""
    nhwc = op.options.get("layout", "nchw") == "nhwc"
    x = _perm(ctx, ctx.operand(op.args["input"], FLOATS), NHWC_TO_NCHW if nhwc else None)
    _, _, h, w = ctx.shape(x)
    window = _hw(op, "windowDimensions", [h, w])
    strides, pad = _hw(op, "strides", [1, 1]), _hw(op, "padding", [0, 0, 0, 0])
    if _hw(op, "dilations", [1, 1]) != [1, 1]:
        raise ctx.unsupported("pooling with dilations has no IR form (MIL pooling has no dilations)")
    spans = [n - k + b + e for n, k, b, e in zip((h, w), window, pad[0::2], pad[1::2])]
    floor = [1 + s // st for s, st in zip(spans, strides)]
    ceil = [1 + -(-s // st) for s, st in zip(spans, strides)]
    want = _hw(op, "outputSizes", ceil if op.options.get("outputShapeRounding") == "ceil" else floor)
    ceil_mode = want != floor
    if ceil_mode and (want != ceil or pad[0] != pad[1] or pad[2] != pad[3]):
        raise ctx.unsupported(f"output sizes {want} with padding {pad}: the IR's ceil_mode needs symmetric "
                              "padding")
    inputs = {"x": x, "kernel_sizes": window, "strides": strides, "pad_type": "custom", "pad": pad,
              "ceil_mode": ceil_mode}
    if op.method == "averagePool2d":
        inputs["exclude_padding_from_average"] = True
    y = ctx.b.add_op(_POOLS[op.method], inputs).outputs[0]
    if ctx.shape(y)[2:] != tuple(want):  # the IR drops a last window starting in the end padding
        raise ctx.unsupported(f"output sizes {want} differ from the IR pooling's {list(ctx.shape(y)[2:])}")
    return [_perm(ctx, y, NCHW_TO_NHWC if nhwc else None)]


# -- normalization ---------------------------------------------------------------------------------

def _along(ctx: Ctx, v: Value, rank: int, axes: list[int]) -> Value:
    """A per-``axes`` tensor (shape ``[x.shape[a] for a in axes]``) reshaped to broadcast over x."""
    order = sorted(range(len(axes)), key=lambda i: axes[i])
    if order != list(range(len(axes))):
        v = ctx.b.transpose(x=v, perm=np.asarray(order, np.int32))
    vs = ctx.shape(v)
    shape = [1] * rank
    for a, n in zip(sorted(axes), vs):
        shape[a] = n
    return ctx.b.reshape(x=v, shape=np.asarray(shape, np.int32))


def _normalize(ctx: Ctx, x: Value, axes: list[int], eps: float, mean: Value | None = None,
               var: Value | None = None) -> Value:
    """``(x - mean) / sqrt(var + eps)``, mean and variance over ``axes`` unless given."""
    b = ctx.b
    ax = np.asarray(axes, np.int32)
    if mean is None:
        mean = b.reduce_mean(x=x, axes=ax, keep_dims=True)
    d = b.sub(x=x, y=mean)
    if var is None:
        var = b.reduce_mean(x=b.mul(x=d, y=d), axes=ax, keep_dims=True)
    return b.real_div(x=d, y=b.sqrt(x=b.add(x=var, y=ctx.const(eps, x))))


def _in_fp32(ctx: Ctx, op: Operator, body: Callable[[Value], Value]) -> list[Value]:
    """Normalizations of float16 tensors compute in float32 (as the IR's fused norm kernels do) and
    round once at the end: a float16 variance loses more than the conformance budget allows."""
    x = ctx.operand(op.args["input"], FLOATS)
    if x.type.dtype.name == "fp16":
        return [ctx.b.cast(x=body(ctx.b.cast(x=x, dtype="fp32")), dtype="fp16")]
    return [body(x)]


def _f32_like(ctx: Ctx, oid: str, x: Value) -> Value:
    v = ctx.operand(oid, FLOATS)
    return v if v.type.dtype == x.type.dtype else ctx.b.cast(x=v, dtype=x.type.dtype.name)


def _scale_bias(ctx: Ctx, y: Value, op: Operator, rank: int, axes: list[int]) -> Value:
    if "scale" in op.options:
        y = ctx.b.mul(x=y, y=_along(ctx, _f32_like(ctx, op.options["scale"], y), rank, axes))
    if "bias" in op.options:
        y = ctx.b.add(x=y, y=_along(ctx, _f32_like(ctx, op.options["bias"], y), rank, axes))
    return y


@maps("batchNormalization")
def batch_normalization(ctx: Ctx, op: Operator) -> list[Value]:
    def body(x: Value) -> Value:
        rank = len(ctx.shape(x))
        axis = op.options.get("axis", 1)
        mean = _along(ctx, _f32_like(ctx, op.args["mean"], x), rank, [axis])
        var = _along(ctx, _f32_like(ctx, op.args["variance"], x), rank, [axis])
        y = _normalize(ctx, x, [axis], op.options.get("epsilon", 1e-5), mean, var)
        return _scale_bias(ctx, y, op, rank, [axis])
    return _in_fp32(ctx, op, body)


@maps("instanceNormalization")
def instance_normalization(ctx: Ctx, op: Operator) -> list[Value]:
    channel, spatial = (3, [1, 2]) if op.options.get("layout", "nchw") == "nhwc" else (1, [2, 3])

    def body(x: Value) -> Value:
        return _scale_bias(ctx, _normalize(ctx, x, spatial, op.options.get("epsilon", 1e-5)), op, 4, [channel])
    return _in_fp32(ctx, op, body)


@maps("layerNormalization")
def layer_normalization(ctx: Ctx, op: Operator) -> list[Value]:
    def body(x: Value) -> Value:
        rank = len(ctx.shape(x))
        axes = list(op.options.get("axes", range(1, rank)))
        if not axes:  # nothing to normalize over: x - mean(x) is 0
            return _scale_bias(ctx, ctx.b.mul(x=x, y=ctx.const(0.0, x)), op, rank, [])
        return _scale_bias(ctx, _normalize(ctx, x, axes, op.options.get("epsilon", 1e-5)), op, rank, axes)
    return _in_fp32(ctx, op, body)


# -- resample2d ------------------------------------------------------------------------------------

@maps("resample2d")
def resample2d(ctx: Ctx, op: Operator) -> list[Value]:
    b = ctx.b
    x = ctx.operand(op.args["input"], FLOATS)
    shape = ctx.shape(x)
    axes = _hw(op, "axes", [2, 3])
    if "sizes" in op.options:
        sizes = _hw(op, "sizes", [])
    else:  # scales give the output size; the coordinate rule uses outputSize / inputSize (spec)
        sizes = [math.floor(shape[a] * float(s)) for a, s in zip(axes, op.options.get("scales", [1.0, 1.0]))]
    scales = [s / shape[a] for s, a in zip(sizes, axes)]
    linear = op.options.get("mode", "nearest-neighbor") == "linear"
    y = x
    for axis, size, scale in sorted(zip(axes, sizes, scales), reverse=True):  # width first, as the spec
        n = shape[axis]
        coord = np.clip((np.arange(size, dtype=np.float64) + 0.5) / scale - 0.5, 0, n - 1)
        if not linear:
            idx = np.ceil(coord - 0.5).astype(np.int32)
            y = b.gather(x=y, indices=b.const(idx), axis=axis)
            continue
        lo, hi = np.floor(coord).astype(np.int32), np.ceil(coord).astype(np.int32)
        t_shape = [1] * len(shape)
        t_shape[axis] = size
        t = (coord - lo).reshape(t_shape)
        dt = x.type.dtype.storage
        v0, v1 = b.gather(x=y, indices=b.const(lo), axis=axis), b.gather(x=y, indices=b.const(hi), axis=axis)
        y = b.add(x=b.mul(x=v0, y=b.const((1 - t).astype(dt))), y=b.mul(x=v1, y=b.const(t.astype(dt))))
    return [y if y is not x else b.identity(x=x)]
