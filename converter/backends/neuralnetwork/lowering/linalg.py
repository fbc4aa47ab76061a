"""Linear algebra: linear, matmul and einsum as ``innerProduct`` / ``batchedMatmul`` layers.

Weight layout: ``innerProduct`` and the one-input ``batchedMatmul`` both store their matrix as
[out, in] row-major, which is MIL ``linear``'s weight as it is (the NN frontend's reading,
converter/frontends/neuralnetwork/layers/linear.py; coremltools' builder writes the transposed
(in, out) matrix). So a ``linear`` weight is written from its array without a copy, and so is a
``matmul`` constant ``y`` given with ``transpose_y``.

1-D operands: MIL's matmul removes the axis it added to a vector; ``batchedMatmul`` with two inputs
keeps it (output rank max(2, rank a, rank b)), so a ``squeeze`` follows. The one-input form keeps
the input's rank, as MIL does.
"""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....ir.core import Op, Value
from ..emitter import NetworkEmitter, op_input, rank, tensor_type
from ._common import same_precision
from .quant import QuantizedWeights, compressed, recorded_fp16
from .registry import lowering


def _dense(params: object, e: NetworkEmitter, weight: np.ndarray, bias: np.ndarray | None,
           quantized: QuantizedWeights | None = None) -> None:
    """weights [out, in] (and bias [out]) of innerProduct / one-input batchedMatmul; ``quantized``:
    the weight's compressed form (8-bit linear or LUT codes), written instead of the dense values."""
    weight, bias = same_precision(weight, bias)
    if quantized is not None:
        quantized.write(params.weights)  # type: ignore[attr-defined]
    else:
        e.weights(params.weights, weight)  # type: ignore[attr-defined]
    if bias is not None:
        params.hasBias = True  # type: ignore[attr-defined]
        e.weights(params.bias, bias)  # type: ignore[attr-defined]


def _nonzero_bias(e: NetworkEmitter, op: Op) -> np.ndarray | None:
    """linear's bias when it can change the result (its default is zeros: then no bias at all)."""
    b = e.param(op, "bias")
    if b is None:
        if op_input(op, "bias") is not None:
            raise LoweringError("the bias must be known at conversion time (a layer weight)")
        return None
    b = np.asarray(b)
    return b if np.any(b != 0) else None


def _known_rank(v: Value) -> int | None:
    shape = tensor_type(v).shape
    return None if shape is None else len(shape)


@lowering("linear", note="innerProduct for x of rank 1-3, one-input batchedMatmul otherwise")
def _linear(e: NetworkEmitter, op: Op) -> None:
    """``x @ W.T + b``: innerProduct for rank 1-3 (it flattens C, H, W of rank 4-5 inputs, which
    linear does not), the one-input batchedMatmul (any rank; a spec 4 layer) otherwise."""
    x = op.inputs["x"]
    out = op.outputs[0]
    w = e.const_array(op.inputs["weight"], "the weight")  # a const input of the IR op
    d_out, d_in = (int(d) for d in w.shape)
    bias = _nonzero_bias(e, op)
    r = _known_rank(x)
    if r is not None and 1 <= r <= 3:
        params = e.layer("innerProduct", op.name, [e.blob(x)], [e.define(out)])
        params.inputChannels, params.outputChannels = d_in, d_out
    else:
        params = e.layer("batchedMatmul", op.name, [e.blob(x)], [e.define(out)])
        params.weightMatrixFirstDimension, params.weightMatrixSecondDimension = d_in, d_out
    w, bias = recorded_fp16(op, "weight", w, bias)
    _dense(params, e, w, bias, compressed(op, "weight"))


def _squeeze(e: NetworkEmitter, name: str, src: str, axes: list[int], dst: str) -> None:
    e.layer("squeeze", name, [src], [dst]).axes.extend(axes)


@lowering("matmul", note="batchedMatmul; a constant 2-D y read once becomes its weight matrix; "
                         "a squeeze after it removes the axis MIL drops for a 1-D operand")
def _matmul(e: NetworkEmitter, op: Op) -> None:
    x, y = op.inputs["x"], op.inputs["y"]
    out = op.outputs[0]
    tx, ty = bool(e.const_param(op, "transpose_x")), bool(e.const_param(op, "transpose_y"))
    rx, ry = rank(x), rank(y)
    y_val = e.const(y)
    if y_val is not None and ry == 2 and not tx and len(y.uses) == 1:
        # a @ M with M = y (K, N) stored as [N, K]: y itself when transpose_y
        matrix = np.asarray(y_val)
        stored = matrix if ty else matrix.T
        n, k = (int(d) for d in stored.shape)
        params = e.layer("batchedMatmul", op.name, [e.blob(x)], [e.define(out)])
        params.weightMatrixFirstDimension, params.weightMatrixSecondDimension = k, n
        _dense(params, e, stored, None)
        return
    squeeze = ([-2] if rx == 1 else []) + ([-1] if ry == 1 else [])
    result = e.fresh(f"{op.name}_matmul") if squeeze else e.define(out)
    params = e.layer("batchedMatmul", op.name, [e.blob(x), e.blob(y)], [result])
    params.transposeA, params.transposeB = tx, ty
    if squeeze:  # [..., 1, N] / [..., M, 1] / [1, 1] (a scalar: [1], NN has no rank 0)
        _squeeze(e, f"{op.name}_vector", result, squeeze, e.define(out))


def _transpose(e: NetworkEmitter, name: str, v: Value, perm: list[int]) -> str:
    """``v`` transposed by ``perm``; a constant is transposed here, in its loadConstantND."""
    val = e.const(v)
    if val is not None:
        return e.load_constant(None, np.transpose(np.asarray(val), perm), name)
    blob = e.fresh(name)
    e.layer("transpose", name, [e.blob(v)], [blob]).axes.extend(perm)
    return blob


@lowering("einsum", kind="decomposed",
          note="MIL's two equations: transpose H before the matrices, batchedMatmul, transpose back")
def _einsum(e: NetworkEmitter, op: Op) -> None:
    """``nchw,nwhu->nchu`` (rank 4) and ``chw,whr->chr`` (rank 3), the only equations the IR op
    accepts: matrices on axes -3 and -1, so swapping axes -3 and -2 of both operands makes H a
    batch axis of one batchedMatmul (which broadcasts N and H of size 1), then swapping back."""
    x, y = op.inputs["values"]
    r = rank(x)
    if r not in (3, 4) or rank(y) != r:
        raise LoweringError(f"einsum operands of ranks {r} and {rank(y)}: the IR op takes two of rank 3 or 4")
    perm = [0, 2, 1, 3] if r == 4 else [1, 0, 2]
    xt = _transpose(e, f"{op.name}_x_h_first", x, perm)
    yt = _transpose(e, f"{op.name}_y_h_first", y, perm)
    product = e.fresh(f"{op.name}_matmul")
    e.layer("batchedMatmul", f"{op.name}_matmul", [xt, yt], [product])
    e.layer("transpose", op.name, [product], [e.define(op.outputs[0])]).axes.extend(perm)
