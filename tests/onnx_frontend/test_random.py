"""Random ops: values are random (the IR draws from its own stream, never onnxruntime's), so what
is checked is what ONNX fixes: shape and dtype (against onnxruntime running the same model; ONNX's reference
evaluator where onnxruntime has no fp16 kernel),
the distribution (moments / frequencies against the formulas, with 6-sigma bounds on 20k draws),
support (uniform in [low, high), Bernoulli in {0, 1} with p = 0 / 1 exact), and determinism
for a given seed. The onnx node-suite Bernoulli cases are checked the same partial way."""

from __future__ import annotations

import math

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

from converter.frontends.onnx import load_onnx

from .feeding import run_program as run

N = 20000


def _model(node, inputs, out_type, opset=21, consts=()):
    g = h.make_graph([node], "g", inputs, [h.make_tensor_value_info("y", out_type, None)],
                     initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in consts])
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def _both(model, feeds, seed=0):
    got = run(load_onnx(model), feeds, seed=seed)["y"]
    try:
        want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    except ort.capi.onnxruntime_pybind11_state.NotImplemented:  # no fp16 random kernels: ONNX's reference
        want = ReferenceEvaluator(model).run(None, feeds)[0]
    assert got.shape == want.shape
    return got, want


def _close(mean, expected, std, n=N):
    assert abs(mean - expected) < 6 * std / math.sqrt(n), (mean, expected)


@pytest.mark.parametrize("dtype,np_dt", [(T.FLOAT, np.float32), (T.FLOAT16, np.float16), (T.DOUBLE, np.float64)])
def test_random_normal_shape_dtype_and_moments(dtype, np_dt):
    node = h.make_node("RandomNormal", [], ["y"], shape=[N // 100, 100], mean=2.5, scale=0.5, dtype=dtype, seed=3.0)
    got, want = _both(_model(node, [], dtype), {})
    assert want.dtype == np_dt and got.dtype == (np.float32 if np_dt == np.float64 else np_dt)  # fp64 held as fp32
    _close(float(got.astype(np.float64).mean()), 2.5, 0.5)
    assert abs(float(got.astype(np.float64).std()) - 0.5) < 0.02


@pytest.mark.parametrize("dtype", [T.FLOAT, T.FLOAT16])
def test_random_uniform_support_and_mean(dtype):
    node = h.make_node("RandomUniform", [], ["y"], shape=[N], low=-3.0, high=5.0, dtype=dtype)
    got, _ = _both(_model(node, [], dtype), {})
    assert got.min() >= -3.0 and got.max() < 5.0
    _close(float(got.astype(np.float64).mean()), 1.0, 8 / math.sqrt(12))


@pytest.mark.parametrize("op", ["RandomNormalLike", "RandomUniformLike"])
def test_like_ops_take_the_run_time_shape_and_the_dtype_attribute(op):
    x = np.zeros((3, 7), np.float32)
    model = _model(h.make_node(op, ["x"], ["y"], dtype=T.FLOAT16),
                   [h.make_tensor_value_info("x", T.FLOAT, ["a", 7])], T.FLOAT16)
    got, want = _both(model, {"x": x})
    assert got.dtype == want.dtype == np.float16


@pytest.mark.parametrize("p", [0.0, 1.0, 0.3])
@pytest.mark.parametrize("out_type,np_dt", [(T.INT32, np.int32), (T.BOOL, np.bool_), (T.FLOAT, np.float32)])
def test_bernoulli_frequencies_and_output_type(p, out_type, np_dt):
    probs = np.full(N, p, np.float32)
    model = _model(h.make_node("Bernoulli", ["p"], ["y"], dtype=out_type), [h.make_tensor_value_info("p", T.FLOAT, [N])],
                   out_type, opset=15)
    got, want = _both(model, {"p": probs})
    assert want.dtype == np_dt
    # a bool graph output may be declared int32 (Core ML features hold no bool)
    assert got.dtype == np_dt or (np_dt == np.bool_ and got.dtype == np.int32)
    assert set(np.unique(got.astype(np.float64))) <= {0.0, 1.0}
    if p in (0.0, 1.0):
        assert np.all(got.astype(np.float64) == p)
    else:
        _close(float(got.astype(np.float64).mean()), p, math.sqrt(p * (1 - p)))


def test_bernoulli_follows_each_elements_probability():
    probs = np.tile(np.array([0.0, 1.0, 0.9], np.float32), N // 3)
    model = _model(h.make_node("Bernoulli", ["p"], ["y"]), [h.make_tensor_value_info("p", T.FLOAT, [probs.size])],
                   T.FLOAT, opset=15)
    got = run(load_onnx(model), {"p": probs})["y"].reshape(-1, 3)
    assert np.all(got[:, 0] == 0) and np.all(got[:, 1] == 1)
    _close(float(got[:, 2].mean()), 0.9, 0.3, got.shape[0])


@pytest.mark.parametrize("out_type", [T.INT32, T.INT64])
def test_multinomial_frequencies_shape_and_dtype(out_type):
    probs = np.array([[0.7, 0.2, 0.1], [0.0, 0.0, 1.0]], np.float64)
    with np.errstate(divide="ignore"):
        logits = np.log(probs).astype(np.float32)
    model = _model(h.make_node("Multinomial", ["x"], ["y"], sample_size=N, dtype=out_type),
                   [h.make_tensor_value_info("x", T.FLOAT, [2, 3])], out_type)
    got, want = _both(model, {"x": logits})
    assert got.shape == (2, N) and want.dtype == (np.int32 if out_type == T.INT32 else np.int64)
    assert got.dtype == np.int32  # int64 is held as int32
    assert np.all(got[1] == 2)
    for k, pk in enumerate(probs[0]):
        _close(float(np.mean(got[0] == k)), pk, math.sqrt(pk * (1 - pk)))


def test_a_seed_gives_the_same_values_and_different_seeds_differ():
    def draw(seed, interp_seed):
        node = h.make_node("RandomUniform", [], ["y"], shape=[64], seed=seed)
        return run(load_onnx(_model(node, [], T.FLOAT)), {}, seed=interp_seed)["y"]

    a = draw(1.0, 0)
    np.testing.assert_array_equal(a, draw(1.0, 5))  # a given seed does not depend on the run's seed
    assert not np.array_equal(a, draw(2.0, 0))


def test_node_suite_bernoulli_cases_partially():
    """ONNX's Bernoulli cases fix random values we cannot reproduce: check shape, dtype and support."""
    from .node_suite import node_cases

    cases = [c for c in node_cases() if c.name.startswith("test_bernoulli")]
    assert len(cases) == 6
    for c in cases:
        (inputs, outputs), = c.data_sets[:1]
        names = [vi.name for vi in c.model.graph.input]
        got = run(load_onnx(c.model), dict(zip(names, inputs)))[c.model.graph.output[0].name]
        want = outputs[0]
        assert got.shape == want.shape, c.name
        assert got.dtype == (np.float32 if want.dtype == np.float64 else want.dtype), c.name
        assert set(np.unique(got.astype(np.float64))) <= {0.0, 1.0}, c.name
