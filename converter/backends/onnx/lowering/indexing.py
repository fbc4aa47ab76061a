"""Gather / scatter, select, one_hot, non_zero, band_part, slice_update.

Indices are int64 in ONNX (MIL's int32/int16/... converted). Negative indices: up to iOS16 MIL
counts them from the end, as ONNX Gather / GatherElements / GatherND / Scatter* do; from iOS17
they are out of range in MIL (undefined), so ONNX's reading is one valid behaviour.

Scatter modes: update / add / mul / max / min are ONNX's reductions none / add / mul / max / min
(max and min from opset 18); sub is add of the negated updates (x - u is exactly x + (-u)); div
has no exact ONNX form (a product of divisors is not a sequence of divisions) and is refused.
MIL's ``scatter`` (1-D indices along ``axis``) is ScatterElements with the indices broadcast to the
updates' shape.
"""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....ir.core import Op
from ....ir.types import is_static_dim
from ..emitter import OnnxEmitter, onnx_type
from ._common import const_array, input_as, int_list, int_param, str_param, to_int64
from .registry import lowering, unsupported
from .shape import shape_of


@lowering("gather", note="Gather (batch_dims: GatherND over the paired leading dims, Transposes when axis > "
                         "batch_dims)")
def _gather(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    rank = e.rank(xv)
    axis = int_param(e, op, "axis") % rank
    batch = int_param(e, op, "batch_dims") if "batch_dims" in op.inputs else 0
    idx = to_int64(e, op, "indices")
    if batch == 0:
        e.node("Gather", [e.input(op), idx], [e.out(op)], axis=axis)
        return
    n_idx = e.rank(op.inputs["indices"])
    if batch < 0:
        batch += n_idx
    rows = e.node("Unsqueeze", [idx, e.int64s([-1])])
    if axis == batch:
        e.node("GatherND", [e.input(op), rows], [e.out(op)], batch_dims=batch)
        return
    # x [B, M, A, R] -> [B, A, M, R]; GatherND gives [B, I, M, R]; then to MIL's [B, M, I, R]
    n_i, n_m, n_r = n_idx - batch, axis - batch, rank - axis - 1
    to_front = list(range(batch)) + [axis] + list(range(batch, axis)) + list(range(axis + 1, rank))
    gathered = e.node("GatherND", [e.node("Transpose", [e.input(op)], perm=to_front), rows], batch_dims=batch)
    perm = (list(range(batch)) + [batch + n_i + j for j in range(n_m)] + [batch + j for j in range(n_i)]
            + [batch + n_i + n_m + j for j in range(n_r)])
    e.node("Transpose", [gathered], [e.out(op)], perm=perm)


@lowering("gather_nd", note="GatherND")
def _gather_nd(e: OnnxEmitter, op: Op) -> None:
    batch = int_param(e, op, "batch_dims") if "batch_dims" in op.inputs else 0
    e.node("GatherND", [e.input(op), to_int64(e, op, "indices")], [e.out(op)], batch_dims=batch)


@lowering("gather_along_axis", note="GatherElements")
def _gather_along_axis(e: OnnxEmitter, op: Op) -> None:
    axis = int_param(e, op, "axis") % e.rank(op.inputs["x"])
    e.node("GatherElements", [e.input(op), to_int64(e, op, "indices")], [e.out(op)], axis=axis)


_REDUCTION = {"update": "none", "add": "add", "sub": "add", "mul": "mul", "max": "max", "min": "min"}


def _scatter_mode(e: OnnxEmitter, op: Op) -> tuple[str, str]:
    """(ONNX reduction, the updates' name) for ``op``'s mode."""
    mode = str_param(e, op, "mode")
    if mode not in _REDUCTION:
        raise LoweringError(f"mode '{mode}' has no exact ONNX form (ONNX scatters reduce with none, add, mul, max, "
                            "min)")
    if mode in ("max", "min") and e.opset < 18:
        raise LoweringError(f"mode '{mode}' needs opset 18 (ScatterElements/ScatterND reduction {mode})")
    updates = e.input(op, "updates")
    if mode == "sub":
        updates = e.node("Neg", [updates])
    return _REDUCTION[mode], updates


def _write_scatter(e: OnnxEmitter, op: Op, op_type: str, indices: str, updates: str, reduction: str,
                   **attrs: object) -> None:
    """A ScatterElements/ScatterND node; an fp16 reduction in fp32 (onnxruntime's CPU scatters
    reduce float, double and integers only), rounded back once."""
    data = e.input(op, "data")
    red = None if reduction == "none" else reduction
    if red is None or e.dtype(op.inputs["data"]).name != "fp16":
        e.node(op_type, [data, indices, updates], [e.out(op)], reduction=red, **attrs)
        return
    y = e.node(op_type, [e.cast(data, "fp32"), indices, e.cast(updates, "fp32")], reduction=red, **attrs)
    e.node("Cast", [y], [e.out(op)], to=onnx_type("fp16"))


@lowering("scatter", note="ScatterElements with the 1-D indices broadcast along axis (sub: add of -updates; "
                          "max/min from opset 18; div refused)")
def _scatter(e: OnnxEmitter, op: Op) -> None:
    reduction, updates = _scatter_mode(e, op)
    uv = op.inputs["updates"]
    rank = e.rank(uv)
    axis = int_param(e, op, "axis") % rank
    idx = to_int64(e, op, "indices")
    shaped = e.node("Reshape", [idx, e.int64s([-1 if i == axis else 1 for i in range(rank)])])
    full = e.node("Expand", [shaped, shape_of(e, uv)])
    _write_scatter(e, op, "ScatterElements", full, updates, reduction, axis=axis)


@lowering("scatter_along_axis", note="ScatterElements (sub: add of -updates; max/min from opset 18; div refused)")
def _scatter_along_axis(e: OnnxEmitter, op: Op) -> None:
    reduction, updates = _scatter_mode(e, op)
    axis = int_param(e, op, "axis") % e.rank(op.inputs["data"])
    _write_scatter(e, op, "ScatterElements", to_int64(e, op, "indices"), updates, reduction, axis=axis)


@lowering("scatter_nd", note="ScatterND (sub: add of -updates; max/min from opset 18; div refused)")
def _scatter_nd(e: OnnxEmitter, op: Op) -> None:
    reduction, updates = _scatter_mode(e, op)
    _write_scatter(e, op, "ScatterND", to_int64(e, op, "indices"), updates, reduction)


@lowering("select", note="Where")
def _select(e: OnnxEmitter, op: Op) -> None:
    e.node("Where", [e.input(op, "cond"), e.input(op, "a"), e.input(op, "b")], [e.out(op)])


@lowering("one_hot", note="OneHot, negative indices first made out of range (ONNX would wrap them)")
def _one_hot(e: OnnxEmitter, op: Op) -> None:
    out_dt = e.dtype(op.outputs[0])
    size = to_int64(e, op, "one_hot_vector_size")
    idx = to_int64(e, op, "indices")
    # MIL: an index outside [0, size) is all off_value; ONNX reads -size..-1 from the end, so those
    # move to `size` (out of range for ONNX too)
    idx = e.node("Where", [e.node("Less", [idx, e.constant(np.asarray(0, np.int64))]),
                           e.node("Reshape", [size, e.int64s([])]), idx])
    on = input_as(e, op, "on_value", out_dt) if "on_value" in op.inputs else e.scalar(1, out_dt)
    off = input_as(e, op, "off_value", out_dt) if "off_value" in op.inputs else e.scalar(0, out_dt)
    values = e.node("Concat", [e.node("Reshape", [off, e.int64s([1])]), e.node("Reshape", [on, e.int64s([1])])],
                    axis=0)
    e.node("OneHot", [idx, size, values], [e.out(op)], axis=int_param(e, op, "axis"))


@lowering("non_zero", note="NonZero, Transpose to [N, rank], Cast to int32")
def _non_zero(e: OnnxEmitter, op: Op) -> None:
    # NonZero tests x != 0 as MIL does: NaN counts as non-zero, -0.0 as zero
    nz = e.node("Transpose", [e.node("NonZero", [e.input(op)])], perm=[1, 0])
    e.node("Cast", [nz], [e.out(op)], to=onnx_type(e.dtype(op.outputs[0])))


@lowering("band_part", kind="decomposed", note="Where(band mask, x, 0); the mask a constant for static sizes, "
                                               "else built from Range")
def _band_part(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    lower, upper = int_param(e, op, "lower"), int_param(e, op, "upper")
    shape = e.tensor_type(xv).shape
    m, n = shape[-2], shape[-1]
    if not (is_static_dim(m) and is_static_dim(n)):
        raise LoweringError("band_part of a symbolic matrix size")
    rows, cols = np.arange(int(m))[:, None], np.arange(int(n))[None, :]
    keep = ((lower < 0) | (rows - cols <= lower)) & ((upper < 0) | (cols - rows <= upper))
    e.node("Where", [e.constant(keep), e.input(op), e.scalar(0, xv)], [e.out(op)])


@lowering("slice_update", kind="decomposed", note="ScatterND of the update at the slice's positions (constant "
                                                  "bounds, static shape)")
def _slice_update(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    shape = e.tensor_type(xv).shape
    if not all(is_static_dim(d) for d in shape):
        raise LoweringError("slice_update of a symbolic shape")
    shape = tuple(int(d) for d in shape)
    rank = len(shape)
    begin, end = const_array(e, op, "begin"), const_array(e, op, "end")
    if begin is None or end is None:
        raise LoweringError("slice_update with run-time bounds")
    strides = int_list(e, op, "stride") if "stride" in op.inputs else [1] * rank
    masks = {k: ([bool(v) for v in np.asarray(e.const_param(op, k)).reshape(-1)] if k in op.inputs else [False] * rank)
             for k in ("begin_mask", "end_mask", "squeeze_mask")}
    index = []
    for i in range(rank):
        b = None if masks["begin_mask"][i] else int(begin[i])
        en = None if masks["end_mask"][i] else int(end[i])
        if masks["squeeze_mask"][i]:
            index.append(slice(b or 0, (b or 0) + 1 if (b or 0) != -1 else None, 1))
        else:
            index.append(slice(b, en, strides[i]))
    positions = np.indices(shape).transpose(list(range(1, rank + 1)) + [0])[tuple(index)]
    sliced_shape = positions.shape[:-1]
    update = e.node("Reshape", [e.input(op, "update"), e.int64s(sliced_shape)])
    e.node("ScatterND", [e.input(op), e.constant(positions.astype(np.int64)), update], [e.out(op)])



unsupported("ONNX graphs have no state: a stateful model's read_state / coreml_update_state have no ONNX form",
            "read_state", "coreml_update_state")
