"""Pooling: AveragePool, MaxPool, LpPool and their Global forms.

count_include_pad=0 is MIL's exclude_padding_from_average. ceil_mode uses MIL's ceil_mode where
it gives ONNX's output (1-2 spatial dims, symmetric pads); where ceil and floor give the same
size it is dropped; other cases are refused. Dilated pooling (opset 19+) has no IR op and is
refused. LpPool is written as (sum-pool of |x|^p)^(1/p), the sum-pool being an average including
the (zero) padding times the kernel size. MaxPool's Indices output is not supported.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir.core import Value
from .context import FLOATS, Ctx, Node
from .ops_conv import WindowAttrs, window_attrs
from .registry import onnx_op


def _pool_window(ctx: Ctx, node: Node, x: Value) -> tuple[WindowAttrs, bool]:
    rank = ctx.rank(x)
    if not 3 <= rank <= 5:
        raise ctx.unsupported(f"{rank - 2} spatial dims (IR pooling takes 1 to 3)")
    win = window_attrs(ctx, rank - 2)
    if any(d != 1 for d in win.dilations):
        raise ctx.unsupported(f"dilations {win.dilations} (the IR's pooling has none)")
    ceil = bool(int(ctx.attr("ceil_mode", 0)))
    if ceil:
        ceil = _ceil_matters(ctx, x, win)
    return win, ceil


def _ceil_matters(ctx: Ctx, x: Value, win: WindowAttrs) -> bool:
    """False when ceil_mode gives the floor output anyway; True when MIL's ceil_mode gives ONNX's
    output; UnsupportedError otherwise."""
    if win.pad_type in ("same", "same_lower"):
        return False  # output ceil(n / s) either way
    spatial = x.type.shape[2:]
    if all(isinstance(d, (int, np.integer)) for d in spatial):
        same = True
        for i, n in enumerate(spatial):
            total = int(n) + win.begins[i] + win.ends[i] - win.kernel[i]
            floor_out = total // win.strides[i] + 1
            ceil_out = -(-total // win.strides[i]) + 1
            if (ceil_out - 1) * win.strides[i] >= int(n) + win.begins[i]:
                ceil_out -= 1  # ONNX: a window starting in the right padding is dropped
            same &= floor_out == ceil_out
        if same:
            return False
    if win.n_spatial > 2 or win.begins != win.ends:
        raise ctx.unsupported("ceil_mode with more than 2 spatial dims or asymmetric pads")
    return True


def _pool_inputs(win: WindowAttrs, ceil: bool) -> dict:
    return {"kernel_sizes": np.array(win.kernel, np.int32), "strides": np.array(win.strides, np.int32),
            "pad_type": win.pad_type, "pad": np.array(win.pad, np.int32), "ceil_mode": ceil}


@onnx_op("AveragePool", versions=(1, 22))
def average_pool(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, FLOATS)
    win, ceil = _pool_window(ctx, node, x)
    exclude = not bool(int(ctx.attr("count_include_pad", 0)))
    return [ctx.b.add_op("avg_pool", {"x": x, **_pool_inputs(win, ceil),
                                      "exclude_padding_from_average": exclude}).outputs[0]]


@onnx_op("MaxPool", versions=(1, 22))
def max_pool(ctx: Ctx, node: Node) -> list[Value | None]:
    x = ctx.input(0, FLOATS)  # int8/uint8 (opset 12) are exact in fp32; the driver casts back
    win, ceil = _pool_window(ctx, node, x)
    return [ctx.b.add_op("max_pool", {"x": x, **_pool_inputs(win, ceil)}).outputs[0], None]


@onnx_op("LpPool", versions=(11, 22))
def lp_pool(ctx: Ctx, node: Node) -> list[Value]:
    b = ctx.b
    x = ctx.input(0, FLOATS)
    win, ceil = _pool_window(ctx, node, x)
    p = float(ctx.attr("p", 2))
    powered = _abs_pow(ctx, x, p)
    mean = b.add_op("avg_pool", {"x": powered, **_pool_inputs(win, ceil),
                                 "exclude_padding_from_average": False}).outputs[0]
    total = b.mul(x=mean, y=ctx.const(float(math.prod(win.kernel)), x))
    return [_root(ctx, total, p)]


def _abs_pow(ctx: Ctx, x: Value, p: float) -> Value:
    ax = ctx.b.abs(x=x)
    return ax if p == 1 else ctx.b.mul(x=ax, y=ax) if p == 2 else ctx.b.pow(x=ax, y=ctx.const(p, x))


def _root(ctx: Ctx, v: Value, p: float) -> Value:
    return v if p == 1 else ctx.b.sqrt(x=v) if p == 2 else ctx.b.pow(x=v, y=ctx.const(1.0 / p, v))


@onnx_op("GlobalAveragePool", "GlobalMaxPool", versions=(1, 22))
def global_pool(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, FLOATS)
    axes = list(range(2, ctx.rank(x)))
    ir_op = "reduce_mean" if node.op_type == "GlobalAveragePool" else "reduce_max"
    return [ctx.b.add_op(ir_op, {"x": x, "axes": axes, "keep_dims": True}).outputs[0]]


@onnx_op("GlobalLpPool", versions=(2, 22))
def global_lp_pool(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, FLOATS)
    p = float(ctx.attr("p", 2))
    total = ctx.b.reduce_sum(x=_abs_pow(ctx, x, p), axes=list(range(2, ctx.rank(x))), keep_dims=True)
    return [_root(ctx, total, p)]
