"""Rank-5 lowerings on vectors: linear / matmul with a constant matrix (innerProduct), gather
of a constant table (embedding), softmax along C."""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....ir.core import Op, Value
from ..lowering._embedding import plan_embedding
from ..lowering.quant import recorded_fp16
from .layout import (
    Rank5Emitter,
    channel_layout,
    dims,
    op_value,
    sequence_split,
    shape_text,
    static_shape,
    vector_layout,
)
from .lowering import input_value, rank5


def _inner_product(e: Rank5Emitter, op: Op, x: Value, weight: np.ndarray, bias: np.ndarray | None) -> None:
    """innerProduct of a vector ([.., C_in] with leading 1s) by ``weight`` [C_out, C_in]."""
    c_out, c_in = weight.shape
    seq = e.seq(x)
    if seq is None:
        vector_layout(x, f"{op.type} input")
        out = e.put(op.outputs[0], vector_layout(op.outputs[0], f"{op.type} output"))
    else:  # each step [1, C_in] -> [1, C_out]
        split = sequence_split(dims(op.outputs[0]), seq)
        if split is None or split[1] != (c_out, 1, 1) or len(dims(x)) > 3:
            raise LoweringError(f"{op.type} of a sequence of shape {shape_text(dims(x))}: innerProduct "
                                f"takes [Seq, 1, C]")
        out = e.put(op.outputs[0], (c_out, 1, 1), seq)
    params = e.layer("innerProduct", op.name, [e.get(x, (c_in, 1, 1))], [out])
    params.inputChannels, params.outputChannels = c_in, c_out
    e.weights(params.weights, weight)
    if bias is not None:
        params.hasBias = True
        e.weights(params.bias, bias)


@rank5("linear", per_step=True)
def _linear(e: Rank5Emitter, op: Op) -> None:
    weight = e.const_array(input_value(op, "weight"), "linear weight")
    bias_v = op_value(op, "bias")
    bias = None if bias_v is None else e.const_array(bias_v, "linear bias")
    if bias is not None and not np.any(bias):
        bias = None
    _inner_product(e, op, input_value(op), weight, bias)


@rank5("matmul", per_step=True)
def _matmul(e: Rank5Emitter, op: Op) -> None:
    """x [.., C_in] @ a constant [C_in, C_out] matrix: innerProduct with the matrix transposed."""
    y = e.const(op_value(op, "y"))
    if y is None or np.ndim(y) != 2:
        raise LoweringError("matmul of a run-time or batched right operand (innerProduct needs a constant matrix)")
    if bool(np.asarray(e.param(op, "transpose_x")).reshape(-1)[0]):
        raise LoweringError("matmul with transpose_x")
    w = np.asarray(y)
    weight = w if bool(np.asarray(e.param(op, "transpose_y")).reshape(-1)[0]) else w.T
    _inner_product(e, op, input_value(op), np.ascontiguousarray(weight), None)


@rank5("gather", per_step=True)
def _gather(e: Rank5Emitter, op: Op) -> None:
    """The legacy ``embedding`` layer (version 1): a row of a constant [V, E] table, at ONE index
    (the layer reads its indices along Seq/Batch, which this mode holds at 1) known to be in
    [0, V) (the rules of lowering/_embedding.py). Weights fp32, or fp16 where the program held them
    so; compressed tables are written dense here."""
    plan = plan_embedding(op)
    if plan is None:
        raise LoweringError("only a gather of rows of a constant 2-D table at indices known to be >= 0 has a "
                            "legacy form (embedding)")
    indices = input_value(op, "indices")
    seq = e.seq(indices)
    vocab, size = (int(d) for d in plan.table.shape)
    if seq is not None:  # one index per step: [S, 1] -> [S, 1, E]
        split = sequence_split(dims(op.outputs[0]), seq)
        if len(dims(indices)) != 2 or split is None or split[1] != (size, 1, 1):
            raise LoweringError(f"gather at indices of shape {shape_text(dims(indices))}: the rank-5 "
                                f"embedding layer reads one index per step ([Seq, 1])")
        out = e.put(op.outputs[0], (size, 1, 1), seq)
    else:
        if any(d != 1 for d in static_shape(indices)):
            raise LoweringError(f"gather at indices of shape {static_shape(indices)}: the rank-5 embedding layer "
                                f"reads several indices along Seq/Batch, which holds one step here")
        out = e.put(op.outputs[0], vector_layout(op.outputs[0], "embedding output"))
    params = e.layer("embedding", op.name, [e.get(indices, (1, 1, 1))], [out])
    params.inputDim, params.outputChannels = vocab, size
    stored, _ = recorded_fp16(op, "x", plan.table.T)  # [outputChannels, inputDim]
    e.weights(params.weights, stored)


@rank5("softmax")
def _softmax(e: Rank5Emitter, op: Op) -> None:
    x = input_value(op)
    layout = channel_layout(x, int(e.const_param(op, "axis")), "softmax")
    e.layer("softmax", op.name, [e.get(x, layout)], [e.put(op.outputs[0], layout)])
