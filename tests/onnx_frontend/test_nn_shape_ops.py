"""Conv, pooling, normalization, softmax, Gemm and shape ops on parameters chosen so that a swapped
or misread attribute shows (non-square kernels, asymmetric pads, distinct strides/dilations,
axes other than the last). Oracle: onnxruntime on the same one-node model."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper as h
from onnx import numpy_helper

from converter.frontends.onnx import load_onnx
from converter.ir.interpreter import run

RNG = np.random.default_rng(7)


def _check(op, feeds, consts=None, attrs=None, opset=21, in_shapes=None, n_out=1, rtol=1e-5):
    """``feeds``: graph inputs (name -> array); ``consts``: initializers (name -> array), in
    the node's input order ``list(feeds) + list(consts)`` unless ``order`` is given in attrs."""
    consts = consts or {}
    attrs = dict(attrs or {})
    order = attrs.pop("_order", list(feeds) + list(consts))
    ins = [h.make_tensor_value_info(n, h.np_dtype_to_tensor_dtype(x.dtype), (in_shapes or {}).get(n, x.shape))
           for n, x in feeds.items()]
    out_type = h.np_dtype_to_tensor_dtype(next(iter(feeds.values())).dtype)
    outs = [h.make_tensor_value_info(f"y{i}", out_type, None) for i in range(n_out)]
    node = h.make_node(op, order, [o.name for o in outs], **attrs)
    g = h.make_graph([node], "g", ins, outs, [numpy_helper.from_array(v, k) for k, v in consts.items()])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    got = run(load_onnx(model), feeds)
    for i, w in enumerate(want):
        g_ = got[f"y{i}"]
        assert g_.shape == w.shape, (g_.shape, w.shape)
        np.testing.assert_allclose(g_.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=1e-5)


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("auto_pad", ["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"])
def test_conv_window_attributes(auto_pad):
    attrs = {"strides": [2, 1], "group": 2, "auto_pad": auto_pad}
    if auto_pad in ("NOTSET", "VALID"):  # onnxruntime refuses dilations with SAME_*
        attrs["dilations"] = [1, 2]
    if auto_pad == "NOTSET":
        attrs["pads"] = [1, 0, 2, 3]
    _check("Conv", {"x": _x(2, 4, 9, 8)}, {"w": _x(6, 2, 2, 3), "b": _x(6)}, attrs)


def test_conv_1d_and_3d():
    _check("Conv", {"x": _x(1, 3, 11)}, {"w": _x(5, 3, 4)}, {"strides": [3], "pads": [2, 1]})
    _check("Conv", {"x": _x(1, 2, 5, 6, 7)}, {"w": _x(3, 2, 2, 3, 1)}, {"pads": [1, 0, 0, 0, 1, 0]})


@pytest.mark.parametrize("include", [0, 1])
@pytest.mark.parametrize("ceil", [0, 1])
@pytest.mark.filterwarnings("ignore::converter.errors.ConversionWarning")  # onnx's inference keeps a 4th column
def test_average_pool_padding_count_and_ceil(include, ceil):
    _check("AveragePool", {"x": _x(1, 2, 7, 8)}, attrs={"kernel_shape": [3, 2], "strides": [2, 3],
                                                        "pads": [1, 1, 1, 1], "count_include_pad": include,
                                                        "ceil_mode": ceil})


def test_max_pool_and_lp_pool_asymmetric():
    _check("MaxPool", {"x": _x(1, 2, 7, 8)}, attrs={"kernel_shape": [3, 2], "strides": [2, 1], "pads": [0, 1, 2, 0]})
    _check("LpPool", {"x": _x(1, 2, 7, 8)}, attrs={"kernel_shape": [2, 3], "strides": [1, 2], "pads": [1, 0, 0, 1],
                                                   "p": 3}, rtol=1e-4)
    _check("GlobalLpPool", {"x": _x(2, 3, 4, 5)}, attrs={"p": 3}, rtol=1e-4)


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_axis_semantics_before_and_after_opset_13(op, opset, axis):
    _check(op, {"x": _x(2, 3, 4)}, attrs={"axis": axis}, opset=opset)


def test_softmax_coerced_2d_with_a_symbolic_batch():
    _check("Softmax", {"x": _x(2, 3, 4)}, attrs={"axis": 1}, opset=11, in_shapes={"x": ["N", 3, 4]})


def test_gemm_transposes_scalings_and_broadcast_bias():
    _check("Gemm", {"a": _x(4, 3)}, {"b": _x(5, 4), "c": _x(1, 5)},
           {"transA": 1, "transB": 1, "alpha": 0.5, "beta": -2.0})


def test_batch_instance_and_layer_norm():
    _check("BatchNormalization", {"x": _x(2, 3, 4, 5)}, {"s": _x(3), "b": _x(3), "m": _x(3),
                                                         "v": np.abs(_x(3)) + 0.1}, {"epsilon": 0.01})
    _check("BatchNormalization", {"x": _x(4, 3)}, {"s": _x(3), "b": _x(3), "m": _x(3), "v": np.abs(_x(3)) + 0.1})
    _check("InstanceNormalization", {"x": _x(2, 3, 4, 5)}, {"s": _x(3), "b": _x(3)}, {"epsilon": 0.01})
    _check("InstanceNormalization", {"x": _x(2, 3, 7)}, {"s": _x(3), "b": _x(3)})
    _check("LayerNormalization", {"x": _x(2, 3, 4, 5)}, {"s": _x(4, 5), "b": _x(4, 5)}, {"axis": -2}, n_out=3,
           rtol=1e-4)
    _check("LayerNormalization", {"x": _x(2, 3, 4)}, {"s": _x(4)}, {"axis": 1}, rtol=1e-4)  # broadcast scale


def test_reshape_zero_copies_the_dim_at_the_same_index_with_a_symbolic_batch():
    _check("Reshape", {"x": _x(2, 3, 4)}, {"s": np.array([0, -1], np.int64)}, in_shapes={"x": ["N", 3, 4]})
    _check("Reshape", {"x": _x(2, 3, 4)}, {"s": np.array([0, 0, 2, 2], np.int64)}, in_shapes={"x": ["N", "M", 4]})


def test_slice_negative_steps_and_clamped_ends():
    starts, ends = np.array([-1, 10], np.int64), np.array([-(2**62), 1], np.int64)
    _check("Slice", {"x": _x(5, 12)}, {"s": starts, "e": ends, "a": np.array([0, 1], np.int64),
                                       "st": np.array([-2, -3], np.int64)})


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_modes_with_negative_pads_and_integers(mode):
    pads = np.array([1, -1, 2, 0, 2, -2], np.int64)
    _check("Pad", {"x": _x(4, 5, 6)}, {"p": pads}, {"mode": mode})
    xi = RNG.integers(-100, 100, (4, 5)).astype(np.int32)
    _check("Pad", {"x": xi}, {"p": np.array([1, 2, 2, 1], np.int64), "v": np.array(7, np.int32)}, {"mode": mode}
           if mode != "constant" else {}, rtol=0) if mode != "constant" else \
        _check("Pad", {"x": xi}, {"p": np.array([1, 2, 2, 1], np.int64), "v": np.array(7, np.int32)}, rtol=0)


def test_split_uneven_expand_tile_flatten():
    _check("Split", {"x": _x(7, 3)}, attrs={"num_outputs": 3}, opset=18, n_out=3)
    _check("Expand", {"x": _x(3, 1)}, {"s": np.array([2, 1, 4], np.int64)})
    _check("Tile", {"x": _x(2, 3)}, {"r": np.array([3, 2], np.int64)})
    _check("Flatten", {"x": _x(2, 3, 4)}, attrs={"axis": 0})
    _check("Flatten", {"x": _x(2, 3, 4)}, attrs={"axis": 2}, in_shapes={"x": ["N", 3, 4]})


def test_reduce_axes_forms_and_noop():
    _check("ReduceMean", {"x": _x(2, 3, 4)}, {"a": np.array([-1, 0], np.int64)}, {"keepdims": 0})
    _check("ReduceSum", {"x": _x(2, 3, 4)}, {"a": np.array([], np.int64)}, {"noop_with_empty_axes": 1})
    _check("ReduceLogSumExp", {"x": _x(2, 3, 4) * 50}, attrs={"axes": [1]}, opset=13)


def test_a_disagreement_with_onnx_shape_inference_is_a_warning():
    """onnx's inference keeps a ceil_mode window that starts in the right padding; onnxruntime and
    onnx's reference implementation drop it, as the mapping does: converted, with a warning."""
    from converter.errors import ConversionWarning

    with pytest.warns(ConversionWarning, match=r"has shape \[1, 2, 4, 3\]; ONNX's shape inference says"):
        _check("AveragePool", {"x": _x(1, 2, 7, 8)}, attrs={"kernel_shape": [3, 2], "strides": [2, 3],
                                                            "pads": [1, 1, 1, 1], "ceil_mode": 1})


@pytest.mark.parametrize("op,extra", [("MaxPool", {}), ("AveragePool", {"count_include_pad": 0}),
                                      ("AveragePool", {"count_include_pad": 1}), ("LpPool", {"p": 3})])
@pytest.mark.parametrize("ceil", [0, 1])
def test_dilated_and_3d_ceil_pooling_by_taps(op, extra, ceil):
    """No IR pooling op has dilations, nor ceil_mode in 3-D or with asymmetric pads: pooled tap by tap."""
    attrs = {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [1, 0, 2, 1], "dilations": [2, 1], "ceil_mode": ceil,
             **extra}
    _check(op, {"x": _x(1, 2, 9, 10)}, attrs=attrs, opset=19 if op != "LpPool" else 18, rtol=1e-4)
    attrs3 = {"kernel_shape": [2, 2, 3], "strides": [2, 1, 2], "pads": [0, 1, 1, 1, 0, 1], "ceil_mode": ceil, **extra}
    _check(op, {"x": _x(1, 2, 5, 4, 7)}, attrs=attrs3, opset=19 if op != "LpPool" else 18, rtol=1e-4)


@pytest.mark.parametrize("starts,ends", [([1, -1], [4, -20]), ([-100, 7], [100, 0]), ([2, 3], [2, 5])])
def test_slice_with_run_time_starts_and_ends(starts, ends):
    """starts/ends as graph inputs (in the int32 range: run-time int64 is held as int32)."""
    _check("Slice", {"x": _x(5, 8), "s": np.array(starts, np.int64), "e": np.array(ends, np.int64)},
           {"a": np.array([0, 1], np.int64), "st": np.array([1, -2], np.int64)})


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_with_run_time_pads(mode):
    _check("Pad", {"x": _x(3, 4, 5), "p": np.array([0, 1, 2, 1, 0, 3], np.int64)}, {"v": np.array(2.5, np.float32)}
           if mode == "constant" else None, {"mode": mode})


@pytest.mark.parametrize("storage_order", [0, 1])
def test_max_pool_indices(storage_order):
    """Indices: flat positions in the input (row- or column-major per image), padding never chosen."""
    attrs = {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1], "storage_order": storage_order}
    x = _x(2, 3, 7, 6)
    model_feeds = {"x": x}
    from onnx import TensorProto

    node = h.make_node("MaxPool", ["x"], ["y", "i"], **attrs)
    g = h.make_graph([node], "g", [h.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                     [h.make_tensor_value_info("y", TensorProto.FLOAT, None),
                      h.make_tensor_value_info("i", TensorProto.INT64, None)])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 12)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want_y, want_i = sess.run(None, model_feeds)
    got = run(load_onnx(model), model_feeds)
    np.testing.assert_array_equal(got["y"], want_y)
    np.testing.assert_array_equal(got["i"], want_i)
