"""Resize (opsets 11-19) and Upsample (9) as per-axis gathers and weighted sums.

MIL's resize ops cover two axes and a few coordinate conventions; ONNX's Resize is separable
over any axes with six coordinate modes, so each resized axis is written out as ONNX's reference
computes it: source coordinates ``x_ori`` of the output indices (from the scale, or from the
size: scale = size / in, ``keep_aspect_ratio_policy`` picks one scale and rounds the sizes half
up), then taps around ``floor(x_ori)`` clamped to the edge (nearest: one tap rounded by
``nearest_mode``; linear: 2; cubic: 4 with ``cubic_coeff_a``), weights renormalized over the
taps inside the input when ``exclude_outside``, and ``extrapolation_value`` where a
``tf_crop_and_resize`` coordinate leaves the input. Scales, sizes and roi may be run-time
tensors (the arithmetic is IR ops; constants fold). ``antialias`` (linear / cubic downscaling
with a filter stretched by 1 / scale) needs constant scales or sizes and a static input: each axis
is then a matmul with the interpolation matrix built at conversion time; with run-time scales it
is refused (the filter width would follow a run-time value).
"""

from __future__ import annotations

import numpy as np

from ...ir.core import Value
from ...ir.types import is_static_dim
from .context import FLOATS, Ctx, Node, normalize_axis
from .registry import onnx_op
from .shape_util import static_dims

_COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                "tf_crop_and_resize")


def _scalar(ctx: Ctx, vec: Value, i: int) -> Value:
    """Element ``i`` of a 1-D value as a 0-D value."""
    b = ctx.b
    return b.squeeze(x=b.slice_by_size(x=vec, begin=np.asarray([i], np.int32), size=np.asarray([1], np.int32)),
                     axes=[0])


def _source_coords(ctx: Ctx, mode: str, y: Value, scale: Value, n: int, m: Value,
                   roi: tuple[Value, Value] | None) -> tuple[Value, Value | None]:
    """``x_ori`` for output indices ``y`` (fp32) and, for tf_crop_and_resize, where it is outside."""
    b = ctx.b

    def f(v: float) -> Value:
        return b.const(np.float32(v))

    out_w = b.mul(x=scale, y=f(n))  # ONNX uses scale * in (a float), not the integer size
    half = b.sub(x=b.real_div(x=b.add(x=y, y=f(0.5)), y=scale), y=f(0.5))
    if mode == "half_pixel":
        return half, None
    if mode == "asymmetric":
        return b.real_div(x=y, y=scale), None
    if mode == "pytorch_half_pixel":
        return b.select(cond=b.equal(x=out_w, y=f(1.0)), a=f(-0.5), b=half), None
    if mode == "half_pixel_symmetric":
        m_f = b.cast(x=m, dtype="fp32")
        adjustment = b.real_div(x=m_f, y=out_w)
        offset = b.mul(x=f(n / 2), y=b.sub(x=f(1.0), y=adjustment))
        return b.add(x=offset, y=half), None
    is_one = b.equal(x=out_w, y=f(1.0))
    denom = b.select(cond=is_one, a=f(1.0), b=b.sub(x=out_w, y=f(1.0)))
    if mode == "align_corners":
        return b.select(cond=is_one, a=f(0.0), b=b.mul(x=y, y=b.real_div(x=f(n - 1), y=denom))), None
    start, end = roi  # tf_crop_and_resize
    span = b.mul(x=b.sub(x=end, y=start), y=f(n - 1))
    x = b.select(cond=is_one, a=b.real_div(x=span, y=f(2.0)), b=b.mul(x=y, y=b.real_div(x=span, y=denom)))
    x = b.add(x=x, y=b.mul(x=start, y=f(n - 1)))
    outside = b.logical_or(x=b.less(x=x, y=f(0.0)), y=b.greater(x=x, y=f(n - 1)))
    return x, outside


def _cubic(b, r: Value, a: float) -> list[Value]:
    def f(v: float) -> Value:
        return b.const(np.float32(v))

    def outer(t: Value) -> Value:  # ((A*t - 5A)*t + 8A)*t - 4A for t in [1, 2]
        return b.sub(x=b.mul(x=b.add(x=b.mul(x=b.sub(x=b.mul(x=t, y=f(a)), y=f(5 * a)), y=t), y=f(8 * a)), y=t),
                     y=f(4 * a))

    def inner(t: Value) -> Value:  # ((A+2)*t - (A+3))*t*t + 1 for t in [0, 1]
        return b.add(x=b.mul(x=b.mul(x=b.sub(x=b.mul(x=t, y=f(a + 2)), y=f(a + 3)), y=t), y=t), y=f(1.0))

    one_minus = b.sub(x=f(1.0), y=r)
    return [outer(b.add(x=r, y=f(1.0))), inner(r), inner(one_minus), outer(b.add(x=one_minus, y=f(1.0)))]


def _resize_axis(ctx: Ctx, x: Value, axis: int, n: int, scale: Value, m: Value, opts: dict,
                 roi: tuple[Value, Value] | None) -> Value:
    b = ctx.b

    def f(v: float) -> Value:
        return b.const(np.float32(v))

    y = b.cast(x=b.range_1d(start=np.int32(0), end=m, step=np.int32(1)), dtype="fp32")
    x_ori, outside = _source_coords(ctx, opts["coord"], y, scale, n, m, roi)
    rank = ctx.rank(x)
    bshape = np.asarray([-1] + [1] * (rank - 1 - axis), np.int32)

    def clamp(i: Value) -> Value:
        return b.minimum(x=b.maximum(x=i, y=np.int32(0)), y=np.int32(n - 1))

    mode = opts["mode"]
    if mode == "nearest":
        rounding = {"round_prefer_floor": lambda v: b.ceil(x=b.sub(x=v, y=f(0.5))),
                    "round_prefer_ceil": lambda v: b.floor(x=b.add(x=v, y=f(0.5))),
                    "floor": lambda v: b.floor(x=v), "ceil": lambda v: b.ceil(x=v)}[opts["nearest"]]
        idx = clamp(b.cast(x=rounding(x_ori), dtype="int32"))
        out = b.gather(x=x, indices=idx, axis=axis)
    else:
        base_f = b.floor(x=x_ori)
        r = b.sub(x=x_ori, y=base_f)
        base = b.cast(x=base_f, dtype="int32")
        if mode == "linear":
            offsets, weights = (0, 1), [b.sub(x=f(1.0), y=r), r]
        else:
            offsets, weights = (-1, 0, 1, 2), _cubic(b, r, opts["cubic_a"])
        taps = [b.add(x=base, y=np.int32(o)) for o in offsets]
        if opts["exclude_outside"]:
            inside = [b.cast(x=b.logical_and(x=b.greater_equal(x=t, y=np.int32(0)), y=b.less(x=t, y=np.int32(n))),
                             dtype="fp32") for t in taps]
            weights = [b.mul(x=w, y=i) for w, i in zip(weights, inside)]
            total = weights[0]
            for w in weights[1:]:
                total = b.add(x=total, y=w)
            weights = [b.real_div(x=w, y=total) for w in weights]
        out = None
        for t, w in zip(taps, weights):
            w = b.reshape(x=w, shape=bshape)
            if x.type.dtype.name != "fp32":
                w = b.cast(x=w, dtype=x.type.dtype.name)
            term = b.mul(x=b.gather(x=x, indices=clamp(t), axis=axis), y=w)
            out = term if out is None else b.add(x=out, y=term)
    if outside is not None:
        fill = b.const(np.asarray(opts["extrapolation"], dtype=x.type.dtype.storage))
        out = b.select(cond=b.reshape(x=outside, shape=bshape), a=fill, b=out)
    return out


def _resize(ctx: Ctx, x: Value, axes: list[int], scales: Value | None, sizes: Value | None,
            roi: Value | None, opts: dict) -> Value:
    """``scales`` / ``sizes``: fp32 / int32 vectors with one entry per axis of ``axes``."""
    b = ctx.b
    shape = static_dims(ctx, x, "Resize")
    rank = len(shape)
    k = len(axes)
    per_axis: list[tuple[Value, Value]] = []
    if sizes is not None:
        sizes_f = b.cast(x=sizes, dtype="fp32")
        ratios = b.real_div(x=sizes_f, y=b.const(np.asarray([shape[a] for a in axes], np.float32)))
        policy = opts["policy"]
        if policy in ("not_larger", "not_smaller"):
            one = (b.reduce_min if policy == "not_larger" else b.reduce_max)(x=ratios, axes=[0], keep_dims=False)
            for a in axes:
                out = b.cast(x=b.floor(x=b.add(x=b.mul(x=one, y=np.float32(shape[a])), y=np.float32(0.5))),
                             dtype="int32")
                per_axis.append((one, out))
        elif policy == "stretch":
            for i, _ in enumerate(axes):
                per_axis.append((_scalar(ctx, ratios, i), _scalar(ctx, sizes, i)))
        else:
            raise ctx.format_error(f"keep_aspect_ratio_policy '{policy}' is not one of stretch, not_larger, "
                                   "not_smaller")
    else:
        for i, a in enumerate(axes):
            s = _scalar(ctx, scales, i)
            known = _const_scalar(s)
            if known is not None:  # floor(in * scale) in float64, as onnx's shape inference (fp32 can round up)
                per_axis.append((s, b.const(np.int32(np.floor(shape[a] * known)))))
            else:
                per_axis.append((s, b.cast(x=b.floor(x=b.mul(x=s, y=np.float32(shape[a]))), dtype="int32")))
    roi_pairs: list[tuple[Value, Value] | None] = [None] * k
    if opts["coord"] == "tf_crop_and_resize":
        if roi is None:
            raise ctx.format_error("tf_crop_and_resize needs roi")
        roi_len = roi.type.shape[0]
        full = is_static_dim(roi_len) and int(roi_len) == 2 * rank and k != rank
        for i, a in enumerate(axes):
            lo, hi = (a, rank + a) if full else (i, k + i)
            roi_pairs[i] = (_scalar(ctx, roi, lo), _scalar(ctx, roi, hi))
    for i, a in enumerate(axes):
        s_const = _const_scalar(per_axis[i][0])
        if s_const == 1.0 and roi_pairs[i] is None:
            continue  # ONNX leaves an axis of scale 1 as it is
        x = _resize_axis(ctx, x, a, shape[a], per_axis[i][0], per_axis[i][1], opts, roi_pairs[i])
    return x


def _const_scalar(v: Value) -> float | None:
    from ...ir.consteval import compile_time_value

    got = compile_time_value(v)
    return None if got is None else float(np.asarray(got).reshape(()))


def _options(ctx: Ctx, node: Node) -> dict:
    coord = ctx.attr("coordinate_transformation_mode", "half_pixel")
    if coord not in _COORD_MODES or (coord == "half_pixel_symmetric" and node.version < 19):
        raise ctx.format_error(f"coordinate_transformation_mode '{coord}' is not valid at this opset")
    mode = ctx.attr("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        raise ctx.format_error(f"mode '{mode}' is not one of nearest, linear, cubic")
    nearest = ctx.attr("nearest_mode", "round_prefer_floor")
    if nearest not in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
        raise ctx.format_error(f"nearest_mode '{nearest}' is not valid")
    return {"antialias": bool(int(ctx.attr("antialias", 0) or 0)) and mode != "nearest", "coord": coord,
            "mode": mode, "nearest": nearest, "cubic_a": float(ctx.attr("cubic_coeff_a", -0.75)),
            "exclude_outside": bool(ctx.attr("exclude_outside", 0)),
            "extrapolation": float(ctx.attr("extrapolation_value", 0.0)),
            "policy": ctx.attr("keep_aspect_ratio_policy", "stretch")}


def _given(ctx: Ctx, i: int) -> bool:
    """Input ``i`` is present and not an empty tensor (opset 11 passes '' or an empty scales)."""
    if not ctx.has(i):
        return False
    shape = ctx.value(ctx.node.proto.input[i]).type.shape
    return not (shape is not None and len(shape) == 1 and is_static_dim(shape[0]) and int(shape[0]) == 0)


@onnx_op("Resize", versions=(11, 19))
def resize(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, FLOATS)
    opts = _options(ctx, node)
    rank = ctx.rank(x)
    axes_attr = ctx.attr("axes") if node.version >= 18 else None
    axes = list(range(rank)) if not axes_attr else [normalize_axis(ctx, int(a), rank) for a in axes_attr]
    has_scales, has_sizes = _given(ctx, 2), _given(ctx, 3)
    if has_scales == has_sizes:
        raise ctx.format_error("exactly one of scales and sizes must be given")
    if opts["antialias"]:
        return [_antialias_resize(ctx, x, axes, opts)]
    fast = _as_mil_resize(ctx, x, axes, ctx.const_input(2) if has_scales else None,
                          ctx.const_input(3) if has_sizes else None, opts)
    if fast is not None:
        return [fast]
    scales = ctx.input(2, ("fp32",)) if has_scales else None
    sizes = ctx.input(3, ("int32",)) if has_sizes else None
    roi = ctx.input(1, ("fp32",)) if _given(ctx, 1) else None
    return [_resize(ctx, x, axes, scales, sizes, roi, opts)]


@onnx_op("Upsample", versions=(7, 10))
def upsample(ctx: Ctx, node: Node) -> list[Value]:
    """Upsample is Resize with asymmetric coordinates from the given scales (nearest rounds down):
    what onnxruntime computes, and ONNX's reference for integer nearest scales. Opset 7 gives the
    scales as an attribute, 9 and 10 as an input."""
    x = ctx.input(0, FLOATS)
    mode = ctx.attr("mode", "nearest")
    opts = {"antialias": False, "coord": "asymmetric", "mode": mode, "nearest": "floor", "cubic_a": -0.75,
            "exclude_outside": False, "extrapolation": 0.0, "policy": "stretch"}
    if mode not in ("nearest", "linear", "bilinear"):
        raise ctx.format_error(f"mode '{mode}' is not nearest or linear")
    opts["mode"] = "linear" if mode == "bilinear" else mode
    if node.version == 7:
        scales = ctx.b.const(np.asarray(ctx.required_attr("scales"), np.float32))
    else:
        scales = ctx.input(1, ("fp32",))
    return [_resize(ctx, x, list(range(ctx.rank(x))), scales, None, None, opts)]


#: Coordinate modes -> MIL sampling mode of resize_bilinear, when the scale is out / in exactly.
_LINEAR_SAMPLING = {"half_pixel": "UNALIGN_CORNERS", "pytorch_half_pixel": "UNALIGN_CORNERS",
                    "half_pixel_symmetric": "UNALIGN_CORNERS", "align_corners": "STRICT_ALIGN_CORNERS",
                    "asymmetric": "DEFAULT"}


def _as_mil_resize(ctx: Ctx, x: Value, axes: list[int], scales: np.ndarray | None, sizes: np.ndarray | None,
                   opts: dict) -> Value | None:
    """One MIL op for the common case (constant scales or sizes on the last two axes of a static
    input, every output size exactly in * scale): linear -> resize_bilinear, whose sampling modes
    are ONNX's coordinate modes when scale = out / in (half_pixel's taps below 0 or past the end
    clamp to the edge, as MIL's positions are clamped); nearest with integer upscales ->
    upsample_nearest_neighbor (floor(i / s): what half-pixel coordinates with either round_prefer
    mode and asymmetric ones with floor give). None when it does not apply."""
    shape = x.type.shape
    if (scales is None and sizes is None) or shape is None or len(shape) < 3 \
            or not all(is_static_dim(d) for d in shape) or opts["exclude_outside"] or opts["policy"] != "stretch":
        return None
    rank = len(shape)
    shape = [int(d) for d in shape]
    given = np.asarray(scales if scales is not None else sizes, np.float64).reshape(-1)
    if len(given) != len(axes):
        return None
    out, scale = list(shape), [1.0] * rank
    for a, g in zip(axes, given):
        if scales is not None:
            scale[a], out[a] = float(np.float32(g)), int(np.floor(shape[a] * float(np.float32(g))))
            if out[a] != shape[a] * scale[a]:
                return None  # ONNX's coordinates then use the fractional in * scale
        else:
            out[a], scale[a] = int(g), int(g) / shape[a]
    if any(out[a] != shape[a] for a in range(rank - 2)) or min(out) < 1:
        return None
    b = ctx.b
    if opts["mode"] == "linear" and opts["coord"] in _LINEAR_SAMPLING:
        if opts["coord"] == "pytorch_half_pixel" and min(out[-2:]) == 1:
            return None
        return b.resize_bilinear(x=x, target_size_height=np.int32(out[-2]), target_size_width=np.int32(out[-1]),
                                 sampling_mode=_LINEAR_SAMPLING[opts["coord"]])
    if opts["mode"] == "nearest":
        factors = [out[a] // shape[a] for a in (rank - 2, rank - 1)]
        if any(out[a] != f * shape[a] or f < 1 for a, f in zip((rank - 2, rank - 1), factors)):
            return None
        half = opts["coord"] in ("half_pixel", "pytorch_half_pixel", "half_pixel_symmetric") \
            and opts["nearest"] in ("round_prefer_floor", "round_prefer_ceil")
        if not (half or (opts["coord"] == "asymmetric" and opts["nearest"] == "floor")):
            return None
        if factors == [1, 1]:
            return b.identity(x=x)
        return b.upsample_nearest_neighbor(x=x, scale_factor_height=np.int32(factors[0]),
                                           scale_factor_width=np.int32(factors[1]))
    return None


def _coord_np(mode: str, y: np.ndarray, scale: float, n: int, m: int, roi: tuple[float, float] | None) -> np.ndarray:
    """ONNX's source coordinates in float64 (the conversion-time twin of `_source_coords`)."""
    out_w = scale * n
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if mode == "asymmetric":
        return y / scale
    if mode == "pytorch_half_pixel":
        return np.full(m, -0.5) if out_w == 1 else (y + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        return n / 2 * (1 - m / out_w) + (y + 0.5) / scale - 0.5
    if mode == "align_corners":
        return np.zeros(m) if out_w == 1 else y * (n - 1) / (out_w - 1)
    start, end = roi
    x = np.full(m, (end - start) * (n - 1) / 2) if out_w == 1 else y * (end - start) * (n - 1) / (out_w - 1)
    return x + start * (n - 1)


def _antialias_matrix(n: int, m: int, scale: float, opts: dict, roi: tuple[float, float] | None) -> np.ndarray:
    """[m, n] weights of ONNX's antialiased linear / cubic resize along one axis: the filter is
    stretched by 1 / min(scale, 1) and normalized; taps past the edge read the edge pixel (or are
    dropped and the rest renormalized with exclude_outside)."""
    s = min(scale, 1.0)
    x = _coord_np(opts["coord"], np.arange(m, dtype=np.float64), scale, n, m, roi)
    w = np.zeros((m, n))
    a = opts["cubic_a"]
    for row, xo in enumerate(x):
        if opts["coord"] == "tf_crop_and_resize" and (xo < 0 or xo > n - 1):
            continue  # extrapolated: added as a constant below
        base = int(np.floor(xo))
        ratio = xo - base
        if ratio == 0:  # ONNX takes an integral coordinate as ratio 1 from the pixel before
            base, ratio = base - 1, 1.0
        if opts["mode"] == "linear":
            start = int(np.floor(-1 / s) + 1)
            taps = np.arange(start, 2 - start)
            coeffs = np.clip(1 - np.abs((taps - ratio) * s), 0, 1)
        else:
            start = int(np.floor(-2 / s) + 1)
            taps = np.arange(start, 2 - start)
            t = np.abs((taps - ratio) * s)
            coeffs = np.where(t <= 1, (a + 2) * t ** 3 - (a + 3) * t ** 2 + 1,
                              np.where(t < 2, a * t ** 3 - 5 * a * t ** 2 + 8 * a * t - 4 * a, 0.0))
        coeffs = coeffs / coeffs.sum()
        idx = base + taps
        if opts["exclude_outside"]:
            coeffs = np.where((idx >= 0) & (idx < n), coeffs, 0.0)
            coeffs = coeffs / coeffs.sum()
        np.add.at(w[row], np.clip(idx, 0, n - 1), coeffs)
    return w


def _antialias_resize(ctx: Ctx, x: Value, axes: list[int], opts: dict) -> Value:
    b = ctx.b
    shape = static_dims(ctx, x, "an antialiased Resize")
    rank = len(shape)
    scales, sizes = ctx.const_input(2) if _given(ctx, 2) else None, ctx.const_input(3) if _given(ctx, 3) else None
    roi = ctx.const_input(1) if _given(ctx, 1) else None
    if (scales is None and sizes is None) or (opts["coord"] == "tf_crop_and_resize" and roi is None):
        raise ctx.unsupported("antialias needs constant scales or sizes (its filter width follows the scale)")
    given = [float(v) for v in np.asarray(scales if scales is not None else sizes).reshape(-1)]
    if opts["policy"] not in ("stretch", "not_larger", "not_smaller"):
        raise ctx.format_error(f"keep_aspect_ratio_policy '{opts['policy']}' is not valid")
    per = {}
    if scales is not None:
        for a, g in zip(axes, given):
            g = float(np.float32(g))
            per[a] = (g, int(np.floor(shape[a] * g)))
    else:
        ratios = [g / shape[a] for a, g in zip(axes, given)]
        if opts["policy"] != "stretch":
            one = min(ratios) if opts["policy"] == "not_larger" else max(ratios)
            per = {a: (one, int(one * shape[a] + 0.5)) for a in axes}
        else:
            per = {a: (r, int(g)) for a, r, g in zip(axes, ratios, given)}
    roi_list = [float(v) for v in np.asarray(roi).reshape(-1)] if roi is not None else None
    dt = x.type.dtype
    y = x
    for i, a in enumerate(axes):
        scale, m = per[a]
        pair = None
        if roi_list is not None and opts["coord"] == "tf_crop_and_resize":
            full = len(roi_list) == 2 * rank and len(axes) != rank
            pair = (roi_list[a], roi_list[rank + a]) if full else (roi_list[i], roi_list[len(axes) + i])
        if scale == 1.0 and m == shape[a] and pair is None:
            continue
        w = _antialias_matrix(shape[a], m, scale, opts, pair).astype(dt.storage)
        moved = y if a == rank - 1 else b.transpose(x=y, perm=[*[d for d in range(rank) if d != a], a])
        out = b.matmul(x=moved, y=b.const(np.ascontiguousarray(w.T)))
        if pair is not None:
            xo = _coord_np("tf_crop_and_resize", np.arange(m, dtype=np.float64), scale, shape[a], m, pair)
            outside = (xo < 0) | (xo > shape[a] - 1)
            if outside.any():
                out = b.add(x=out, y=b.const((outside * opts["extrapolation"]).astype(dt.storage)))
        if a != rank - 1:
            inv = list(range(rank - 1))
            inv.insert(a, rank - 1)
            out = b.transpose(x=out, perm=inv)
        y = out
    return y
