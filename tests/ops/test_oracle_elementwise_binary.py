"""Elementwise binary ops against onnxruntime (one-node ONNX models) and the WebNN vectors."""

from __future__ import annotations

import numpy as np
import pytest

from tests.oracles import webnn_vectors
from tests.oracles.onnx_oracle import run_onnx_node

from .harness import assert_close, run_op

# op -> (ONNX op, extra ONNX attributes)
_ONNX = {
    "add": ("Add", {}),
    "sub": ("Sub", {}),
    "mul": ("Mul", {}),
    "real_div": ("Div", {}),
    "floor_div": None,  # Floor(Div) below
    "mod": ("Mod", {"fmod": 0}),
    "pow": ("Pow", {}),
    "maximum": ("Max", {}),
    "minimum": ("Min", {}),
    "equal": ("Equal", {}),
    "not_equal": None,  # Not(Equal)
    "greater": ("Greater", {}),
    "greater_equal": ("GreaterOrEqual", {}),
    "less": ("Less", {}),
    "less_equal": ("LessOrEqual", {}),
    "logical_and": ("And", {}),
    "logical_or": ("Or", {}),
    "logical_xor": ("Xor", {}),
}

ORACLE = {op: "onnxruntime" for op in _ONNX}

_SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.5, 3.0e38], np.float32)


def _inputs(op: str, dt: str, rng: np.random.Generator):
    if op.startswith("logical_"):
        return rng.integers(0, 2, (2, 3, 4)).astype(bool), rng.integers(0, 2, (3, 1)).astype(bool)
    if dt == "int32":
        x = rng.integers(-50, 50, (2, 3, 4)).astype(np.int32)
        y = rng.integers(1, 7, (3, 1)).astype(np.int32) * rng.choice([-1, 1], (3, 1)).astype(np.int32)
        if op == "pow":
            x, y = np.abs(x) % 6, np.abs(y) % 4
        return x, y
    x = rng.standard_normal((2, 3, 4)).astype(dt) * 4
    y = rng.standard_normal((3, 1)).astype(dt) * 4
    if op == "pow":
        x = np.abs(x)
    return x, y


def _oracle(op: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    from onnx import helper

    from tests.oracles.onnx_oracle import run_onnx

    if op == "floor_div":
        if x.dtype.kind == "i":
            # Python floor division: ONNX Div truncates; floor = trunc - (remainder != 0 and signs differ)
            nodes = [helper.make_node("Mod", ["x", "y"], ["m"], fmod=0), helper.make_node("Sub", ["x", "m"], ["t"]),
                     helper.make_node("Div", ["t", "y"], ["out"])]
        else:
            nodes = [helper.make_node("Div", ["x", "y"], ["q"]), helper.make_node("Floor", ["q"], ["out"])]
        return run_onnx(nodes, {"x": x, "y": y}, ["out"])[0]
    if op == "not_equal":
        nodes = [helper.make_node("Equal", ["x", "y"], ["e"]), helper.make_node("Not", ["e"], ["out"])]
        return run_onnx(nodes, {"x": x, "y": y}, ["out"])[0]
    onnx_op, attrs = _ONNX[op]
    if op == "mod" and x.dtype.kind == "f":
        attrs = {"fmod": 1}  # ONNX float Mod needs fmod=1 (C fmod); rebuild Python mod from it
        r = run_onnx_node(onnx_op, {"x": x, "y": y}, attrs)[0]
        return np.where((r != 0) & ((r < 0) != (y < 0)), r + y, r).astype(x.dtype)
    return run_onnx_node(onnx_op, {"x": x, "y": y}, attrs)[0]


def _dtype_cases() -> list[tuple[str, str]]:
    from converter.ir.opdef import get_opdef

    out = []
    for op in sorted(_ONNX):
        accepted = get_opdef(op, "iOS15").signature.inputs["x"].types
        for dt, mil_dt in (("float32", "fp32"), ("float16", "fp16"), ("int32", "int32"), ("bool", "bool")):
            if mil_dt in accepted:
                out.append((op, dt))
    return out


@pytest.mark.parametrize("op,dt", _dtype_cases())
def test_binary_vs_onnxruntime(op: str, dt: str):
    rng = np.random.default_rng(abs(hash((op, dt))) % 2**32)
    x, y = _inputs(op, dt, rng)
    got = run_op(op, {"x": x, "y": y})[0]
    want = _oracle(op, x, y)
    tol = dict(rtol=1e-3, atol=1e-3) if dt == "float16" else dict(rtol=1e-6, atol=1e-6)
    assert_close(got, want, **tol, what=f"{op} {dt}")


@pytest.mark.parametrize("op", ["add", "sub", "mul", "real_div", "maximum", "minimum", "equal", "less", "greater"])
def test_binary_special_values_vs_onnxruntime(op: str):
    x = np.repeat(_SPECIAL[:, None], len(_SPECIAL), 1)
    y = np.repeat(_SPECIAL[None, :], len(_SPECIAL), 0)
    got = run_op(op, {"x": x, "y": y})[0]
    assert_close(got, _oracle(op, x, y), what=op)


_WEBNN = {"add": "add", "sub": "sub", "mul": "mul", "div": "real_div", "max": "maximum", "min": "minimum",
          "pow": "pow", "equal": "equal", "greater": "greater", "greaterOrEqual": "greater_equal",
          "lesser": "less", "lesserOrEqual": "less_equal", "logicalAnd": "logical_and", "logicalOr": "logical_or",
          "logicalXor": "logical_xor"}
_ULP = {"add": 1, "sub": 1, "mul": 1, "div": 2, "max": 0, "min": 0, "pow": 32}


@pytest.mark.parametrize("webnn_op", sorted(_WEBNN))
def test_binary_vs_webnn_vectors(webnn_op: str):
    op = _WEBNN[webnn_op]
    checked = 0
    for vec in webnn_vectors.load(webnn_op):
        (node,) = vec.operators
        a, b = (next(iter(arg.values())) for arg in node["arguments"][:2])
        x, y = vec.inputs[a], vec.inputs[b]
        if op.startswith("logical_"):
            x, y = x.astype(bool), y.astype(bool)
        if x.dtype not in (np.float32, np.float16, np.int32) and not op.startswith("logical_"):
            continue  # MIL has no such dtype for this op
        got = run_op(op, {"x": x, "y": y})[0]
        want = vec.expected[node["outputs"]]
        if got.dtype == bool:
            got = got.astype(np.uint8)
        webnn_vectors.assert_ulp(got, want, _ULP.get(webnn_op, 0), what=vec.name)
        checked += 1
    assert checked > 0
