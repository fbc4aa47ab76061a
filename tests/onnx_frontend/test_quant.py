"""Quantization mappings (ops_quant.py), written as float / int32 arithmetic: round half to even
at ties, saturation at both ends of each integer type, per-axis and blocked scales, per-row /
per-column zero points, and integer convs large enough to need the exact weight split. Oracle:
onnxruntime on the same one-node model (scales and zero points as graph inputs and as
initializers)."""

from __future__ import annotations

import numpy as np
import pytest

from .ort_oracle import check, ours

TIES = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, 127.5, -128.5, 254.5, 300.0, -300.0, 3.75, -7.25],
                np.float32)
CONSTS = pytest.mark.parametrize("consts", [(), (1, 2)], ids=["runtime", "const"])


@CONSTS
@pytest.mark.parametrize("dt,zp", [(np.uint8, 3), (np.int8, -2), (np.uint16, 40000), (np.int16, -5)])
def test_quantize_rounds_half_to_even_and_saturates(dt, zp, consts):
    for scale in (1.0, 0.5):
        check("QuantizeLinear", [TIES * 100 if dt in (np.uint16, np.int16) else TIES, np.array(scale, np.float32),
                                 np.array(zp, dt)], consts=consts)


@CONSTS
def test_quantize_per_axis_and_dequantize_back(consts):
    x = np.array([[0.5, -3.0, 12.5, 7.0], [100.0, -0.25, 2.5, 1.5], [-9.0, 33.0, 4.5, -6.5]], np.float32)
    scale = np.array([0.5, 0.25, 2.0], np.float32)
    zp = np.array([10, -3, 0], np.int8)
    check("QuantizeLinear", [x, scale, zp], {"axis": 0}, consts=consts)
    q = np.array([[1, -128, 127, 5], [0, 60, -7, 3], [9, 2, -1, 100]], np.int8)
    check("DequantizeLinear", [q, scale, zp], {"axis": 0}, consts=consts)
    check("DequantizeLinear", [q.T.copy(), scale, zp], {"axis": 1}, consts=consts)


@CONSTS
def test_blocked_quantization_with_a_short_last_block(consts):
    x = np.linspace(-20, 37, 15, dtype=np.float32).reshape(3, 5)
    scale = np.array([[0.5, 2.0, 1.0], [0.25, 4.0, 3.0], [1.5, 0.75, 8.0]], np.float32)  # blocks of 2 along axis 1
    zp = np.array([[1, -2, 3], [0, 5, -6], [7, 0, -1]], np.int8)
    check("QuantizeLinear", [x, scale, zp], {"axis": 1, "block_size": 2}, consts=consts)
    q = np.arange(15, dtype=np.int8).reshape(3, 5) * 9 - 60
    check("DequantizeLinear", [q, scale, zp], {"axis": 1, "block_size": 2}, consts=consts)


@pytest.mark.parametrize("out", [22, 21], ids=["int4", "uint4"])
def test_quantize_to_int4_saturates_in_int8(out):
    """onnxruntime's Python API cannot return int4 arrays: onnx's reference evaluator is the oracle."""
    check("QuantizeLinear", [TIES, np.array(0.5, np.float32)], {"output_dtype": out}, consts=(1,), oracle="reference")


def test_quantize_fp16_input_divides_in_fp16():
    x = np.array([0.3, 1.7, -2.5, 33.3, -100.0], np.float16)
    check("QuantizeLinear", [x, np.array(0.1, np.float16), np.array(-4, np.int8)])


@pytest.mark.parametrize("x", [np.array([[-1.5, 0.3, 2.25], [7.5, -0.01, 4.0]], np.float32),
                               np.array([0.5, 3.0, 9.25], np.float32), np.array([-4.0, -0.5], np.float32)],
                         ids=["mixed", "positive", "negative"])
def test_dynamic_quantize_linear(x):
    check("DynamicQuantizeLinear", [x], n_out=3)


A_U8 = np.array([[11, 7, 250, 0], [3, 128, 9, 77], [255, 1, 64, 30]], np.uint8)
B_U8 = np.array([[1, 2], [200, 7], [5, 255], [90, 13]], np.uint8)


@pytest.mark.parametrize("consts", [(), (2, 3)], ids=["runtime", "const"])
def test_matmul_integer_zero_points(consts):
    check("MatMulInteger", [A_U8, B_U8, np.array(12, np.uint8), np.array(100, np.uint8)], consts=consts)
    check("MatMulInteger", [A_U8, B_U8, np.array([12], np.uint8), np.array([3, 100], np.uint8)], consts=consts)


@pytest.mark.parametrize("consts", [(), (2, 3)], ids=["runtime", "const"])
def test_matmul_integer_per_row_zero_point_of_a(consts):
    """The spec's per-row zero point ([M] for an [M, K] A): onnxruntime refuses it and onnx's
    reference subtracts it along K, so the oracle is the spec's formula."""
    za, zb = np.array([12, 0, 200], np.uint8), np.array([3, 100], np.uint8)
    want = (A_U8.astype(np.int64) - za[:, None]) @ (B_U8.astype(np.int64) - zb)
    got, = ours("MatMulInteger", [A_U8, B_U8, za, zb], consts=consts)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dt", [np.int8, np.uint8])
def test_qlinear_matmul_requantizes(dt):
    lo = -128 if dt == np.int8 else 0
    a = (np.arange(12).reshape(3, 4) * 37 % 256 + lo).astype(dt)
    b = (np.arange(8).reshape(4, 2) * 53 % 256 + lo).astype(dt)
    check("QLinearMatMul", [a, np.array(0.05, np.float32), np.array(3, dt), b, np.array(0.02, np.float32),
                            np.array(-1 if dt == np.int8 else 9, dt), np.array(0.3, np.float32), np.array(5, dt)])


def test_conv_integer_large_enough_to_need_the_weight_split():
    rng = np.random.default_rng(7)
    x = rng.integers(0, 256, (1, 40, 6, 5), dtype=np.uint8)  # 40 * 3 * 3 = 360 terms per output
    w = rng.integers(0, 256, (3, 40, 3, 3), dtype=np.uint8)
    check("ConvInteger", [x, w, np.array(2, np.uint8), np.array(250, np.uint8)], {"pads": [1, 0, 1, 2]},
          consts=(1, 3))
    check("ConvInteger", [x, w], {"strides": [2, 1]})


def test_qlinear_conv_per_channel_scales_bias_and_padding():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (1, 3, 7, 6), dtype=np.uint8)
    w = rng.integers(-128, 128, (4, 3, 3, 2), dtype=np.int8)
    w_scale = np.array([0.01, 0.02, 0.005, 0.03], np.float32)
    bias = np.array([100, -2000, 0, 35], np.int32)
    check("QLinearConv", [x, np.array(0.04, np.float32), np.array(120, np.uint8), w, w_scale,
                          np.zeros(4, np.int8), np.array(0.25, np.float32), np.array(7, np.uint8), bias],
          {"pads": [1, 0, 2, 1], "strides": [2, 1]}, consts=(3, 4, 5, 8))
    check("QLinearConv", [x, np.array(0.04, np.float32), np.array(120, np.uint8), w, w_scale,
                          np.zeros(4, np.int8), np.array(0.25, np.float32), np.array(7, np.uint8), bias],
          {"auto_pad": "SAME_LOWER"}, consts=(3, 4, 5, 8))


@pytest.mark.parametrize("case", ["per-tensor", "per-axis", "blocked", "no-zero-point", "short-block"])
def test_constant_weights_dequantize_stay_compressed(case):
    """Constant data and parameters: one constexpr_blockwise_shift_scale (except a short last
    block, which it cannot express), with onnxruntime's values."""
    from converter.frontends.onnx import load_onnx

    from .ort_oracle import one_node_model

    w = (np.arange(24, dtype=np.int64).reshape(4, 6) * 29 % 256 - 128).astype(np.int8)
    attrs: dict = {}
    scale, zp = np.array(0.05, np.float32), np.array(-3, np.int8)
    if case == "per-axis":
        scale, zp, attrs = np.array([0.5, 0.25, 0.125, 2.0], np.float32), np.array([1, -2, 3, 0], np.int8), {"axis": 0}
    elif case in ("blocked", "short-block"):
        block = 3 if case == "blocked" else 4
        nb = -(-6 // block)
        scale = (np.arange(4 * nb, dtype=np.float32).reshape(4, nb) + 1) / 16
        zp = (np.arange(4 * nb).reshape(4, nb) % 5 - 2).astype(np.int8)
        attrs = {"axis": 1, "block_size": block}
    inputs = [w, scale, None if case == "no-zero-point" else zp]
    check("DequantizeLinear", inputs, attrs, consts=(0, 1, 2))
    model, _ = one_node_model("DequantizeLinear", inputs, attrs, consts=(0, 1, 2))
    ops = [op.type for op in load_onnx(model).functions["main"].block.ops]
    assert ("constexpr_blockwise_shift_scale" in ops) == (case != "short-block"), ops


def test_int4_blocked_weights_stay_int4_through_an_mlpackage(tmp_path):
    """int4 initializer, blocked scales: constexpr_blockwise_shift_scale on int4 data, saved as a
    MIL package and read back; values vs onnx's reference evaluator (onnxruntime cannot take
    int4 DequantizeLinear initializers through its Python API either)."""
    import onnx
    from onnx import TensorProto, numpy_helper
    from onnx import helper as h
    from onnx.reference import ReferenceEvaluator

    import converter
    from converter.frontends.onnx import load_onnx

    w = (np.arange(32).reshape(8, 4) * 7 % 16 - 8).astype(np.int8)
    init = [h.make_tensor("W", TensorProto.INT4, [8, 4], w.reshape(-1).tolist()),
            numpy_helper.from_array((np.arange(16, dtype=np.float32).reshape(4, 4) + 1) / 10, "S")]
    g = h.make_graph([h.make_node("DequantizeLinear", ["W", "S"], ["Wf"], axis=0, block_size=2),
                      h.make_node("Mul", ["x", "Wf"], ["y"])], "g", [h.make_tensor_value_info("x", 1, [8, 4])],
                     [h.make_tensor_value_info("y", 1, [8, 4])], initializer=init)
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 21)])
    onnx.checker.check_model(model)
    x = np.linspace(-2, 3, 32, dtype=np.float32).reshape(8, 4)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    prog = load_onnx(model)
    shift_scale = [op for op in prog.functions["main"].block.ops if op.type == "constexpr_blockwise_shift_scale"]
    assert len(shift_scale) == 1 and shift_scale[0].inputs["data"].type.dtype.name == "int4"
    converter.save(prog, tmp_path / "q.mlpackage", to="mil")
    back = converter.load(tmp_path / "q.mlpackage")
    np.testing.assert_array_equal(converter.run(back, {"x": x})["y"], want)
