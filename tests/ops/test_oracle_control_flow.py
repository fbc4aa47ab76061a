"""const, cond and while_loop against onnxruntime's Constant, If and Loop."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from converter.ir.types import type_of_array
from tests.oracles.onnx_oracle import run_onnx

from .harness import Case, assert_close, run_case

ORACLE = {
    "const": "onnxruntime Constant",
    "_const_symbolic": "onnxruntime Constant",
    "cond": "onnxruntime If",
    "while_loop": "onnxruntime Loop",
}

_VALUES = [
    np.array([[1.5, -0.0, np.nan], [np.inf, -np.inf, 3e-39]], np.float32),
    np.arange(-3, 3, dtype=np.int32).reshape(3, 2),
    np.array([True, False, True]),
    np.array(0.25, np.float16),
]


@pytest.mark.parametrize("op", ["const", "_const_symbolic"])
@pytest.mark.parametrize("val", _VALUES, ids=lambda v: f"{v.dtype}{list(v.shape)}")
def test_constants_vs_onnx_constant(op: str, val: np.ndarray):
    def build(b):
        if op == "const":
            return b.const(val)
        return b.add_op(op, {}, attributes={"val": val}, output_types=[type_of_array(val)]).outputs[0]

    (got,) = run_case(Case(op, build=build))
    node = helper.make_node("Constant", [], ["out"], value=numpy_helper.from_array(val))
    (want,) = run_onnx([node], {}, ["out"])
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def _ir_cond(b, x, flag):
    return list(b.cond(flag, lambda t: [t.mul(x=x, y=np.float32(2))], lambda f: [f.sub(x=x, y=np.float32(1))]))


def _onnx_cond(x: np.ndarray, flag: np.ndarray) -> np.ndarray:
    def branch(op: str, c: float) -> object:
        k = helper.make_node("Constant", [], [f"k_{op}"], value=numpy_helper.from_array(np.array(c, np.float32)))
        n = helper.make_node(op, ["x", f"k_{op}"], [f"y_{op}"])
        out = helper.make_tensor_value_info(f"y_{op}", TensorProto.FLOAT, None)
        return helper.make_graph([k, n], f"branch_{op}", [], [out])

    node = helper.make_node("If", ["flag"], ["out"], then_branch=branch("Mul", 2.0), else_branch=branch("Sub", 1.0))
    return run_onnx([node], {"x": x, "flag": flag}, ["out"])[0]


@pytest.mark.parametrize("flag", [True, False])
def test_cond_vs_onnx_if(flag: bool):
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    f = np.array(flag)
    (got,) = run_case(Case("cond", inputs={"x": x, "flag": f}, build=_ir_cond))
    assert_close(got, _onnx_cond(x, f), rtol=0, atol=0)


def _ir_loop(n: int):
    def build(b, x):
        i0 = b.const(np.int32(0))
        _, acc = b.while_loop(
            [i0, x],
            lambda c, i, acc: c.less(x=i, y=np.int32(n)),
            lambda c, i, acc: [c.add(x=i, y=np.int32(1)), c.add(x=c.mul(x=acc, y=np.float32(1.5)), y=x)],
        )
        return acc

    return build


def _onnx_loop(x: np.ndarray, n: int) -> np.ndarray:
    """while (i < n) { i += 1; acc = acc * 1.5 + x } as an ONNX Loop with a data-dependent condition."""
    c = lambda name, v: helper.make_node("Constant", [], [name], value=numpy_helper.from_array(v))  # noqa: E731
    body = helper.make_graph(
        [
            c("one", np.array(1, np.int32)),
            c("n", np.array(n, np.int32)),
            c("k", np.array(1.5, np.float32)),
            helper.make_node("Add", ["i_in", "one"], ["i_out"]),
            helper.make_node("Mul", ["acc_in", "k"], ["scaled"]),
            helper.make_node("Add", ["scaled", "x"], ["acc_out"]),
            helper.make_node("Less", ["i_out", "n"], ["cond_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("iter", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("i_in", TensorProto.INT32, []),
            helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, list(x.shape)),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("i_out", TensorProto.INT32, []),
            helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, list(x.shape)),
        ],
    )
    nodes = [
        c("i0", np.array(0, np.int32)),
        c("cond0", np.array(0 < n)),
        helper.make_node("Loop", ["", "cond0", "i0", "x"], ["i_final", "out"], body=body),
    ]
    return run_onnx(nodes, {"x": x}, ["out"])[0]


@pytest.mark.parametrize("n", [0, 1, 4])
def test_while_loop_vs_onnx_loop(n: int):
    x = np.random.default_rng(n).standard_normal((3, 2)).astype(np.float32)
    (got,) = run_case(Case("while_loop", inputs={"x": x}, build=_ir_loop(n)))
    assert_close(got, _onnx_loop(x, n), rtol=1e-6, atol=1e-6)
