"""Conv/linear family patterns (converter/passes/fusions/conv_family.py): ``x`` reshaped into the
layout the pattern needs ([1, C, 1, W] for convs and pools, [M, K] for matmuls), the decomposed
form with random constants (distinct per channel; groups > 1 where the channels allow), and
reshaped back to ``x``'s type. The conv + batch_norm / scale / bias and matmul + add fusions round
differently from the original (tolerances below); the others are exact."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from converter.ir.builder import Builder
from converter.ir.core import Value
from converter.ir.opdef import opset_index
from converter.ir.types import TensorType, is_static_dim

from . import Sprinkle

MAX_ELEMENTS = 48
INEXACT = {"rtol": 1e-4, "atol": 1e-5}


def _size(x: Value) -> int | None:
    t = x.type
    if not isinstance(t, TensorType) or t.shape is None or not all(is_static_dim(d) for d in t.shape):
        return None
    n = math.prod(int(d) for d in t.shape)
    return n if 0 < n <= MAX_ELEMENTS else None


def _back(b: Builder, y: Value, x: Value) -> Value:
    return b.reshape(x=y, shape=np.asarray([int(d) for d in x.type.shape], np.int32))


def _rng(draw) -> np.random.Generator:
    return np.random.default_rng(draw(st.integers(0, 2**31)))


def _channels(n: int, draw) -> tuple[int, int]:
    """(C, groups): C divides n, groups divides C."""
    c = draw(st.sampled_from([d for d in (1, 2, 3, 4, 6) if n % d == 0]))
    return c, draw(st.sampled_from([g for g in (1, 2, 3) if c % g == 0]))


def _nchw(b: Builder, x: Value, c: int, n: int) -> Value:
    return b.reshape(x=x, shape=np.asarray([1, c, 1, n // c], np.int32))


def _bn(b: Builder, y: Value, c: int, rng: np.random.Generator) -> Value:
    return b.batch_norm(x=y, mean=b.const(rng.normal(0.2, 0.5, c).astype(np.float32)),
                        variance=b.const(rng.uniform(0.3, 2.0, c).astype(np.float32)),
                        gamma=b.const(rng.uniform(0.4, 1.6, c).astype(np.float32)),
                        beta=b.const(rng.normal(-0.1, 0.6, c).astype(np.float32)),
                        epsilon=b.const(np.float32(rng.uniform(0.001, 0.05))))


def _conv(b: Builder, y: Value, c: int, groups: int, rng: np.random.Generator, draw, *, bias: bool) -> Value:
    k = draw(st.sampled_from([1, 2, 3]))
    w = rng.normal(0, 0.6, (c, c // groups, 1, k)).astype(np.float32)
    return b.conv(x=y, weight=b.const(w), bias=b.const(rng.normal(0, 0.5, c).astype(np.float32)) if bias else None,
                  pad_type="custom", pad=[0, 0, (k - 1) // 2, k // 2], groups=groups)


def conv_batchnorm(b: Builder, x: Value, draw) -> Value | None:
    n = _size(x)
    if n is None:
        return None
    c, g = _channels(n, draw)
    rng = _rng(draw)
    y = _conv(b, _nchw(b, x, c, n), c, g, rng, draw, bias=draw(st.booleans()))
    return _back(b, _bn(b, y, c, rng), x)


def conv_transpose_batchnorm(b: Builder, x: Value, draw) -> Value | None:
    n = _size(x)
    if n is None:
        return None
    c, g = _channels(n, draw)
    rng = _rng(draw)
    w = rng.normal(0, 0.6, (c, c // g, 1, 1)).astype(np.float32)
    y = b.conv_transpose(x=_nchw(b, x, c, n), weight=b.const(w), groups=g)
    return _back(b, _bn(b, y, c, rng), x)


def conv_scale_bias(b: Builder, x: Value, draw) -> Value | None:
    n = _size(x)
    if n is None:
        return None
    c, g = _channels(n, draw)
    rng = _rng(draw)
    y = _conv(b, _nchw(b, x, c, n), c, g, rng, draw, bias=draw(st.booleans()))
    y = b.mul(x=b.const(rng.uniform(0.5, 2.0, (c, 1, 1)).astype(np.float32)), y=y)
    shift = b.const(rng.normal(0, 1, (1, c, 1, 1)).astype(np.float32))
    form = draw(st.sampled_from(["conv - c", "c + conv", "c - conv"]))
    if form == "conv - c":
        y = b.sub(x=y, y=shift)
    elif form == "c + conv":
        y = b.add(x=shift, y=y)
    else:
        y = b.sub(x=shift, y=y)
    return _back(b, y, x)


def matmul_add(b: Builder, x: Value, draw) -> Value | None:
    n = _size(x)
    if n is None:
        return None
    k = draw(st.sampled_from([d for d in (1, 2, 3, 4) if n % d == 0]))
    rng = _rng(draw)
    w = rng.normal(0, 0.6, (k, k)).astype(np.float32)
    transpose_y = draw(st.booleans())
    y = b.matmul(x=b.reshape(x=x, shape=np.asarray([n // k, k], np.int32)), y=b.const(w), transpose_y=transpose_y)
    return _back(b, b.add(x=y, y=b.const(rng.normal(0, 1, k).astype(np.float32))), x)


def transpose_matmul(b: Builder, x: Value, draw) -> Value | None:
    n = _size(x)
    if n is None:
        return None
    a = draw(st.sampled_from([d for d in (1, 2, 3, 4) if n % d == 0]))
    m = b.reshape(x=x, shape=np.asarray([a, n // a], np.int32))
    w = _rng(draw).normal(0, 0.6, (a, a)).astype(np.float32)
    if draw(st.booleans()):  # x^T @ w: [n/a, a] @ [a, a]
        y = b.matmul(x=b.transpose(x=m, perm=[1, 0]), y=b.const(w))
    else:  # w @ (x^T)^T with transpose_y: [a, a] @ [a, n/a]
        y = b.matmul(x=b.const(w), y=b.transpose(x=m, perm=[1, 0]), transpose_y=True)
    return _back(b, y, x)


def _pad_window(kind: str):
    def make(b: Builder, x: Value, draw) -> Value | None:
        n = _size(x)
        if n is None:
            return None
        before = draw(st.integers(0, 2))
        p = b.pad(x=b.reshape(x=x, shape=np.asarray([1, 1, 1, n], np.int32)), pad=[0, 0, before, 2 - before],
                  constant_val=np.float32(-np.inf if kind == "max_pool" else 0.0))
        if kind == "conv":
            w = _rng(draw).normal(0, 0.6, (1, 1, 1, 3)).astype(np.float32)
            y = b.conv(x=p, weight=b.const(w))
        else:
            y = getattr(b, kind)(x=p, kernel_sizes=[1, 3], strides=[1, 1], pad_type="valid")
        return _back(b, y, x)

    return make


def requantize(b: Builder, x: Value, draw) -> Value | None:
    if opset_index(b.opset) < opset_index("iOS17") or _size(x) is None:
        return None
    rng = _rng(draw)
    dt = draw(st.sampled_from(["int8", "uint8"]))
    scale = b.const(np.float32(rng.uniform(0.01, 0.5)))
    zp = b.const(np.asarray(draw(st.integers(0, 20)), np.int8 if dt == "int8" else np.uint8))
    q = b.quantize(input=x, scale=scale, zero_point=zp, output_dtype=dt)
    f = b.dequantize(input=q, scale=scale, zero_point=zp)
    return b.dequantize(input=b.quantize(input=f, scale=scale, zero_point=zp, output_dtype=dt), scale=scale,
                        zero_point=zp)


SPRINKLES = [
    Sprinkle("conv + batch_norm", conv_batchnorm, fires="fuse_conv_batchnorm", **INEXACT),
    Sprinkle("conv_transpose + batch_norm", conv_transpose_batchnorm, fires="fuse_conv_batchnorm", **INEXACT),
    Sprinkle("conv * scale +/- bias", conv_scale_bias, fires="fuse_conv_scale", **INEXACT),
    Sprinkle("matmul + add", matmul_add, fires="fuse_matmul_add_linear", **INEXACT),
    Sprinkle("transpose into matmul", transpose_matmul, fires="fold_transpose_into_matmul_x"),
    Sprinkle("pad + conv", _pad_window("conv"), fires="fuse_pad_conv"),
    Sprinkle("pad + avg_pool", _pad_window("avg_pool"), fires="fuse_pad_avg_pool"),
    Sprinkle("pad -inf + max_pool", _pad_window("max_pool"), fires="fuse_pad_max_pool"),
    Sprinkle("quantize(dequantize(q))", requantize, fires="quantize_of_dequantize"),
]
