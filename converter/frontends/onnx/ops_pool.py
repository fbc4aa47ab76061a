"""Pooling: AveragePool, MaxPool, LpPool and their Global forms.

count_include_pad=0 is MIL's exclude_padding_from_average. ceil_mode uses MIL's ceil_mode where
it gives ONNX's output (1-2 spatial dims, symmetric pads); where ceil and floor give the same
size it is dropped. Dilated pooling (opset 19+) and the other ceil_mode cases, which no IR
pooling op expresses, are pooled tap by tap (`_pool_by_taps`: strided slices of the padded
input, elementwise max / sum, counts from the geometry; static spatial dims). LpPool is written as (sum-pool of |x|^p)^(1/p), the sum-pool being an average including
the (zero) padding times the kernel size. MaxPool's Indices output (flat indices into the input,
row- or column-major by storage_order) comes from the tap-by-tap form, which tracks the argmax.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir.core import Value
from .context import FLOATS, Ctx, Node
from .ops_conv import WindowAttrs, window_attrs
from .registry import onnx_op


class _ByTaps(Exception):
    """The window cannot be an IR pooling op (dilations, a ceil_mode MIL does not match): pool
    by kernel taps instead (`_pool_by_taps`)."""


def _pool_window(ctx: Ctx, node: Node, x: Value) -> tuple[WindowAttrs, bool]:
    rank = ctx.rank(x)
    if not 3 <= rank <= 5:
        raise ctx.unsupported(f"{rank - 2} spatial dims (IR pooling takes 1 to 3)")
    win = window_attrs(ctx, rank - 2)
    if any(d != 1 for d in win.dilations):
        raise _ByTaps
    ceil = bool(int(ctx.attr("ceil_mode", 0)))
    if ceil:
        ceil = _ceil_matters(ctx, x, win)
    return win, ceil


def _ceil_matters(ctx: Ctx, x: Value, win: WindowAttrs) -> bool:
    """False when ceil_mode gives the floor output anyway; True when MIL's ceil_mode gives ONNX's
    output; `_ByTaps` otherwise."""
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
        raise _ByTaps
    return True


#: Pooling by taps unrolls the kernel: at most this many taps.
MAX_TAPS = 1024


def _onnx_geometry(ctx: Ctx, win: WindowAttrs, spatial: tuple[int, ...], ceil: bool
                   ) -> tuple[list[int], list[int], list[int]]:
    """(output sizes, pads before, pads after) per spatial dim, by ONNX's rules (dilated kernels,
    auto_pad, ceil_mode dropping a window that starts in the right padding)."""
    outs, before, after = [], [], []
    for i, n in enumerate(spatial):
        s, eff = win.strides[i], (win.kernel[i] - 1) * win.dilations[i] + 1
        if win.pad_type in ("same", "same_lower"):
            out = -(-n // s)
            total = max((out - 1) * s + eff - n, 0)
            small, big = total // 2, total - total // 2
            b, e = (small, big) if win.pad_type == "same" else (big, small)
        else:
            b, e = (win.begins[i], win.ends[i]) if win.pad_type == "custom" else (0, 0)
            span = n + b + e - eff
            if span < 0:
                raise ctx.format_error(f"the dilated kernel ({eff}) is larger than the padded input ({n + b + e})")
            out = (-(-span // s) if ceil else span // s) + 1
            if ceil and (out - 1) * s >= n + b:
                out -= 1
        outs.append(out)
        before.append(b)
        after.append(e)
    return outs, before, after


def _pool_by_taps(ctx: Ctx, node: Node, x: Value, kind: str, p: float = 2.0, indices: bool = False
                  ) -> Value | tuple[Value, Value]:
    """Pooling as an elementwise max / sum over the kernel's taps, each a strided slice of the
    explicitly padded input (-inf for max, 0 otherwise); averages divide by per-position counts
    computed from the geometry (cells inside the input, or inside input plus explicit pads with
    count_include_pad). Needs static spatial dims."""
    b = ctx.b
    rank = ctx.rank(x)
    win = window_attrs(ctx, rank - 2)
    shape = ctx.static_shape(x)
    if shape is None:
        raise ctx.unsupported("dilated pooling (or a ceil_mode the IR cannot express) needs static spatial dims")
    taps = math.prod(win.kernel)
    if taps > MAX_TAPS:
        raise ctx.unsupported(f"a kernel of {taps} taps pooled tap by tap (at most {MAX_TAPS})")
    spatial = shape[2:]
    ceil = bool(int(ctx.attr("ceil_mode", 0)))
    outs, before, after = _onnx_geometry(ctx, win, spatial, ceil)
    # the last tap of the last window may reach past the explicit padding (ceil_mode): pad to it
    reach = [(o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip(outs, win.strides, win.kernel, win.dilations)]
    extra = [max(r - (n + bb + e), 0) for r, n, bb, e in zip(reach, spatial, before, after)]
    src = x if kind != "lp" else _abs_pow(ctx, x, p)
    fill = -np.inf if kind == "max" else 0.0
    pad = [v for i in range(len(spatial)) for v in (before[i], after[i] + extra[i])]
    if any(pad):
        src = b.pad(x=src, pad=np.array(pad, np.int32), mode="constant", constant_val=np.asarray(fill, src.type.dtype.storage))
    acc = idx = None
    for tap in np.ndindex(*win.kernel):
        begin = [0, 0] + [t * d for t, d in zip(tap, win.dilations)]
        end = [0, 0] + [t * d + (o - 1) * s + 1 for t, d, o, s in zip(tap, win.dilations, outs, win.strides)]
        piece = b.slice_by_index(x=src, begin=np.array(begin, np.int32), end=np.array(end, np.int32),
                                 stride=np.array([1, 1, *win.strides], np.int32),
                                 begin_mask=[True, True] + [False] * len(spatial),
                                 end_mask=[True, True] + [False] * len(spatial))
        if indices:  # the first strict maximum in row-major kernel order, as onnxruntime scans
            where = _tap_positions(win, spatial, outs, before, tap, int(ctx.attr("storage_order", 0)))
            if acc is None:
                acc, idx = piece, b.const(where)
            else:
                better = b.greater(x=piece, y=acc)
                acc, idx = b.select(cond=better, a=piece, b=acc), b.select(cond=better, a=where, b=idx)
            continue
        acc = piece if acc is None else (b.maximum(x=acc, y=piece) if kind == "max" else b.add(x=acc, y=piece))
    if indices:
        n, c = shape[0], shape[1]
        per_image = int(np.prod(spatial))
        base = (np.arange(n * c, dtype=np.int64) * per_image).reshape(n, c, *([1] * len(spatial)))
        if n * c * per_image > np.iinfo(np.int32).max:
            raise ctx.unsupported("indices beyond the int32 range")
        return acc, b.add(x=idx, y=base.astype(np.int32))
    if kind == "avg":
        include = bool(int(ctx.attr("count_include_pad", 0)))
        counts = _counts(win, spatial, outs, before, after, include)
        acc = b.real_div(x=acc, y=b.const(counts.astype(x.type.dtype.storage)))
    elif kind == "lp":
        acc = _root(ctx, acc, p)
    return acc


def _tap_positions(win: WindowAttrs, spatial: tuple[int, ...], outs: list[int], before: list[int],
                   tap: tuple[int, ...], storage_order: int) -> np.ndarray:
    """For one kernel tap: the flat index within one [spatial] image of the cell each output
    position reads (row-major, or column-major with storage_order=1), shape [1, 1, *outs]."""
    coords = [np.arange(o) * s + t * d - bb for o, s, t, d, bb in zip(outs, win.strides, tap, win.dilations, before)]
    grids = np.meshgrid(*coords, indexing="ij")
    dims = spatial if not storage_order else spatial[::-1]
    grids = grids if not storage_order else grids[::-1]
    flat = np.ravel_multi_index(tuple(np.clip(g, 0, d - 1) for g, d in zip(grids, dims)), dims)
    return flat.reshape(1, 1, *outs).astype(np.int32)


def _counts(win: WindowAttrs, spatial: tuple[int, ...], outs: list[int], before: list[int], after: list[int],
            include_pad: bool) -> np.ndarray:
    """How many cells each output position averages: the window's taps inside the input (or
    inside input and explicit padding), as onnxruntime and onnx's reference count them."""
    per_dim = []
    for i, n in enumerate(spatial):
        lo, hi = (-before[i], n + after[i]) if include_pad else (0, n)
        starts = np.arange(outs[i]) * win.strides[i] - before[i]
        taps = starts[:, None] + np.arange(win.kernel[i])[None, :] * win.dilations[i]
        per_dim.append(((taps >= lo) & (taps < hi)).sum(axis=1))
    counts = per_dim[0]
    for c in per_dim[1:]:
        counts = np.multiply.outer(counts, c)
    return np.maximum(counts, 1).astype(np.float32)


def _pool_inputs(win: WindowAttrs, ceil: bool) -> dict:
    return {"kernel_sizes": np.array(win.kernel, np.int32), "strides": np.array(win.strides, np.int32),
            "pad_type": win.pad_type, "pad": np.array(win.pad, np.int32), "ceil_mode": ceil}


@onnx_op("AveragePool", versions=(1, 22))
def average_pool(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, FLOATS)
    try:
        win, ceil = _pool_window(ctx, node, x)
    except _ByTaps:
        return [_pool_by_taps(ctx, node, x, "avg")]
    exclude = not bool(int(ctx.attr("count_include_pad", 0)))
    return [ctx.b.add_op("avg_pool", {"x": x, **_pool_inputs(win, ceil),
                                      "exclude_padding_from_average": exclude}).outputs[0]]


@onnx_op("MaxPool", versions=(1, 22))
def max_pool(ctx: Ctx, node: Node) -> list[Value | None]:
    x = ctx.input(0, FLOATS)  # int8/uint8 (opset 12) are exact in fp32; the driver casts back
    if len(node.outputs) > 1 and node.outputs[1]:  # Indices: pooled tap by tap, tracking the argmax
        return list(_pool_by_taps(ctx, node, x, "max", indices=True))
    try:
        win, ceil = _pool_window(ctx, node, x)
    except _ByTaps:
        return [_pool_by_taps(ctx, node, x, "max"), None]
    return [ctx.b.add_op("max_pool", {"x": x, **_pool_inputs(win, ceil)}).outputs[0], None]


@onnx_op("LpPool", versions=(11, 22))
def lp_pool(ctx: Ctx, node: Node) -> list[Value]:
    b = ctx.b
    x = ctx.input(0, FLOATS)
    p = float(ctx.attr("p", 2))
    try:
        win, ceil = _pool_window(ctx, node, x)
    except _ByTaps:
        return [_pool_by_taps(ctx, node, x, "lp", p)]
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
