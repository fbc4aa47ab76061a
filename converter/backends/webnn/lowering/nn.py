"""Convolutions, pooling, matrix products and normalizations.

Spatial ops work on 4-D operands; in NHWC mode (``--layout nhwc``) they take and produce NHWC
operands (`emitter.NCHW_TO_NHWC`) and their filters are re-laid-out at conversion time (conv2d
``ohwi``, convTranspose2d ``ohwi``). 1-D forms (rank 3) run as 2-D with a unit height.
Padding is given explicitly, computed by the IR's own window rules (``same``, ``valid``,
custom); pooling with ``ceil_mode`` passes the IR's exact output sizes.
"""

from __future__ import annotations

import numpy as np

from ....ir.core import Op, Value
from ....ir.opdef import InferArgs
from ....ir.ops.conv import read_window
from ....ir.ops.pool import _output_windows
from ..emitter import NCHW_TO_NHWC, GraphEmitter, LoweringError, Operand
from ._common import axis_of, float_scalar, int_list, out, physical_axis, reshape
from .registry import lowering


def _spatial_input(e: GraphEmitter, v: Value, layout: str | None = None) -> tuple[Operand, bool, str]:
    """``v`` as a 4-D operand, whether it was 1-D (rank 3), and the layout the op computes in:
    ``layout``, else NHWC in NHWC mode for 2-D ops; 1-D ops (a unit height added) stay NCHW, where
    NHWC would only add transposes."""
    shape = e.shape(v)
    if len(shape) == 4:
        if (layout or e.layout) == "nhwc":
            return e.get(v, NCHW_TO_NHWC), False, "nhwc"
        return e.get(v), False, "nchw"
    if len(shape) == 3:
        return reshape(e, e.get(v), [shape[0], shape[1], 1, shape[2]]), True, "nchw"
    raise LoweringError(f"{len(shape) - 2}-D spatial ops have no WebNN form (conv2d and the 2-D pools only)")


def _bind_spatial(e: GraphEmitter, op: Op, y: Operand, one_d: bool) -> None:
    """Bind the op's output from a 4-D result (NHWC operands keep their layout)."""
    e.bind(out(op), reshape(e, y, e.shape(out(op))) if one_d else y)


def _out_hw(y_shape: tuple[int, ...], layout: str) -> tuple[int, int]:
    return (y_shape[2], y_shape[3]) if layout == "nchw" else (y_shape[1], y_shape[2])


def _shape4(n: int, c: int, h: int, w: int, layout: str) -> list[int]:
    return [n, c, h, w] if layout == "nchw" else [n, h, w, c]


def _window(op: Op, kernel: tuple[int, ...], one_d: bool):  # noqa: ANN202 - a conv.Window
    a = InferArgs(op.opdef, op)
    pool = op.type not in ("conv", "conv_transpose")
    ceil = pool and "ceil_mode" in op.opdef.signature.inputs and bool(np.asarray(a.value("ceil_mode")).reshape(-1)[0])
    return read_window(a, kernel, dilations=not pool, ceil_mode=ceil)


def _pads(win, in_hw: tuple[int, ...], one_d: bool) -> list[int]:  # noqa: ANN001
    pairs = win.pads(in_hw)
    if one_d:
        return [0, 0, pairs[0][0], pairs[0][1]]
    return [pairs[0][0], pairs[0][1], pairs[1][0], pairs[1][1]]


def _two(values: tuple[int, ...], one_d: bool, fill: int = 1) -> list[int]:
    return [fill, int(values[0])] if one_d else [int(values[0]), int(values[1])]


def _filter(e: GraphEmitter, v: Value, one_d: bool, nhwc_perm: tuple[int, ...], layout: str,
            value: np.ndarray | None = None) -> Operand:
    """The filter operand in the op's layout (``value``: a replacement value computed from ``v``'s)."""
    const = e.value_of(v) if value is None else value
    shape = const.shape if const is not None else e.shape(v)
    if one_d:
        if const is None:
            raise LoweringError("a 1-D convolution needs a constant weight here")
        const = const.reshape(shape[0], shape[1], 1, shape[2])
    if const is not None:
        arr = np.transpose(const, nhwc_perm) if layout == "nhwc" else const
        dtype = e.dtype_of(v)  # a quantized weight's replacement value is a float filter
        return e.constant(arr, dtype if dtype.startswith("float") else e.data_type("fp32"))
    return e.get(v, nhwc_perm if layout == "nhwc" else None)


def _bias(e: GraphEmitter, op: Op) -> Operand | None:
    if "bias" not in op.inputs:
        return None
    return e.get(op.inputs["bias"])


@lowering("conv", note="conv2d (explicit padding; ohwi filters in NHWC)")
def _conv(e: GraphEmitter, op: Op) -> None:
    lower_conv(e, op)


def _conv_frame(e: GraphEmitter, op: Op):  # noqa: ANN202 - a tuple of what both convolutions read
    """What conv and conv_transpose read alike: (x operand, 1-D?, layout, weight shape, input
    spatial sizes, window, groups, output shape)."""
    xv = op.inputs["x"]
    x, one_d, layout = _spatial_input(e, xv)
    w_shape = e.shape(op.inputs["weight"])
    win = _window(op, tuple(w_shape[2:]), one_d)
    groups = int(float_scalar(e.param(op, "groups")))
    return x, one_d, layout, w_shape, e.shape(xv)[2:], win, groups, e.shape(out(op))


def lower_conv(e: GraphEmitter, op: Op, weight: np.ndarray | None = None) -> None:
    """conv2d for ``op`` (conv and its kin); ``weight``: the filter's value where it is not the op's
    ``weight`` input as it stands (conv_quantized's dequantized one)."""
    x, one_d, layout, w_shape, in_sizes, win, groups, y_ir = _conv_frame(e, op)
    y_shape = _shape4(y_ir[0], y_ir[1], 1 if one_d else y_ir[2], y_ir[-1], layout)
    y = e.emit("conv2d", x, _filter(e, op.inputs["weight"], one_d, (0, 2, 3, 1), layout, weight), shape=y_shape,
               dtype=x.dtype,
               perm=x.perm, padding=_pads(win, tuple(in_sizes), one_d), strides=_two(win.strides, one_d),
               dilations=_two(win.dilations, one_d), groups=groups, inputLayout=layout,
               filterLayout="ohwi" if layout == "nhwc" else "oihw", bias=_bias(e, op))
    _bind_spatial(e, op, y, one_d)


@lowering("conv_transpose", kind="decomposed",
          note="convTranspose2d without padding (Chromium refuses explicit padding), then a slice to the IR's "
               "output window; outputPadding where the output extends the full result")
def _conv_transpose(e: GraphEmitter, op: Op) -> None:
    from ....ir.ops.conv import ConvTranspose

    x, one_d, layout, w_shape, in_sizes, win, groups, y_ir = _conv_frame(e, op)
    outs = y_ir[2:]
    full = [(n - 1) * s + (int(k) - 1) * d + 1 for n, k, s, d in zip(in_sizes, w_shape[2:], win.strides, win.dilations)]
    crop = [ConvTranspose._crop_before(win, i, in_sizes[i], outs[i]) for i in range(len(outs))]
    extra = [max(c + o - f, 0) for c, o, f in zip(crop, outs, full)]
    for ex, s, d in zip(extra, win.strides, win.dilations):
        if ex >= max(s, d):
            raise LoweringError("an output larger than the full transposed convolution by a stride or more has no "
                                "WebNN form")
    sizes = [f + x_ for f, x_ in zip(full, extra)]
    hw = [1, sizes[0]] if one_d else sizes
    c_out = y_ir[1]
    weight = _plain_transpose_weight(e, op, groups, win.dilations)
    y = e.emit("convTranspose2d", x, _filter(e, op.inputs["weight"], one_d, (1, 2, 3, 0), layout, weight),
               shape=_shape4(y_ir[0], c_out, hw[0], hw[1], layout), dtype=x.dtype, perm=x.perm,
               padding=[0, 0, 0, 0], strides=_two(win.strides, one_d), dilations=[1, 1],
               outputPadding=_two(tuple(extra), one_d, fill=0), groups=1, inputLayout=layout,
               filterLayout="ohwi" if layout == "nhwc" else "iohw", bias=_bias(e, op))
    start_hw = [0, crop[0]] if one_d else crop
    size_hw = [1, outs[0]] if one_d else list(outs)
    if layout == "nchw":
        starts, size = [0, 0, *start_hw], [y_ir[0], c_out, *size_hw]
    else:
        starts, size = [0, *start_hw, 0], [y_ir[0], *size_hw, c_out]
    if list(size) != list(y.shape):
        y = e.emit("slice", y, starts, size, shape=size, dtype=y.dtype, perm=y.perm)
    _bind_spatial(e, op, y, one_d)


def _plain_transpose_weight(e: GraphEmitter, op: Op, groups: int, dilations: tuple[int, ...]) -> np.ndarray | None:
    """Chromium's convTranspose2d refuses dilations and groups (at build): the same product with a
    constant weight whose taps are spread by the dilations (zeros between) and whose groups form a
    block-diagonal [C_in, C_out] weight. None: the weight as it is (no dilations, one group)."""
    if groups == 1 and all(d == 1 for d in dilations):
        return None
    w = e.value_of(op.inputs["weight"])
    if w is None:
        raise LoweringError("conv_transpose with dilations or groups needs a constant weight (Chromium's "
                            "convTranspose2d refuses both)")
    c_in, og, *kernel = w.shape
    dilated = np.zeros((c_in, og, *[(k - 1) * d + 1 for k, d in zip(kernel, dilations)]), w.dtype)
    dilated[(slice(None), slice(None), *[slice(None, None, d) for d in dilations])] = w
    dense = np.zeros((c_in, og * groups, *dilated.shape[2:]), w.dtype)
    ig = c_in // groups
    for g in range(groups):
        dense[g * ig:(g + 1) * ig, g * og:(g + 1) * og] = dilated[g * ig:(g + 1) * ig]
    return dense


def _pool_layout(e: GraphEmitter, xv: Value) -> str:
    """Pools work in either layout at the same cost: in NHWC mode a pool follows its input's layout
    (NHWC after a conv; the IR's own after, e.g., a normalization's elementwise ops), so it never
    adds a transpose pair of its own."""
    if e.layout != "nhwc":
        return "nchw"
    if e.is_bound(xv) and e.any(xv).perm is None:
        return "nchw"
    return "nhwc"


def _pool(e: GraphEmitter, op: Op, method: str) -> None:
    xv = op.inputs["x"]
    x, one_d, layout = _spatial_input(e, xv, _pool_layout(e, xv))
    kernel = tuple(int_list(e.const_param(op, "kernel_sizes")))
    win = _window(op, kernel, one_d)
    in_sizes = tuple(e.shape(xv)[2:])
    y_ir = e.shape(out(op))
    out_hw = [1, y_ir[2]] if one_d else [y_ir[2], y_ir[3]]
    y_shape = _shape4(y_ir[0], y_ir[1], out_hw[0], out_hw[1], layout)
    pads = _pads(win, in_sizes, one_d)
    common = {"windowDimensions": _two(kernel, one_d), "strides": _two(win.strides, one_d),
              "dilations": _two(win.dilations, one_d) if method == "maxPool2d" else None, "layout": layout}
    if method == "averagePool2d":
        if any(d != 1 for d in win.dilations):
            raise LoweringError("averagePool2d with dilations is refused by Chromium")
        common.pop("dilations")
        exclude = bool(np.asarray(e.param(op, "exclude_padding_from_average")).reshape(-1)[0])
        y = _average(e, x, win, in_sizes, tuple(y_ir[2:]), exclude, pads, one_d, y_shape, common, layout)
    else:
        if win.ceil_mode:
            common["outputSizes"] = out_hw
        y = e.emit(method, x, shape=y_shape, dtype=x.dtype, perm=x.perm, padding=pads, **common)
        if method == "maxPool2d":
            y = _empty_windows_to_minus_inf(e, y, win, in_sizes, tuple(y_ir[2:]), layout)
    _bind_spatial(e, op, y, one_d)


def _empty_windows_to_minus_inf(e: GraphEmitter, y: Operand, win, in_sizes, outs, layout: str) -> Operand:  # noqa: ANN001
    """A max over a window of padding only is -inf in MIL; Chromium's maxPool2d gives 0 there: such
    positions (known at conversion time) get -inf added."""
    empty = np.zeros(outs, bool)
    for index, _region, count in _output_windows(win, in_sizes, outs, exclude=True):
        empty[index] = count == 0
    if not empty.any():
        return y
    offset = np.where(empty, -np.inf, 0.0).astype(np.float32).reshape(y.shape[2:] if layout == "nchw" else
                                                                     y.shape[1:3])
    offset = offset[..., None] if layout == "nhwc" else offset
    return e.emit("add", y, e.constant(offset, y.dtype), shape=y.shape, dtype=y.dtype, perm=y.perm)


def _average(e: GraphEmitter, x: Operand, win, in_sizes, outs, exclude, pads, one_d, y_shape, common,  # noqa: ANN001, ANN202
             layout):
    """Average pooling that divides exactly as the IR does: windows are summed over an explicitly
    zero-padded input (padding plus ceil_mode's overhang), then scaled by k / count per position."""
    k = int(np.prod(win.kernel))
    counts = np.ones(outs, np.float64) * k
    for index, _region, count in _output_windows(win, in_sizes, outs, exclude=exclude):
        counts[index] = count
    overhang = []
    for i, (n, o) in enumerate(zip(in_sizes, outs)):
        before, after = win.pad(i, n)
        need = (o - 1) * win.strides[i] + int(win.effective(i))
        overhang.append(max(need - (n + before + after), 0))
    plain = not any(pads) and not any(overhang) and np.all(counts == k)
    if plain:
        return e.emit("averagePool2d", x, shape=y_shape, dtype=x.dtype, perm=x.perm, padding=[0, 0, 0, 0], **common)
    hw_before = [pads[0], pads[2]]
    hw_after = [pads[1] + (0 if one_d else overhang[0]), pads[3] + overhang[-1]]
    if layout == "nhwc":
        before, after = [0, *hw_before, 0], [0, *hw_after, 0]
    else:
        before, after = [0, 0, *hw_before], [0, 0, *hw_after]
    padded_shape = [d + b + a for d, b, a in zip(x.shape, before, after)]
    xp = e.emit("pad", x, before, after, shape=padded_shape, dtype=x.dtype, perm=x.perm, mode="constant")
    avg = e.emit("averagePool2d", xp, shape=y_shape, dtype=x.dtype, perm=x.perm, padding=[0, 0, 0, 0], **common)
    if np.all(counts == k):
        return avg
    scale = (k / np.maximum(counts, 1)).reshape((1, *outs) if one_d else outs)  # no cell counted: 0, as MIL
    scale = scale.reshape(scale.shape[-2:])
    scale = scale[..., None] if layout == "nhwc" else scale  # [H, W, 1] broadcasts over NHWC's channels
    return e.emit("mul", avg, e.constant(scale.astype(np.float32), x.dtype), shape=y_shape, dtype=x.dtype,
                  perm=x.perm)


@lowering("max_pool", note="maxPool2d (explicit padding; ceil_mode as exact outputSizes)")
def _max_pool(e: GraphEmitter, op: Op) -> None:
    _pool(e, op, "maxPool2d")


@lowering("avg_pool", kind="decomposed", note="averagePool2d; padding and ceil_mode as an explicit zero pad and an "
                                              "exact per-position divisor")
def _avg_pool(e: GraphEmitter, op: Op) -> None:
    _pool(e, op, "averagePool2d")


@lowering("l2_pool", note="l2Pool2d")
def _l2_pool(e: GraphEmitter, op: Op) -> None:
    _pool(e, op, "l2Pool2d")


# -- matrix products ------------------------------------------------------------------------------------


@lowering("linear", note="gemm (rank 2, bTranspose) or matmul with the weight transposed at conversion time, + bias")
def _linear(e: GraphEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    x = e.get(xv)
    w = e.value_of(op.inputs["weight"])
    if w is None:
        raise LoweringError("linear needs a constant weight")
    order = e.flat_orders.get(xv)
    if order is not None:  # x is a flatten of NHWC data, in its physical order: reorder the weight's columns
        w = np.ascontiguousarray(w[:, order])
    dtype = x.dtype
    if not dtype.startswith("float"):
        raise LoweringError("integer linear has no WebNN form (gemm and matmul are float-only in Chromium)")
    bias = e.value_of(op.inputs["bias"]) if "bias" in op.inputs else None
    y_shape = e.shape(out(op))
    if x.rank == 2:
        options = {"bTranspose": True}
        if bias is not None and np.any(bias):
            options["c"] = e.constant(bias, dtype)
        e.bind(out(op), e.emit("gemm", x, e.constant(w, dtype), shape=y_shape, dtype=dtype, **options))
        return
    x2 = reshape(e, x, [1, x.shape[0]]) if x.rank == 1 else x
    mm_shape = list(x2.shape[:-1]) + [w.shape[0]]
    y = e.emit("matmul", x2, e.constant(np.ascontiguousarray(w.T), dtype), shape=mm_shape, dtype=dtype)
    if bias is not None and np.any(bias):
        y = e.emit("add", y, e.constant(bias, dtype), shape=mm_shape, dtype=dtype)
    e.bind(out(op), reshape(e, y, y_shape))


@lowering("matmul", note="matmul; transpose_x/y as transposes (constants transposed at conversion time); rank-1 "
                         "operands reshaped")
def _matmul(e: GraphEmitter, op: Op) -> None:
    def side(key: str, flag_key: str, vector_shape) -> Operand:  # noqa: ANN001
        v = op.inputs[key]
        t = bool(np.asarray(e.param(op, flag_key)).reshape(-1)[0])
        shape = e.shape(v)
        const = e.value_of(v) if not e.is_bound(v) else None
        if const is not None:
            arr = const.reshape(vector_shape(shape[0])) if len(shape) == 1 else const
            if t and len(shape) > 1:
                arr = np.swapaxes(arr, -1, -2)
            return e.constant(np.ascontiguousarray(arr), e.dtype_of(v))
        o = e.get(v)
        if len(shape) == 1:
            return reshape(e, o, vector_shape(shape[0]))
        if t:
            perm = list(range(len(shape)))
            perm[-1], perm[-2] = perm[-2], perm[-1]
            o = e.emit("transpose", o, shape=[o.shape[p] for p in perm], dtype=o.dtype, permutation=perm)
        return o

    a = side("x", "transpose_x", lambda k: [1, k])
    b = side("y", "transpose_y", lambda k: [k, 1])
    if not a.dtype.startswith("float"):
        raise LoweringError("integer matmul has no WebNN form (matmul is float-only in Chromium)")
    batch = list(np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2])))
    shape = batch + [a.shape[-2], b.shape[-1]]
    y = e.emit("matmul", a, b, shape=shape, dtype=a.dtype)
    e.bind(out(op), reshape(e, y, e.shape(out(op))))


# -- normalization ------------------------------------------------------------------------------------


def _eps(e: GraphEmitter, op: Op) -> float:
    return float_scalar(e.param(op, "epsilon"))


@lowering("batch_norm", note="batchNormalization (axis: the channel axis of the layout)")
def _batch_norm(e: GraphEmitter, op: Op) -> None:
    x = e.any(op.inputs["x"])
    options = {"epsilon": _eps(e, op), "axis": physical_axis(x, 1)}
    for key, name in (("gamma", "scale"), ("beta", "bias")):
        if key in op.inputs:
            options[name] = e.get(op.inputs[key])
    e.bind(out(op), e.emit("batchNormalization", x, e.get(op.inputs["mean"]), e.get(op.inputs["variance"]),
                           shape=x.shape, dtype=x.dtype, perm=x.perm, **options))


@lowering("instance_norm", note="instanceNormalization (rank 3 as 4 with a unit width)")
def _instance_norm(e: GraphEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    shape = e.shape(xv)
    if len(shape) == 4:
        x = e.get(xv, NCHW_TO_NHWC) if e.layout == "nhwc" else e.get(xv)
        one_d = False
    elif len(shape) == 3:
        x = reshape(e, e.get(xv), [*shape, 1])
        one_d = True
    else:
        raise LoweringError(f"instance_norm of rank {len(shape)} has no WebNN form")
    layout = "nhwc" if x.perm is not None else "nchw"
    options = {"epsilon": _eps(e, op), "layout": layout}
    for key, name in (("gamma", "scale"), ("beta", "bias")):
        if key in op.inputs:
            options[name] = e.get(op.inputs[key])
    y = e.emit("instanceNormalization", x, shape=x.shape, dtype=x.dtype, perm=x.perm, **options)
    e.bind(out(op), reshape(e, y, shape) if one_d else y)


@lowering("layer_norm", note="layerNormalization (axes normalized; gamma/beta reshaped to the normalized dims)")
def _layer_norm(e: GraphEmitter, op: Op) -> None:
    x = e.get(op.inputs["x"])
    axes_v = e.param(op, "axes")
    axes = list(range(x.rank)) if axes_v is None else sorted({axis_of(a, x.rank) for a in int_list(axes_v)})
    options: dict[str, object] = {"epsilon": _eps(e, op), "axes": axes}
    norm_shape = [x.shape[a] for a in axes]
    for key, name in (("gamma", "scale"), ("beta", "bias")):
        if key in op.inputs:
            value = e.value_of(op.inputs[key])
            options[name] = (e.constant(value.reshape(norm_shape), x.dtype) if value is not None
                             else reshape(e, e.get(op.inputs[key]), norm_shape))
    e.bind(out(op), e.emit("layerNormalization", x, shape=x.shape, dtype=x.dtype, **options))
