"""conv / conv_transpose / conv_quantized and pooling lowered to NeuralNetwork layers, written,
read back by our NN frontend and run; the oracle is torch (torch.nn.functional), with windows
chosen non-square, strides/dilations/pads unequal and groups > 1 so that swapped parameters fail.
'same' padding amounts are computed in the test from the TF/MIL definition (total
``max((ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)``, odd unit after; before for same_lower)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from converter.errors import UnsupportedError
from converter.formats.model_file import read_model_file
from tests.nn_backend.helpers import assert_close, layer_kinds, program, run_nn

RNG = np.random.default_rng(7)


def _r(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a))


def _same(n: int, k: int, s: int, d: int = 1, lower: bool = False) -> tuple[int, int]:
    total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
    small, big = total // 2, total - total // 2
    return (big, small) if lower else (small, big)


def _run(tmp_path: Path, feeds: dict, body, opset: str = "iOS15") -> tuple[dict, Path]:  # type: ignore[no-untyped-def]
    path = tmp_path / "m.mlmodel"
    return run_nn(program(feeds, body, opset=opset), feeds, path), path


def _layers(path: Path) -> list:  # type: ignore[type-arg]
    return list(read_model_file(path).model.neuralNetwork.layers)


def _spec(path: Path) -> int:
    return read_model_file(path).model.specificationVersion


# -- conv ------------------------------------------------------------------------------------------


def test_conv2d_groups_strides_dilations_custom_pads_bias(tmp_path: Path) -> None:
    x, w, b = _r(2, 6, 9, 11), _r(4, 3, 3, 2), _r(4)
    got, path = _run(tmp_path, {"x": x}, lambda bb, x: [bb.conv(
        x=x, weight=w, bias=b, strides=[2, 1], dilations=[1, 2], pad_type="custom", pad=[1, 0, 2, 3], groups=2,
        name="y")])
    want = F.conv2d(F.pad(_t(x), (2, 3, 1, 0)), _t(w), _t(b), stride=(2, 1), dilation=(1, 2), groups=2)
    assert_close(got["y"], want.numpy())
    assert layer_kinds(path) == {"convolution": 1}
    assert _spec(path) == 4  # array mapping; the layer itself is spec 1


@pytest.mark.parametrize("pad_type", ["same", "same_lower"])
def test_conv2d_same_paddings_split_the_odd_unit_as_mil_says(tmp_path: Path, pad_type: str) -> None:
    x, w = _r(1, 2, 7, 8), _r(3, 2, 4, 3)
    lower = pad_type == "same_lower"
    got, path = _run(tmp_path, {"x": x}, lambda bb, x: [bb.conv(
        x=x, weight=w, strides=[3, 2], dilations=[1, 2], pad_type=pad_type, name="y")], opset="iOS16")
    (t, bo), (le, r) = _same(7, 4, 3, 1, lower), _same(8, 3, 2, 2, lower)
    assert (t, bo) != (bo, t) and (le, r) != (r, le)  # the split matters for these sizes
    want = F.conv2d(F.pad(_t(x), (le, r, t, bo)), _t(w), stride=(3, 2), dilation=(1, 2))
    assert_close(got["y"], want.numpy())
    assert _layers(path)[0].convolution.WhichOneof("ConvolutionPaddingType") == "same"


def test_conv1d_wraps_the_2d_layer_in_expand_and_squeeze(tmp_path: Path) -> None:
    x, w, b = _r(2, 4, 13), _r(6, 2, 3), _r(6)
    got, path = _run(tmp_path, {"x": x}, lambda bb, x: [bb.conv(
        x=x, weight=w, bias=b, strides=[2], dilations=[3], pad_type="custom", pad=[2, 1], groups=2, name="y")])
    want = F.conv1d(F.pad(_t(x), (2, 1)), _t(w), _t(b), stride=2, dilation=3, groups=2)
    assert_close(got["y"], want.numpy())
    assert layer_kinds(path) == {"expandDims": 1, "convolution": 1, "squeeze": 1}


def test_conv3d_is_convolution3d(tmp_path: Path) -> None:
    x, w, b = _r(1, 4, 5, 6, 7), _r(6, 2, 2, 3, 1), _r(6)
    got, path = _run(tmp_path, {"x": x}, lambda bb, x: [bb.conv(
        x=x, weight=w, bias=b, strides=[1, 2, 3], dilations=[2, 1, 1], pad_type="custom", pad=[1, 0, 0, 2, 1, 1],
        groups=2, name="y")])
    want = F.conv3d(F.pad(_t(x), (1, 1, 0, 2, 1, 0)), _t(w), _t(b), stride=(1, 2, 3), dilation=(2, 1, 1), groups=2)
    assert_close(got["y"], want.numpy())
    assert layer_kinds(path) == {"convolution3d": 1}
    assert _spec(path) == 5


def test_conv3d_same(tmp_path: Path) -> None:
    x, w = _r(1, 2, 5, 6, 7), _r(3, 2, 2, 3, 2)
    got, path = _run(tmp_path, {"x": x}, lambda bb, x: [bb.conv(x=x, weight=w, strides=[2, 2, 3], pad_type="same",
                                                                name="y")])
    pads = [_same(n, k, s) for n, k, s in zip((5, 6, 7), (2, 3, 2), (2, 2, 3))]
    want = F.conv3d(F.pad(_t(x), (*pads[2], *pads[1], *pads[0])), _t(w), stride=(2, 2, 3))
    assert_close(got["y"], want.numpy())


def test_conv_with_a_runtime_weight_is_a_two_input_convolution(tmp_path: Path) -> None:
    x, w, b = _r(2, 4, 6, 7), _r(6, 2, 2, 3), _r(6)
    feeds = {"x": x, "w": w}
    got, path = _run(tmp_path, feeds, lambda bb, x, w: [bb.conv(
        x=x, weight=w, bias=b, strides=[1, 2], pad_type="custom", pad=[0, 1, 2, 0], groups=2, name="y")])
    want = F.conv2d(F.pad(_t(x), (2, 0, 0, 1)), _t(w), _t(b), stride=(1, 2), groups=2)
    assert_close(got["y"], want.numpy())
    # Core ML's validator: no static bias beside a weight input, so the bias is added after
    assert layer_kinds(path) == {"convolution": 1, "loadConstantND": 1, "addBroadcastable": 1}
    conv = next(layer for layer in _layers(path) if layer.WhichOneof("layer") == "convolution")
    assert list(conv.input) == ["x", "w"] and not conv.convolution.HasField("weights")
    assert not conv.convolution.hasBias


def test_a_dilated_conv_with_a_runtime_weight_is_refused(tmp_path: Path) -> None:
    x, w = _r(1, 2, 6, 6), _r(2, 2, 2, 2)
    prog = program({"x": x, "w": w}, lambda bb, x, w: [bb.conv(x=x, weight=w, dilations=[1, 2], name="y")])
    with pytest.raises(UnsupportedError, match="weight input only undilated"):
        run_nn(prog, {"x": x, "w": w}, tmp_path / "m.mlmodel")


def test_conv_with_a_runtime_bias_adds_it_after(tmp_path: Path) -> None:
    x, w, b = _r(1, 3, 5, 6), _r(2, 3, 2, 2), _r(2)
    feeds = {"x": x, "b": b}
    got, path = _run(tmp_path, feeds, lambda bb, x, b: [bb.conv(x=x, weight=w, bias=b, name="y")], opset="iOS17")
    assert_close(got["y"], F.conv2d(_t(x), _t(w), _t(b)).numpy())
    assert layer_kinds(path) == {"convolution": 1, "expandDims": 1, "addBroadcastable": 1}


def test_fp16_weights_stay_fp16(tmp_path: Path) -> None:
    x, w, b = _r(1, 2, 5, 5), _r(3, 2, 3, 3).astype(np.float16), _r(3).astype(np.float16)
    got, path = _run(tmp_path, {"x": x.astype(np.float16)}, lambda bb, x: [bb.conv(x=x, weight=w, bias=b, name="y")])
    want = F.conv2d(_t(x.astype(np.float16).astype(np.float32)), _t(w.astype(np.float32)), _t(b.astype(np.float32)))
    assert_close(got["y"], want.numpy(), 2e-3)
    conv = _layers(path)[0].convolution
    assert len(conv.weights.float16Value) == w.size * 2 and len(conv.bias.float16Value) == 6


# -- conv_transpose --------------------------------------------------------------------------------


def test_conv_transpose2d_groups_strides_dilations_asymmetric_pads(tmp_path: Path) -> None:
    x, w, b = _r(2, 4, 4, 5), _r(4, 3, 3, 2), _r(6)
    got, path = _run(tmp_path, {"x": x}, lambda bb, x: [bb.conv_transpose(
        x=x, weight=w, bias=b, strides=[2, 3], dilations=[2, 1], pad_type="custom", pad=[1, 0, 0, 2], groups=2,
        name="y")])
    full = F.conv_transpose2d(_t(x), _t(w), _t(b), stride=(2, 3), dilation=(2, 1), groups=2).numpy()
    assert_close(got["y"], full[:, :, 1:, :-2])
    assert layer_kinds(path) == {"convolution": 1}
    conv = _layers(path)[0].convolution
    assert conv.isDeconvolution and not conv.outputShape  # sizes follow from the padding amounts


def test_conv_transpose2d_output_shape_past_the_padding_rule(tmp_path: Path) -> None:
    x, w = _r(1, 3, 4, 5), _r(3, 2, 3, 3)
    out_hw = [(4 - 1) * 2 + 3 - 2 + 1, (5 - 1) * 3 + 3 - 2 + 2]  # output_padding (1, 2)
    got, path = _run(tmp_path, {"x": x}, lambda bb, x: [bb.conv_transpose(
        x=x, weight=w, strides=[2, 3], pad_type="custom", pad=[1, 1, 1, 1], output_shape=[1, 2, *out_hw],
        name="y")])
    want = F.conv_transpose2d(_t(x), _t(w), stride=(2, 3), padding=1, output_padding=(1, 2))
    assert_close(got["y"], want.numpy())
    assert list(_layers(path)[0].convolution.outputShape) == out_hw


def test_conv_transpose2d_same_crops_half_the_excess_first(tmp_path: Path) -> None:
    x, w = _r(1, 2, 3, 4), _r(2, 3, 4, 5)
    got, _ = _run(tmp_path, {"x": x}, lambda bb, x: [bb.conv_transpose(x=x, weight=w, strides=[2, 3], pad_type="same",
                                                                       name="y")])
    full = F.conv_transpose2d(_t(x), _t(w), stride=(2, 3)).numpy()
    (h, ww) = (3 * 2, 4 * 3)
    top, left = (full.shape[2] - h) // 2, (full.shape[3] - ww) // 2
    assert_close(got["y"], full[:, :, top:top + h, left:left + ww])


def test_conv_transpose1d_and_3d(tmp_path: Path) -> None:
    x1, w1 = _r(2, 4, 6), _r(4, 3, 3)
    got, path = _run(tmp_path, {"x": x1}, lambda bb, x: [bb.conv_transpose(
        x=x, weight=w1, strides=[3], dilations=[2], pad_type="custom", pad=[2, 1], name="y")])
    full = F.conv_transpose1d(_t(x1), _t(w1), stride=3, dilation=2).numpy()
    assert_close(got["y"], full[:, :, 2:-1])
    assert layer_kinds(path) == {"expandDims": 1, "convolution": 1, "squeeze": 1}
    x3, w3, b3 = _r(1, 4, 3, 4, 2), _r(4, 1, 2, 3, 2), _r(2)
    got, path = _run(tmp_path, {"x": x3}, lambda bb, x: [bb.conv_transpose(
        x=x, weight=w3, bias=b3, strides=[2, 1, 3], pad_type="custom", pad=[1, 0, 0, 1, 1, 1], groups=2, name="y")])
    full = F.conv_transpose3d(_t(x3), _t(w3), _t(b3), stride=(2, 1, 3), groups=2).numpy()
    assert_close(got["y"], full[:, :, 1:, :-1, 1:-1])
    assert layer_kinds(path) == {"convolution3d": 1}


# -- conv_quantized --------------------------------------------------------------------------------


@pytest.mark.parametrize("nbits", [8, 4])
def test_conv_quantized_keeps_codes_with_linear_quantization(tmp_path: Path, nbits: int) -> None:
    x = _r(1, 4, 6, 5)
    q = RNG.integers(0, 1 << nbits, (6, 2, 3, 2)).astype(np.uint8)
    scale, qbias = np.array([0.5, -0.25, 0.125, 1.0, 0.75, -1.5], np.float32), np.float32(-0.375)
    bias = np.arange(6, dtype=np.uint8)
    got, path = _run(tmp_path, {"x": x}, lambda bb, x: [bb.conv_quantized(
        x=x, weight=q, bias=bias, quantization_type="linear", nbits=np.int32(nbits), quant_scale=scale,
        quant_bias=qbias, strides=[2, 1], pad_type="custom", pad=[1, 0, 0, 1], groups=2, name="y")])
    w = q.astype(np.float32) * scale.reshape(-1, 1, 1, 1) + qbias  # the op's dequantization
    want = F.conv2d(F.pad(_t(x), (0, 1, 1, 0)), _t(w), _t(bias.astype(np.float32)), stride=(2, 1), groups=2)
    assert_close(got["y"], want.numpy())
    wp = _layers(path)[0].convolution.weights
    assert wp.quantization.numberOfBits == nbits and len(wp.rawValue) == q.size * nbits // 8
    assert _spec(path) == 4


# -- pooling ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("exclude", [False, True])
def test_avg_pool_padding_counted_or_not(tmp_path: Path, exclude: bool) -> None:
    x = _r(2, 3, 9, 10)
    got, path = _run(tmp_path, {"x": x}, lambda bb, x: [bb.avg_pool(
        x=x, kernel_sizes=[3, 4], strides=[2, 3], pad_type="custom", pad=[1, 1, 2, 2],
        exclude_padding_from_average=exclude, name="y")])
    want = F.avg_pool2d(_t(x), (3, 4), (2, 3), padding=(1, 2), count_include_pad=not exclude)
    assert_close(got["y"], want.numpy())
    assert layer_kinds(path) == {"pooling": 1}


@pytest.mark.parametrize("op", ["max_pool", "avg_pool"])
def test_ceil_mode_is_include_last_pixel(tmp_path: Path, op: str) -> None:
    x = _r(1, 2, 8, 11)
    got, path = _run(tmp_path, {"x": x}, lambda bb, x: [getattr(bb, op)(
        x=x, kernel_sizes=[3, 2], strides=[2, 3], pad_type="custom", pad=[1, 1, 1, 1], ceil_mode=True, name="y")])
    fn = F.max_pool2d if op == "max_pool" else F.avg_pool2d
    want = fn(_t(x), (3, 2), (2, 3), padding=1, ceil_mode=True)
    assert_close(got["y"], want.numpy())
    assert list(_layers(path)[0].pooling.includeLastPixel.paddingAmounts) == [1, 1]


def test_ceil_mode_that_changes_nothing_is_plain_padding(tmp_path: Path) -> None:
    x = _r(1, 2, 9, 7)
    got, path = _run(tmp_path, {"x": x}, lambda bb, x: [bb.max_pool(
        x=x, kernel_sizes=[3, 3], strides=[2, 2], pad_type="valid", ceil_mode=True, name="y")])
    assert_close(got["y"], F.max_pool2d(_t(x), 3, 2, ceil_mode=True).numpy())
    assert _layers(path)[0].pooling.WhichOneof("PoolingPaddingType") == "valid"


def test_ceil_mode_where_include_last_pixel_drops_a_window_is_refused(tmp_path: Path) -> None:
    # W unpadded with stride 3 > kernel 1: ceil gives a last window at 6 >= W (6); H padded
    x = _r(1, 1, 5, 6)
    prog = program({"x": x}, lambda bb, x: [bb.max_pool(x=x, kernel_sizes=[3, 1], strides=[2, 3], pad_type="custom",
                                                        pad=[1, 1, 0, 0], ceil_mode=True, name="y")])
    with pytest.raises(UnsupportedError, match="includeLastPixel drops the last window"):
        run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")


@pytest.mark.parametrize("pad_type", ["same", "same_lower"])
def test_max_pool_same_paddings(tmp_path: Path, pad_type: str) -> None:
    x = _r(1, 2, 7, 9)
    got, _ = _run(tmp_path, {"x": x}, lambda bb, x: [bb.max_pool(x=x, kernel_sizes=[4, 3], strides=[3, 2],
                                                                 pad_type=pad_type, name="y")], opset="iOS16")
    (t, b), (le, r) = _same(7, 4, 3, lower=pad_type == "same_lower"), _same(9, 3, 2, lower=pad_type == "same_lower")
    want = F.max_pool2d(F.pad(_t(x), (le, r, t, b), value=-np.inf), (4, 3), (3, 2))
    assert_close(got["y"], want.numpy())


def test_l2_pool(tmp_path: Path) -> None:
    x = _r(1, 3, 8, 9)
    got, _ = _run(tmp_path, {"x": x}, lambda bb, x: [bb.l2_pool(x=x, kernel_sizes=[2, 3], strides=[3, 2],
                                                                pad_type="valid", name="y")])
    assert_close(got["y"], F.lp_pool2d(_t(x), 2, (2, 3), (3, 2)).numpy())


@pytest.mark.parametrize("op", ["avg_pool", "max_pool", "l2_pool"])
def test_a_window_over_the_whole_input_is_global_pooling(tmp_path: Path, op: str) -> None:
    x = _r(2, 3, 5, 7)
    got, path = _run(tmp_path, {"x": x}, lambda bb, x: [getattr(bb, op)(x=x, kernel_sizes=[5, 7], strides=[1, 2],
                                                                        pad_type="valid", name="y")])
    want = {"avg_pool": x.mean(axis=(2, 3), keepdims=True), "max_pool": x.max(axis=(2, 3), keepdims=True),
            "l2_pool": np.sqrt((x.astype(np.float64) ** 2).sum(axis=(2, 3), keepdims=True))}[op]
    assert_close(got["y"], want)
    pooling = _layers(path)[0].pooling
    assert pooling.globalPooling and not pooling.kernelSize


def test_pool1d_and_3d(tmp_path: Path) -> None:
    x1 = _r(2, 3, 11)
    got, path = _run(tmp_path, {"x": x1}, lambda bb, x: [bb.avg_pool(
        x=x, kernel_sizes=[3], strides=[2], pad_type="custom", pad=[1, 1], exclude_padding_from_average=True,
        name="y")])
    assert_close(got["y"], F.avg_pool1d(_t(x1), 3, 2, padding=1, count_include_pad=False).numpy())
    assert layer_kinds(path) == {"expandDims": 1, "pooling": 1, "squeeze": 1}
    x3 = _r(1, 2, 5, 6, 7)
    got, path = _run(tmp_path, {"x": x3}, lambda bb, x: [bb.avg_pool(
        x=x, kernel_sizes=[2, 3, 4], strides=[1, 2, 3], pad_type="custom", pad=[1, 1, 1, 1, 2, 2],
        exclude_padding_from_average=True, name="y")])
    want = F.avg_pool3d(_t(x3), (2, 3, 4), (1, 2, 3), padding=(1, 1, 2), count_include_pad=False)
    assert_close(got["y"], want.numpy())
    assert layer_kinds(path) == {"pooling3d": 1}
    got, path = _run(tmp_path, {"x": x3}, lambda bb, x: [bb.max_pool(x=x, kernel_sizes=[5, 6, 7], strides=[1, 1, 1],
                                                                     pad_type="valid", name="y")])
    assert_close(got["y"], x3.max(axis=(2, 3, 4), keepdims=True))
    assert layer_kinds(path) == {"globalPooling3d": 1}


def test_conv3d_same_lower_becomes_custom_amounts(tmp_path: Path) -> None:
    x, w = _r(1, 2, 5, 6, 7), _r(3, 2, 2, 3, 2)
    got, path = _run(tmp_path, {"x": x}, lambda bb, x: [bb.conv(x=x, weight=w, strides=[2, 2, 3],
                                                                pad_type="same_lower", name="y")], opset="iOS16")
    pads = [_same(n, k, s, lower=True) for n, k, s in zip((5, 6, 7), (2, 3, 2), (2, 2, 3))]
    want = F.conv3d(F.pad(_t(x), (*pads[2], *pads[1], *pads[0])), _t(w), stride=(2, 2, 3))
    assert_close(got["y"], want.numpy())
    conv = _layers(path)[0].convolution3d
    assert conv.paddingType == conv.CUSTOM


def test_conv1d_with_a_runtime_weight(tmp_path: Path) -> None:
    x, w = _r(2, 4, 9), _r(3, 4, 3)
    got, path = _run(tmp_path, {"x": x, "w": w}, lambda bb, x, w: [bb.conv(
        x=x, weight=w, strides=[2], pad_type="custom", pad=[0, 2], name="y")])
    assert_close(got["y"], F.conv1d(F.pad(_t(x), (0, 2)), _t(w), stride=2).numpy())
    assert layer_kinds(path) == {"expandDims": 2, "convolution": 1, "squeeze": 1}


def test_a_runtime_conv_transpose_weight_is_refused_with_the_reason(tmp_path: Path) -> None:
    x, w = _r(1, 2, 3, 3), _r(2, 2, 2, 2)
    prog = program({"x": x, "w": w}, lambda bb, x, w: [bb.conv_transpose(x=x, weight=w, name="y")], opset="iOS17")
    with pytest.raises(UnsupportedError, match="conv_transpose 'y'.*only convolution takes its weight"):
        run_nn(prog, {"x": x, "w": w}, tmp_path / "m.mlmodel")


# -- random windows (hypothesis): conv and conv_transpose against torch -----------------------------


@st.composite
def _windows(draw: st.DrawFn) -> dict:
    groups = draw(st.sampled_from([1, 2]))
    kernel = [draw(st.integers(1, 3)) for _ in range(2)]
    return {"groups": groups, "c_in": groups * draw(st.integers(1, 2)), "c_out": groups * draw(st.integers(1, 2)),
            "kernel": kernel, "strides": [draw(st.integers(1, 3)) for _ in range(2)],
            "dilations": [draw(st.integers(1, 2)) for _ in range(2)],
            "pad": [draw(st.integers(0, 2)) for _ in range(4)], "size": [draw(st.integers(5, 8)) for _ in range(2)]}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(w=_windows())
def test_random_conv_windows_match_torch(tmp_path: Path, w: dict) -> None:
    x = _r(1, w["c_in"], *w["size"])
    weight = _r(w["c_out"], w["c_in"] // w["groups"], *w["kernel"])
    t, b, le, r = w["pad"]
    got, _ = _run(tmp_path, {"x": x}, lambda bb, x: [bb.conv(
        x=x, weight=weight, strides=w["strides"], dilations=w["dilations"], pad_type="custom", pad=[t, b, le, r],
        groups=w["groups"], name="y")])
    want = F.conv2d(F.pad(_t(x), (le, r, t, b)), _t(weight), stride=w["strides"], dilation=w["dilations"],
                    groups=w["groups"])
    assert_close(got["y"], want.numpy())


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(w=_windows())
def test_random_conv_transpose_windows_match_torch(tmp_path: Path, w: dict) -> None:
    x = _r(1, w["c_in"], *w["size"])
    weight = _r(w["c_in"], w["c_out"] // w["groups"], *w["kernel"])
    t, b, le, r = w["pad"]
    full = F.conv_transpose2d(_t(x), _t(weight), stride=w["strides"], dilation=w["dilations"],
                              groups=w["groups"]).numpy()
    if full.shape[2] <= t + b or full.shape[3] <= le + r:
        return  # the pads would remove the whole output
    got, _ = _run(tmp_path, {"x": x}, lambda bb, x: [bb.conv_transpose(
        x=x, weight=weight, strides=w["strides"], dilations=w["dilations"], pad_type="custom", pad=[t, b, le, r],
        groups=w["groups"], name="y")])
    assert_close(got["y"], full[:, :, t:full.shape[2] - b, le:full.shape[3] - r])
