"""Linear algebra: linear, matmul, einsum (MIL's two forms), scaled_dot_product_attention.

Where an operand has another dtype than the result (iOS17 allows a const weight of another float
type), the product is computed in float32 and rounded once to the result's dtype, as the IR kernel
does; otherwise ONNX's MatMul/Gemm run in the operands' own dtype.
"""

from __future__ import annotations

import numpy as np

from ....ir.core import Op
from ....ir.types import dtype
from ..emitter import OnnxEmitter, onnx_type
from ._common import const_array, input_as, str_param
from .registry import lowering


@lowering("linear", note="Gemm(x, weight, bias, transB=1) for rank-2 x; else MatMul with the weight transposed "
                         "at conversion time, and Add")
def _linear(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    out_dt = e.dtype(op.outputs[0])
    mixed = any(e.dtype(op.inputs[k]) != out_dt for k in ("weight", "bias") if k in op.inputs)
    work = "fp32" if mixed else out_dt
    x = input_as(e, op, "x", work)
    has_bias = "bias" in op.inputs
    bias = input_as(e, op, "bias", work) if has_bias else None
    if e.rank(xv) == 2:
        y = e.node("Gemm", [x, input_as(e, op, "weight", work), bias], [e.fresh("gemm") if mixed else e.out(op)],
                   transB=1)
    else:
        w = const_array(e, op, "weight")
        wt = (e.constant(np.ascontiguousarray(w.T).astype(dtype(work).storage))
              if w is not None else e.node("Transpose", [input_as(e, op, "weight", work)], perm=[1, 0]))
        if has_bias:
            y = e.node("Add", [e.node("MatMul", [x, wt]), bias], [e.fresh("linear") if mixed else e.out(op)])
        else:
            y = e.node("MatMul", [x, wt], [e.fresh("linear") if mixed else e.out(op)])
    if mixed:
        e.node("Cast", [y], [e.out(op)], to=onnx_type(out_dt))


def _swap_last(e: OnnxEmitter, op: Op, key: str, name: str) -> str:
    """``op``'s operand ``key`` (already available as ``name``) with its last two dims swapped."""
    v = op.inputs[key]
    r = e.rank(v)
    c = const_array(e, op, key)
    if c is not None and name == e.name(v):
        return e.constant(np.ascontiguousarray(np.swapaxes(c, -1, -2)))
    perm = list(range(r))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return e.node("Transpose", [name], perm=perm)


@lowering("matmul", note="MatMul (transpose_x/transpose_y: Transpose, or a constant transposed at conversion time)")
def _matmul(e: OnnxEmitter, op: Op) -> None:
    out_dt = e.dtype(op.outputs[0])
    mixed = e.dtype(op.inputs["x"]) != e.dtype(op.inputs["y"])
    work = "fp32" if mixed else out_dt
    operands = []
    for key in ("x", "y"):
        name = input_as(e, op, key, work)
        if bool(np.asarray(e.const_param(op, f"transpose_{key}")).reshape(-1)[0]):
            name = _swap_last(e, op, key, name)
        operands.append(name)
    if mixed:
        e.node("Cast", [e.node("MatMul", operands)], [e.out(op)], to=onnx_type(out_dt))
    else:
        e.node("MatMul", operands, [e.out(op)])


@lowering("einsum", kind="decomposed", note="MIL's two equations as Transpose, MatMul (batch and H broadcast), "
                                            "Transpose")
def _einsum(e: OnnxEmitter, op: Op) -> None:
    """x[..., c, h, k] * y[..., k, h, u] summed over k: h moves before the matrices, MatMul, back."""
    str_param(e, op, "equation")  # checked by the op definition: one of the two patterns
    x, y = (e.name(v) for v in op.inputs["values"])
    r = e.rank(op.inputs["values"][0])
    lead = list(range(r - 3))
    to_h_first = lead + [r - 2, r - 3, r - 1]  # [..., c, h, k] -> [..., h, c, k] (and y's k, h alike)
    xt = e.node("Transpose", [x], perm=to_h_first)
    yt = e.node("Transpose", [y], perm=to_h_first)
    e.node("Transpose", [e.node("MatMul", [xt, yt])], [e.out(op)], perm=to_h_first)


@lowering("scaled_dot_product_attention", kind="decomposed",
          note="Softmax(MatMul(Q, K^T) / sqrt(E) + mask) @ V; a bool mask as Where(mask, 0, -inf)")
def _sdpa(e: OnnxEmitter, op: Op) -> None:
    qv = op.inputs["query"]
    q, k, v = (e.input(op, n) for n in ("query", "key", "value"))
    r = e.rank(qv)
    dim = e.tensor_type(qv).shape[-1]
    perm = list(range(r))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    scores = e.node("MatMul", [q, e.node("Transpose", [k], perm=perm)])
    if isinstance(dim, int):
        scores = e.node("Div", [scores, e.scalar(np.sqrt(np.float32(dim)), qv)])
    else:
        size = e.cast(e.node("Gather", [e.node("Shape", [q]), e.int64s([-1])]), e.dtype(qv))
        scores = e.node("Div", [scores, e.node("Sqrt", [size])])
    if "attn_mask" in op.inputs:
        mv = op.inputs["attn_mask"]
        mask = e.input(op, "attn_mask")
        if e.dtype(mv).name == "bool":
            mask = e.node("Where", [mask, e.scalar(0.0, qv), e.scalar(-np.inf, qv)])
        elif e.dtype(mv) != e.dtype(qv):
            mask = e.cast(mask, e.dtype(qv))
        scores = e.node("Add", [scores, mask])
    e.node("MatMul", [e.node("Softmax", [scores], axis=-1), v], [e.out(op)])
