"""Shape ops as ND layers (specification version 4): reshapes, permutations, joins and splits,
unit dims, tiles, reversals, generated tensors (fill, range) and ``shape``.

Shapes are read from the op's result types: a reshape whose result has static dims is one
``reshapeStatic`` whatever its ``shape`` input held (0s and -1s are resolved already); a result
with symbolic (flexible) dims keeps them flexible with -1 / 0 entries, or a shape vector computed
from ``getShape`` at run time. Blobs are fp32 at run time: integer values written as floats are
checked for exactness (`exact_float`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ....errors import LoweringError
from ....ir.core import Op, Value
from ....ir.types import Dim, is_static_dim
from ..emitter import NetworkEmitter, op_input, rank, static_shape, tensor_type
from ._common import allows, exact_float, single
from .registry import lowering


def axis_param(e: NetworkEmitter, op: Op, key: str, r: int, *, extra: int = 0) -> int:
    """A compile-time axis parameter normalised to [0, r + extra)."""
    axis = int(np.asarray(e.const_param(op, key)).reshape(()))
    n = r + extra
    if not -n <= axis < n:
        raise LoweringError(f"{key} {axis} is out of range for rank {r}")
    return axis + n if axis < 0 else axis


def dims(v: Value) -> tuple:
    t = tensor_type(v)
    if t.shape is None:
        raise LoweringError(f"'{v.name}' has no known rank")
    return tuple(t.shape)


def inp(op: Op, key: str) -> Value:
    v = op_input(op, key)
    if v is None:
        raise LoweringError(f"input '{key}' is missing")
    return v


def alias(e: NetworkEmitter, op: Op, x: Value) -> None:
    """The op's result is ``x`` (no layer: an output feature gets its copy layer at the end)."""
    e.bind(op.outputs[0], e.blob(x))


# ---------------------------------------------------------------------------------------------
# reshapes


def shape_blob(e: NetworkEmitter, name: str, entries: Sequence[int | tuple[Value, int]]) -> str:
    """A 1-D blob holding a shape computed at run time: each entry a literal size or (value, axis),
    the size of that value's axis. One ``getShape`` per source value, their concatenation (and the
    literals) picked in order by one ``gather`` with constant indices."""
    sources: list[Value] = []
    for ent in entries:
        if isinstance(ent, tuple) and ent[0] not in sources:
            sources.append(ent[0])
    pieces, offsets, at = [], {}, 0
    for v in sources:
        shp = e.fresh(f"{name}_{v.name}_shape")
        e.layer("getShape", shp, [e.blob(v)], [shp])
        pieces.append(shp)
        offsets[v] = at
        at += rank(v)
    literals = [int(ent) for ent in entries if not isinstance(ent, tuple)]
    if literals:
        pieces.append(e.load_constant(None, np.asarray(literals, np.float32), f"{name}_sizes"))
    if len(pieces) > 1:
        joined = e.fresh(f"{name}_dims")
        e.layer("concatND", joined, pieces, [joined]).axis = 0
    else:
        joined = pieces[0]
    picks, lit = [], at
    for ent in entries:
        if isinstance(ent, tuple):
            picks.append(offsets[ent[0]] + ent[1])
        else:
            picks.append(lit)
            lit += 1
    if picks == list(range(at + len(literals))):
        return joined
    out = e.fresh(f"{name}_target")
    idx = e.load_constant(None, np.asarray(picks, np.float32), f"{name}_picks")
    e.layer("gather", out, [joined, idx], [out]).axis = 0
    return out


def reshape_to(e: NetworkEmitter, op: Op, x: Value, entries: Sequence[int | tuple[Value, int]] | None) -> None:
    """Reshape ``x`` to the op's result type. ``entries`` says where each symbolic result dim comes
    from at run time ((value, axis) or -1 for the one dim inferred), None: from nowhere known."""
    out = op.outputs[0]
    out_dims = dims(out)
    x_dims = dims(x)
    symbolic = [i for i, d in enumerate(out_dims) if not is_static_dim(d)]
    if len(symbolic) <= 1:
        target = [-1 if i in symbolic else int(d) for i, d in enumerate(out_dims)]
        single(e, op, "reshapeStatic", [e.blob(x)]).targetShape.extend(target or [1])
        return
    if len(out_dims) == len(x_dims):
        free = [i for i in symbolic if out_dims[i] != x_dims[i]]
        if len(free) <= 1:  # 0 keeps the input's dim at that index, one -1 is inferred
            target = [-1 if i in free else 0 if i in symbolic else int(d) for i, d in enumerate(out_dims)]
            single(e, op, "rankPreservingReshape", [e.blob(x)]).targetShape.extend(target)
            return
    if entries is None:
        raise LoweringError(f"the result shape {[str(d) for d in out_dims]} has several flexible dims of unknown "
                            f"origin")
    vec = shape_blob(e, f"{op.name}_shape", [int(d) if is_static_dim(d) else ent
                                            for d, ent in zip(out_dims, entries)])
    single(e, op, "reshapeDynamic", [e.blob(x), vec])


def _matching_dim(d: Dim, sources: Sequence[tuple[Value, int]]) -> tuple[Value, int] | None:
    for v, i in sources:
        if dims(v)[i] == d:
            return v, i
    return None


@lowering("reshape", note="reshapeStatic for a static result (or one flexible dim as -1); "
          "rankPreservingReshape or getShape + reshapeDynamic for several flexible dims; "
          "reshapeDynamic for a run-time shape")
def _reshape(e: NetworkEmitter, op: Op) -> None:
    x = inp(op, "x")
    shape_v = inp(op, "shape")
    target = e.const(shape_v)
    out_dims = dims(op.outputs[0])
    if target is None and len([d for d in out_dims if not is_static_dim(d)]) > 1:
        single(e, op, "reshapeDynamic", [e.blob(x), e.blob(shape_v)])
        return
    x_dims = dims(x)
    sources = [(x, i) for i in range(len(x_dims))]
    entries: list[int | tuple[Value, int]] = []
    for d in out_dims:
        if is_static_dim(d):
            entries.append(int(d))
        else:
            entries.append(_matching_dim(d, sources) or -1)
    if sum(1 for ent in entries if ent == -1) > 1:
        reshape_to(e, op, x, None)
    else:
        reshape_to(e, op, x, entries)


@lowering("reshape_like", kind="decomposed", note="reshapeStatic for a static result, reshapeLike for one "
          "whole reference, else getShape of the references + reshapeDynamic")
def _reshape_like(e: NetworkEmitter, op: Op) -> None:
    x = inp(op, "x")
    refs = op.inputs.get("ref_tensors")
    refs = tuple(refs) if isinstance(refs, tuple) else (refs,)
    begins = [int(b) for b in np.asarray(e.const_param(op, "begins")).reshape(-1)]
    ends = [int(b) for b in np.asarray(e.const_param(op, "ends")).reshape(-1)]
    masks = [bool(m) for m in np.asarray(e.const_param(op, "end_masks")).reshape(-1)]
    entries: list[int | tuple[Value, int]] = []
    for ref, b, end, m in zip(refs, begins, ends, masks):
        r = rank(ref)
        lo = b + r if b < 0 else b
        hi = r if m else (end + r if end < 0 else end)
        entries.extend((ref, i) for i in range(lo, hi))
    out_dims = dims(op.outputs[0])
    if len([d for d in out_dims if not is_static_dim(d)]) > 1 and len(refs) == 1 and entries == [
            (refs[0], i) for i in range(rank(refs[0]))]:
        single(e, op, "reshapeLike", [e.blob(x), e.blob(refs[0])])
        return
    reshape_to(e, op, x, entries)


@lowering("flatten2d")
def _flatten2d(e: NetworkEmitter, op: Op) -> None:
    """-rank <= axis <= rank; a negative axis counts from the end (rank + axis)."""
    r = rank(inp(op, "x"))
    axis = int(np.asarray(e.const_param(op, "axis")).reshape(()))
    if not -r <= axis <= r:
        raise LoweringError(f"axis {axis} is out of range for rank {r}")
    single(e, op, "flattenTo2D").axis = axis + r if axis < 0 else axis


# ---------------------------------------------------------------------------------------------
# permutations, unit dims


@lowering("transpose")
def _transpose(e: NetworkEmitter, op: Op) -> None:
    r = rank(inp(op, "x"))
    if r <= 1:
        alias(e, op, inp(op, "x"))
        return
    perm = [p + r if p < 0 else p for p in (int(p) for p in np.asarray(e.const_param(op, "perm")).reshape(-1))]
    if _moves_only_unit_dims(dims(inp(op, "x")), perm):  # same shape, same row-major order: no layer
        alias(e, op, inp(op, "x"))
        return
    single(e, op, "transpose").axes.extend(perm)


def _moves_only_unit_dims(shape: tuple, perm: list[int]) -> bool:
    """Whether ``perm`` permutes only axes of static size 1 among themselves (an identity on the data:
    the other axes keep their places)."""
    return all(p == i or (is_static_dim(shape[i]) and int(shape[i]) == 1) for i, p in enumerate(perm)) and all(
        p == i or (is_static_dim(shape[p]) and int(shape[p]) == 1) for i, p in enumerate(perm))


@lowering("squeeze", note="the axes the result type removed (a flexible dim is never squeezed)")
def _squeeze(e: NetworkEmitter, op: Op) -> None:
    x = inp(op, "x")
    x_dims = dims(x)
    axes_v = e.param(op, "axes")
    asked = range(len(x_dims)) if axes_v is None else [int(a) % len(x_dims) for a in np.asarray(axes_v).reshape(-1)]
    gone = sorted({i for i in asked if is_static_dim(x_dims[i]) and int(x_dims[i]) == 1})
    if not gone:
        alias(e, op, x)
        return
    if len(gone) == len(x_dims):  # rank 0: a [1] blob
        single(e, op, "reshapeStatic").targetShape.append(1)
        return
    single(e, op, "squeeze").axes.extend(gone)


@lowering("expand_dims")
def _expand_dims(e: NetworkEmitter, op: Op) -> None:
    x = inp(op, "x")
    axes = [int(a) for a in np.asarray(e.const_param(op, "axes")).reshape(-1)]
    r_out = rank(x) + len(axes)
    if rank(x) == 0:  # a rank-0 value is a [1] blob: reshape to the all-ones result
        single(e, op, "reshapeStatic").targetShape.extend([1] * r_out)
        return
    single(e, op, "expandDims").axes.extend(sorted(a + r_out if a < 0 else a for a in axes))


# ---------------------------------------------------------------------------------------------
# joins, splits, repeats


@lowering("concat", note="concatND; interleave is its iOS14 parameter (stack + reshapeStatic under a lower --target)")
def _concat(e: NetworkEmitter, op: Op) -> None:
    values = tuple(op.inputs["values"])  # type: ignore[arg-type]
    r = rank(values[0])
    interleave = bool(e.param(op, "interleave"))
    if r == 0:  # rank-0 values are joined into a vector (each is a [1] blob)
        axis = 0
    else:
        axis = axis_param(e, op, "axis", r)
        if not interleave:  # an empty part adds nothing (and Core ML refuses empty blobs)
            values = tuple(v for v in values if not (is_static_dim(dims(v)[axis]) and int(dims(v)[axis]) == 0))
    if not values:
        raise LoweringError("every input is empty along the axis")
    if len(values) == 1:
        if r == 0:
            single(e, op, "reshapeStatic", [e.blob(values[0])]).targetShape.append(1)
        else:
            alias(e, op, values[0])
        return
    if interleave and not allows(e, 5):  # iOS13: stacked after the axis, merged into it
        out_dims = dims(op.outputs[0])
        if sum(1 for d in out_dims if not is_static_dim(d)) > 1:
            raise LoweringError("interleave with several flexible dims needs concatND's interleave (iOS14), above "
                                "the requested version")
        stacked = e.fresh(f"{op.name}_stacked")
        e.layer("stack", stacked, [e.blob(v) for v in values], [stacked]).axis = axis + 1
        single(e, op, "reshapeStatic", [stacked]).targetShape.extend(
            int(d) if is_static_dim(d) else -1 for d in out_dims)
        return
    params = single(e, op, "concatND", [e.blob(v) for v in values])
    params.axis = axis
    if interleave:
        params.interleave = True
        e.state.need(5, "concatND interleave")


@lowering("stack")
def _stack(e: NetworkEmitter, op: Op) -> None:
    values = tuple(op.inputs["values"])  # type: ignore[arg-type]
    if rank(values[0]) == 0:  # rank-0 values are [1] blobs: stacking them is joining them
        if len(values) == 1:
            alias(e, op, values[0])
        else:
            single(e, op, "concatND", [e.blob(v) for v in values]).axis = 0
        return
    axis = axis_param(e, op, "axis", rank(values[0]), extra=1)
    if len(values) == 1:
        single(e, op, "expandDims", [e.blob(values[0])]).axes.append(axis)
        return
    single(e, op, "stack", [e.blob(v) for v in values]).axis = axis


@lowering("split", note="splitND (numSplits, or splitSizes for unequal parts)")
def _split(e: NetworkEmitter, op: Op) -> None:
    x = inp(op, "x")
    axis = axis_param(e, op, "axis", rank(x))
    outs = op.outputs
    if len(outs) == 1:
        alias(e, op, x)
        return
    sizes = [dims(v)[axis] for v in outs]
    if any(is_static_dim(s) and int(s) == 0 for s in sizes):
        raise LoweringError("a part of size 0 (NeuralNetwork blobs cannot be empty)")
    params = e.layer("splitND", op.name, [e.blob(x)], [e.define(v) for v in outs])
    params.axis = axis
    if e.param(op, "split_sizes") is not None:
        if not all(is_static_dim(s) for s in sizes):
            raise LoweringError("split_sizes of a flexible dim must be static")
        params.splitSizes.extend(int(s) for s in sizes)
    else:
        params.numSplits = len(outs)


@lowering("tile", note="reps as the field, or a run-time reps as the second input")
def _tile(e: NetworkEmitter, op: Op) -> None:
    reps_v = inp(op, "reps")
    reps = e.const(reps_v)
    if rank(inp(op, "x")) == 0:
        alias(e, op, inp(op, "x"))
        return
    if reps is None:
        single(e, op, "tile", [e.blob(inp(op, "x")), e.blob(reps_v)])
    else:
        single(e, op, "tile").reps.extend(int(t) for t in np.asarray(reps).reshape(-1))


@lowering("reverse")
def _reverse(e: NetworkEmitter, op: Op) -> None:
    r = rank(inp(op, "x"))
    axes_v = e.param(op, "axes")
    axes = set(range(r)) if axes_v is None else {int(a) % r for a in np.asarray(axes_v).reshape(-1)}
    if not axes:
        alias(e, op, inp(op, "x"))
        return
    single(e, op, "reverse").reverseDim.extend(i in axes for i in range(r))


@lowering("reverse_sequence", note="reverseSeq; a batch axis after the sequence axis (the layer needs it "
          "before) is swapped with it by transposes around the layer")
def _reverse_sequence(e: NetworkEmitter, op: Op) -> None:
    x = inp(op, "x")
    r = rank(x)
    seq, batch = axis_param(e, op, "seq_axis", r), axis_param(e, op, "batch_axis", r)
    lengths = e.blob(inp(op, "lengths"))
    if batch < seq:
        params = single(e, op, "reverseSeq", [e.blob(x), lengths])
        params.batchAxis, params.sequenceAxis = batch, seq
        return
    perm = list(range(r))
    perm[batch], perm[seq] = seq, batch
    swapped, rev = e.fresh(f"{op.name}_swapped"), e.fresh(f"{op.name}_reversed")
    e.layer("transpose", swapped, [e.blob(x)], [swapped]).axes.extend(perm)
    params = e.layer("reverseSeq", rev, [swapped, lengths], [rev])
    params.batchAxis, params.sequenceAxis = seq, batch
    single(e, op, "transpose", [rev]).axes.extend(perm)


# ---------------------------------------------------------------------------------------------
# generated tensors and shapes


@lowering("shape")
def _shape(e: NetworkEmitter, op: Op) -> None:
    single(e, op, "getShape")


def _fill_value(e: NetworkEmitter, op: Op) -> float:
    v = e.param(op, "value")
    return 0.0 if v is None else exact_float(v, "value")


@lowering("fill", note="fillStatic for a constant shape, else fillDynamic")
def _fill(e: NetworkEmitter, op: Op) -> None:
    shape_v = inp(op, "shape")
    shape = e.const(shape_v)
    if shape is not None:
        params = single(e, op, "fillStatic", [])
        params.targetShape.extend([int(d) for d in np.asarray(shape).reshape(-1)] or [1])  # rank 0: [1]
    else:
        params = single(e, op, "fillDynamic", [e.blob(shape_v)])
    params.value = _fill_value(e, op)


@lowering("fill_like")
def _fill_like(e: NetworkEmitter, op: Op) -> None:
    single(e, op, "fillLike", [e.blob(inp(op, "ref_tensor"))]).value = _fill_value(e, op)


@lowering("range_1d", note="rangeStatic for constant bounds, else rangeDynamic (end, start, step inputs; the "
          "leading constant ones as fields)")
def _range_1d(e: NetworkEmitter, op: Op) -> None:
    vals = {k: e.const(inp(op, k)) for k in ("start", "end", "step")}
    if all(v is not None for v in vals.values()):
        params = single(e, op, "rangeStatic", [])
        params.endValue = exact_float(vals["end"], "end")
        params.startValue = exact_float(vals["start"], "start")
        params.stepSizeValue = exact_float(vals["step"], "step")
        return
    # inputs in order end, start, step: a run-time step needs start as an input too
    n_inputs = 3 if vals["step"] is None else 2 if vals["start"] is None else 1
    names = ["end", "start", "step"][:n_inputs]
    for k in names:
        if vals[k] is not None:
            exact_float(vals[k], k)
    params = single(e, op, "rangeDynamic", [e.blob(inp(op, k)) for k in names])
    if n_inputs < 2:
        params.startValue = exact_float(vals["start"], "start")
    if n_inputs < 3:
        params.stepSizeValue = exact_float(vals["step"], "step")


__all__ = ["alias", "axis_param", "dims", "inp", "reshape_to", "shape_blob", "static_shape"]
