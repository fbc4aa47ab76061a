"""RandomNormal, RandomUniform, RandomNormalLike, RandomUniformLike, Bernoulli, Multinomial.

The IR's random ops (converter/ir/ops/random.py) guarantee the distribution, shape and dtype and
are deterministic per seed, but draw from their own stream: values never equal onnxruntime's or
ONNX's reference (which draws with numpy's legacy generator). ONNX's float ``seed`` becomes the
IR's int seed through its bit pattern (distinct seeds stay distinct); no seed is the IR's -1 (a
stream fixed per op). Samples are drawn in fp16 when the output is fp16, else fp32 (fp64 and
bf16 outputs are held in fp32 by the dtype policy).

- ``*Like``: the shape of the input at run time (a constant when static);
- Bernoulli: ``uniform[0, 1) < p`` elementwise (ONNX's own function body; the IR's
  random_bernoulli takes one scalar probability);
- Multinomial: ``random_categorical`` in logits mode (ONNX's input holds unnormalized
  log-probabilities), indices cast from float to the int output type.
"""

from __future__ import annotations

import numpy as np
import onnx

from ...ir.core import Value
from ...ir.types import is_static_dim
from .context import FLOATS, Ctx, Node, ir_dtype
from .registry import onnx_op


def ir_seed(ctx: Ctx) -> int:
    seed = ctx.attr("seed")
    if seed is None:
        return -1
    return int(np.asarray(seed, np.float32).view(np.int32)) & 0x7FFFFFFF


def _sample_dtype(elem_type: int | None) -> str:
    return "fp16" if elem_type is not None and ir_dtype(elem_type) == "fp16" else "fp32"


def _shape_of(ctx: Ctx, x: Value) -> Value | np.ndarray:
    dims = x.type.shape
    if dims is not None and all(is_static_dim(d) for d in dims):
        return np.asarray([int(d) for d in dims], np.int32)
    return ctx.b.shape(x=x)


def _draw(ctx: Ctx, kind: str, shape: Value | np.ndarray, dt: str) -> Value:
    b, f = ctx.b, np.dtype(np.float16 if dt == "fp16" else np.float32).type
    if kind == "Normal":
        mean, scale = float(ctx.attr("mean", 0.0)), float(ctx.attr("scale", 1.0))
        return b.random_normal(shape=shape, mean=f(mean), stddev=f(scale), seed=ir_seed(ctx))
    low, high = float(ctx.attr("low", 0.0)), float(ctx.attr("high", 1.0))
    return b.random_uniform(shape=shape, low=f(low), high=f(high), seed=ir_seed(ctx))


def _kind(node: Node) -> str:
    return "Normal" if "Normal" in node.op_type else "Uniform"


@onnx_op("RandomNormal", "RandomUniform", versions=(1, 22))
def random_shaped(ctx: Ctx, node: Node) -> list[Value]:
    shape = ctx.required_attr("shape")
    if any(int(d) < 0 for d in shape):
        raise ctx.format_error(f"shape {list(shape)} has a negative size")
    dt = _sample_dtype(int(ctx.attr("dtype", onnx.TensorProto.FLOAT)))
    return [_draw(ctx, _kind(node), np.asarray(shape, np.int32), dt)]


@onnx_op("RandomNormalLike", "RandomUniformLike", versions=(1, 22))
def random_like(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0)
    out_type = ctx.attr("dtype")
    dt = _sample_dtype(int(out_type) if out_type is not None else ctx.input_elem_type(0))
    return [_draw(ctx, _kind(node), _shape_of(ctx, x), dt)]


@onnx_op("Bernoulli", versions=(15, 22))
def bernoulli(ctx: Ctx, node: Node) -> list[Value]:
    p = ctx.input(0, FLOATS)
    f = np.dtype(p.type.dtype.storage).type
    u = ctx.b.random_uniform(shape=_shape_of(ctx, p), low=f(0), high=f(1), seed=ir_seed(ctx))
    return [ctx.b.less(x=u, y=p)]  # the driver casts the bool to the output type


@onnx_op("Multinomial", versions=(7, 22))
def multinomial(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, FLOATS)
    if ctx.rank(x) != 2:
        raise ctx.format_error(f"input must be [batch_size, class_size], has rank {ctx.rank(x)}")
    size = int(ctx.attr("sample_size", 1))
    if size < 1:
        raise ctx.format_error(f"sample_size must be >= 1, got {size}")
    idx = ctx.b.random_categorical(x=x, mode="logits", size=size, seed=ir_seed(ctx))
    return [ctx.b.cast(x=idx, dtype="int32")]
