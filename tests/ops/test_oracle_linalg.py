"""linear, matmul, einsum and scaled_dot_product_attention against onnxruntime, torch and the WebNN vectors.

fp16 (and iOS17 mixed-dtype) results are checked against the fp32 oracle result rounded to the
output dtype: our kernels accumulate in fp32 and round once.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from onnx import helper

from tests.oracles import webnn_vectors
from tests.oracles.onnx_oracle import run_onnx, run_onnx_node

from .harness import assert_close, run_op

ORACLE = {
    "linear": "onnxruntime Gemm (rank 2) / MatMul + Add",
    "matmul": "onnxruntime MatMul (+ Transpose) + WebNN matmul vectors",
    "einsum": "onnxruntime Einsum (+ Expand for broadcast dims)",
    "scaled_dot_product_attention": "torch.nn.functional.scaled_dot_product_attention",
}

_F32 = np.float32


def _tol(dt: str) -> dict:
    return dict(rtol=2e-3, atol=2e-3) if dt == "float16" else dict(rtol=1e-5, atol=1e-5)


def _data(rng: np.random.Generator, shape: tuple, dt: str) -> np.ndarray:
    if dt == "int32":
        return rng.integers(-20, 20, shape).astype(np.int32)
    return rng.standard_normal(shape).astype(dt)


# ---------------------------------------------------------------------------------------------
# linear


@pytest.mark.parametrize(
    "x_shape,dt,bias,opset",
    [((3, 4), "float32", True, "iOS15"), ((4,), "float32", True, "iOS15"), ((2, 3, 4), "float32", False, "iOS15"),
     ((2, 2, 3, 4), "float32", True, "iOS15"), ((3, 4), "float16", True, "iOS15"), ((3, 4), "int32", True, "iOS15"),
     ((2, 3, 4), "float16", True, "iOS17")],
    ids=lambda v: str(v),
)
def test_linear_vs_onnxruntime(x_shape: tuple, dt: str, bias: bool, opset: str):
    rng = np.random.default_rng(1)
    x = _data(rng, x_shape, dt)
    wdt = "float32" if opset == "iOS17" else dt  # iOS17: fp32 weights for an fp16 x
    w, b = _data(rng, (5, 4), wdt), _data(rng, (5,), wdt)
    params = {"weight": w, **({"bias": b} if bias else {})}
    got = run_op("linear", {"x": x}, params, opset=opset)[0]
    b_or_zero = b if bias else np.zeros(5, wdt)  # MIL's default bias
    feed_dt = np.int32 if dt == "int32" else _F32
    x_, w_, b_ = (v.astype(feed_dt) for v in (x, w, b_or_zero))
    if x.ndim == 2 and dt != "int32":
        want = run_onnx_node("Gemm", {"x": x_, "w": w_, "b": b_}, {"transB": 1})[0]
    else:
        nodes = [helper.make_node("MatMul", ["x", "wt"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["out"])]
        want = run_onnx(nodes, {"x": x_}, ["out"], {"wt": np.ascontiguousarray(w_.T), "b": b_})[0]
    assert_close(got, want.astype(dt), **_tol(dt), what=f"linear {x_shape} {dt}")


# ---------------------------------------------------------------------------------------------
# matmul


def _onnx_matmul(x: np.ndarray, y: np.ndarray, tx: bool, ty: bool) -> np.ndarray:
    nodes, names = [], []
    for name, arr, flag in (("x", x, tx), ("y", y, ty)):
        if flag:
            perm = list(range(arr.ndim))
            perm[-2:] = perm[-1], perm[-2]
            nodes.append(helper.make_node("Transpose", [name], [f"{name}t"], perm=perm))
            names.append(f"{name}t")
        else:
            names.append(name)
    nodes.append(helper.make_node("MatMul", names, ["out"]))
    return run_onnx(nodes, {"x": x, "y": y}, ["out"])[0]


_MATMUL_CASES = [
    ((3, 4), (4, 5), False, False, "float32"),
    ((2, 3, 4), (4, 5), False, False, "float32"),
    ((2, 1, 3, 4), (3, 4, 5), False, False, "float32"),
    ((4, 3), (2, 5, 4), True, True, "float32"),
    ((2, 4, 3), (1, 4, 5), True, False, "float32"),
    ((4,), (2, 4, 5), False, False, "float32"),
    ((2, 3, 4), (4,), False, False, "float32"),
    ((3, 4, 2), (4,), True, False, "float32"),
    ((4,), (5, 4), False, True, "float32"),
    ((4,), (4,), False, False, "float32"),
    ((2, 3, 4), (2, 4, 5), False, False, "float16"),
    ((3, 4), (5, 4), False, True, "int32"),
    ((2, 3, 4), (4,), False, False, "int32"),
]


@pytest.mark.parametrize("x_shape,y_shape,tx,ty,dt", _MATMUL_CASES, ids=lambda v: str(v))
def test_matmul_vs_onnxruntime(x_shape: tuple, y_shape: tuple, tx: bool, ty: bool, dt: str):
    rng = np.random.default_rng(2)
    x, y = _data(rng, x_shape, dt), _data(rng, y_shape, dt)
    got = run_op("matmul", {"x": x, "y": y}, {"transpose_x": tx, "transpose_y": ty})[0]
    feed = (x.astype(_F32), y.astype(_F32)) if dt == "float16" else (x, y)
    want = _onnx_matmul(*feed, tx, ty).astype(dt)
    assert_close(got, want, **_tol(dt), what=f"matmul {x_shape} x {y_shape}")


def test_matmul_int32_wraps_vs_onnxruntime():
    x = np.array([[2**20, 2**20], [-(2**30), 3]], np.int32)
    y = np.array([[2**12, 1], [2**12, -(2**30)]], np.int32)
    got = run_op("matmul", {"x": x, "y": y})[0]
    assert_close(got, _onnx_matmul(x, y, False, False), what="matmul int32 overflow")


def test_matmul_special_values_vs_onnxruntime():
    x = np.array([[np.inf, 1.0], [np.nan, 0.0], [-0.0, -0.0], [3e38, 3e38]], _F32)
    y = np.array([[0.0, 1.0, -0.0], [1.0, -np.inf, 2.0]], _F32)
    got = run_op("matmul", {"x": x, "y": y})[0]
    assert_close(got, _onnx_matmul(x, y, False, False), what="matmul special values")


@pytest.mark.parametrize("const_operand", ["x", "y"])
def test_matmul_ios17_one_const_operand_vs_onnxruntime(const_operand: str):
    # iOS17: one const operand may have another dtype; the output takes the non-const one's.
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5))
    runtime, const = ("y", "x") if const_operand == "x" else ("x", "y")
    values = {"x": x, "y": y}
    inputs = {runtime: values[runtime].astype(np.float16)}
    params = {const: values[const].astype(_F32)}
    got = run_op("matmul", inputs, params, opset="iOS17")[0]
    assert got.dtype == np.float16
    want = _onnx_matmul(x.astype(np.float16).astype(_F32) if runtime == "x" else x.astype(_F32),
                        y.astype(np.float16).astype(_F32) if runtime == "y" else y.astype(_F32), False, False)
    assert_close(got, want.astype(np.float16), **_tol("float16"), what=f"matmul iOS17 const {const_operand}")


def test_matmul_vs_webnn_vectors():
    checked = 0
    for vec in webnn_vectors.load("matmul"):
        (node,) = vec.operators
        a_name, b_name = node["arguments"][0]["a"], node["arguments"][1]["b"]
        a, b = vec.inputs[a_name], vec.inputs[b_name]
        got = run_op("matmul", {"x": a, "y": b})[0]
        webnn_vectors.assert_ulp(got, vec.expected[node["outputs"]], 2 * a.shape[-1], what=vec.name)
        checked += 1
    assert checked == 22


# ---------------------------------------------------------------------------------------------
# einsum


_EINSUM_CASES = [
    ("nchw,nwhu->nchu", (2, 3, 4, 5), (2, 5, 4, 6), "float32"),
    ("abcd,adce->abce", (1, 3, 4, 5), (2, 5, 1, 6), "float32"),
    ("chw,whr->chr", (3, 4, 5), (5, 4, 6), "float32"),
    ("xyz,zyw->xyw", (3, 1, 5), (5, 4, 2), "float32"),
    ("nchw,nwhu->nchu", (2, 3, 4, 5), (2, 5, 4, 6), "float16"),
]


@pytest.mark.parametrize("equation,x_shape,y_shape,dt", _EINSUM_CASES, ids=lambda v: str(v))
def test_einsum_vs_onnxruntime(equation: str, x_shape: tuple, y_shape: tuple, dt: str):
    rng = np.random.default_rng(4)
    x, y = _data(rng, x_shape, dt), _data(rng, y_shape, dt)
    got = run_op("einsum", {"values": [x, y]}, {"equation": equation})[0]
    # ONNX Einsum does not broadcast size-1 labelled dims: Expand them first (B at -4, H at -2).
    bx, by = list(x_shape), list(y_shape)
    for i in ([-4, -2] if len(x_shape) == 4 else [-2]):
        bx[i] = by[i] = max(x_shape[i], y_shape[i])
    nodes = [helper.make_node("Expand", ["x", "sx"], ["xe"]), helper.make_node("Expand", ["y", "sy"], ["ye"]),
             helper.make_node("Einsum", ["xe", "ye"], ["out"], equation=equation)]
    inits = {"sx": np.array(bx, np.int64), "sy": np.array(by, np.int64)}
    want = run_onnx(nodes, {"x": x.astype(_F32), "y": y.astype(_F32)}, ["out"], inits)[0].astype(dt)
    assert_close(got, want, **_tol(dt), what=f"einsum {equation}")


# ---------------------------------------------------------------------------------------------
# scaled_dot_product_attention


def _torch_sdpa(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    t = [torch.from_numpy(a.astype(_F32)) for a in (q, k, v)]
    m = None if mask is None else torch.from_numpy(mask if mask.dtype == bool else mask.astype(_F32))
    return torch.nn.functional.scaled_dot_product_attention(*t, attn_mask=m).numpy()


_SDPA_CASES = [
    ((2, 3, 4), (2, 5, 4), (2, 5, 6), None, "float32"),
    ((1, 2, 3, 8), (1, 2, 5, 8), (1, 2, 5, 3), "bool", "float32"),
    ((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 4), "float", "float32"),
    ((2, 3, 4), (2, 5, 4), (2, 5, 6), "bool-batched", "float32"),
    ((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 4), "float", "float16"),
    ((2, 3, 4), (2, 5, 4), (2, 5, 6), "bool", "float16"),
]


@pytest.mark.parametrize("q_shape,k_shape,v_shape,mask,dt", _SDPA_CASES, ids=lambda v: str(v))
def test_sdpa_vs_torch(q_shape: tuple, k_shape: tuple, v_shape: tuple, mask: str | None, dt: str):
    rng = np.random.default_rng(5)
    q, k, v = (_data(rng, s, dt) * 2 for s in (q_shape, k_shape, v_shape))
    L, S = q_shape[-2], k_shape[-2]
    inputs = {"query": q, "key": k, "value": v}
    if mask == "bool":
        inputs["attn_mask"] = rng.random((L, S)) < 0.6
        inputs["attn_mask"][:, 0] = True  # no fully masked row: NaN in MIL's formula, 0 in torch
    elif mask == "bool-batched":
        inputs["attn_mask"] = rng.random((q_shape[0], 1, S)) < 0.6
        inputs["attn_mask"][..., 0] = True
    elif mask == "float":
        inputs["attn_mask"] = (rng.standard_normal((q_shape[1], L, S)) * 3).astype(dt)
        inputs["attn_mask"][0, 0, 1] = -np.inf
    got = run_op("scaled_dot_product_attention", inputs, opset="iOS18")[0]
    want = _torch_sdpa(q, k, v, inputs.get("attn_mask")).astype(dt)
    assert_close(got, want, **_tol(dt), what=f"sdpa {q_shape} mask={mask}")


# ---------------------------------------------------------------------------------------------
# type inference rejects what MIL rejects


def _z(*shape: int, dt: str = "float32") -> np.ndarray:
    return np.zeros(shape, dt)


_INVALID = [
    ("linear", {"x": _z(2, 4)}, {"weight": _z(4)}, "iOS15", "weight must be 2-D"),
    ("linear", {"x": _z(2, 3)}, {"weight": _z(5, 4)}, "iOS15", "last dim of x vs weight columns"),
    ("linear", {"x": _z(2, 4)}, {"weight": _z(5, 4), "bias": _z(4)}, "iOS15", "bias size vs weight rows"),
    ("matmul", {"x": _z(2, 3), "y": _z(4, 5)}, {}, "iOS15", "contracted dims"),
    ("matmul", {"x": _z(2, 3, 4), "y": _z(3, 4, 5)}, {}, "iOS15", "cannot be broadcast"),
    ("matmul", {"x": _z(4), "y": _z(4, 5)}, {"transpose_x": True}, "iOS15", "x is 1-D"),
    ("matmul", {"x": _z(3, 4), "y": _z(4, dt="float16")}, {}, "iOS17", "both non-const"),
    ("einsum", {"values": [_z(3, 4), _z(4, 5)]}, {"equation": "ij,jk->ik"}, "iOS15", "unsupported einsum"),
    ("einsum", {"values": [_z(3, 4, 5), _z(5, 4, 6)]}, {"equation": "nchw,nwhu->nchu"}, "iOS15", "rank-4 inputs"),
    ("einsum", {"values": [_z(3, 4, 5), _z(5, 4, 6, dt="float16")]}, {"equation": "chw,whr->chr"}, "iOS15",
     "both be fp16 or both fp32"),
    ("scaled_dot_product_attention", {"query": _z(3, 4), "key": _z(5, 4), "value": _z(5, 6)}, {}, "iOS18",
     "rank >= 3"),
    ("scaled_dot_product_attention", {"query": _z(2, 3, 4), "key": _z(2, 5, 3), "value": _z(2, 5, 6)}, {}, "iOS18",
     "embedding dims"),
    ("scaled_dot_product_attention", {"query": _z(2, 3, 4), "key": _z(2, 5, 4), "value": _z(2, 5, 6),
                                      "attn_mask": _z(3, 4)}, {}, "iOS18", "sequence length"),
    ("scaled_dot_product_attention", {"query": _z(2, 3, 4), "key": _z(2, 5, 4), "value": _z(2, 5, 6),
                                      "attn_mask": _z(2, 2, 3, 5)}, {}, "iOS18", "does not broadcast|rank 1..3"),
]


@pytest.mark.parametrize("op,inputs,params,opset,match", _INVALID, ids=lambda v: v if isinstance(v, str) else None)
def test_invalid_inputs_are_rejected(op: str, inputs: dict, params: dict, opset: str, match: str):
    from converter.errors import TypeInferenceError

    with pytest.raises(TypeInferenceError, match=match):
        run_op(op, inputs, params, opset=opset)


def test_sdpa_needs_ios18():
    from converter.errors import UnsupportedError

    with pytest.raises(UnsupportedError, match="first in iOS18"):
        run_op("scaled_dot_product_attention", {"query": _z(1, 2, 2), "key": _z(1, 2, 2), "value": _z(1, 2, 2)},
               opset="iOS17")
