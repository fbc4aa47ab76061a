"""Normalization ops against onnxruntime, torch and the WebNN vectors.

fp16 inputs are checked against the fp32 oracle result rounded to fp16 (our kernels compute in
fp32 and round once). WebNN vectors whose layout differs from MIL's (channel axis, parameter
order) are adapted by moving axes of the test data, never by computing expected values here.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from onnx import helper

from tests.oracles import webnn_vectors
from tests.oracles.onnx_oracle import run_onnx, run_onnx_node

from .harness import assert_close, run_op
from .oracle_util import single_op_vectors

ORACLE = {
    "batch_norm": "onnxruntime BatchNormalization + WebNN batchNormalization vectors",
    "instance_norm": "onnxruntime InstanceNormalization + WebNN instanceNormalization vectors",
    "l2_norm": "onnxruntime ReduceSumSquare/Add/Sqrt/Div graph",
    "layer_norm": "onnxruntime LayerNormalization (Transpose for non-trailing axes) + WebNN layerNormalization vectors",
    "local_response_norm": "torch local_response_norm (all sizes) and onnxruntime LRN (odd sizes); "
                           "coremltools' on-device expected values for rank 3",
}

_F32 = np.float32


def _tol(dt: str) -> dict:
    return dict(rtol=2e-3, atol=2e-3) if dt == "float16" else dict(rtol=1e-5, atol=1e-5)


def _rand(rng: np.random.Generator, shape: tuple, dt: str = "float32", scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(dt)


# ---------------------------------------------------------------------------------------------
# batch_norm / instance_norm


@pytest.mark.parametrize(
    "shape,dt,affine,opset",
    [((2, 3, 5), "float32", True, "iOS15"), ((2, 3, 4, 5), "float32", False, "iOS15"),
     ((1, 3, 2, 3, 4), "float32", True, "iOS15"), ((2, 3, 4, 5), "float16", True, "iOS15"),
     ((2, 3, 4, 5), "float16", True, "iOS17")],
    ids=lambda v: str(v),
)
def test_batch_norm_vs_onnxruntime(shape: tuple, dt: str, affine: bool, opset: str):
    rng = np.random.default_rng(1)
    c = shape[1]
    x = _rand(rng, shape, dt, 3.0)
    pdt = "float32" if opset == "iOS17" else dt  # iOS17: fp32 parameters for an fp16 x
    mean, var = _rand(rng, (c,), pdt), rng.uniform(0.1, 2.0, c).astype(pdt)
    gamma, beta = _rand(rng, (c,), pdt), _rand(rng, (c,), pdt)
    params = {"mean": mean, "variance": var, "epsilon": np.array(1e-3, pdt)}
    if affine:
        params.update(gamma=gamma, beta=beta)
    got = run_op("batch_norm", {"x": x}, params, opset=opset)[0]
    scale, bias = (gamma, beta) if affine else (np.ones(c, pdt), np.zeros(c, pdt))  # MIL's defaults
    feeds = {k: v.astype(_F32) for k, v in (("x", x), ("s", scale), ("b", bias), ("m", mean), ("v", var))}
    want = run_onnx_node("BatchNormalization", feeds, {"epsilon": 1e-3})[0].astype(dt)
    assert_close(got, want, **_tol(dt), what=f"batch_norm {shape} {dt}")


@pytest.mark.parametrize(
    "shape,dt,opset",
    [((2, 3, 7), "float32", "iOS15"), ((2, 3, 4, 5), "float32", "iOS15"), ((1, 2, 3, 4, 2), "float32", "iOS15"),
     ((2, 3, 4, 5), "float16", "iOS15"), ((2, 3, 4, 5), "float16", "iOS17")],
    ids=lambda v: str(v),
)
def test_instance_norm_vs_onnxruntime(shape: tuple, dt: str, opset: str):
    rng = np.random.default_rng(2)
    c = shape[1]
    x = _rand(rng, shape, dt, 3.0) + 1
    pdt = "float32" if opset == "iOS17" else dt
    gamma, beta = _rand(rng, (c,), pdt), _rand(rng, (c,), pdt)
    got = run_op("instance_norm", {"x": x}, {"gamma": gamma, "beta": beta, "epsilon": np.array(1e-4, pdt)},
                 opset=opset)[0]
    want = run_onnx_node("InstanceNormalization", {"x": x.astype(_F32), "s": gamma.astype(_F32),
                                                   "b": beta.astype(_F32)}, {"epsilon": 1e-4})[0].astype(dt)
    assert_close(got, want, **_tol(dt), what=f"instance_norm {shape} {dt}")


def test_instance_norm_defaults_and_constant_slices_vs_onnxruntime():
    x = np.zeros((1, 2, 3, 3), _F32)
    x[0, 1] = 5.0  # a constant slice: variance 0, output beta
    x[0, 0, 0, 0] = np.inf
    got = run_op("instance_norm", {"x": x})[0]
    want = run_onnx_node("InstanceNormalization", {"x": x, "s": np.ones(2, _F32), "b": np.zeros(2, _F32)},
                         {"epsilon": 1e-5})[0]
    assert_close(got, want, what="instance_norm defaults")


# ---------------------------------------------------------------------------------------------
# l2_norm


def _onnx_l2_norm(x: np.ndarray, eps: float) -> np.ndarray:
    nodes = [
        helper.make_node("ReduceSumSquare", ["x", "axes"], ["ss"], keepdims=1),
        helper.make_node("Add", ["ss", "eps"], ["sse"]),
        helper.make_node("Sqrt", ["sse"], ["norm"]),
        helper.make_node("Div", ["x", "norm"], ["out"]),
    ]
    inits = {"axes": np.array([-3, -2, -1], np.int64), "eps": np.array(eps, x.dtype)}
    return run_onnx(nodes, {"x": x}, ["out"], inits)[0]


@pytest.mark.parametrize(
    "shape,dt,eps,opset",
    [((2, 3, 4), "float32", 1e-6, "iOS15"), ((2, 3, 4, 5), "float32", 5.7, "iOS15"),
     ((2, 2, 3, 4, 5), "float32", 1e-4, "iOS15"), ((3, 2, 4, 5), "float16", 1e-3, "iOS15"),
     ((3, 2, 4, 5), "float16", 1e-3, "iOS17")],
    ids=lambda v: str(v),
)
def test_l2_norm_vs_onnxruntime(shape: tuple, dt: str, eps: float, opset: str):
    x = _rand(np.random.default_rng(3), shape, dt)
    x.reshape(-1)[:3] = 0  # a zero start does not matter; epsilon keeps all-zero slices finite
    params = {"epsilon": np.array(eps, "float32" if opset == "iOS17" else dt)}
    got = run_op("l2_norm", {"x": x}, params, opset=opset)[0]
    want = _onnx_l2_norm(x.astype(_F32), eps).astype(dt)
    assert_close(got, want, **_tol(dt), what=f"l2_norm {shape}")


def test_l2_norm_zero_slice_vs_onnxruntime():
    x = np.zeros((2, 1, 2, 2), _F32)
    x[1] = [[[3.0, 4.0], [0.0, -0.0]]]
    got = run_op("l2_norm", {"x": x}, {"epsilon": 0.0})[0]  # 0 / 0 = NaN in slice 0
    assert_close(got, _onnx_l2_norm(x, 0.0), what="l2_norm eps=0")


# ---------------------------------------------------------------------------------------------
# layer_norm


def _onnx_layer_norm(x: np.ndarray, axes: list[int], gamma: np.ndarray | None, beta: np.ndarray | None,
                     eps: float) -> np.ndarray:
    """LayerNormalization normalizes trailing dims: move ``axes`` (sorted) last, then back."""
    rank = x.ndim
    axes = sorted(a % rank for a in axes)
    perm = [i for i in range(rank) if i not in axes] + axes
    inverse = list(np.argsort(perm))
    normalized = [x.shape[i] for i in axes]
    feeds = {"x": x, "s": np.ones(normalized, x.dtype) if gamma is None else gamma}
    names = ["xt", "s"]
    if beta is not None:
        feeds["b"] = beta
        names.append("b")
    nodes = [
        helper.make_node("Transpose", ["x"], ["xt"], perm=perm),
        helper.make_node("LayerNormalization", names, ["yt"], axis=rank - len(axes), epsilon=eps),
        helper.make_node("Transpose", ["yt"], ["out"], perm=inverse),
    ]
    return run_onnx(nodes, feeds, ["out"])[0]


_LN_CASES = [
    ((2, 3, 4), None, True, "float32", "iOS15"),
    ((2, 3, 4, 5), [-1], True, "float32", "iOS15"),
    ((2, 3, 4, 5), [1, -1], False, "float32", "iOS15"),
    ((2, 3, 4, 5), [2, 0], True, "float32", "iOS15"),
    ((6, 5), [0], True, "float16", "iOS15"),
    ((2, 3, 8), [-1, -2], True, "float16", "iOS17"),
]


@pytest.mark.parametrize("shape,axes,affine,dt,opset", _LN_CASES, ids=lambda v: str(v))
def test_layer_norm_vs_onnxruntime(shape: tuple, axes: list | None, affine: bool, dt: str, opset: str):
    rng = np.random.default_rng(4)
    x = _rand(rng, shape, dt, 2.0) + 0.5
    full_axes = list(range(len(shape))) if axes is None else axes
    normalized = tuple(shape[i % len(shape)] for i in sorted(a % len(shape) for a in full_axes))
    pdt = "float32" if opset == "iOS17" else dt
    gamma, beta = _rand(rng, normalized, pdt), _rand(rng, normalized, pdt)
    params: dict = {"epsilon": np.array(1e-3, pdt)}
    if axes is not None:
        params["axes"] = axes
    if affine:
        params.update(gamma=gamma, beta=beta)
    got = run_op("layer_norm", {"x": x}, params, opset=opset)[0]
    want = _onnx_layer_norm(x.astype(_F32), full_axes, gamma.astype(_F32) if affine else None,
                            beta.astype(_F32) if affine else None, 1e-3).astype(dt)
    assert_close(got, want, **_tol(dt), what=f"layer_norm {shape} axes={axes}")


def _moveaxis_params(values: np.ndarray, axes: list[int], rank: int) -> np.ndarray:
    """WebNN's scale/bias follow the order of ``axes``; MIL's follow the sorted axes."""
    positive = [a % rank for a in axes]
    return np.transpose(values, np.argsort(positive)) if values.ndim else values


def test_layer_norm_vs_webnn_vectors():
    checked = 0
    for vec, args, options, output in single_op_vectors("layerNormalization"):
        x = vec.inputs[args["input"]]
        axes = options.get("axes", list(range(1, x.ndim)))  # WebNN's default: every axis but the first
        params: dict = {"axes": np.array(axes, np.int32), "epsilon": np.array(options.get("epsilon", 1e-5), x.dtype)}
        for webnn_name, mil_name in (("scale", "gamma"), ("bias", "beta")):
            if webnn_name in options:
                params[mil_name] = _moveaxis_params(vec.inputs[options[webnn_name]], axes, x.ndim)
        got = run_op("layer_norm", {"x": x}, params)[0]
        atol = 1 / 512 if x.dtype == np.float16 else 1 / 1024
        webnn_vectors.assert_atol(got, vec.expected[output], atol, what=vec.name)
        checked += 1
    assert checked == 25


def _channels_to_axis1(x: np.ndarray, axis: int) -> tuple[np.ndarray, tuple]:
    """[..., C (at ``axis``), ...] -> [M, C, 1] (batch_norm needs rank >= 3), and how to undo it."""
    moved = np.moveaxis(x, axis, -1)
    return moved.reshape(-1, x.shape[axis], 1), moved.shape


def test_batch_norm_vs_webnn_vectors():
    checked = 0
    for vec, args, options, output in single_op_vectors("batchNormalization"):
        x = vec.inputs[args["input"]]
        axis = options.get("axis", 1)
        params: dict = {"mean": vec.inputs[args["mean"]], "variance": vec.inputs[args["variance"]],
                        "epsilon": np.array(options.get("epsilon", 1e-5), x.dtype)}
        for webnn_name, mil_name in (("scale", "gamma"), ("bias", "beta")):
            if webnn_name in options:
                params[mil_name] = vec.inputs[options[webnn_name]]
        x3, moved_shape = _channels_to_axis1(x, axis)
        got = np.moveaxis(run_op("batch_norm", {"x": x3}, params)[0].reshape(moved_shape), -1, axis)
        webnn_vectors.assert_ulp(got, vec.expected[output], 6, what=vec.name)
        checked += 1
    assert checked == 24


def test_instance_norm_vs_webnn_vectors():
    checked = 0
    for vec, args, options, output in single_op_vectors("instanceNormalization"):
        x = vec.inputs[args["input"]]
        nhwc = options.get("layout", "nchw") == "nhwc"
        params: dict = {"epsilon": np.array(options.get("epsilon", 1e-5), x.dtype)}
        for webnn_name, mil_name in (("scale", "gamma"), ("bias", "beta")):
            if webnn_name in options:
                params[mil_name] = vec.inputs[options[webnn_name]]
        got = run_op("instance_norm", {"x": np.moveaxis(x, -1, 1) if nhwc else x}, params)[0]
        got = np.moveaxis(got, 1, -1) if nhwc else got
        budget = 8400 if x.dtype == np.float16 else 840
        webnn_vectors.assert_ulp(got, vec.expected[output], budget, what=vec.name)
        checked += 1
    assert checked == 14


# ---------------------------------------------------------------------------------------------
# local_response_norm


def _torch_lrn(x: np.ndarray, size: int, alpha: float, beta: float, k: float) -> np.ndarray:
    """torch normalizes across dim 1 of [N, C, ...]; MIL across dim -3 with the dims before it as batch."""
    x4 = x.reshape((-1,) + x.shape[-3:])
    y = torch.nn.functional.local_response_norm(torch.from_numpy(x4.astype(_F32)), size, alpha, beta, k)
    return y.numpy().reshape(x.shape)


@pytest.mark.parametrize(
    "shape,size,dt,opset",
    [(s, n, "float32", "iOS15") for s, n in itertools.product([(2, 5, 3, 4), (4, 3, 2), (2, 2, 6, 3, 2)], [1, 2, 3, 4, 5])]
    + [((2, 5, 3, 4), 3, "float16", "iOS15"), ((2, 5, 3, 4), 4, "float16", "iOS17")],
    ids=lambda v: str(v),
)
def test_local_response_norm_vs_torch(shape: tuple, size: int, dt: str, opset: str):
    x = _rand(np.random.default_rng(5), shape, dt, 3.0)
    alpha, beta, k = 0.3, 0.75, 2.0
    pdt = "float32" if opset == "iOS17" else dt
    params = {"size": size, "alpha": np.array(alpha, pdt), "beta": np.array(beta, pdt), "k": np.array(k, pdt)}
    got = run_op("local_response_norm", {"x": x}, params, opset=opset)[0]
    want = _torch_lrn(x, size, alpha, beta, k).astype(dt)
    assert_close(got, want, **_tol(dt), what=f"local_response_norm {shape} size={size}")


@pytest.mark.parametrize("size", [1, 3, 5, 7])
def test_local_response_norm_odd_sizes_vs_onnxruntime(size: int):
    # ONNX LRN's window agrees with MIL's (torch's) for odd sizes only.
    x = _rand(np.random.default_rng(6), (2, 6, 3, 3), "float32", 3.0)
    got = run_op("local_response_norm", {"x": x}, {"size": size, "alpha": 0.5, "beta": 0.6, "k": 1.5})[0]
    want = run_onnx_node("LRN", {"x": x}, {"size": size, "alpha": 0.5, "beta": 0.6, "bias": 1.5})[0]
    assert_close(got, want, what=f"local_response_norm size={size}")


def test_local_response_norm_rank3_vs_coremltools_device_values():
    """Expected values of coremltools' test_builder_to_backend_smoke for local_response_norm
    (mil/ops/tests/iOS14/test_normalization.py), checked by coremltools on device: for a rank-3
    input the channel axis is -3 (here of size 1), not 1."""
    x = np.array([[[1.0, -7.0], [5.0, -6.0], [-3.0, -5.0]]], _F32)
    size2 = [[[0.99996257, -6.98716545], [4.99531746, -5.99191284], [-2.99898791, -4.99531746]]]
    size3 = [[[0.99997497, -6.99143696], [4.99687672, -5.99460602], [-2.99932504, -4.99687672]]]
    assert_close(run_op("local_response_norm", {"x": x}, {"size": 2})[0], np.array(size2, _F32), what="size 2")
    assert_close(run_op("local_response_norm", {"x": x}, {"size": 3, "alpha": 1e-4, "beta": 0.75, "k": 1.0})[0],
                 np.array(size3, _F32), what="size 3")


# ---------------------------------------------------------------------------------------------
# type inference rejects what MIL rejects

_C3 = np.ones(3, _F32)
_INVALID = [
    ("batch_norm", (2, 3), {"mean": _C3, "variance": _C3}, "rank in \\[3, 5\\]"),
    ("batch_norm", (1, 3, 1, 1, 1, 2), {"mean": _C3, "variance": _C3}, "rank in \\[3, 5\\]"),
    ("batch_norm", (2, 4, 5), {"mean": _C3, "variance": _C3}, "3 entries but x has 4 channels"),
    ("instance_norm", (2, 3, 4), {"gamma": np.ones((3, 1), _F32)}, "must be 1-D"),
    ("instance_norm", (2, 3), {}, "rank >= 3"),
    ("l2_norm", (3, 4), {}, "rank >= 3"),
    ("layer_norm", (2, 3, 4), {"axes": [1, 2], "gamma": np.ones((4, 3), _F32)}, "must have shape \\['3', '4'\\]"),
    ("layer_norm", (2, 3, 4), {"axes": [3]}, "out of range"),
    ("local_response_norm", (2, 3, 4), {"size": 0}, "size must be >= 1"),
    ("local_response_norm", (3, 4), {"size": 3}, "rank >= 3"),
]


@pytest.mark.parametrize("op,shape,params,match", _INVALID, ids=lambda v: v if isinstance(v, str) else None)
def test_invalid_inputs_are_rejected(op: str, shape: tuple, params: dict, match: str):
    from converter.errors import TypeInferenceError

    with pytest.raises(TypeInferenceError, match=match):
        run_op(op, {"x": np.zeros(shape, _F32)}, params)
