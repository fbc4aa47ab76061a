"""conv_quantized through the ONNX backend under onnxruntime, against torch's conv on the weight
dequantized in the test from the op's definition (codes * quant_scale + quant_bias, per tensor or
per output channel), and against our interpreter."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from .helpers import assert_close, op_types, program, run_both

RNG = np.random.default_rng(12)


@pytest.mark.parametrize("nbits", [8, 3])
@pytest.mark.parametrize("per_channel", [False, True])
def test_conv_quantized_2d(nbits: int, per_channel: bool) -> None:
    x = RNG.standard_normal((2, 4, 7, 6)).astype(np.float32)
    q = RNG.integers(0, 1 << nbits, (6, 2, 3, 2)).astype(np.uint8)
    scale = np.array([0.5, -0.25, 0.125, 1.0, 0.75, -1.5], np.float32) if per_channel else np.float32(0.0625)
    qbias = np.array([0.1, -0.3, 0.7, 0.0, -1.1, 0.25], np.float32) if per_channel else np.float32(-0.375)
    bias = np.array([3, 1, 4, 1, 5, 9], np.uint8)  # the op takes a uint8 bias, added as its value
    prog = program({"x": x}, lambda b, x: b.conv_quantized(
        x=x, weight=q, bias=bias, quantization_type="linear", nbits=np.int32(nbits), quant_scale=scale,
        quant_bias=qbias, strides=[2, 1], pad_type="custom", pad=[1, 0, 0, 1], groups=2), opset="iOS15")
    got, interp = run_both(prog, {"x": x})
    w = q.astype(np.float64) * np.reshape(scale, (-1, 1, 1, 1)) + np.reshape(qbias, (-1, 1, 1, 1))
    want = F.conv2d(F.pad(torch.from_numpy(x).double(), (0, 1, 1, 0)), torch.from_numpy(w),
                    torch.from_numpy(bias.astype(np.float64)), stride=(2, 1), groups=2).numpy()
    (g,), (i,) = got.values(), interp.values()
    assert_close(g, want)
    assert_close(g, i)  # fp32 accumulation orders differ (interpreter, onnxruntime)
    assert op_types(prog).count("Conv") == 1 and "DequantizeLinear" not in op_types(prog)


def test_conv_quantized_1d_same_padding() -> None:
    x = RNG.standard_normal((1, 3, 11)).astype(np.float32)
    q = RNG.integers(0, 256, (5, 3, 4)).astype(np.uint8)
    scale, qbias = np.float32(0.02), np.float32(-2.5)
    prog = program({"x": x}, lambda b, x: b.conv_quantized(
        x=x, weight=q, quantization_type="linear", quant_scale=scale, quant_bias=qbias, pad_type="same",
        dilations=[2]), opset="iOS15")
    got, interp = run_both(prog, {"x": x})
    w = q.astype(np.float64) * 0.02 - 2.5
    # 'same' with kernel 4, dilation 2: 6 padding in all, 3 before and 3 after
    want = F.conv1d(F.pad(torch.from_numpy(x).double(), (3, 3)), torch.from_numpy(w), dilation=2).numpy()
    assert_close(next(iter(got.values())), want)
    assert_close(next(iter(got.values())), next(iter(interp.values())), 1e-6)
