"""Convolutions: conv, conv_transpose and conv_quantized as ``convolution`` (1-D and 2-D) or
``convolution3d`` (3-D) layers.

Weight layouts are MIL's (``[C_out, C_in / groups, *K]``; deconvolution ``[C_in, C_out / groups,
*K]``), so weights are written as they are. A run-time conv weight is the layer's second input
(specification 4; 2-D only). A dilated conv_transpose gets its kernel spread out with zeros (the
deconvolution layers' dilation is not defined by the spec), which is the same operator.
Deconvolution output sizes follow the padding amounts; ``outputShape`` is written only when the
op's ``output_shape`` differs from what the padding gives.
"""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....ir.core import Op, Value
from ..emitter import NetworkEmitter, op_input, static_shape
from ._window import (
    WindowParams,
    expand_h,
    read_window,
    set_2d_padding,
    set_3d_padding,
    spatial_rank,
    spatial_sizes,
    squeeze_h,
    text,
)
from .quant import compressed, recorded_fp16
from .registry import lowering


def _weights_pair(weight: np.ndarray, bias: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Weight and bias in one precision (Core ML's validator rejects a convolution whose weights and
    bias differ; the IR gives both one dtype, this keeps it so): fp16 when both are, else fp32."""
    if bias is None:
        return weight, None
    if weight.dtype == bias.dtype == np.float16:
        return weight, bias
    return weight.astype(np.float32, copy=False), bias.astype(np.float32, copy=False)


def _float_weights(arr: np.ndarray) -> np.ndarray:
    return arr if arr.dtype in (np.float16, np.float32) else arr.astype(np.float32)


class _Conv:
    """The parts of a conv-like op the layers need."""

    def __init__(self, e: NetworkEmitter, op: Op, *, transpose: bool) -> None:
        self.e, self.op = e, op
        self.x = op.inputs["x"]
        self.n_spatial = spatial_rank(self.x, "x")
        self.w_value: Value = op.inputs["weight"]
        w_shape = static_shape(self.w_value)
        if w_shape is None:
            raise LoweringError("the weight must have a static shape")
        self.w_shape = w_shape
        self.groups = int(np.asarray(e.const_param(op, "groups")).reshape(-1)[0])
        self.win = read_window(e, op, w_shape[2:])
        self.transpose = transpose

    def bias_const(self) -> np.ndarray | None:
        b = op_input(self.op, "bias")
        if b is None:
            return None
        val = self.e.const(b)
        return None if val is None else _float_weights(np.asarray(val).reshape(-1))


def _out_blob(e: NetworkEmitter, op: Op, one_d: bool) -> tuple[str, str]:
    """(blob the layer writes, the op's result blob)."""
    out = e.define(op.outputs[0])
    return (e.fresh(f"{op.name}_2d_out") if one_d else out), out


def _add_runtime_bias(e: NetworkEmitter, op: Op, blob: str, out: str, n_spatial: int) -> None:
    """``blob + bias[C, 1, ...]`` for a bias computed at run time (iOS17) or a constant one beside a
    run-time weight (Core ML's convolution has no static bias then)."""
    bias_v = op.inputs["bias"]
    const = e.const(bias_v)
    if const is not None:
        shaped = e.load_constant(None, np.asarray(const).reshape((-1,) + (1,) * n_spatial), f"{op.name}_bias")
    else:
        shaped = e.fresh(f"{op.name}_bias_shaped")
        e.layer("expandDims", f"{op.name}_bias_shaped", [e.blob(bias_v)], [shaped]).axes.extend(
            range(1, n_spatial + 1))
    e.layer("addBroadcastable", f"{op.name}_bias", [blob, shaped], [out])


@lowering("conv", note="1-D via expandDims/squeeze; 3-D as convolution3d (spec 5); a run-time weight is the "
                       "layer's second input (spec 4, 1-D and 2-D)")
def _conv(e: NetworkEmitter, op: Op) -> None:
    c = _Conv(e, op, transpose=False)
    weight = e.const(c.w_value)
    bias = c.bias_const()
    runtime_bias = op_input(op, "bias") is not None and (bias is None or weight is None)
    if c.n_spatial == 3:
        if weight is None:
            raise LoweringError("a 3-D conv needs a constant weight (convolution3d has no weight input)")
        _conv3d(e, op, c, _float_weights(np.asarray(weight)), bias, runtime_bias)
        return
    one_d = c.n_spatial == 1
    win = c.win.widened() if one_d else c.win
    x = e.blob(c.x)
    if one_d:
        x = expand_h(e, x, op.name)
    layer_out, out = _out_blob(e, op, one_d)
    conv_out = e.fresh(f"{op.name}_nobias") if runtime_bias else layer_out
    c_out, k_c = c.w_shape[0], c.w_shape[1]
    inputs = [x]
    if weight is None:
        if any(d > 1 for d in win.dilations):
            raise LoweringError("a dilated conv with a run-time weight: Core ML's convolution takes a weight input "
                                "only undilated")
        w_blob = e.blob(c.w_value)
        if one_d:
            w_blob = expand_h(e, w_blob, f"{op.name}_weight")
        inputs.append(w_blob)
        e.state.need(4, "convolution with a run-time weight")
    p = e.layer("convolution", op.name, inputs, [conv_out])
    p.outputChannels, p.kernelChannels, p.nGroups = c_out, k_c, c.groups
    p.kernelSize.extend(win.kernel)
    p.stride.extend(win.strides)
    p.dilationFactor.extend(win.dilations)
    set_2d_padding(p, win)
    if weight is not None:
        w, b = _weights_pair(*recorded_fp16(op, "weight", _float_weights(np.asarray(weight)), bias))
        q = compressed(op, "weight")  # 8-bit linear or LUT codes the program had: kept (same row-major order)
        if q is not None:
            q.write(p.weights)
        else:
            e.weights(p.weights, w.reshape(c_out, k_c, *win.kernel))
        if b is not None:
            p.hasBias = True
            e.weights(p.bias, b)
    if runtime_bias:  # computed at run time, or beside a run-time weight (no static bias then)
        _add_runtime_bias(e, op, conv_out, layer_out, 2)
    if one_d:
        squeeze_h(e, layer_out, out, op.name)


def _conv3d(e: NetworkEmitter, op: Op, c: _Conv, weight: np.ndarray, bias: np.ndarray | None,
            runtime_bias: bool, *, output_shape: list[int] | None = None) -> None:
    out = e.define(op.outputs[0])
    layer_out = e.fresh(f"{op.name}_nobias") if runtime_bias else out
    p = e.layer("convolution3d", op.name, [e.blob(c.x)], [layer_out])
    win = c.win
    if c.transpose:
        p.inputChannels, p.outputChannels = c.w_shape[0], c.w_shape[1] * c.groups
        p.isDeconvolution = True
        if output_shape is not None:
            p.outputShape.extend(output_shape)
    else:
        p.outputChannels, p.inputChannels = c.w_shape[0], c.w_shape[1] * c.groups
    p.nGroups = c.groups
    p.kernelDepth, p.kernelHeight, p.kernelWidth = weight.shape[2:]
    p.strideDepth, p.strideHeight, p.strideWidth = win.strides
    p.dilationDepth, p.dilationHeight, p.dilationWidth = win.dilations
    set_3d_padding(p, win, spatial_sizes(c.x), "conv")
    w, b = _weights_pair(weight, bias)
    e.weights(p.weights, w)
    if b is not None:
        p.hasBias = True
        e.weights(p.bias, b)
    if runtime_bias:
        _add_runtime_bias(e, op, layer_out, out, 3)


def _dilated_kernel(weight: np.ndarray, dilations: list[int]) -> np.ndarray:
    """``weight [.., .., *K]`` with ``d - 1`` zeros between taps: the undilated kernel of the same
    operator (size ``(K - 1) * d + 1``)."""
    if all(d == 1 for d in dilations):
        return weight
    sizes = [(k - 1) * d + 1 for k, d in zip(weight.shape[2:], dilations)]
    out = np.zeros(weight.shape[:2] + tuple(sizes), weight.dtype)
    out[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in dilations)] = weight
    return out


@lowering("conv_transpose", note="convolution isDeconvolution (3-D: convolution3d, spec 5); 1-D via "
                                 "expandDims/squeeze; dilation folded into the kernel")
def _conv_transpose(e: NetworkEmitter, op: Op) -> None:
    c = _Conv(e, op, transpose=True)
    weight = e.const(c.w_value)
    if weight is None:
        raise LoweringError("a run-time conv_transpose weight has no NeuralNetwork form (only convolution takes "
                            "its weight as an input)")
    weight = _dilated_kernel(_float_weights(np.asarray(weight)), c.win.dilations)
    kernel = list(weight.shape[2:])
    bias = c.bias_const()
    runtime_bias = op_input(op, "bias") is not None and bias is None
    win = WindowParams(kernel, c.win.strides, [1] * len(kernel), c.win.pad_type, c.win.pads)
    c.win = win
    sizes = spatial_sizes(c.x)
    given = e.const(op_input(op, "output_shape"))
    output_shape = None
    if given is not None:
        wanted = [int(v) for v in np.asarray(given).reshape(-1)[2:]]
        if sizes is None:
            raise LoweringError("conv_transpose with output_shape needs static spatial input sizes")
        natural = [n * s if win.pad_type == "same" else (n - 1) * s + k - b - a
                   for n, s, k, (b, a) in zip(sizes, win.strides, kernel, win.pads)]
        output_shape = None if wanted == natural else wanted
    if c.n_spatial == 3:
        _conv3d(e, op, c, weight, bias, runtime_bias, output_shape=output_shape)
        return
    one_d = c.n_spatial == 1
    lwin = win.widened() if one_d else win
    x = e.blob(c.x)
    if one_d:
        x = expand_h(e, x, op.name)
    layer_out, out = _out_blob(e, op, one_d)
    deconv_out = e.fresh(f"{op.name}_nobias") if runtime_bias else layer_out
    p = e.layer("convolution", op.name, [x], [deconv_out])
    p.isDeconvolution = True
    p.kernelChannels, p.outputChannels, p.nGroups = c.w_shape[0], c.w_shape[1] * c.groups, c.groups
    p.kernelSize.extend(lwin.kernel)
    p.stride.extend(lwin.strides)
    set_2d_padding(p, lwin)
    if output_shape is not None:
        p.outputShape.extend([1, *output_shape] if one_d else output_shape)
    w, b = _weights_pair(weight, bias)
    e.weights(p.weights, w.reshape(w.shape[0], w.shape[1], *lwin.kernel))
    if b is not None:
        p.hasBias = True
        e.weights(p.bias, b)
    if runtime_bias:
        _add_runtime_bias(e, op, deconv_out, layer_out, 2)
    if one_d:
        squeeze_h(e, layer_out, out, op.name)


def _pack_msb_first(codes: np.ndarray, nbits: int) -> bytes:
    """n-bit codes packed most significant bit first, as NeuralNetwork quantized weights are."""
    bits = (codes.reshape(-1, 1).astype(np.uint8) >> np.arange(nbits - 1, -1, -1, dtype=np.uint8)) & 1
    return np.packbits(bits.reshape(-1)).tobytes()


@lowering("conv_quantized", note="convolution with linearly quantized weights (rawValue codes, spec 3)")
def _conv_quantized(e: NetworkEmitter, op: Op) -> None:
    """``w = q * quant_scale + quant_bias`` is WeightParams' linear quantization ``scale * q + bias``
    (per tensor or per output channel); codes stay codes."""
    c = _Conv(e, op, transpose=False)
    if c.n_spatial == 3:
        raise LoweringError("3-D conv_quantized: convolution3d takes no quantized weights")
    if text(e, op, "quantization_type") != "linear":
        raise LoweringError("only 'linear' quantization has its parameters in the op")
    q = np.asarray(e.const_array(c.w_value, "the quantized weight")).astype(np.uint8)
    nbits = int(np.asarray(e.const_param(op, "nbits")).reshape(-1)[0])
    scale = np.asarray(e.const_param(op, "quant_scale"), np.float32).reshape(-1)
    qbias = np.asarray(e.const_param(op, "quant_bias"), np.float32).reshape(-1)
    bias_v = op_input(op, "bias")
    bias = None if bias_v is None else np.asarray(e.const_array(bias_v, "bias"), np.float32).reshape(-1)
    one_d = c.n_spatial == 1
    win = c.win.widened() if one_d else c.win
    x = e.blob(c.x)
    if one_d:
        x = expand_h(e, x, op.name)
    layer_out, out = _out_blob(e, op, one_d)
    p = e.layer("convolution", op.name, [x], [layer_out])
    p.outputChannels, p.kernelChannels, p.nGroups = c.w_shape[0], c.w_shape[1], c.groups
    p.kernelSize.extend(win.kernel)
    p.stride.extend(win.strides)
    p.dilationFactor.extend(win.dilations)
    set_2d_padding(p, win)
    p.weights.rawValue = _pack_msb_first(q, nbits)
    p.weights.quantization.numberOfBits = nbits
    p.weights.quantization.linearQuantization.scale.extend(scale.tolist())
    p.weights.quantization.linearQuantization.bias.extend(qbias.tolist())
    e.state.need(3, "quantized weights")
    if bias is not None:
        p.hasBias = True
        e.weights(p.bias, bias)
    if one_d:
        squeeze_h(e, layer_out, out, op.name)
