"""conv, conv_transpose and conv_quantized against onnxruntime, PyTorch and the WebNN vectors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from onnx import helper

from converter.ir.interpreter import run
from converter.ir.symexpr import ceildiv, evaluate
from converter.ir.types import Symbol, TensorType, dtype
from tests.oracles import webnn_vectors
from tests.oracles.onnx_oracle import run_onnx, run_onnx_node

from .harness import Case, assert_close, build_program, run_op

ORACLE = {
    "conv": "onnxruntime Conv (all pad types, groups, dilations, 1-3d), PyTorch convNd, WebNN conv2d vectors",
    "conv_transpose": "onnxruntime ConvTranspose (pads, auto_pad, output_shape), PyTorch conv_transposeNd "
                      "(output_padding), WebNN convTranspose2d vectors",
    "conv_quantized": "onnxruntime graph Cast -> Mul(scale) -> Add(bias) -> Conv (the documented dequantization)",
}

_FP16_TOL = dict(rtol=2e-3, atol=2e-3)
_FP32_TOL = dict(rtol=1e-5, atol=1e-5)
_ONNX_AUTO_PAD = {"valid": "VALID", "same": "SAME_UPPER", "same_lower": "SAME_LOWER"}


def _onnx_pads(pad: list[int]) -> list[int]:
    """MIL [b0, a0, b1, a1, ...] -> ONNX [b0, b1, ..., a0, a1, ...]."""
    return pad[0::2] + pad[1::2]


def _rng(key: str) -> np.random.Generator:
    return np.random.default_rng(sum(map(ord, key)))


# id, x shape, weight shape, MIL params
_CONV = [
    ("2d-valid", (2, 3, 7, 6), (4, 3, 3, 2), {}),
    ("2d-stride2-same-odd-total", (1, 3, 8, 7), (5, 3, 3, 3), {"strides": [2, 2], "pad_type": "same"}),
    ("2d-even-kernel-same-asymmetric", (1, 2, 6, 6), (3, 2, 2, 4), {"pad_type": "same"}),
    ("2d-even-kernel-same_lower", (1, 2, 6, 5), (3, 2, 2, 4), {"pad_type": "same_lower", "strides": [1, 2]}),
    ("2d-custom-asymmetric", (1, 3, 5, 6), (2, 3, 3, 3), {"pad_type": "custom", "pad": [2, 0, 1, 3]}),
    ("2d-dilated-same", (1, 2, 9, 8), (2, 2, 3, 2), {"dilations": [2, 3], "pad_type": "same", "strides": [2, 1]}),
    ("2d-groups", (1, 6, 5, 5), (4, 3, 3, 3), {"groups": 2, "pad_type": "custom", "pad": [1, 1, 1, 1]}),
    ("2d-depthwise-multiplier", (2, 4, 6, 6), (8, 1, 3, 3), {"groups": 4, "strides": [2, 2], "pad_type": "same"}),
    ("1d", (2, 3, 11), (4, 3, 5), {"strides": [3], "dilations": [2], "pad_type": "same"}),
    ("3d", (1, 2, 5, 4, 6), (3, 2, 2, 3, 3), {"strides": [1, 2, 2], "pad_type": "custom", "pad": [0, 1, 1, 0, 2, 1]}),
    ("3d-groups-same_lower", (1, 4, 4, 5, 4), (2, 2, 2, 2, 3), {"groups": 2, "pad_type": "same_lower"}),
    ("empty-batch", (0, 3, 5, 5), (2, 3, 3, 3), {}),
]


def _conv_onnx_attrs(params: dict, n_spatial: int) -> dict:
    attrs = {"strides": params.get("strides", [1] * n_spatial), "dilations": params.get("dilations", [1] * n_spatial),
             "group": params.get("groups", 1)}
    pad_type = params.get("pad_type", "valid")
    if pad_type == "custom":
        attrs["pads"] = _onnx_pads(params["pad"])
    else:
        attrs["auto_pad"] = _ONNX_AUTO_PAD[pad_type]
    return attrs


@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("case_id,xs,ws,params", _CONV, ids=[c[0] for c in _CONV])
def test_conv_vs_onnxruntime(case_id: str, xs: tuple, ws: tuple, params: dict, dt: str):
    rng = _rng(case_id + dt)
    x, w = rng.standard_normal(xs).astype(dt), rng.standard_normal(ws).astype(dt)
    b = rng.standard_normal(ws[0]).astype(dt)
    opset = "iOS16" if params.get("pad_type") == "same_lower" else "iOS15"
    got = run_op("conv", {"x": x}, {"weight": w, "bias": b, **params}, opset=opset)[0]
    f32 = {k: v.astype(np.float32) for k, v in {"x": x, "w": w, "b": b}.items()}
    attrs = _conv_onnx_attrs(params, len(xs) - 2)
    # onnxruntime rejects dilations with auto_pad SAME_*; the ONNX reference evaluator takes them
    engine = "reference" if "auto_pad" in attrs and max(attrs["dilations"]) > 1 else "ort"
    want = run_onnx_node("Conv", {"x": f32["x"]}, attrs, initializers={"w": f32["w"], "b": f32["b"]}, engine=engine)[0]
    assert got.dtype == np.dtype(dt)
    assert_close(got, want.astype(dt), **(_FP16_TOL if dt == "float16" else _FP32_TOL), what=case_id)


def test_conv_special_values_vs_torch():
    x = np.array([[[[np.nan, 1, 2, 3], [np.inf, -np.inf, 0.0, -0.0], [1e38, 1e38, -1, 2], [0, 1, 2, 3]]]], np.float32)
    w = np.array([[[[1, 0], [0, 1]]], [[[0, 0], [0, 0]]], [[[2, 2], [2, 2]]]], np.float32)
    got = run_op("conv", {"x": x}, {"weight": w})[0]
    want = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w)).numpy()
    assert_close(got, want, what="nan/inf/overflow")


def test_conv_iOS17_runtime_weights_of_another_dtype_vs_torch():
    rng = _rng("ios17")
    x = rng.standard_normal((1, 4, 6, 5)).astype(np.float16)
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    got = run_op("conv", {"x": x, "weight": w, "bias": b}, {"groups": 2, "strides": [2, 1], "pad_type": "same"},
                 opset="iOS17")[0]
    assert got.dtype == np.float16
    # 'same': H (stride 2) pads 0 before / 1 after, W (stride 1) 1 / 1
    xt = torch.nn.functional.pad(torch.from_numpy(x.astype(np.float32)), (1, 1, 0, 1))
    want = torch.nn.functional.conv2d(xt, torch.from_numpy(w), torch.from_numpy(b), stride=(2, 1), groups=2)
    assert_close(got, want.numpy().astype(np.float16), **_FP16_TOL)


def _run_symbolic(op: str, x: np.ndarray, shape: tuple, params: dict, opset: str = "iOS15"):
    case = Case(op, {"x": x}, params, opset=opset, input_types={"x": TensorType(dtype(x.dtype), shape)})
    prog, feeds = build_program(case)
    out_type = prog.main.outputs[0].type
    return out_type.shape, list(run(prog, feeds).values())[0]


def test_conv_symbolic_spatial_dims_vs_onnxruntime():
    """Stride 1 'same' keeps H and W; stride 2 gives ceil(H / 2) and ceil(W / 2), which evaluate to
    the sizes onnxruntime's output has; the values match."""
    rng = _rng("symbolic")
    x = rng.standard_normal((1, 3, 9, 8)).astype(np.float32)
    w = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    h, wd = Symbol("H"), Symbol("W")
    for strides in ([1, 1], [2, 2]):
        shape, got = _run_symbolic("conv", x, (1, 3, h, wd), {"weight": w, "strides": strides, "pad_type": "same"})
        assert shape[:2] == (1, 2)
        if strides == [1, 1]:
            assert shape[2:] == (h, wd)
        else:
            assert shape[2:] == (ceildiv(h, 2), ceildiv(wd, 2))
        want = run_onnx_node("Conv", {"x": x}, {"strides": strides, "auto_pad": "SAME_UPPER"}, initializers={"w": w})
        assert [evaluate(d, {"H": 9, "W": 8}) for d in shape] == list(want[0].shape)
        assert_close(got, want[0], **_FP32_TOL, what=f"strides {strides}")


# ---------------------------------------------------------------------------------------------
# conv_transpose

# id, x shape, weight shape [C_in, C_out/groups, *K], MIL params
_CONV_T = [
    ("2d-valid", (2, 3, 4, 5), (3, 2, 3, 3), {}),
    ("2d-stride-custom-asymmetric", (1, 2, 4, 3), (2, 3, 3, 4), {"strides": [2, 3], "pad_type": "custom",
                                                                 "pad": [1, 0, 2, 1]}),
    ("2d-groups-dilated", (1, 4, 3, 4), (4, 3, 2, 3), {"groups": 2, "dilations": [2, 1], "strides": [1, 2]}),
    ("1d-stride", (2, 3, 6), (3, 4, 4), {"strides": [2], "pad_type": "custom", "pad": [1, 1]}),
    ("3d", (1, 2, 3, 2, 3), (2, 2, 2, 3, 2), {"strides": [2, 1, 2]}),
]


def _torch_conv_transpose(x, w, b, params, output_padding=None):
    n = x.ndim - 2
    fn = {1: torch.nn.functional.conv_transpose1d, 2: torch.nn.functional.conv_transpose2d,
          3: torch.nn.functional.conv_transpose3d}[n]
    pad = params.get("pad", [0] * 2 * n)
    y = fn(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), stride=params.get("strides", [1] * n),
           dilation=params.get("dilations", [1] * n), groups=params.get("groups", 1),
           output_padding=output_padding or [0] * n)
    # torch pads symmetrically only: crop the custom (possibly asymmetric) pads here
    crop = (slice(None), slice(None)) + tuple(
        slice(pad[2 * i], y.shape[2 + i] - pad[2 * i + 1]) for i in range(n))
    return y.numpy()[crop]


@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("case_id,xs,ws,params", _CONV_T, ids=[c[0] for c in _CONV_T])
def test_conv_transpose_vs_torch_and_onnxruntime(case_id: str, xs: tuple, ws: tuple, params: dict, dt: str):
    rng = _rng(case_id + dt)
    x, w = rng.standard_normal(xs).astype(dt), rng.standard_normal(ws).astype(dt)
    b = rng.standard_normal(ws[1] * params.get("groups", 1)).astype(dt)
    got = run_op("conv_transpose", {"x": x}, {"weight": w, "bias": b, **params})[0]
    assert got.dtype == np.dtype(dt)
    tol = _FP16_TOL if dt == "float16" else _FP32_TOL
    f32 = [a.astype(np.float32) for a in (x, w, b)]
    assert_close(got, _torch_conv_transpose(*f32, params).astype(dt), **tol, what=f"{case_id} torch")
    n = len(xs) - 2
    attrs = {"strides": params.get("strides", [1] * n), "dilations": params.get("dilations", [1] * n),
             "group": params.get("groups", 1), "pads": _onnx_pads(params.get("pad", [0] * 2 * n))}
    want = run_onnx_node("ConvTranspose", {"x": f32[0]}, attrs, initializers={"w": f32[1], "b": f32[2]})[0]
    assert_close(got, want.astype(dt), **tol, what=f"{case_id} onnxruntime")


@pytest.mark.parametrize("xs,ws,strides,dilations", [
    ((1, 2, 4, 5), (2, 3, 3, 3), [2, 2], [1, 1]),  # K_eff - s = 1: crop 0 before, 1 after
    ((1, 2, 3, 3), (2, 1, 4, 3), [2, 3], [1, 1]),  # K_eff - s = 2 and 0
    ((1, 2, 3, 4), (2, 2, 3, 2), [1, 2], [2, 2]),
])
def test_conv_transpose_same_vs_onnxruntime_same_upper(xs, ws, strides, dilations):
    rng = _rng(str(xs) + str(ws))
    x, w = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32)
    params = {"strides": strides, "dilations": dilations, "pad_type": "same"}
    got = run_op("conv_transpose", {"x": x}, {"weight": w, **params})[0]
    assert got.shape[2:] == tuple(i * s for i, s in zip(xs[2:], strides))
    want = run_onnx_node("ConvTranspose", {"x": x}, {"strides": strides, "dilations": dilations,
                                                     "auto_pad": "SAME_UPPER"}, initializers={"w": w})[0]
    assert_close(got, want, **_FP32_TOL)


def test_conv_transpose_same_kernel_below_stride_vs_torch():
    """K_eff < stride: 'same' (D * s) is longer than the full result; the end is zero (+ bias), which
    torch's output_padding gives (onnxruntime stops at the full size)."""
    rng = _rng("same-short")
    x = rng.standard_normal((1, 2, 3, 3)).astype(np.float32)
    w = rng.standard_normal((2, 1, 4, 2)).astype(np.float32)
    b = rng.standard_normal(1).astype(np.float32)
    got = run_op("conv_transpose", {"x": x}, {"weight": w, "bias": b, "strides": [2, 3], "pad_type": "same"})[0]
    # H: full 8, out 6 -> crop 1 / 1; W: full 8, out 9 -> one extra column
    want = torch.nn.functional.conv_transpose2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b),
                                                stride=(2, 3), padding=(1, 0), output_padding=(0, 1))
    assert_close(got, want.numpy(), **_FP32_TOL)


def test_conv_transpose_output_shape_vs_torch_output_padding():
    """'valid' with output_shape one past the full size: torch's output_padding (zeros + bias at the end)."""
    rng = _rng("output_shape")
    x = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    w = rng.standard_normal((2, 3, 2, 2)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    got = run_op("conv_transpose", {"x": x}, {"weight": w, "bias": b, "strides": [3, 3],
                                              "output_shape": [1, 3, 9, 12]})[0]  # full size 8 x 11
    want = _torch_conv_transpose(x, w, b, {"strides": [3, 3]}, output_padding=[1, 1])
    assert_close(got, want, **_FP32_TOL)


def test_conv_transpose_same_with_output_shape_vs_onnxruntime():
    """TF's conv2d_transpose SAME with an odd output: half the excess cropped before (ONNX SAME_UPPER)."""
    rng = _rng("same-output-shape")
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    w = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    got = run_op("conv_transpose", {"x": x}, {"weight": w, "strides": [2, 2], "pad_type": "same",
                                              "output_shape": [1, 3, 7, 8]})[0]
    want = run_onnx_node("ConvTranspose", {"x": x}, {"strides": [2, 2], "auto_pad": "SAME_UPPER",
                                                     "output_shape": [7, 8]}, initializers={"w": w})[0]
    assert_close(got, want, **_FP32_TOL)


def test_conv_transpose_iOS17_runtime_weight_vs_torch():
    rng = _rng("ct17")
    x = rng.standard_normal((1, 4, 3, 3)).astype(np.float32)
    w = rng.standard_normal((4, 1, 3, 3)).astype(np.float16)
    got = run_op("conv_transpose", {"x": x, "weight": w}, {"groups": 4, "strides": [2, 2]}, opset="iOS17")[0]
    want = torch.nn.functional.conv_transpose2d(torch.from_numpy(x), torch.from_numpy(w.astype(np.float32)),
                                                stride=2, groups=4)
    assert_close(got, want.numpy(), **_FP32_TOL)


def test_conv_transpose_symbolic_dims():
    x = _rng("ctsym").standard_normal((1, 2, 3, 5)).astype(np.float32)
    w = np.ones((2, 2, 3, 3), np.float32)
    h, wd = Symbol("H"), Symbol("W")
    shape, _ = _run_symbolic("conv_transpose", x, (1, 2, h, wd), {"weight": w, "pad_type": "same"})
    assert shape == (1, 2, h, wd)
    shape, got = _run_symbolic("conv_transpose", x, (1, 2, h, wd), {"weight": w, "strides": [2, 2]})
    assert shape[2:] == (2 * h + 1, 2 * wd + 1)  # (n - 1) * stride + kernel
    assert got.shape == (1, 2, 7, 11)


# ---------------------------------------------------------------------------------------------
# conv_quantized


@pytest.mark.parametrize("per_channel", [False, True])
def test_conv_quantized_vs_onnxruntime_dequantize_graph(per_channel: bool):
    rng = _rng(f"q{per_channel}")
    x = rng.standard_normal((1, 3, 6, 5)).astype(np.float32)
    q = rng.integers(0, 256, (4, 3, 3, 3)).astype(np.uint8)
    shape = (4,) if per_channel else ()
    scale = rng.uniform(0.001, 0.02, shape).astype(np.float32)
    bias = rng.uniform(-1.0, 0.0, shape).astype(np.float32)
    got = run_op("conv_quantized", {"x": x}, {"weight": q, "quantization_type": "linear", "quant_scale": scale,
                                              "quant_bias": bias, "strides": [2, 1], "pad_type": "same"})[0]
    bshape = (4, 1, 1, 1) if per_channel else ()
    nodes = [helper.make_node("Cast", ["q"], ["qf"], to=1),
             helper.make_node("Mul", ["qf", "scale"], ["ws"]),
             helper.make_node("Add", ["ws", "bias"], ["w"]),
             helper.make_node("Conv", ["x", "w"], ["out"], strides=[2, 1], auto_pad="SAME_UPPER")]
    want = run_onnx(nodes, {"x": x}, ["out"], {"q": q, "scale": scale.reshape(bshape), "bias": bias.reshape(bshape)})
    assert_close(got, want[0], **_FP32_TOL)


# ---------------------------------------------------------------------------------------------
# WebNN conformance vectors

_OIHW = {"oihw": (0, 1, 2, 3), "hwio": (3, 2, 0, 1), "ohwi": (0, 3, 1, 2), "ihwo": (3, 0, 1, 2)}
_IOHW = {"iohw": (0, 1, 2, 3), "hwoi": (3, 2, 0, 1), "ohwi": (3, 0, 1, 2)}


def _webnn_case(vec: webnn_vectors.Vector, transpose: bool):
    (node,) = vec.operators
    args = {k: v for arg in node["arguments"] for k, v in arg.items()}
    opts = dict(args.get("options", {}))
    x, f = vec.inputs[args["input"]], vec.inputs[args["filter"]]
    nhwc = opts.get("inputLayout", "nchw") == "nhwc"
    if nhwc:
        x = x.transpose(0, 3, 1, 2)
    layouts = _IOHW if transpose else _OIHW
    f = f.transpose(layouts[opts.get("filterLayout", "iohw" if transpose else "oihw")])
    params: dict = {"weight": f, "strides": opts.get("strides", [1, 1]), "dilations": opts.get("dilations", [1, 1]),
                    "groups": opts.get("groups", 1), "pad_type": "custom"}
    pb_h, pa_h, pb_w, pa_w = opts.get("padding", [0, 0, 0, 0])
    params["pad"] = [pb_h, pa_h, pb_w, pa_w]
    if "bias" in opts:
        params["bias"] = vec.inputs[opts["bias"]]
    if transpose and ("outputSizes" in opts or "outputPadding" in opts):
        c_out = f.shape[1] * params["groups"]
        if "outputSizes" in opts:
            sizes = opts["outputSizes"]
        else:
            sizes = [(i - 1) * s + (k - 1) * d + 1 - pb - pa + op for i, s, k, d, pb, pa, op in zip(
                x.shape[2:], params["strides"], f.shape[2:], params["dilations"], (pb_h, pb_w), (pa_h, pa_w),
                opts["outputPadding"])]
        params["output_shape"] = [x.shape[0], c_out, *sizes]
    in_per_group = f.shape[0] // params["groups"] if transpose else f.shape[1]
    budget = f.shape[2] * f.shape[3] * in_per_group * 2  # the WPT formula (README)
    return x, params, nhwc, budget, node["outputs"]


@pytest.mark.parametrize("webnn_op,op", [("conv2d", "conv"), ("convTranspose2d", "conv_transpose")])
def test_conv_vs_webnn_vectors(webnn_op: str, op: str):
    vectors = webnn_vectors.load(webnn_op)
    for vec in vectors:
        x, params, nhwc, budget, out_name = _webnn_case(vec, transpose=op == "conv_transpose")
        got = run_op(op, {"x": x}, params)[0]
        if nhwc:
            got = got.transpose(0, 2, 3, 1)
        webnn_vectors.assert_ulp(got, vec.expected[out_name], budget, what=vec.name)
    assert len(vectors) > 30
