"""Resizing: resize_bilinear, upsample_bilinear, upsample_nearest_neighbor, resize_nearest_neighbor
and resize (iOS17).

WebNN's ``resample2d`` has one coordinate transform, half-pixel with clamping (spec 8.9.41):
``c = clamp((i + 0.5) * in / out - 0.5, 0, in - 1)``, nearest ``ceil(c - 0.5)``, linear between
``floor(c)`` and ``ceil(c)``. Chromium 153 rounds nearest ties up instead (a 2x downscale picks
pixels 1, 3, 5, the spec 0, 2, 4: measured), so nearest uses resample2d only where no tie occurs. For each resized axis the IR's own sampling (its sampling_grid and
index rules, `converter.ir.ops.image`) is computed at conversion time as an interpolation matrix
and compared with resample2d's: where they are equal (to 1e-6) the op is one ``resample2d``;
otherwise it is decomposed exactly, per axis and separably (height then width, as the IR does):
``gather`` of the source rows with constant int32 indices, then ``a * (1 - f) + b * f`` with
constant weights. The gathers work on any rank and in the operand's own layout (an NHWC operand
is resized along its axes 1 and 2, without transposes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ....ir.core import Op
from ....ir.opdef import InferArgs
from ....ir.ops.image import half_pixel_nearest, sampling_grid
from ..emitter import GraphEmitter, LoweringError, Operand
from ._common import cast, float_scalar, out, physical_axis, reshape
from .registry import lowering, unsupported

_F32 = np.float32


@dataclass(frozen=True)
class AxisPlan:
    """How one axis of ``n_in`` samples becomes ``n_out``: ``x[lo] * (1 - frac) + x[hi] * frac``
    (nearest: ``frac`` all 0, ``hi`` = ``lo``)."""

    lo: np.ndarray
    hi: np.ndarray
    frac: np.ndarray
    n_in: int

    @property
    def n_out(self) -> int:
        return int(self.lo.size)

    @property
    def nearest(self) -> bool:
        return not np.any(self.frac)

    @property
    def identity(self) -> bool:
        return self.nearest and self.n_out == self.n_in and bool(np.all(self.lo == np.arange(self.n_in)))

    def matrix(self) -> np.ndarray:
        """The [n_out, n_in] interpolation matrix."""
        m = np.zeros((self.n_out, self.n_in), np.float64)
        rows = np.arange(self.n_out)
        np.add.at(m, (rows, self.lo), 1.0 - self.frac.astype(np.float64))
        np.add.at(m, (rows, self.hi), self.frac.astype(np.float64))
        return m


def nearest_plan(idx: np.ndarray, n_in: int) -> AxisPlan:
    idx = np.asarray(idx, np.int64)
    return AxisPlan(idx, idx, np.zeros(idx.size, _F32), n_in)


def linear_plan(mode: str, n_in: int, n_out: int) -> AxisPlan:
    """The IR's linear sampling of an axis (image.lerp_axis over image.sampling_grid)."""
    pos = sampling_grid(mode, 0.0, float(n_in - 1), n_out)
    lo = np.clip(np.floor(pos), 0, n_in - 1).astype(np.int64)
    hi = np.minimum(lo + 1, n_in - 1)
    return AxisPlan(lo, hi, (pos - lo).astype(_F32), n_in)


def resample2d_plan(mode: str, n_in: int, n_out: int) -> AxisPlan:
    """What WebNN's resample2d computes on an axis (spec 8.9.41), for comparison."""
    c = np.clip((np.arange(n_out, dtype=np.float64) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
    if mode == "nearest-neighbor":
        return nearest_plan(np.ceil(c - 0.5).astype(np.int64), n_in)
    if mode == "nearest-half-up":  # Chromium's TFLite kernel rounds ties up (floor(c + 0.5)), the spec down
        return nearest_plan(np.floor(c + 0.5).astype(np.int64), n_in)
    lo = np.floor(c).astype(np.int64)
    return AxisPlan(lo, np.ceil(c).astype(np.int64), (c - lo).astype(_F32), n_in)


def _same(a: AxisPlan, b: AxisPlan) -> bool:
    return a.n_in == b.n_in and a.n_out == b.n_out and bool(np.allclose(a.matrix(), b.matrix(), rtol=0, atol=1e-6))


def resize_axes(e: GraphEmitter, op: Op, plans: Sequence[AxisPlan], *, x_key: str = "x") -> None:
    """Resize the last ``len(plans)`` axes of the op's input as ``plans`` say and bind the result:
    one resample2d where it computes exactly the plans, else gathers and lerps."""
    xv = op.inputs[x_key]
    shape = e.shape(xv)
    rank = len(shape)
    axes = list(range(rank - len(plans), rank))
    y_shape = e.shape(out(op))
    if all(p.identity for p in plans):
        x = e.any(xv)
        e.bind(out(op), e.emit("identity", x, shape=x.shape, dtype=x.dtype, perm=x.perm))
        return
    x = e.any(xv)
    dtype = x.dtype
    is_float = dtype.startswith("float")
    if is_float and len(plans) == 2 and rank >= 3:
        for method_mode, variants in (("nearest-neighbor", ("nearest-neighbor", "nearest-half-up")),
                                      ("linear", ("linear",))):
            if all(_same(p, resample2d_plan(v, p.n_in, p.n_out)) for p in plans for v in variants):
                e.bind(out(op), _resample2d(e, xv, x, method_mode, [p.n_out for p in plans], y_shape))
                return
    if not is_float and not all(p.nearest for p in plans):
        if not dtype.startswith("int"):
            raise LoweringError(f"linear resizing of {dtype} tensors has no WebNN form")
        y = _gather_lerp(e, cast(e, x, "float32"), axes, plans)
        e.bind(out(op), _truncate_to(e, y, dtype))
        return
    e.bind(out(op), _gather_lerp(e, x, axes, plans))


def _resample2d(e: GraphEmitter, xv, x: Operand, mode: str, sizes: list[int], y_shape) -> Operand:  # noqa: ANN001
    """resample2d on a 4-D operand: an NCHW or NHWC one as it is (axes [2, 3] or [1, 2]), other ranks
    through a 4-D reshape of the IR layout ([..., C, H, W] -> [prod(...), C, H, W])."""
    rank = len(y_shape)
    if x.rank == 4:
        ph, pw = physical_axis(x, 2), physical_axis(x, 3)
        if [ph, pw] in ([2, 3], [1, 2]):
            shape = list(x.shape)
            shape[ph], shape[pw] = sizes
            return e.emit("resample2d", x, shape=shape, dtype=x.dtype, perm=x.perm, mode=mode, sizes=sizes,
                          axes=[ph, pw])
    x = e.get(xv)
    ir_shape = list(x.shape)
    lead = int(np.prod(ir_shape[:-3], dtype=np.int64)) if rank > 3 else 1
    x4 = reshape(e, x, [lead, *ir_shape[-3:]])
    y4 = e.emit("resample2d", x4, shape=[lead, ir_shape[-3], *sizes], dtype=x.dtype, mode=mode, sizes=sizes,
                axes=[2, 3])
    return reshape(e, y4, y_shape)


def _gather_lerp(e: GraphEmitter, x: Operand, axes: Sequence[int], plans: Sequence[AxisPlan]) -> Operand:
    """Separable resize in ``x``'s own layout: per axis a gather (nearest) or two gathers and a lerp."""
    y = x
    for axis, plan in zip(axes, plans):
        if plan.identity:
            continue
        pa = physical_axis(y, axis)
        shape = list(y.shape)
        shape[pa] = plan.n_out

        def take(idx: np.ndarray, src: Operand = y, pa: int = pa, shape: list[int] = shape) -> Operand:
            return e.emit("gather", src, e.constant(idx.astype(np.int32), "int32"), shape=shape, dtype=src.dtype,
                          perm=src.perm, axis=pa)

        if plan.nearest:
            y = take(plan.lo)
            continue
        wshape = [1] * y.rank
        wshape[pa] = plan.n_out
        frac = plan.frac.astype(_F32)
        a = take(plan.lo)
        b = take(plan.hi)
        wa = e.constant((_F32(1) - frac).reshape(wshape), y.dtype)
        wb = e.constant(frac.reshape(wshape), y.dtype)
        a = e.emit("mul", a, wa, shape=shape, dtype=y.dtype, perm=y.perm)
        b = e.emit("mul", b, wb, shape=shape, dtype=y.dtype, perm=y.perm)
        y = e.emit("add", a, b, shape=shape, dtype=y.dtype, perm=y.perm)
    return y


def _truncate_to(e: GraphEmitter, y: Operand, dtype: str) -> Operand:
    """A float result cast to an integer type truncating toward zero (the IR's C-style cast)."""
    sign = e.emit("sign", y, shape=y.shape, dtype=y.dtype, perm=y.perm)
    mag = e.emit("floor", e.emit("abs", y, shape=y.shape, dtype=y.dtype, perm=y.perm), shape=y.shape,
                 dtype=y.dtype, perm=y.perm)
    return cast(e, e.emit("mul", sign, mag, shape=y.shape, dtype=y.dtype, perm=y.perm), dtype)


def _str(e: GraphEmitter, op: Op, key: str) -> str:
    return str(np.asarray(e.const_param(op, key)).reshape(-1)[0])


def _in_out(e: GraphEmitter, op: Op, n: int) -> list[tuple[int, int]]:
    xs, ys = e.shape(op.inputs["x"]), e.shape(out(op))
    return list(zip(xs[-n:], ys[-n:]))


@lowering("resize_bilinear", kind="decomposed",
          note="resample2d linear for UNALIGN_CORNERS (half-pixel); other sampling modes as per-axis gathers of "
               "the two source rows (constant int32 indices) and a lerp with constant weights")
def _resize_bilinear(e: GraphEmitter, op: Op) -> None:
    mode = _str(e, op, "sampling_mode")
    resize_axes(e, op, [linear_plan(mode, n, m) for n, m in _in_out(e, op, 2)])


@lowering("upsample_bilinear", kind="decomposed",
          note="resample2d linear for half-pixel centres; align_corners and TF's legacy mode as gathers and a lerp")
def _upsample_bilinear(e: GraphEmitter, op: Op) -> None:
    mode = op.opdef._mode(InferArgs(op.opdef, op))
    resize_axes(e, op, [linear_plan(mode, n, m) for n, m in _in_out(e, op, 2)])


@lowering("upsample_nearest_neighbor", kind="decomposed",
          note="resample2d nearest-neighbor for integer scales; other scales as a gather with constant indices")
def _upsample_nearest(e: GraphEmitter, op: Op) -> None:
    scales = (float_scalar(e.const_param(op, "scale_factor_height")),
              float_scalar(e.const_param(op, "scale_factor_width")))
    plans = []
    for (n, m), s in zip(_in_out(e, op, 2), scales):
        src = np.floor(np.arange(m, dtype=_F32) * _F32(1.0 / s)).astype(np.int64)
        plans.append(nearest_plan(np.minimum(src, n - 1), n))
    resize_axes(e, op, plans)


@lowering("resize_nearest_neighbor", kind="decomposed",
          note="half-pixel nearest rounding half up: resample2d where WebNN's (half down) picks the same pixels "
               "(integer upscales), else a gather with constant indices")
def _resize_nearest(e: GraphEmitter, op: Op) -> None:
    resize_axes(e, op, [nearest_plan(half_pixel_nearest(n, m), n) for n, m in _in_out(e, op, 2)])


@lowering("resize", kind="decomposed",
          note="the last resized_dims axes (sizes known at conversion time): NEAREST_NEIGHBOR as "
               "resize_nearest_neighbor, LINEAR as resize_bilinear per axis; int32 linear truncated")
def _resize(e: GraphEmitter, op: Op) -> None:
    n = int(float_scalar(e.const_param(op, "resized_dims")))
    if n == 0:
        x = e.any(op.inputs["x"])
        e.bind(out(op), e.emit("identity", x, shape=x.shape, dtype=x.dtype, perm=x.perm))
        return
    pairs = _in_out(e, op, n)
    if _str(e, op, "interpolation_mode") == "NEAREST_NEIGHBOR":
        plans = [nearest_plan(half_pixel_nearest(a, b), a) for a, b in pairs]
    else:
        mode = _str(e, op, "sampling_mode")
        plans = [linear_plan(mode, a, b) for a, b in pairs]
    resize_axes(e, op, plans)


unsupported("sample positions read from the data (a per-box crop and bilinear resize): WebNN has no "
            "crop-and-resize, and a decomposition through computed gatherND coordinates is not written",
            "crop_resize")
unsupported("grid sampling at positions read from the data: WebNN has no grid sampler, and a decomposition "
            "through computed gatherND coordinates and padding modes is not written", "resample", "affine")
