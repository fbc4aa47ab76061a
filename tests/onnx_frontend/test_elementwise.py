"""Element-wise and activation mappings where ONNX and MIL differ, on inputs chosen to hit the
difference (negative operands, ties, wrap-around, bounds crossing). Oracle: onnxruntime running
the same one-node model."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper as h
from onnx import numpy_helper

from converter.frontends.onnx import load_onnx
from converter.ir.interpreter import run


def _one_node(op, inputs, attrs=None, opset=21, out_type=None):
    names = [f"i{k}" for k in range(len(inputs))]
    ins = [h.make_tensor_value_info(n, h.np_dtype_to_tensor_dtype(x.dtype), x.shape) for n, x in zip(names, inputs)]
    out = h.make_tensor_value_info("y", out_type if out_type is not None else ins[0].type.tensor_type.elem_type, None)
    g = h.make_graph([h.make_node(op, names, ["y"], **(attrs or {}))], "g", ins, [out])
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)]), dict(zip(names, inputs))


def _check(op, inputs, attrs=None, opset=21, out_type=None, exact=True):
    model, feeds = _one_node(op, inputs, attrs, opset, out_type)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)[0]
    # a scalar ONNX input is a [1] input of the program (Core ML inputs have rank >= 1)
    got = run(load_onnx(model), {k: v.reshape(1) if v.ndim == 0 else v for k, v in feeds.items()})["y"]
    assert got.shape == want.shape
    if exact:
        np.testing.assert_array_equal(got.astype(want.dtype), want)
    else:
        # onnx's tolerance: onnxruntime evaluates formulas in fp32 (its tanh-form gelu at x=-3 is off
        # by 3e-4 relative from the float64 formula, which our kernels round once)
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-7)


I32 = np.array([-7, 7, -7, 7, -6, 0, 5, -1], np.int32)
D32 = np.array([2, 2, -2, -2, 4, 3, -5, 3], np.int32)


@pytest.mark.parametrize("dt", [np.int32, np.int64, np.int8, np.int16])
def test_integer_div_truncates_toward_zero(dt):
    _check("Div", [I32.astype(dt), D32.astype(dt)])


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dt", [np.int32, np.int64, np.int8])
def test_integer_mod_signs(fmod, dt):
    _check("Mod", [I32.astype(dt), D32.astype(dt)], {"fmod": fmod})


def test_float_fmod_takes_the_dividend_sign():
    x = np.array([-4.5, 7.25, 5.0, 4.5, -7.25, 8.0], np.float32)
    y = np.array([2.0, -3.5, 8.0, -2.0, 3.5, 5.0], np.float32)
    _check("Mod", [x, y], {"fmod": 1})


def test_uint8_and_int8_arithmetic_wraps_like_onnx():
    a = np.array([250, 3, 128, 255], np.uint8)
    b = np.array([10, 5, 128, 1], np.uint8)
    for op in ("Add", "Mul", "Sub"):
        _check(op, [a, b])
        _check(op, [a.view(np.int8), b.view(np.int8)])


def test_thresholded_relu_drops_values_equal_to_alpha():
    _check("ThresholdedRelu", [np.array([0.5, 1.0, 1.5, -2.0], np.float32)], {"alpha": 1.0})


def test_prelu_broadcasts_a_slope_per_channel():
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)
    slope = np.array([[0.1], [0.2], [0.3]], np.float32)
    _check("PRelu", [x, slope])


def test_clip_with_integer_bounds_and_min_above_max():
    x = np.array([-5, 0, 3, 9], np.int32)
    _check("Clip", [x, np.array(-1, np.int32), np.array(4, np.int32)])
    _check("Clip", [x.astype(np.float32), np.array(5, np.float32), np.array(2, np.float32)])


def test_integer_pow_and_float_exponent_on_integer_base():
    _check("Pow", [np.array([2, -3, 4], np.int32), np.array([3, 2, 0], np.int32)])
    _check("Pow", [np.array([1.5, 2.0, 3.0], np.float32), np.array([2, 3, -1], np.int64)], exact=False)


@pytest.mark.parametrize("op,attrs", [("Selu", {"alpha": 1.5, "gamma": 2.5}), ("Celu", {"alpha": 0.7}),
                                      ("Elu", {"alpha": 0.3}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
                                      ("HardSwish", {}), ("Mish", {}), ("LeakyRelu", {"alpha": 0.2}),
                                      ("Softplus", {}), ("Softsign", {}), ("Gelu", {"approximate": "tanh"}),
                                      ("Gelu", {}), ("Asinh", {}), ("Acosh", {}), ("Round", {})])
def test_activations_and_composed_math(op, attrs):
    x = np.array([-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.5, 3.5, 1.5, -1.5], np.float32)
    if op == "Acosh":
        x = np.abs(x) + 1
    _check(op, [x], attrs, exact=op == "Round")


def test_isinf_detect_flags():
    x = np.array([np.inf, -np.inf, 1.0, np.nan], np.float32)
    for neg in (0, 1):
        for pos in (0, 1):
            _check("IsInf", [x], {"detect_negative": neg, "detect_positive": pos}, out_type=9)


def test_variadic_mean_and_max_broadcast():
    a, b, c = (np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1.0, -2.0, 9.0], np.float32),
               np.array([[0.5], [7.0]], np.float32))
    _check("Mean", [a, b, c], exact=False)
    _check("Max", [a, b, c])


def test_constant_of_shape_int64_value_from_a_runtime_shape():
    model, feeds = _one_node("ConstantOfShape", [np.array([2, 3], np.int64)],
                             {"value": numpy_helper.from_array(np.array([-4], np.int64))}, out_type=7)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)[0]
    np.testing.assert_array_equal(run(load_onnx(model), feeds)["y"], want)


def test_log_of_zero_is_minus_infinity():
    """MIL log adds an epsilon (1e-45) by default; ONNX's log(0) is -inf."""
    _check("Log", [np.array([0.0, 1e-30, 2.0], np.float32)], exact=False)


@pytest.mark.parametrize("attrs,b_shape", [({"broadcast": 1, "axis": 1}, (3, 4)), ({"broadcast": 1}, (4, 5)),
                                           ({"broadcast": 1, "axis": -3}, (3,)), ({}, (2, 3, 4, 5))])
def test_opset_6_broadcast_with_axis_aligns_from_axis(attrs, b_shape):
    """Legacy broadcast (opset < 7): B's dims align with A's from ``axis``. Oracle: the formula of
    the opset-6 spec (numpy with B given trailing 1s), which onnxruntime no longer runs."""
    a = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)
    b = (np.arange(np.prod(b_shape), dtype=np.float32) * 10).reshape(b_shape)
    model, feeds = _one_node("Mul", [a, b], attrs, opset=6)
    axis = attrs.get("axis", 4 - len(b_shape)) % 4
    want = a * b.reshape(b_shape + (1,) * (4 - axis - len(b_shape)))
    np.testing.assert_array_equal(run(load_onnx(model), feeds)["y"], want)
