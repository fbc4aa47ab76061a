"""Data movement known at conversion time, one-hot, top-1 and gather_nd.

Ops that only move elements, once their index-like inputs are constants (gather_nd, scatter*,
slice_update, batch_to_space, space_to_batch, sliding_windows, reverse_sequence), are lowered
through an *index map*: the op's own kernel is run at conversion time on the element numbers of
its data inputs (1, 2, ... in the data's dtype; 0 where the op fills a zero), which gives, for each
output element, the input element it copies. The graph is then one ``gather`` with constant int32
indices from the flattened inputs (concatenated, after a leading zero where the op pads). The map
is checked at conversion time by running the kernel on random data too: an op that computes
rather than moves (a scatter that adds, a fill that is not zero) is refused, never approximated.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ....ir.consteval import evaluate_op
from ....ir.core import Op, Value
from ..emitter import GraphEmitter, LoweringError, Operand
from ._common import axis_of, cast, float_scalar, out, reshape
from .registry import lowering

#: the most output elements an index map may have (its int32 indices are written to model.bin)
MAX_MAP_ELEMENTS = 1 << 22

#: the largest element number each data type holds exactly
_EXACT = {np.dtype(np.float32): 1 << 24, np.dtype(np.float16): 1 << 11, np.dtype(np.int32): (1 << 31) - 1,
          np.dtype(np.int64): (1 << 31) - 1}


def _known_inputs(e: GraphEmitter, op: Op, data: Sequence[str]) -> dict[Value, np.ndarray]:
    env: dict[Value, np.ndarray] = {}
    for key, v in op.inputs.items():
        if key in data:
            continue
        for value in (v if isinstance(v, tuple) else (v,)):
            const = e.value_of(value)
            if const is None:
                raise LoweringError(f"'{key}' must be known at conversion time (WebNN graphs are static)")
            env[value] = const
    return env


def index_map(e: GraphEmitter, op: Op, data: Sequence[str]) -> np.ndarray:
    """For each element of the op's first output (flattened), 1 + its position in the concatenation
    of the flattened ``data`` inputs, or 0 where the op writes a zero."""
    env = _known_inputs(e, op, data)
    values = [op.inputs[k] for k in data]
    shapes = [e.shape(v) for v in values]
    sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
    total = sum(sizes)
    out_size = int(np.prod(e.shape(out(op)), dtype=np.int64))
    if out_size > MAX_MAP_ELEMENTS:
        raise LoweringError(f"its output of {out_size} elements is larger than the {MAX_MAP_ELEMENTS} an index "
                            "map may have")
    numbered = {}
    start = 1
    for v, shape, size in zip(values, shapes, sizes):
        dt = np.dtype(v.type.dtype.storage)  # type: ignore[union-attr]
        if dt not in _EXACT:
            raise LoweringError(f"an index map numbers elements in the data's own type, and {dt} cannot number "
                                f"{total} of them")
        if total + 1 > _EXACT[dt]:
            raise LoweringError(f"{total} {dt} elements are too many to number exactly for an index map")
        numbered[v] = (np.arange(start, start + size).reshape(shape)).astype(dt)
        start += size
    try:
        mapped = np.asarray(evaluate_op(op, {**env, **numbered})[0])
    except Exception as err:  # noqa: BLE001 - the kernel's own error says why
        raise LoweringError(f"its index map could not be computed: {err}") from None
    idx = mapped.astype(np.int64).reshape(-1)
    if not np.array_equal(idx, mapped.reshape(-1)) or idx.min(initial=0) < 0 or idx.max(initial=0) > total:
        raise LoweringError("it does not only move elements")
    # check on random data: the map must reproduce the kernel
    rng = np.random.default_rng(0)
    random = {v: (rng.standard_normal(a.shape) * 100).astype(a.dtype) + (1 if a.dtype.kind in "iu" else 0.5)
              for v, a in numbered.items()}
    want = np.asarray(evaluate_op(op, {**env, **random})[0]).reshape(-1)
    flat = np.concatenate([np.zeros(1, want.dtype)] + [random[v].reshape(-1).astype(want.dtype) for v in values])
    if not np.array_equal(flat[idx], want):
        raise LoweringError("it does not only move elements (a zero fill, copies)")
    return idx


def lower_by_index_map(e: GraphEmitter, op: Op, data: Sequence[str]) -> None:
    idx = index_map(e, op, data)
    dtype = e.dtype_of(out(op))
    parts: list[Operand] = []
    if np.any(idx == 0):
        parts.append(e.constant(np.zeros(1), dtype))
    else:
        idx = idx - 1
    for key in data:
        v = op.inputs[key]
        o = cast(e, e.get(v), dtype)
        parts.append(reshape(e, o, [int(np.prod(o.shape, dtype=np.int64))]))
    n = sum(p.shape[0] for p in parts)
    flat = parts[0] if len(parts) == 1 else e.emit("concat", parts, 0, shape=[n], dtype=dtype)
    y_shape = list(e.shape(out(op)))
    if np.array_equal(idx, np.arange(n)) and n == idx.size:
        e.bind(out(op), reshape(e, flat, y_shape) if y_shape != [n] else
               e.emit("identity", flat, shape=[n], dtype=dtype))
        return
    g = e.emit("gather", flat, e.constant(idx.astype(np.int32), "int32"), shape=[idx.size], dtype=dtype, axis=0)
    e.bind(out(op), reshape(e, g, y_shape))


_MOVES = {
    "batch_to_space": ("x",), "space_to_batch": ("x",), "sliding_windows": ("x",), "reverse_sequence": ("x",),
    "slice_update": ("x", "update"),
}
for _t, _data in _MOVES.items():
    lowering(_t, kind="decomposed", note="a gather with a constant index map (parameters known at conversion time)")(
        lambda e, op, _data=_data: lower_by_index_map(e, op, _data))


def _scatter(e: GraphEmitter, op: Op) -> None:
    mode = str(np.asarray(e.param(op, "mode")).reshape(-1)[0])
    if mode != "update":
        raise LoweringError(f"mode '{mode}' has no WebNN form (WebNN's scatters only replace)")
    if e.value_of(op.inputs["indices"]) is None:
        raise LoweringError("indices must be known at conversion time (Chromium's scatterND and scatterElements "
                            "take constant indices only)")
    lower_by_index_map(e, op, ("data", "updates"))


for _t in ("scatter_nd", "scatter_along_axis"):  # scatter (every mode): lowering/scatter.py
    lowering(_t, kind="decomposed", note="mode 'update' with constant indices: a gather from data and updates with a "
                                         "constant index map (duplicate indices as the IR); other modes unsupported")(
        _scatter)


@lowering("gather_nd", note="constant indices: a gather with a constant index map; else gatherND with negative "
                            "indices wrapped (batch_dims 0)")
def _gather_nd(e: GraphEmitter, op: Op) -> None:
    if e.value_of(op.inputs["indices"]) is not None:
        lower_by_index_map(e, op, ("x",))
        return
    batch_dims = int(np.asarray(e.param(op, "batch_dims") if "batch_dims" in op.inputs else 0).reshape(-1)[0])
    if batch_dims:
        raise LoweringError("gather_nd with batch_dims and indices computed in the graph has no WebNN form")
    x = e.get(op.inputs["x"])
    i = cast(e, e.get(op.inputs["indices"]), "int32")
    k = i.shape[-1]
    sizes = e.constant(np.asarray(x.shape[:k], np.int32), "int32")
    neg = e.emit("lesser", i, e.scalar(0, "int32"), shape=i.shape, dtype="uint8")
    wrapped = e.emit("where", neg, e.emit("add", i, sizes, shape=i.shape, dtype="int32"), i, shape=i.shape,
                     dtype="int32")
    e.bind(out(op), e.emit("gatherND", x, wrapped, shape=e.shape(out(op)), dtype=x.dtype))


@lowering("one_hot", kind="decomposed", note="where(equal(indices, constant range), on, off) (constant depth)")
def _one_hot(e: GraphEmitter, op: Op) -> None:
    depth = int(float_scalar(e.const_param(op, "one_hot_vector_size")))
    iv = op.inputs["indices"]
    i = cast(e, e.get(iv), "int32")
    y_shape = list(e.shape(out(op)))
    axis = axis_of(int(float_scalar(e.param(op, "axis"))), len(y_shape))
    expanded = reshape(e, i, i.shape[:axis] + (1,) + i.shape[axis:])
    rng_shape = [1] * len(y_shape)
    rng_shape[axis] = depth
    rng = e.constant(np.arange(depth, dtype=np.int32).reshape(rng_shape), "int32")
    hot = e.emit("equal", expanded, rng, shape=y_shape, dtype="uint8")
    dtype = e.dtype_of(out(op))
    work = "int32" if dtype == "uint8" else dtype  # where takes no uint8 values in Chromium
    on = e.scalar(float_scalar(e.param(op, "on_value")), work)
    off = e.scalar(float_scalar(e.param(op, "off_value")), work)
    e.bind(out(op), cast(e, e.emit("where", hot, on, off, shape=y_shape, dtype=work), dtype))


@lowering("topk", kind="decomposed", note="k = 1 only: reduceMax/reduceMin and argMax/argMin (first index on ties)")
def _topk(e: GraphEmitter, op: Op) -> None:
    x = e.get(op.inputs["x"])
    axis = axis_of(int(float_scalar(e.const_param(op, "axis"))), x.rank)
    k = int(float_scalar(e.const_param(op, "k")))
    if k != 1 and not (k == -1 and x.shape[axis] == 1):
        raise LoweringError(f"k = {k}: WebNN has no sort (only k = 1 has a form, as argMax)")
    ascending = bool(np.asarray(e.param(op, "ascending")).reshape(-1)[0])
    shape = list(x.shape)
    shape[axis] = 1
    values = e.emit("reduceMin" if ascending else "reduceMax", x, shape=shape, dtype=x.dtype, axes=[axis],
                    keepDimensions=True)
    e.bind(op.outputs[0], values)
    if len(op.outputs) > 1:
        idx = e.emit("argMin" if ascending else "argMax", x, axis, shape=shape, dtype="int32", keepDimensions=True,
                     outputDataType="int32")
        e.bind(op.outputs[1], cast(e, idx, e.dtype_of(op.outputs[1])))
