"""Rank-5 lowerings on channels and two spatial axes: convolution (also transposed), pooling,
batch_norm, lrn, upsampling and resizeBilinear."""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....formats.proto import NeuralNetwork_pb2 as nn
from ....ir.core import Op
from ..lowering._common import scalar
from .layout import (
    Layout,
    Rank5Emitter,
    chw_layout,
    is_static,
    op_value,
    spatial_layout,
)
from .lowering import input_value, rank5

# convolution and pooling


def _pairs(v, what: str) -> list[int]:
    vals = [int(d) for d in np.asarray(v).reshape(-1)]
    if len(vals) != 2:
        raise LoweringError(f"{what} {vals}: rank-5 layers have two spatial axes")
    return vals


def _set_padding(e: Rank5Emitter, op: Op, params, kernel: list[int], strides: list[int],
                 dilations: list[int]) -> None:
    """ValidPadding (with amounts) or SamePadding of a conv/pool for MIL's pad_type and pad."""
    pad_type = str(e.const_param(op, "pad_type"))
    if pad_type == "same":
        params.same.asymmetryMode = nn.SamePadding.BOTTOM_RIGHT_HEAVY
        return
    if pad_type == "same_lower":
        params.same.asymmetryMode = nn.SamePadding.TOP_LEFT_HEAVY
        return
    params.valid.SetInParent()
    if pad_type == "valid":
        return
    if pad_type != "custom":
        raise LoweringError(f"pad_type '{pad_type}' has no legacy form")
    pad = [int(d) for d in np.asarray(e.const_param(op, "pad")).reshape(-1)]
    if len(pad) != 4:
        raise LoweringError(f"pad {pad}: rank-5 layers have two spatial axes")
    for start, end in ((pad[0], pad[1]), (pad[2], pad[3])):
        edge = params.valid.paddingAmounts.borderAmounts.add()
        edge.startEdgeSize, edge.endEdgeSize = start, end


def _conv_common(e: Rank5Emitter, op: Op, what: str):
    x = input_value(op)
    flexible = what == "conv"  # conv_transpose computes with the sizes
    layout = spatial_layout(x, f"{what} input", flexible=flexible)
    out_layout = spatial_layout(op.outputs[0], f"{what} output", flexible=flexible)
    if e.const(op_value(op, "weight")) is None:
        raise LoweringError(f"{what} with a run-time weight (a second input needs specification version 4)")
    weight = np.asarray(e.const(op_value(op, "weight")))
    bias_v = op_value(op, "bias")
    bias = None if bias_v is None else e.const_array(bias_v, f"{what} bias")
    params = e.layer("convolution", op.name, [e.get(x, layout)], [e.put(op.outputs[0], out_layout)])
    groups = int(e.const_param(op, "groups"))
    params.nGroups = groups
    params.kernelSize.extend(int(d) for d in weight.shape[2:])
    params.stride.extend(_pairs(e.const_param(op, "strides"), "strides"))
    return x, layout, out_layout, weight, bias, groups, params


@rank5("conv")
def _conv(e: Rank5Emitter, op: Op) -> None:
    """convolution: weights [C_out, C_in / groups, kH, kW] as MIL's; kernelChannels = C_in / groups."""
    x, layout, out_layout, weight, bias, groups, params = _conv_common(e, op, "conv")
    dilations = _pairs(e.const_param(op, "dilations"), "dilations")
    params.outputChannels = weight.shape[0]
    params.kernelChannels = weight.shape[1]
    params.dilationFactor.extend(dilations)
    _set_padding(e, op, params, list(weight.shape[2:]), list(params.stride), dilations)
    e.weights(params.weights, weight)
    if bias is not None:
        params.hasBias = True
        e.weights(params.bias, bias)


@rank5("conv_transpose")
def _conv_transpose(e: Rank5Emitter, op: Op) -> None:
    """Deconvolution: weights [C_in, C_out / groups, kH, kW] (MIL's layout is the layer's). The
    crop of the full ``(D - 1) * s + K`` result is written as ValidPadding amounts (before, after),
    whose output size ``(D - 1) * s + K - before - after`` is the op's; ``outputShape`` is not
    written: the spec says the padding is ignored when it is set, so where the crop falls would be
    up to the runtime (onnxmltools then centres it)."""
    x, layout, out_layout, weight, bias, groups, params = _conv_common(e, op, "conv_transpose")
    if _pairs(e.const_param(op, "dilations"), "dilations") != [1, 1]:
        raise LoweringError("a dilated conv_transpose (the legacy deconvolution ignores dilation)")
    params.isDeconvolution = True
    params.kernelChannels = weight.shape[0]
    params.outputChannels = weight.shape[1] * groups
    pad_type = str(e.const_param(op, "pad_type"))
    pad = [int(d) for d in np.asarray(e.const_param(op, "pad")).reshape(-1)] if pad_type == "custom" else [0] * 4
    params.valid.SetInParent()
    for i, (n, k, s, out) in enumerate(zip(layout[1:], weight.shape[2:], params.stride, out_layout[1:])):
        excess = (n - 1) * s + int(k) - out
        before = excess // 2 if pad_type == "same" else pad[2 * i]
        if excess < 0 or not 0 <= before <= excess:
            raise LoweringError(f"conv_transpose output size {out} is larger than its full result "
                                f"{(n - 1) * s + int(k)} minus the padding (no legacy form)")
        edge = params.valid.paddingAmounts.borderAmounts.add()
        edge.startEdgeSize, edge.endEdgeSize = before, excess - before
    e.weights(params.weights, weight)
    if bias is not None:
        params.hasBias = True
        e.weights(params.bias, bias)


_POOL = {"max_pool": nn.PoolingLayerParams.MAX, "avg_pool": nn.PoolingLayerParams.AVERAGE,
         "l2_pool": nn.PoolingLayerParams.L2}


@rank5(*_POOL)
def _pool(e: Rank5Emitter, op: Op) -> None:
    x = input_value(op)
    layout = spatial_layout(x, "pooling input", flexible=True)
    out_layout = spatial_layout(op.outputs[0], "pooling output", flexible=True)
    kernel = _pairs(e.const_param(op, "kernel_sizes"), "kernel_sizes")
    strides = _pairs(e.const_param(op, "strides"), "strides")
    ceil = bool(np.asarray(e.const_param(op, "ceil_mode")).reshape(-1)[0])
    if ceil and not is_static(layout + out_layout):
        raise LoweringError("ceil_mode pooling of flexible sizes (includeLastPixel is checked against the sizes)")
    amounts = _include_last_pixel(e, op, layout, out_layout, kernel, strides) if ceil else None
    params = e.layer("pooling", op.name, [e.get(x, layout)], [e.put(op.outputs[0], out_layout)])
    params.type = _POOL[op.type]
    params.kernelSize.extend(kernel)
    params.stride.extend(strides)
    if amounts is not None:
        params.includeLastPixel.paddingAmounts.extend(amounts)
    else:
        _set_padding(e, op, params, kernel, strides, [1, 1])
    if op.type == "avg_pool":
        params.avgPoolExcludePadding = bool(np.asarray(e.const_param(op, "exclude_padding_from_average")).reshape(-1)[0])


def _include_last_pixel(e: Rank5Emitter, op: Op, layout: Layout, out_layout: Layout, kernel: list[int],
                        strides: list[int]) -> list[int]:
    """The [H, W] padding of ``includeLastPixel`` pooling for MIL's ceil_mode pooling with valid or
    symmetric custom padding: Caffe's windows, ``ceil((D + 2p - K) / s) + 1`` of them, the last one
    dropped when it starts past ``D + p`` while either axis is padded (MIL drops it per padded axis:
    the output sizes must agree). Averages never count the ceil-mode overhang in either."""
    pad_type = str(e.const_param(op, "pad_type"))
    pad = [int(d) for d in np.asarray(e.const_param(op, "pad")).reshape(-1)] if pad_type == "custom" else [0] * 4
    if pad_type not in ("valid", "custom") or pad[0] != pad[1] or pad[2] != pad[3]:
        raise LoweringError(f"ceil_mode pooling with {pad_type} padding {pad} (legacy ceil-mode pooling, "
                            f"includeLastPixel, pads symmetrically)")
    amounts = [pad[0], pad[2]]
    for n, k, s, p, want in zip(layout[1:], kernel, strides, amounts, out_layout[1:]):
        out = -(-(n + 2 * p - k) // s) + 1
        if any(amounts) and (out - 1) * s >= n + p:
            out -= 1
        if out != want:
            raise LoweringError(f"ceil_mode pooling whose output size {want} differs from the legacy "
                                f"includeLastPixel size {out}")
    return amounts


@rank5("batch_norm")
def _batch_norm(e: Rank5Emitter, op: Op) -> None:
    x = input_value(op)
    layout = spatial_layout(x, "batch_norm input", flexible=True)
    c = layout[0]
    params = e.layer("batchnorm", op.name, [e.get(x, layout)], [e.put(op.outputs[0], layout)])
    params.channels = c
    eps = float(e.const_param(op, "epsilon"))
    # 0 is proto3's "unset", which readers take as 1e-5: the smallest positive fp32 instead
    params.epsilon = eps if eps != 0 else float(np.nextafter(np.float32(0), np.float32(1)))
    for key, default in (("gamma", 1.0), ("beta", 0.0), ("mean", None), ("variance", None)):
        v = op_value(op, key)
        arr = np.full(c, default, np.float32) if v is None else e.const_array(v, f"batch_norm {key}").reshape(-1)
        e.weights(getattr(params, key), np.broadcast_to(arr, (c,)))


@rank5("local_response_norm")
def _lrn(e: Rank5Emitter, op: Op) -> None:
    """``lrn``: x / (k + alpha / size * sum of squares over ``size`` channels) ** beta, as MIL's."""
    x = input_value(op)
    layout = chw_layout(x, "local_response_norm input")
    params = e.layer("lrn", op.name, [e.get(x, layout)], [e.put(op.outputs[0], layout)])
    params.localSize = int(np.asarray(e.const_param(op, "size")).reshape(()))
    params.alpha = scalar(e.const_param(op, "alpha"), "alpha")
    params.beta = scalar(e.const_param(op, "beta"), "beta")
    params.k = scalar(e.const_param(op, "k"), "k")
    if params.k == 0:
        raise LoweringError("k = 0 (proto3's unset value, which readers take as 1)")


# ---------------------------------------------------------------------------------------------
# resizing


@rank5("upsample_nearest_neighbor")
def _upsample(e: Rank5Emitter, op: Op) -> None:
    """``upsample`` (NN mode) by integer factors: every pixel repeated (all nearest rules agree)."""
    x = input_value(op)
    layout = chw_layout(x, "upsample input")
    factors = [float(np.asarray(e.const_param(op, k)).reshape(())) for k in ("scale_factor_height",
                                                                             "scale_factor_width")]
    if any(f != int(f) or f < 1 for f in factors):
        raise LoweringError(f"upsampling by {factors} (fractional factors need specification version 5)")
    out_layout = chw_layout(op.outputs[0], "upsample output")
    params = e.layer("upsample", op.name, [e.get(x, layout)], [e.put(op.outputs[0], out_layout)])
    params.scalingFactor.extend(int(f) for f in factors)
    params.mode = nn.UpsampleLayerParams.NN


_SAMPLING = {"STRICT_ALIGN_CORNERS": nn.SamplingMode.STRICT_ALIGN_ENDPOINTS_MODE,
             "ALIGN_CORNERS": nn.SamplingMode.ALIGN_ENDPOINTS_MODE, "DEFAULT": nn.SamplingMode.UPSAMPLE_MODE,
             "OFFSET_CORNERS": nn.SamplingMode.ROI_ALIGN_MODE}


@rank5("resize_bilinear")
def _resize_bilinear(e: Rank5Emitter, op: Op) -> None:
    """``resizeBilinear`` (specification version 3, iOS 12): MIL's sampling modes are the layer's
    SamplingMode methods, but UNALIGN_CORNERS (half-pixel centres), which it does not have."""
    x = input_value(op)
    layout = chw_layout(x, "resize_bilinear input")
    mode = str(e.const_param(op, "sampling_mode"))
    out_layout = chw_layout(op.outputs[0], "resize_bilinear output")
    factors = [o // i for o, i in zip(out_layout[1:], layout[1:])]
    if mode == "DEFAULT" and all(f >= 1 and f * i == o for f, i, o in zip(factors, layout[1:], out_layout[1:])):
        # integer factors: upsample BILINEAR in DEFAULT mode samples i * in / out from 0 (version 1)
        params = e.layer("upsample", op.name, [e.get(x, layout)], [e.put(op.outputs[0], out_layout)])
        params.scalingFactor.extend(factors)
        params.mode = nn.UpsampleLayerParams.BILINEAR
        return
    if mode not in _SAMPLING:
        raise LoweringError(f"sampling_mode {mode} (resizeBilinear has no half-pixel-centre mode)")
    params = e.layer("resizeBilinear", op.name, [e.get(x, layout)], [e.put(op.outputs[0], out_layout)])
    params.targetSize.extend(out_layout[1:])
    params.mode.samplingMethod = _SAMPLING[mode]
