"""Activation ops against onnxruntime (one node, or the MIL formula spelled in ONNX nodes), torch
(silu, relu6) and the WebNN conformance vectors.

fp16: the oracle runs in fp32 on the same (fp16-exact) inputs and parameters and its result is
rounded to fp16, the documented numerics of these kernels (compute wide, round once).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import helper

from converter.errors import TypeInferenceError
from tests.oracles import webnn_vectors
from tests.oracles.onnx_oracle import run_onnx

from .harness import assert_close, run_op

# MIL op -> (oracle description, default MIL params for the tests)
_OPS: dict[str, tuple[str, dict[str, Any]]] = {
    "relu": ("onnxruntime Relu", {}),
    "sigmoid": ("onnxruntime Sigmoid", {}),
    "softplus": ("onnxruntime Softplus", {}),
    "softsign": ("onnxruntime Softsign", {}),
    "elu": ("onnxruntime Elu", {"alpha": 0.7}),
    "leaky_relu": ("onnxruntime LeakyRelu", {"alpha": 0.15}),
    "sigmoid_hard": ("onnxruntime HardSigmoid", {"alpha": 0.3, "beta": 0.45}),
    "gelu": ("onnxruntime Gelu (opset 20; SIGMOID_APPROXIMATION as Mul(x, Sigmoid(1.702 x)))", {}),
    "softmax": ("onnxruntime Softmax", {}),
    "prelu": ("onnxruntime PRelu (slope shaped [C, 1, ...])", {}),
    "clamped_relu": ("onnxruntime Min(LeakyRelu(x, alpha), beta)", {"alpha": 0.4, "beta": 1.25}),
    "linear_activation": ("onnxruntime Add(Mul(x, alpha), beta)", {"alpha": -1.5, "beta": 0.25}),
    "scaled_tanh": ("onnxruntime Mul(alpha, Tanh(Mul(beta, x)))", {"alpha": 1.7, "beta": 0.66}),
    "thresholded_relu": ("onnxruntime Where(Less(x, alpha), 0, x); ThresholdedRelu away from ties and NaN",
                         {"alpha": 0.5}),
    "softplus_parametric": ("onnxruntime Mul(alpha, Softplus(Mul(beta, x))) per channel", {}),
    "relu6": ("torch.nn.functional.relu6", {}),
    "silu": ("torch.nn.functional.silu", {}),
}
ORACLE = {op: how for op, (how, _) in _OPS.items()}

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")

_SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, -2.5, 6.0, 7.0, 1e-45, 1e-30, 20.0,
                     -20.0, 100.0, -100.0, 3e38, -3e38, 70000.0], np.float32)
_CHANNEL = {  # per-channel parameters for C = 4
    "alpha": np.array([0.25, -0.5, 2.0, 0.0], np.float32),
    "beta": np.array([1.0, 0.5, -2.0, 0.25], np.float32),  # alpha 0 with beta > 1: see test_intermediates_...
}


def _channel_params(op: str) -> dict[str, np.ndarray]:
    names = {"prelu": ("alpha",), "softplus_parametric": ("alpha", "beta")}.get(op, ())
    return {n: _CHANNEL[n] for n in names}


def _per_channel(p: np.ndarray, rank: int) -> np.ndarray:
    return p.reshape((-1,) + (1,) * (rank - 2))


def _onnx(op: str, x: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    """The ONNX graph for ``op`` on fp32 ``x`` (parameters as fp32), run by onnxruntime."""
    n = helper.make_node
    consts: dict[str, np.ndarray] = {}

    def const(name: str, v: Any) -> str:
        consts[name] = np.asarray(v, np.float32)
        return name

    single = {"relu": "Relu", "sigmoid": "Sigmoid", "softplus": "Softplus", "softsign": "Softsign"}
    if op in single:
        nodes = [n(single[op], ["x"], ["y"])]
    elif op == "elu":
        nodes = [n("Elu", ["x"], ["y"], alpha=float(p["alpha"]))]
    elif op == "leaky_relu":
        nodes = [n("LeakyRelu", ["x"], ["y"], alpha=float(p["alpha"]))]
    elif op == "sigmoid_hard":
        nodes = [n("HardSigmoid", ["x"], ["y"], alpha=float(p["alpha"]), beta=float(p["beta"]))]
    elif op == "gelu":
        mode = p.get("mode", "EXACT")
        if mode == "SIGMOID_APPROXIMATION":
            nodes = [n("Mul", ["x", const("k", 1.702)], ["t"]), n("Sigmoid", ["t"], ["s"]), n("Mul", ["x", "s"], ["y"])]
        else:
            nodes = [n("Gelu", ["x"], ["y"], approximate="tanh" if mode == "TANH_APPROXIMATION" else "none")]
    elif op == "softmax":
        nodes = [n("Softmax", ["x"], ["y"], axis=int(p.get("axis", -1)))]
    elif op == "prelu":
        nodes = [n("PRelu", ["x", const("slope", _per_channel(p["alpha"], x.ndim))], ["y"])]
    elif op == "clamped_relu":
        nodes = [n("LeakyRelu", ["x"], ["t"], alpha=float(p["alpha"])), n("Min", ["t", const("b", p["beta"])], ["y"])]
    elif op == "linear_activation":
        nodes = [n("Mul", ["x", const("a", p["alpha"])], ["t"]), n("Add", ["t", const("b", p["beta"])], ["y"])]
    elif op == "scaled_tanh":
        nodes = [n("Mul", ["x", const("b", p["beta"])], ["t"]), n("Tanh", ["t"], ["u"]),
                 n("Mul", [const("a", p["alpha"]), "u"], ["y"])]
    elif op == "thresholded_relu":
        nodes = [n("Less", ["x", const("a", p["alpha"])], ["lt"]), n("Where", ["lt", const("zero", 0.0), "x"], ["y"])]
    elif op == "softplus_parametric":
        nodes = [n("Mul", ["x", const("b", _per_channel(p["beta"], x.ndim))], ["t"]), n("Softplus", ["t"], ["s"]),
                 n("Mul", [const("a", _per_channel(p["alpha"], x.ndim)), "s"], ["y"])]
    else:
        raise AssertionError(op)
    return run_onnx(nodes, {"x": x}, ["y"], consts, )[0]


def _oracle(op: str, x: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    """The oracle in fp32 (fp16 inputs and parameters widened exactly), rounded to x's dtype."""
    x32 = x.astype(np.float32)
    if op in ("relu6", "silu"):
        import torch

        fn = torch.nn.functional.relu6 if op == "relu6" else torch.nn.functional.silu
        y = fn(torch.from_numpy(x32)).numpy()
    else:
        y = _onnx(op, x32, {k: (np.asarray(v, np.float32) if not isinstance(v, str) else v) for k, v in p.items()})
    return y.astype(x.dtype)


def _params(op: str, dt: type, opset: str) -> dict[str, Any]:
    """Test parameters: in x's dtype in iOS15, fp32 (another dtype than fp16 x) in iOS17."""
    pdt = np.float32 if opset == "iOS17" else dt
    p = {k: pdt(v) for k, v in _OPS[op][1].items()}
    p.update({k: v.astype(pdt) for k, v in _channel_params(op).items()})
    return p


def _tol(dt: np.dtype) -> dict[str, float]:
    return dict(rtol=2e-3, atol=2e-3) if dt == np.float16 else dict(rtol=1e-5, atol=1e-6)


def _check(op: str, x: np.ndarray, p: dict[str, Any], opset: str = "iOS15") -> None:
    got = run_op(op, {"x": x}, p, opset=opset)[0]
    assert_close(got, _oracle(op, x, p), **_tol(x.dtype), what=f"{op} {x.dtype} {opset} {p}")


def _random(op: str, dt: type, rng: np.random.Generator) -> np.ndarray:
    shape = (2, 4, 3, 5) if _channel_params(op) else (3, 4, 5)
    return (rng.standard_normal(shape) * 3).astype(dt)


_CASES = [(op, dt, opset) for op in sorted(_OPS) for dt in ("fp32", "fp16") for opset in ("iOS15", "iOS17")
          if not (dt == "fp32" and opset == "iOS17")]
_NP = {"fp32": np.float32, "fp16": np.float16}


@pytest.mark.parametrize("op,dt,opset", _CASES)
def test_activation_vs_oracle(op: str, dt: str, opset: str):
    rng = np.random.default_rng(abs(hash((op, dt))) % 2**32)
    _check(op, _random(op, _NP[dt], rng), _params(op, _NP[dt], opset), opset)


@pytest.mark.parametrize("op,dt", [(op, dt) for op in sorted(_OPS) for dt in ("fp32", "fp16")])
def test_activation_special_values_vs_oracle(op: str, dt: str):
    """NaN, +-inf, +-0, overflow-prone magnitudes; per-channel ops get them in every channel."""
    x = _SPECIAL.astype(_NP[dt])
    if _channel_params(op):
        x = np.broadcast_to(x, (1, 4, len(x))).copy()
    elif op == "softmax":
        x = x[None, :]
    _check(op, x, _params(op, _NP[dt], "iOS15"))


@pytest.mark.parametrize("mode", ["EXACT", "TANH_APPROXIMATION", "SIGMOID_APPROXIMATION"])
@pytest.mark.parametrize("dt", ["fp32", "fp16"])
def test_gelu_modes_vs_onnxruntime(mode: str, dt: str):
    x = np.concatenate([_random("gelu", np.float32, np.random.default_rng(3)).ravel(), _SPECIAL]).astype(_NP[dt])
    _check("gelu", x, {"mode": mode})


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_softmax_axes_vs_onnxruntime(axis: int):
    x = _random("softmax", np.float32, np.random.default_rng(axis + 10)) * 20  # large: needs the max shift
    _check("softmax", x, {"axis": axis})


def test_softmax_inf_rows_vs_onnxruntime():
    x = np.array([[1.0, np.inf, 2.0], [-np.inf] * 3, [np.nan, 1.0, 2.0], [-np.inf, 0.0, 1.0], [1e30, 1e30, -1e30]],
                 np.float32)
    _check("softmax", x, {"axis": 1})


@pytest.mark.parametrize("rank", [3, 4, 5])
def test_prelu_ranks_vs_onnxruntime(rank: int):
    x = np.random.default_rng(rank).standard_normal((2, 4) + (3,) * (rank - 2)).astype(np.float32)
    _check("prelu", x, {"alpha": _CHANNEL["alpha"]})


@pytest.mark.parametrize("rank", [3, 4, 5, 6])
def test_softplus_parametric_ranks_vs_onnxruntime(rank: int):
    x = np.random.default_rng(rank).standard_normal((2, 4) + (2,) * (rank - 2)).astype(np.float32) * 5
    _check("softplus_parametric", x, {"alpha": _CHANNEL["alpha"], "beta": _CHANNEL["beta"]})


def test_thresholded_relu_ties_keep_x_and_match_onnx_elsewhere():
    """MIL keeps x == alpha (ONNX ThresholdedRelu zeroes it); away from ties and NaN they agree."""
    x = np.array([-1.0, 0.5, 0.49, 0.51, 3.0], np.float32)
    got = run_op("thresholded_relu", {"x": x}, {"alpha": 0.5})[0]
    np.testing.assert_array_equal(got, np.array([0.0, 0.5, 0.0, 0.51, 3.0], np.float32))
    x = _random("thresholded_relu", np.float32, np.random.default_rng(4))
    x = x[x != 0.5]
    want = run_onnx([helper.make_node("ThresholdedRelu", ["x"], ["y"], alpha=0.5)], {"x": x}, ["y"])[0]
    assert_close(run_op("thresholded_relu", {"x": x}, {"alpha": 0.5})[0], want)


def test_clamped_relu_negative_beta_follows_documented_formula():
    """beta < 0: the doc's min(beta, x or alpha*x), not coremltools' folding (which double-counts beta)."""
    x = np.array([-2.0, -0.5, 0.0, 0.5, 3.0], np.float32)
    _check("clamped_relu", x, {"alpha": 0.5, "beta": -0.25})


def test_intermediates_do_not_overflow_at_storage_precision():
    """Kernels compute in float64 (see elementwise_unary): 0 * softplus(3 * 3e38) is 0, where an
    fp32 evaluation overflows to 0 * inf = NaN; 2 * 60000 - 60000 in fp16 is 60000, not inf."""
    x = np.full((1, 1, 1), 3e38, np.float32)
    got = run_op("softplus_parametric", {"x": x}, {"alpha": np.float32([0.0]), "beta": np.float32([3.0])})[0]
    np.testing.assert_array_equal(got, np.zeros_like(x))
    got = run_op("linear_activation", {"x": np.float16([60000.0])}, {"alpha": 2.0, "beta": -60000.0})[0]
    np.testing.assert_array_equal(got, np.float16([60000.0]))


@pytest.mark.parametrize("op,x_shape,params,match", [
    ("prelu", (2, 4), {"alpha": _CHANNEL["alpha"]}, "rank"),
    ("prelu", (1, 4, 2, 2, 2, 2), {"alpha": _CHANNEL["alpha"]}, "rank"),
    ("prelu", (2, 3, 5), {"alpha": _CHANNEL["alpha"]}, "channels"),
    ("softplus_parametric", (2, 4), {"alpha": _CHANNEL["alpha"], "beta": _CHANNEL["beta"]}, "rank"),
    ("softplus_parametric", (1, 4, 3), {"alpha": _CHANNEL["alpha"], "beta": _CHANNEL["beta"][:3]}, "channels"),
    ("softmax", (2, 3), {"axis": 2}, "out of range"),
    ("gelu", (2, 3), {"mode": "FAST"}, "unknown gelu mode"),
    ("leaky_relu", (2, 3), {"alpha": np.array([0.1, 0.2], np.float32)}, "scalar"),
])
def test_activation_rejects_invalid_parameters(op: str, x_shape: tuple, params: dict, match: str):
    with pytest.raises(TypeInferenceError, match=match):
        run_op(op, {"x": np.zeros(x_shape, np.float32)}, params)


# -------------------------------------------------------------------------------------------------
# WebNN conformance vectors

# WebNN op -> (MIL op, MIL defaults for absent WebNN options, ULP budget (fp32, fp16))
_WEBNN: dict[str, tuple[str, dict[str, float], tuple[int, int]]] = {
    "relu": ("relu", {}, (0, 0)),
    "sigmoid": ("sigmoid", {}, (34, 3)),
    "elu": ("elu", {"alpha": 1.0}, (18, 18)),
    "leakyRelu": ("leaky_relu", {"alpha": 0.01}, (1, 1)),
    "hardSigmoid": ("sigmoid_hard", {"alpha": 0.2, "beta": 0.5}, (2, 2)),
    "linear": ("linear_activation", {"alpha": 1.0, "beta": 0.0}, (2, 2)),
    "softmax": ("softmax", {}, (0, 0)),  # budget from the input shape, below
}


@pytest.mark.parametrize("webnn_op", sorted(_WEBNN))
def test_activation_vs_webnn_vectors(webnn_op: str):
    """Scalar options are passed as fp32 constants in iOS17 (U domain), as WebNN keeps them."""
    op, defaults, (ulp32, ulp16) = _WEBNN[webnn_op]
    checked = 0
    for vec in webnn_vectors.load(webnn_op):
        (node,) = vec.operators
        x = vec.inputs[node["arguments"][0]["input"]]
        if x.dtype not in (np.float32, np.float16):
            continue  # MIL activations are float only
        opts: dict[str, Any] = {}
        for arg in node["arguments"][1:]:
            opts.update(arg.get("options", arg))
        params = {k: np.float32(opts.get(k, v)) for k, v in defaults.items()}
        budget = ulp32 if x.dtype == np.float32 else ulp16
        if op == "softmax":
            params = {"axis": np.int32(opts["axis"])}
            budget = 3 * x.shape[int(opts["axis"])] + 3
        got = run_op(op, {"x": x}, params, opset="iOS17")[0]
        webnn_vectors.assert_ulp(got, vec.expected[node["outputs"]], budget, what=vec.name)
        checked += 1
    assert checked > 0
