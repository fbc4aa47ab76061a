"""A ``gather`` of rows of a constant table as one ``embeddingND`` layer (specification 4).

``embeddingND`` stores the table transposed, [embeddingSize E, vocabSize V], and maps indices
shaped ``S + [1]`` (rank 2-5) to ``S + [E]``: ``gather(table [V, E], indices S, axis=0)`` when the
indices get a trailing unit axis first. The ops making the indices from another value by reshaping
only (cast to a 32/64-bit integer, squeeze, expand_dims, reshape; each read only on the way) are
absorbed: one squeeze / expandDims / reshapeStatic of that value gives the layer's input (none when
it already has the shape). An ``add`` of a constant [E] bias that is the gather's only reader
becomes the layer's bias. The weights keep their form: fp16 stays ``float16Value``, a table held as
an 8-bit linear or a lookup-table constexpr is written as the quantized WeightParams of its
transpose (lowering/quant.py, TRANSPOSED: per-channel scales must run along E; a form that cannot be
transposed that way is written dense). A table other ops read as well (an output projection tied to
the embedding, say) keeps the gather layer: its loadConstantND serves them all, where the layer
would hold a second copy.

Index range. The proto: "Input values must be in the range [0, vocabSize - 1]". MIL's gather
counts a negative index from the end up to iOS16 (from iOS17 a negative index is out of range, as
for the layer). So the layer is used only when every index the program defines is >= 0:

- the gather is an iOS17+ op (negative indices are undefined there too), or
- its source model requires indices in [0, V) (``INDICES_IN_RANGE``, set by the NeuralNetwork
  frontend on the gather it reads an embedding / embeddingND layer as: a negative index is
  undefined in the model, so the layer it came from is an exact reading), or
- the indices are provably non-negative: a constant >= 0, or an op whose results are (argmax /
  argmin / argsort / topk indices / non_zero / shape / relu / relu6 / clip with alpha >= 0 /
  range_1d from a start >= 0 with a step > 0), through value-preserving reshapes and casts.

Anything else (a model input read directly by an iOS15 gather, say) keeps the gather path, which
wraps negative indices as MIL does. Fractional indices: the layer is assumed to truncate float
indices, as the gather layers are (lowering/cast.py binds an index cast to its float input).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ....ir.consteval import compile_time_value
from ....ir.core import INDICES_IN_RANGE, Op, Value
from ....ir.opdef import opset_index
from ....ir.types import TensorType, is_static_dim
from ..emitter import NetworkEmitter
from ._common import same_precision
from .quant import compressed, recorded_fp16

#: ops between a value and the gather's indices that keep the values and their row-major order
_RESHAPES = frozenset({"squeeze", "expand_dims", "reshape"})
#: the layer's input rank range (the proto: rank 2 to 5)
_MIN_RANK, _MAX_RANK = 2, 5


@dataclass(frozen=True)
class EmbeddingPlan:
    """How one gather becomes an embeddingND layer."""

    table: np.ndarray  # [V, E]
    source: Value  # the value whose blob, reshaped to ``target``, is the layer's input
    chain: tuple[Op, ...]  # the index ops absorbed (from the gather back to ``source``)
    target: tuple  # the layer's input shape: indices shape + [1]
    bias_add: Op | None  # the absorbed add of the bias
    bias: np.ndarray | None  # [E]


def _shape(v: Value) -> tuple | None:
    t = v.type
    return tuple(t.shape) if isinstance(t, TensorType) and t.shape is not None else None


def _int_value(v: Value | None) -> int | None:
    val = compile_time_value(v) if isinstance(v, Value) else None
    return None if val is None or np.asarray(val).size != 1 else int(np.asarray(val).reshape(()))


def _index_cast(op: Op) -> bool:
    """A cast that keeps every index value: to a 32/64-bit integer, from a float (truncated by the
    layer, as by the gather layers), bool or an integer type no wider."""
    src, dst = op.inputs.get("x"), op.outputs[0].type
    if not isinstance(src, Value) or not isinstance(src.type, TensorType) or not isinstance(dst, TensorType):
        return False
    if dst.dtype.name not in ("int32", "int64"):
        return False
    s = src.type.dtype
    return s.is_float or s.kind == "bool" or (s.is_int and s.bits <= dst.dtype.bits)


def _passes_values(op: Op) -> bool:
    return op.type in _RESHAPES or op.type == "identity" or (op.type == "cast" and _index_cast(op))


def _non_negative(v: Value, depth: int = 8) -> bool:
    """Whether every value of ``v`` is provably >= 0 (see the module docstring)."""
    const = compile_time_value(v)
    if const is not None:
        arr = np.asarray(const)
        return arr.dtype.kind in "iufb" and bool(np.all(arr >= 0))
    p = v.producer
    if p is None or depth == 0:
        return False
    t = p.type
    if t in ("reduce_argmax", "reduce_argmin", "argsort", "non_zero", "shape", "relu", "relu6"):
        return True
    if t == "topk":
        return len(p.outputs) > 1 and v is p.outputs[1]
    if t == "clip":
        lo = compile_time_value(p.inputs["alpha"]) if isinstance(p.inputs.get("alpha"), Value) else None
        return lo is not None and bool(np.all(np.asarray(lo) >= 0))
    if t == "range_1d":
        start, step = _int_value(p.inputs.get("start")), _int_value(p.inputs.get("step"))
        return start is not None and step is not None and start >= 0 and step > 0
    if _passes_values(p) and isinstance(p.inputs.get("x"), Value):
        return _non_negative(p.inputs["x"], depth - 1)  # type: ignore[arg-type]
    return False


def _indices_in_range(op: Op) -> bool:
    """Whether every index the program defines is in [0, V) (module docstring)."""
    if op.opdef is not None and opset_index(op.opdef.signature.since) >= opset_index("iOS17"):
        return True
    if op.attributes.get(INDICES_IN_RANGE):
        return True
    return _non_negative(op.inputs["indices"])  # type: ignore[arg-type]


def _index_chain(indices: Value, block: object) -> tuple[Value, tuple[Op, ...]]:
    """The value the indices are made from by value-keeping reshapes and casts, each result read
    only by the next op, and those ops (nearest the gather first)."""
    chain: list[Op] = []
    v = indices
    while True:
        p = v.producer
        uses = list(v.uses)
        if (p is None or p.block is not block or not _passes_values(p) or len(uses) != 1
                or not isinstance(uses[0].user, Op) or not isinstance(p.inputs.get("x"), Value)):
            return v, tuple(chain)
        chain.append(p)
        v = p.inputs["x"]  # type: ignore[assignment]


def _same_dim(a: object, b: object) -> bool:
    if is_static_dim(a) and is_static_dim(b):
        return int(a) == int(b)  # type: ignore[call-overload]
    return a == b


def unit_dims_between(src: tuple, dst: tuple) -> list[int] | None:
    """The axes of ``src`` to remove (static 1s) so that it becomes ``dst``, or None."""
    removed, j = [], 0
    for i, d in enumerate(src):
        if j < len(dst) and _same_dim(d, dst[j]):
            j += 1
        elif is_static_dim(d) and int(d) == 1:
            removed.append(i)
        else:
            return None
    return removed if j == len(dst) else None


def reshape_layer(src: tuple, dst: tuple) -> tuple[str, list[int]] | None:
    """One layer reshaping a blob of shape ``src`` to ``dst``: ("", []) for none, ("squeeze", axes),
    ("expandDims", axes) or ("reshapeStatic", target shape; static only); None when none fits."""
    if len(src) == len(dst) and all(_same_dim(a, b) for a, b in zip(src, dst)):
        return "", []
    if len(src) > len(dst):
        axes = unit_dims_between(src, dst)
        if axes is not None:
            return "squeeze", axes
    else:
        axes = unit_dims_between(dst, src)
        if axes is not None:
            return "expandDims", axes
    if all(is_static_dim(d) for d in dst):
        return "reshapeStatic", [int(d) for d in dst]
    return None


def _bias(gather: Op, size: int) -> tuple[Op | None, np.ndarray | None]:
    """The ``add`` of a constant [E] (or [1, ..., E]) bias reading the gather's result, its only
    reader and in its block; the bias."""
    out = gather.outputs[0]
    uses = list(out.uses)
    if len(uses) != 1 or not isinstance(uses[0].user, Op):
        return None, None
    add = uses[0].user
    if add.type != "add" or add.block is not gather.block:
        return None, None
    other = add.inputs["y"] if add.inputs.get("x") is out else add.inputs.get("x")
    if other is out or not isinstance(other, Value):
        return None, None
    val = compile_time_value(other)
    shape_out, shape_add = _shape(out), _shape(add.outputs[0])
    if val is None or shape_out is None or shape_add is None or len(shape_add) != len(shape_out):
        return None, None
    arr = np.asarray(val)
    if arr.dtype.kind != "f" or arr.ndim > len(shape_out) or arr.size != size or (arr.ndim and arr.shape[-1] != size):
        return None, None
    return add, arr.reshape(size)


def plan_embedding(op: Op) -> EmbeddingPlan | None:
    """The embeddingND form of gather ``op``, or None (the gather layer then)."""
    x, indices = op.inputs.get("x"), op.inputs.get("indices")
    if not isinstance(x, Value) or not isinstance(indices, Value):
        return None
    if "batch_dims" in op.inputs and _int_value(op.inputs.get("batch_dims")) not in (0, None):  # type: ignore[arg-type]
        return None
    table = compile_time_value(x)
    idx_shape = _shape(indices)
    if table is None or idx_shape is None:
        return None
    table = np.asarray(table)
    if table.ndim != 2 or table.dtype.kind != "f" or 0 in table.shape or len(x.uses) != 1:
        return None  # a table other ops read too (tied weights) is loaded once, for all of them
    axis = _int_value(op.inputs.get("axis")) if "axis" in op.inputs else 0  # type: ignore[arg-type]
    if axis not in (0, -2) or not _MIN_RANK <= len(idx_shape) + 1 <= _MAX_RANK or not _indices_in_range(op):
        return None
    target = (*idx_shape, 1)
    source, chain = _index_chain(indices, op.block)
    src_shape = _shape(source)
    if src_shape is None or reshape_layer(src_shape, target) is None:
        source, chain = indices, ()
    bias_add, bias = _bias(op, int(table.shape[1]))
    return EmbeddingPlan(table, source, chain, target, bias_add, bias)


def absorbs(op: Op) -> list[Op]:
    plan = plan_embedding(op)
    if plan is None:
        return []
    return [*plan.chain, *([plan.bias_add] if plan.bias_add is not None else [])]


def lower_embedding(e: NetworkEmitter, op: Op, plan: EmbeddingPlan) -> None:
    """The layer(s) of ``plan``: the index reshape (if any) and embeddingND."""
    src_shape = _shape(plan.source)
    how = reshape_layer(src_shape, plan.target) if src_shape is not None else None
    if how is None:
        how = ("expandDims", [len(plan.target) - 1])
    kind, values = how
    blob = e.blob(plan.source)
    if kind:
        shaped = e.fresh(f"{op.name}_indices")
        params = e.layer(kind, shaped, [blob], [shaped])
        (params.targetShape if kind == "reshapeStatic" else params.axes).extend(values)
        blob = shaped
    result = plan.bias_add.outputs[0] if plan.bias_add is not None else op.outputs[0]
    params = e.layer("embeddingND", op.name, [blob], [e.define(result)])
    vocab, size = (int(d) for d in plan.table.shape)
    params.vocabSize, params.embeddingSize = vocab, size
    stored = plan.table.T  # [E, V]
    quantized = compressed(op, "x")
    stored, bias = recorded_fp16(op, "x", stored, plan.bias)
    stored, bias = same_precision(stored, bias)
    if quantized is not None:
        quantized.write(params.weights)
    else:
        e.weights(params.weights, stored)
    if bias is not None:
        params.hasBias = True
        e.weights(params.bias, bias)
