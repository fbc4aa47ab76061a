"""WebNN data-movement, reduction and matrix ops as IR ops.

Index operands (gather*, scatter*) are normalised the way the spec says implementations must
handle them: a negative index counts from the end, and out-of-range indices are clamped into the
dimension (WebNN forbids out-of-bounds memory access; the conformance vectors assume clamping).
"""

from __future__ import annotations

import numpy as np

from ...ir.core import Value
from .context import IR_DTYPE, Ctx
from .graph import Operator
from .registry import maps

FLOATS = ("fp32", "fp16")
ANY = ("fp32", "fp16", "int32", "int8", "uint8", "int16", "uint16", "bool")


@maps("cast", out=lambda ctx, op: [op.args["dataType"]])
def cast(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.value(op.args["input"])
    return [ctx.b.cast(x=x, dtype=IR_DTYPE[op.args["dataType"]])]


@maps("concat")
def concat(ctx: Ctx, op: Operator) -> list[Value]:
    values = tuple(ctx.value(v) for v in op.args["inputs"])
    return [ctx.b.concat(values=values, axis=op.args["axis"])]


@maps("reshape")
def reshape(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["input"], ANY)
    return [ctx.b.reshape(x=x, shape=np.asarray(op.args["newShape"], np.int32))]


def broadcast_to(ctx: Ctx, x: Value, shape: tuple[int, ...]) -> Value:
    """numpy ``broadcast_to`` in IR ops: reshape to the output rank, then tile the size-1 dims."""
    in_shape = ctx.shape(x)
    out = tuple(int(max(a, b)) for a, b in zip((1,) * (len(shape) - len(in_shape)) + in_shape, shape)) \
        if len(shape) >= len(in_shape) else None
    if out is None:
        raise ctx.unsupported(f"cannot expand shape {list(in_shape)} to {list(shape)}")
    full = (1,) * (len(out) - len(in_shape)) + in_shape
    if full != in_shape:
        x = ctx.b.reshape(x=x, shape=np.asarray(full, np.int32))
    reps = [o // i for o, i in zip(out, full)]
    if any(r != 1 for r in reps):
        x = ctx.b.tile(x=ctx.widen(x, ("fp32", "fp16", "int32", "bool")), reps=np.asarray(reps, np.int32))
    return x


@maps("expand")
def expand(ctx: Ctx, op: Operator) -> list[Value]:
    y = broadcast_to(ctx, ctx.value(op.args["input"]), tuple(op.args["newShape"]))
    return [y if y is not ctx.value(op.args["input"]) else ctx.b.identity(x=y)]


@maps("transpose")
def transpose(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["input"], ANY)
    rank = len(ctx.shape(x))
    perm = op.options.get("permutation", list(range(rank))[::-1])
    return [ctx.b.transpose(x=x, perm=np.asarray(perm, np.int32))]


@maps("tile")
def tile(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["input"], ("fp32", "fp16", "int32", "bool"))
    return [ctx.b.tile(x=x, reps=np.asarray(op.args["repetitions"], np.int32))]


@maps("reverse")
def reverse(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["input"], ANY)
    axes = op.options.get("axes", list(range(len(ctx.shape(x)))))
    if not axes:
        return [ctx.b.identity(x=x)]
    return [ctx.b.reverse(x=x, axes=np.asarray(axes, np.int32))]


@maps("slice")
def slice_(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["input"], ANY)
    starts, sizes = op.args["starts"], op.args["sizes"]
    strides = op.options.get("strides", [1] * len(starts))
    ends = [s + n for s, n in zip(starts, sizes)]  # sizes: the window read from the input (spec 8.9.47)
    return [ctx.b.slice_by_index(x=x, begin=np.asarray(starts, np.int32), end=np.asarray(ends, np.int32),
                                 stride=np.asarray(strides, np.int32))]


@maps("split")
def split(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["input"], ("fp32", "fp16", "int32", "bool"))
    splits, axis = op.args["splits"], op.options.get("axis", 0)
    if isinstance(splits, int):
        outs = ctx.b.split(x=x, num_splits=splits, axis=axis)
    else:
        outs = ctx.b.split(x=x, split_sizes=np.asarray(splits, np.int32), axis=axis)
    return list(outs) if isinstance(outs, tuple) else [outs]


@maps("pad")
def pad(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["input"], FLOATS)
    pads = [int(p) for pair in zip(op.args["beginningPadding"], op.args["endingPadding"]) for p in pair]
    mode = {"constant": "constant", "edge": "replicate", "reflection": "reflect"}[op.options.get("mode", "constant")]
    value = float(op.options.get("value", 0.0))
    return [ctx.b.pad(x=x, pad=np.asarray(pads, np.int32), mode=mode, constant_val=ctx.const(value, x))]


@maps("triangular")
def triangular(ctx: Ctx, op: Operator) -> list[Value]:
    """Keeps ``j - i >= diagonal`` (upper) or ``j - i <= diagonal`` (lower) of the last two dims; the
    mask is computed from two index vectors (no rows x cols constant)."""
    b = ctx.b
    x = ctx.operand(op.args["input"], ("fp32", "fp16", "int32", "bool"))
    rows, cols = ctx.shape(x)[-2:]
    j_minus_i = b.sub(x=b.const(np.arange(cols, dtype=np.int32)[None, :]),
                      y=b.const(np.arange(rows, dtype=np.int32)[:, None]))
    diag = ctx.const(np.int32(op.options.get("diagonal", 0)))
    keep = b.greater_equal(x=j_minus_i, y=diag) if op.options.get("upper", True) else b.less_equal(x=j_minus_i, y=diag)
    zero = ctx.const(np.zeros((), x.type.dtype.storage))
    return [b.select(cond=keep, a=x, b=zero)]


@maps("cumulativeSum")
def cumulative_sum(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["input"])
    return [ctx.b.cumsum(x=x, axis=op.args["axis"], exclusive=op.options.get("exclusive", False),
                         reverse=op.options.get("reversed", False))]


_REDUCE = {"reduceL1": "reduce_l1_norm", "reduceL2": "reduce_l2_norm", "reduceLogSum": "reduce_log_sum",
           "reduceLogSumExp": "reduce_log_sum_exp", "reduceMax": "reduce_max", "reduceMean": "reduce_mean",
           "reduceMin": "reduce_min", "reduceProduct": "reduce_prod", "reduceSum": "reduce_sum",
           "reduceSumSquare": "reduce_sum_square"}


@maps(*_REDUCE)
def reduce(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["input"])
    inputs: dict = {"x": x, "keep_dims": op.options.get("keepDimensions", False)}
    if "axes" in op.options:
        inputs["axes"] = np.asarray(op.options["axes"], np.int32)
    return [ctx.b.add_op(_REDUCE[op.method], inputs).outputs[0]]


@maps("argMin", "argMax", out=lambda ctx, op: [op.options.get("outputDataType", "int32")])
def arg_min_max(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["input"])
    ir_op = "reduce_argmax" if op.method == "argMax" else "reduce_argmin"
    return [ctx.b.add_op(ir_op, {"x": x, "axis": op.args["axis"], "keep_dims": op.options.get("keepDimensions", False),
                                 "output_dtype": "int32"}).outputs[0]]


@maps("softmax")
def softmax(ctx: Ctx, op: Operator) -> list[Value]:
    return [ctx.b.softmax(x=ctx.operand(op.args["input"], FLOATS), axis=op.args["axis"])]


@maps("matmul")
def matmul(ctx: Ctx, op: Operator) -> list[Value]:
    a, b = ctx.operand(op.args["a"]), ctx.operand(op.args["b"])
    return [ctx.b.matmul(x=a, y=b)]


@maps("gemm")
def gemm(ctx: Ctx, op: Operator) -> list[Value]:
    """``alpha * A' B' + beta * C`` (A' = A transposed when aTranspose, likewise B')."""
    b = ctx.b
    x, y = ctx.operand(op.args["a"], FLOATS), ctx.operand(op.args["b"], FLOATS)
    out = b.matmul(x=x, y=y, transpose_x=op.options.get("aTranspose", False),
                   transpose_y=op.options.get("bTranspose", False))
    alpha, beta = op.options.get("alpha", 1.0), op.options.get("beta", 1.0)
    if alpha != 1.0:
        out = b.mul(x=out, y=ctx.const(alpha, x))
    if "c" in op.options and beta != 0.0:
        c = ctx.operand(op.options["c"], FLOATS)
        if beta != 1.0:
            c = b.mul(x=c, y=ctx.const(beta, x))
        out = b.add(x=out, y=c)
    return [out]


# -- gather / scatter ------------------------------------------------------------------------------

def _indices_into(ctx: Ctx, oid: str, dims: Value | int) -> Value:
    """Indices made valid for ``dims`` (a size, or an int32 vector broadcasting over the last axis):
    negative ones count from the end, the rest are clamped into ``[0, dim - 1]``."""
    b = ctx.b
    idx = ctx.operand(oid, ("int32",))
    size = dims if isinstance(dims, Value) else ctx.const(np.int32(dims))
    zero = ctx.const(np.int32(0))
    idx = b.select(cond=b.less(x=idx, y=zero), a=b.add(x=idx, y=size), b=idx)
    idx = b.maximum(x=idx, y=zero)
    return b.minimum(x=idx, y=b.sub(x=size, y=ctx.const(np.int32(1))))


_GATHER_TYPES = ("fp32", "fp16", "int32", "int8", "uint8")


@maps("gather")
def gather(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["input"], _GATHER_TYPES)
    axis = op.options.get("axis", 0)
    idx = _indices_into(ctx, op.args["indices"], ctx.shape(x)[axis])
    return [ctx.b.gather(x=x, indices=idx, axis=axis)]


@maps("gatherElements")
def gather_elements(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["input"], _GATHER_TYPES)
    axis = op.options.get("axis", 0)
    idx = _indices_into(ctx, op.args["indices"], ctx.shape(x)[axis])
    return [ctx.b.gather_along_axis(x=x, indices=idx, axis=axis)]


@maps("gatherND")
def gather_nd(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["input"], _GATHER_TYPES)
    k = ctx.shape(op.args["indices"])[-1]
    dims = ctx.b.const(np.asarray(ctx.shape(x)[:k], np.int32))
    idx = _indices_into(ctx, op.args["indices"], dims)
    return [ctx.b.gather_nd(x=x, indices=idx)]


@maps("scatterElements")
def scatter_elements(ctx: Ctx, op: Operator) -> list[Value]:
    data = ctx.operand(op.args["input"])
    axis = op.options.get("axis", 0)
    idx = _indices_into(ctx, op.args["indices"], ctx.shape(data)[axis])
    updates = ctx.operand(op.args["updates"])
    return [ctx.b.scatter_along_axis(data=data, indices=idx, updates=updates, axis=axis, mode="update")]


@maps("scatterND")
def scatter_nd(ctx: Ctx, op: Operator) -> list[Value]:
    data = ctx.operand(op.args["input"])
    k = ctx.shape(op.args["indices"])[-1]
    dims = ctx.b.const(np.asarray(ctx.shape(data)[:k], np.int32))
    idx = _indices_into(ctx, op.args["indices"], dims)
    updates = ctx.operand(op.args["updates"])
    return [ctx.b.scatter_nd(data=data, indices=idx, updates=updates, mode="update")]


# -- quantization ----------------------------------------------------------------------------------

def _broadcast_block(ctx: Ctx, v: Value, shape: tuple[int, ...]) -> Value:
    """Block-wise scale/zeroPoint (each dim divides the input's) repeated to the input's shape."""
    vs = ctx.shape(v)
    full = (1,) * (len(shape) - len(vs)) + vs
    if full != vs:
        v = ctx.b.reshape(x=v, shape=np.asarray(full, np.int32))
    for axis, (n, m) in enumerate(zip(shape, full)):
        if m not in (1, n):
            if n % m:
                raise ctx.unsupported(f"a scale of shape {list(vs)} does not tile the input shape {list(shape)}")
            idx = np.repeat(np.arange(m, dtype=np.int32), n // m)
            v = ctx.b.gather(x=ctx.widen(v, _GATHER_TYPES), indices=ctx.b.const(idx), axis=axis)
    return v


@maps("dequantizeLinear", out=lambda ctx, op: [ctx.wdtype(op.args["scale"])])
def dequantize_linear(ctx: Ctx, op: Operator) -> list[Value]:
    """``(input - zeroPoint) * scale``, scale and zeroPoint repeated block-wise over the input."""
    b = ctx.b
    shape = ctx.shape(op.args["input"])
    ft = "fp32"
    x = b.cast(x=ctx.operand(op.args["input"], ("int32",)), dtype=ft)
    zp = b.cast(x=ctx.operand(op.args["zeroPoint"], ("int32",)), dtype=ft)
    scale = ctx.operand(op.args["scale"], (ft,))
    zp, scale = _broadcast_block(ctx, zp, shape), _broadcast_block(ctx, scale, shape)
    return [b.mul(x=b.sub(x=x, y=zp), y=scale)]


@maps("quantizeLinear", out=lambda ctx, op: [ctx.wdtype(op.args["zeroPoint"])])
def quantize_linear(ctx: Ctx, op: Operator) -> list[Value]:
    """``clamp(roundEven(input / scale) + zeroPoint)`` to the zeroPoint type's range."""
    b = ctx.b
    shape = ctx.shape(op.args["input"])
    x = ctx.operand(op.args["input"], ("fp32",))
    scale = _broadcast_block(ctx, ctx.operand(op.args["scale"], ("fp32",)), shape)
    zp = _broadcast_block(ctx, b.cast(x=ctx.operand(op.args["zeroPoint"], ("int32",)), dtype="fp32"), shape)
    q = b.add(x=b.round(x=b.real_div(x=x, y=scale)), y=zp)
    zdt = ctx.wdtype(op.args["zeroPoint"])
    lo, hi = {"uint8": (0, 255), "int8": (-128, 127), "int32": (-(2**31), 2**31 - 1)}.get(zdt, (-(2**31), 2**31 - 1))
    q = b.clip(x=q, alpha=ctx.const(float(lo), q), beta=ctx.const(float(hi), q))
    return [b.cast(x=q, dtype=IR_DTYPE[zdt])]

