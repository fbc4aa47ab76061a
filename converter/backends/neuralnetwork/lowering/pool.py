"""Pooling: avg_pool, max_pool, l2_pool as ``pooling`` (1-D and 2-D) or ``pooling3d`` (3-D).

A window that covers the whole (static) input without padding is written as global pooling.
``ceil_mode`` is ``includeLastPixel`` (symmetric padding amounts): where its rule and MIL's would
give the same sizes as floor mode it is plain valid/custom padding; the one case where the spec's
rule drops a last window MIL keeps (an unpadded axis of a padded layer, stride > kernel, last
window starting at the input's end) is refused.
"""

from __future__ import annotations

from ....errors import LoweringError
from ....formats.proto import NeuralNetwork_pb2 as nn
from ....ir.core import Op
from ..emitter import NetworkEmitter
from ._window import (
    WindowParams,
    expand_h,
    flag,
    ints,
    read_window,
    set_2d_padding,
    set_3d_padding,
    spatial_rank,
    spatial_sizes,
    squeeze_h,
)
from .registry import lowering

_TYPES_2D = {"max_pool": nn.PoolingLayerParams.MAX, "avg_pool": nn.PoolingLayerParams.AVERAGE,
             "l2_pool": nn.PoolingLayerParams.L2}
_TYPES_3D = {"max_pool": nn.Pooling3DLayerParams.MAX, "avg_pool": nn.Pooling3DLayerParams.AVERAGE}


def _ceil_matters(win: WindowParams, sizes: list[int] | None) -> bool:
    """Whether ceil_mode changes any output size (unknown sizes: assume it does)."""
    if sizes is None:
        return True
    for n, k, s, (b, a) in zip(sizes, win.kernel, win.strides, win.pads):
        if (n + b + a - k) % s:
            return True
    return False


def _check_include_last_pixel(win: WindowParams, sizes: list[int] | None) -> None:
    """includeLastPixel drops a last window starting at or after ``H_in + pad`` on every axis once
    any axis is padded; MIL only on padded axes. Refuse where the two differ."""
    if not any(b for b, _ in win.pads):
        return
    for i, ((b, _), k, s) in enumerate(zip(win.pads, win.kernel, win.strides)):
        if b or s <= k:
            continue
        if sizes is None:
            raise LoweringError("ceil_mode with one axis unpadded, stride > kernel and a flexible size: whether "
                                "includeLastPixel drops its last window depends on the run-time size")
        n = sizes[i]
        out = -(-(n - k) // s) + 1
        if (out - 1) * s >= n:
            raise LoweringError(f"ceil_mode on axis {i}: includeLastPixel drops the last window (it starts at the "
                                "input's end) because another axis is padded; MIL keeps it")


@lowering("max_pool", "avg_pool", "l2_pool", note="pooling (globalPooling when the window is the whole input); "
                                                  "1-D via expandDims/squeeze; 3-D as pooling3d (spec 5)")
def _pool(e: NetworkEmitter, op: Op) -> None:
    x = op.inputs["x"]
    n_spatial = spatial_rank(x, "x")
    kernel = ints(e, op, "kernel_sizes")
    win = read_window(e, op, kernel, dilations=False)
    ceil_mode = flag(e, op, "ceil_mode")
    exclude = op.type == "avg_pool" and flag(e, op, "exclude_padding_from_average")
    sizes = spatial_sizes(x)
    # one window over the whole input, no padding ('same' pads nothing when every stride >= the size)
    is_global = sizes is not None and kernel == sizes and (win.pad_type == "valid" or (
        win.pad_type == "same" and all(s >= k for s, k in zip(win.strides, kernel))))
    if n_spatial == 3:
        _pool3d(e, op, win, exclude, sizes, is_global)
        return
    one_d = n_spatial == 1
    lwin = win.widened() if one_d else win
    blob = e.blob(x)
    if one_d:
        blob = expand_h(e, blob, op.name)
    out = e.define(op.outputs[0])
    layer_out = e.fresh(f"{op.name}_2d_out") if one_d else out
    p = e.layer("pooling", op.name, [blob], [layer_out])
    p.type = _TYPES_2D[op.type]
    if is_global:
        p.globalPooling = True
    else:
        p.kernelSize.extend(lwin.kernel)
        p.stride.extend(lwin.strides)
        if ceil_mode and _ceil_matters(win, sizes):
            _check_include_last_pixel(lwin, None if sizes is None else ([1, *sizes] if one_d else sizes))
            p.includeLastPixel.paddingAmounts.extend(b for b, _ in lwin.pads)
        else:
            set_2d_padding(p, lwin)
    p.avgPoolExcludePadding = exclude
    if one_d:
        squeeze_h(e, layer_out, out, op.name)


def _pool3d(e: NetworkEmitter, op: Op, win: WindowParams, exclude: bool, sizes: list[int] | None,
            is_global: bool) -> None:
    if op.type not in _TYPES_3D:
        raise LoweringError("3-D l2 pooling: Pooling3D has only MAX and AVERAGE")
    blob, out = e.blob(op.inputs["x"]), e.define(op.outputs[0])
    if is_global:
        g = e.layer("globalPooling3d", op.name, [blob], [out])
        g.type = {"max_pool": nn.GlobalPooling3DLayerParams.MAX, "avg_pool": nn.GlobalPooling3DLayerParams.AVERAGE}[
            op.type]
        return
    p = e.layer("pooling3d", op.name, [blob], [out])
    p.type = _TYPES_3D[op.type]
    p.kernelDepth, p.kernelHeight, p.kernelWidth = win.kernel
    p.strideDepth, p.strideHeight, p.strideWidth = win.strides
    set_3d_padding(p, win, sizes, op.type)
    p.countExcludePadding = exclude
