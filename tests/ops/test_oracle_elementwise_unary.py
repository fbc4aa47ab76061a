"""Elementwise unary ops against onnxruntime (one node, or a few for MIL formulas ONNX spells
differently) and the WebNN conformance vectors.

fp16: the oracle runs in fp32 on the same (fp16-exact) inputs and its result is rounded to fp16,
which is the documented numerics of these kernels (compute wide, round once).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import helper

from converter.errors import TypeInferenceError
from converter.ir.opdef import get_opdef
from tests.oracles import webnn_vectors
from tests.oracles.onnx_oracle import run_onnx

from .harness import assert_close, run_op

# MIL op -> ONNX op for the ops that are one ONNX node of the same name and meaning.
_SAME = {
    "abs": "Abs", "acos": "Acos", "asin": "Asin", "atan": "Atan", "atanh": "Atanh", "ceil": "Ceil", "cos": "Cos",
    "cosh": "Cosh", "erf": "Erf", "exp": "Exp", "floor": "Floor", "round": "Round", "sign": "Sign", "sin": "Sin",
    "sinh": "Sinh", "sqrt": "Sqrt", "tan": "Tan", "tanh": "Tanh", "logical_not": "Not",
}
# MIL op -> the ONNX graph used as its oracle, where it is not a single same-named node.
_COMPOSED = {
    "clip": "Clip(x, alpha, beta)",
    "threshold": "Max(x, alpha)",
    "exp2": "Pow(2, x)",
    "square": "Mul(x, x)",
    "inverse": "Reciprocal(Add(x, epsilon))",
    "log": "Log(Add(x, epsilon))",
    "rsqrt": "Reciprocal(Sqrt(Add(x, epsilon)))",
    "cast": "Cast(to)",
}
ORACLE = {op: f"onnxruntime {onnx_op}" for op, onnx_op in _SAME.items()}
ORACLE.update({op: f"onnxruntime {graph}" for op, graph in _COMPOSED.items()})

_DEFAULT_EPS = {"inverse": 1e-4, "log": 1e-45, "rsqrt": 1e-12}  # from the MIL docs, in x's dtype
_PARAMS = {"clip": {"alpha": -1.25, "beta": 2.5}, "threshold": {"alpha": 0.75}}

_SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1.0, -1.0, 1e-45, 1e-30,
                     3e38, -3e38, 65504.0, 70000.0, 88.5, -104.0], np.float32)
_INT_SPECIAL = np.array([0, 1, -1, 7, -7, 46341, -46341, 2**31 - 1, -(2**31)], np.int32)
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")

_NP = {"fp32": np.float32, "fp16": np.float16, "int32": np.int32, "bool": np.bool_}


def _onnx_type(dt: np.dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dt))


def _oracle(op: str, x: np.ndarray, params: dict[str, Any]) -> np.ndarray:
    """The ONNX graph for ``op`` run by onnxruntime; fp16 runs in fp32 and is rounded back."""
    out_fp16 = x.dtype == np.float16
    if out_fp16:
        x = x.astype(np.float32)
    n = helper.make_node
    consts: dict[str, np.ndarray] = {}

    def const(name: str, v: Any) -> str:
        consts[name] = np.asarray(v, dtype=x.dtype)
        return name

    if op in _SAME:
        nodes = [n(_SAME[op], ["x"], ["y"])]
    elif op == "clip":
        nodes = [n("Clip", ["x", const("lo", params["alpha"]), const("hi", params["beta"])], ["y"])]
    elif op == "threshold":
        nodes = [n("Max", ["x", const("a", params["alpha"])], ["y"])]
    elif op == "exp2":
        nodes = [n("Pow", [const("two", 2), "x"], ["y"])]
    elif op == "square":
        nodes = [n("Mul", ["x", "x"], ["y"])]
    elif op in _DEFAULT_EPS:
        eps = const("eps", params["epsilon"])
        tail = {"inverse": ["Reciprocal"], "log": ["Log"], "rsqrt": ["Sqrt", "Reciprocal"]}[op]
        nodes = [n("Add", ["x", eps], ["t0"])]
        nodes += [n(t, [f"t{i}"], [f"t{i + 1}"]) for i, t in enumerate(tail)]
        nodes[-1].output[0] = "y"
    else:
        raise AssertionError(op)
    y = run_onnx(nodes, {"x": x}, ["y"], consts)[0]
    return y.astype(np.float16) if out_fp16 else y


def _params(op: str, dt: str) -> dict[str, Any]:
    """Parameters for ``op``: epsilon takes its documented default (in x's dtype)."""
    if op in _DEFAULT_EPS:
        return {"epsilon": _NP[dt](_DEFAULT_EPS[op])}
    return {k: _NP[dt](v) for k, v in _PARAMS.get(op, {}).items()}


def _run(op: str, x: np.ndarray, params: dict[str, Any], opset: str | None = None) -> np.ndarray:
    run_params = {} if op in _DEFAULT_EPS else params  # leave epsilon to its default
    return run_op(op, {"x": x}, run_params, opset=opset)[0]


def _random(op: str, dt: str, rng: np.random.Generator) -> np.ndarray:
    if dt == "bool":
        return rng.integers(0, 2, (3, 4, 5)).astype(bool)
    if dt == "int32":
        lo, hi = (-5, 31) if op == "exp2" else (-1000, 1000)  # 2^31 overflows: see test_exp2_int32_saturates
        return rng.integers(lo, hi, (3, 4, 5)).astype(np.int32)
    x = rng.standard_normal((3, 4, 5)) * 3
    if op in ("acos", "asin", "atanh"):
        x = np.tanh(x)
    elif op in ("sqrt", "log", "rsqrt"):
        x = np.abs(x)
    return x.astype(_NP[dt])


def _dtype_cases() -> list[tuple[str, str]]:
    out = []
    for op in sorted(set(ORACLE) - {"cast"}):
        accepted = get_opdef(op, "iOS15").signature.inputs["x"].types
        out += [(op, dt) for dt in ("fp32", "fp16", "int32", "bool") if dt in accepted]
    return out


def _tol(dt: np.dtype) -> dict[str, float]:
    return dict(rtol=2e-3, atol=1e-3) if dt == np.float16 else dict(rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("op,dt", _dtype_cases())
def test_unary_vs_onnxruntime(op: str, dt: str):
    rng = np.random.default_rng(abs(hash((op, dt))) % 2**32)
    x = _random(op, dt, rng)
    params = _params(op, dt)
    assert_close(_run(op, x, params), _oracle(op, x, params), **_tol(x.dtype), what=f"{op} {dt}")


@pytest.mark.parametrize("op,dt", [(op, dt) for op, dt in _dtype_cases() if dt != "bool"])
def test_unary_special_values_vs_onnxruntime(op: str, dt: str):
    """NaN, +-inf, +-0, ties, denormals, fp16 overflow, int32 overflow (abs, square wrap)."""
    if dt == "int32":
        x = _INT_SPECIAL if op != "exp2" else np.array([-3, -1, 0, 1, 30], np.int32)
    else:
        x = _SPECIAL.astype(_NP[dt])
    params = _params(op, dt)
    got, want = _run(op, x, params), _oracle(op, x, params)
    assert_close(got, want, **_tol(x.dtype), what=f"{op} {dt}")
    if dt != "int32":  # the sign of zero results too (round(-0.5) = -0.0, ...)
        zero = (want == 0) & (got == 0)
        np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]), err_msg=f"{op} signed zeros")


@pytest.mark.parametrize("op", sorted(_SAME) + ["clip", "exp2", "square", "threshold"])
def test_unary_empty_and_scalar_inputs(op: str):
    dt = "bool" if op == "logical_not" else "fp32"
    for x in (np.zeros((0, 3), _NP[dt]), np.asarray(_random(op, dt, np.random.default_rng(0))[0, 0, 0])):
        params = _params(op, dt)
        assert_close(_run(op, x, params), _oracle(op, x, params), what=f"{op} shape {x.shape}")


@pytest.mark.parametrize("op", sorted(_DEFAULT_EPS))
@pytest.mark.parametrize("opset", ["iOS15", "iOS17"])
def test_epsilon_given_vs_onnxruntime(op: str, opset: str):
    """An explicit epsilon; from iOS17 it may have another dtype than x (fp32 epsilon, fp16 x)."""
    x = np.concatenate([_random(op, "fp16", np.random.default_rng(5)).ravel(), [0.0, -0.25, np.inf]])
    x = x.astype(np.float16)
    eps = np.float32(0.25) if opset == "iOS17" else np.float16(0.25)
    got = run_op(op, {"x": x}, {"epsilon": eps}, opset=opset)[0]
    want = _oracle(op, x, {"epsilon": eps.astype(np.float32)})  # the fp32 epsilon itself, not rounded
    assert_close(got, want, **_tol(x.dtype), what=f"{op} {opset}")


def test_clip_iOS15_alpha_above_beta_gives_beta_like_onnxruntime():
    x = _SPECIAL
    got = run_op("clip", {"x": x}, {"alpha": 2.0, "beta": -1.0}, opset="iOS15")[0]
    assert_close(got, _oracle("clip", x, {"alpha": 2.0, "beta": -1.0}))


@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (2.0, -1.0)])
def test_clip_iOS17_requires_alpha_below_beta(alpha: float, beta: float):
    with pytest.raises(TypeInferenceError, match="alpha < beta"):
        run_op("clip", {"x": _SPECIAL}, {"alpha": alpha, "beta": beta}, opset="iOS17")


# -------------------------------------------------------------------------------------------------
# cast


def _cast_pairs() -> list[tuple[str, str, str]]:
    out = []
    for opset in ("iOS15", "iOS17"):
        names = get_opdef("cast", opset).signature.inputs["x"].types
        out += [(opset, src, dst) for src in names for dst in names]
    return [p for p in out if p[0] == "iOS15" or "int8" in p[1] + p[2] or "int16" in p[1] + p[2]]


def _cast_input(src: str, dst: str, rng: np.random.Generator) -> np.ndarray:
    """Random values, floats kept inside the target's range (beyond it, see the saturation test)."""
    src_np = np.dtype(_NP.get(src) or src)
    if src == "bool":
        return rng.integers(0, 2, 64).astype(bool)
    if src_np.kind in "iu":
        info = np.iinfo(src_np)
        vals = rng.integers(info.min, info.max, 60, dtype=np.int64, endpoint=True)
        return np.concatenate([vals, [0, 1, info.min, info.max]]).astype(src_np)
    x = np.concatenate([rng.standard_normal(60) * 1000, [0.0, -0.0, 0.5, -0.5, 1.99, -1.99]])
    if dst in ("fp16", "fp32", "bool"):
        return np.concatenate([x, [np.nan, np.inf, -np.inf]]).astype(src_np)
    info = np.iinfo(np.dtype(_NP.get(dst) or dst))
    x = x.astype(src_np)
    return x[(info.min <= np.trunc(x)) & (np.trunc(x) <= info.max)]


@pytest.mark.parametrize("opset,src,dst", _cast_pairs())
def test_cast_vs_onnxruntime(opset: str, src: str, dst: str):
    rng = np.random.default_rng(abs(hash((src, dst))) % 2**32)
    x = _cast_input(src, dst, rng)
    got = run_op("cast", {"x": x}, {"dtype": dst}, opset=opset)[0]
    want = run_onnx([helper.make_node("Cast", ["x"], ["y"], to=_onnx_type(_NP.get(dst) or np.dtype(dst)))],
                    {"x": x}, ["y"])[0]
    assert got.dtype == want.dtype
    assert_close(got, want, rtol=0, atol=0, what=f"{src}->{dst}")


def test_cast_float_to_int_truncates_and_saturates():
    """Chosen semantics (MIL and ONNX leave out-of-range conversion undefined; onnxruntime on x86
    gives INT_MIN): truncation toward zero, NaN -> 0, saturation at the target's bounds."""
    x = np.array([2.9, -2.9, -0.5, np.nan, np.inf, -np.inf, 3e9, -3e9, 300.0, -300.0], np.float32)
    want = {
        "int32": [2, -2, 0, 0, 2**31 - 1, -(2**31), 2**31 - 1, -(2**31), 300, -300],
        "int8": [2, -2, 0, 0, 127, -128, 127, -128, 127, -128],
        "uint8": [2, 0, 0, 0, 255, 0, 255, 0, 255, 0],
        "int16": [2, -2, 0, 0, 32767, -32768, 32767, -32768, 300, -300],
        "uint16": [2, 0, 0, 0, 65535, 0, 65535, 0, 300, 0],
    }
    for dst, expected in want.items():
        for src in (np.float32, np.float16):
            xs = x.astype(src)  # +-3e9 become +-inf in fp16: the same saturated results
            got = run_op("cast", {"x": xs}, {"dtype": dst}, opset="iOS17")[0]
            np.testing.assert_array_equal(got, np.array(expected, dtype=_NP.get(dst) or dst), err_msg=f"{src}->{dst}")


def test_exp2_int32_saturates():
    """2^x for int32 is the real power converted like cast: fractions truncate, overflow saturates."""
    got = run_op("exp2", {"x": np.array([-1, -31, 30, 31, 100], np.int32)})[0]
    np.testing.assert_array_equal(got, np.array([0, 0, 2**30, 2**31 - 1, 2**31 - 1], np.int32))


@pytest.mark.parametrize("opset,dst", [("iOS15", "int8"), ("iOS15", "uint16"), ("iOS17", "int64"),
                                       ("iOS18", "fp64"), ("iOS17", "float32")])
def test_cast_rejects_unsupported_dtype(opset: str, dst: str):
    with pytest.raises(TypeInferenceError, match="not supported"):
        run_op("cast", {"x": np.zeros(3, np.float32)}, {"dtype": dst}, opset=opset)


# -------------------------------------------------------------------------------------------------
# WebNN conformance vectors

# WebNN op -> (MIL op, fixed MIL params, ULP budget or ("atol", fp32, fp16))
_WEBNN: dict[str, tuple[str, dict[str, Any], Any]] = {
    "abs": ("abs", {}, 0),
    "ceil": ("ceil", {}, 0),
    "floor": ("floor", {}, 0),
    "roundEven": ("round", {}, 0),
    "sign": ("sign", {}, 0),
    "clamp": ("clip", {}, 0),
    "sqrt": ("sqrt", {}, 1),
    "exp": ("exp", {}, {"float32": 32, "float16": 1}),
    "reciprocal": ("inverse", {"epsilon": 0.0}, 2),
    "log": ("log", {"epsilon": 0.0}, ("atol", 1 / 1024, 1 / 1024)),
    "cos": ("cos", {}, ("atol", 2**-10, 2**-7)),
    "sin": ("sin", {}, ("atol", 1 / 1024, 1 / 512)),
    "tan": ("tan", {}, ("atol", 1 / 1024, 1 / 512)),
    "erf": ("erf", {}, ("atol", 1 / 1024, 1 / 512)),
    "tanh": ("tanh", {}, ("atol", 1 / 1024, 1 / 512)),
    "logicalNot": ("logical_not", {}, 0),
    "cast": ("cast", {}, {"float32": 1, "float16": 1}),
}
_MIN_CHECKED = {"cast": 20, "clamp": 30}  # vectors expected to map onto MIL (guards against silent skips)
_MIL_DTYPE = {"float32": "fp32", "float16": "fp16", "int32": "int32", "int8": "int8", "uint8": "uint8"}


def _number(v: Any) -> float:
    return {"Infinity": np.inf, "-Infinity": -np.inf, "NaN": np.nan}[v] if isinstance(v, str) else float(v)


def _webnn_call(webnn_op: str, node: dict) -> tuple[dict[str, Any], str] | None:
    """MIL params and opset for one vector, or None when MIL cannot express it."""
    op, params, _ = _WEBNN[webnn_op]
    params = dict(params)
    if webnn_op == "cast":
        dst = _MIL_DTYPE.get(node["arguments"][1]["type"])
        return None if dst is None else ({"dtype": dst}, "iOS17")
    if webnn_op == "clamp":
        opts = next((arg["options"] for arg in node["arguments"] if "options" in arg), {})
        lo, hi = _number(opts.get("minValue", -np.inf)), _number(opts.get("maxValue", np.inf))
        # WebNN ignores a NaN bound; MIL clip would propagate it, so a lowering passes +-inf instead.
        lo, hi = (-np.inf if np.isnan(lo) else lo), (np.inf if np.isnan(hi) else hi)
        params = {"alpha": lo, "beta": hi}
        return params, "iOS17" if lo < hi else "iOS15"  # iOS17 rejects alpha >= beta
    return params, "iOS17"


@pytest.mark.parametrize("webnn_op", sorted(_WEBNN))
def test_unary_vs_webnn_vectors(webnn_op: str):
    op, _, budget = _WEBNN[webnn_op]
    checked = 0
    for vec in webnn_vectors.load(webnn_op):
        (node,) = vec.operators
        x = vec.inputs[next(iter(node["arguments"][0].values()))]
        if op == "logical_not":
            x = x.astype(bool)
        mil_dt = "bool" if x.dtype == bool else _MIL_DTYPE.get(str(x.dtype))
        if mil_dt not in get_opdef(op, "iOS17").signature.inputs["x"].types:
            continue  # a dtype MIL does not have for this op
        call = _webnn_call(webnn_op, node)
        if call is None:
            continue
        got = run_op(op, {"x": x}, call[0], opset=call[1])[0]
        want = vec.expected[node["outputs"]]
        if got.dtype == bool:
            got = got.astype(np.uint8)
        b = budget.get(str(want.dtype), 0) if isinstance(budget, dict) else budget
        if isinstance(b, tuple):
            webnn_vectors.assert_atol(got, want, b[1] if want.dtype == np.float32 else b[2], what=vec.name)
        else:
            webnn_vectors.assert_ulp(got, want, b, what=vec.name)
        checked += 1
    assert checked >= _MIN_CHECKED.get(webnn_op, 1), checked
