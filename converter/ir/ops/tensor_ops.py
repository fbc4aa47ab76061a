"""Tensor operations: concat, split, stack, tile, flatten2d, shape, fill, fill_like, range_1d,
one_hot, non_zero, band_part, identity, select, non_maximum_suppression."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..opdef import EvalArgs, InferArgs, OpDef, opset_index, register
from ..shapes import ShapeError, broadcast_shapes, dim_sum
from ..symexpr import floordiv
from ..types import Dim, DType, TensorType, Type, dtype, fresh_symbol, int32, is_static_dim
from ._util import as_int_list
from .tensor_transform import axis_of, dims_product, merge_dims


def _tensor_types(a: InferArgs, name: str) -> list[TensorType]:
    types = list(a.types(name))
    if not types:
        raise a.fail(f"{name} is empty")
    if not all(isinstance(t, TensorType) for t in types):
        raise a.fail(f"{name} must all be tensors, got {[str(t) for t in types]}")
    if len({t.dtype for t in types}) > 1:
        raise a.fail(f"{name} must share one dtype, got {[t.dtype.name for t in types]}")
    return types


def _merge_shapes(a: InferArgs, shapes: list[tuple], skip: int | None = None) -> list[Dim]:
    """Per-dim merge of equal-rank shapes that must agree (except at ``skip``)."""
    if len({len(s) for s in shapes}) > 1:
        raise a.fail(f"inputs must have the same rank, got shapes {[list(map(str, s)) for s in shapes]}")
    try:
        return [None if i == skip else merge_dims([s[i] for s in shapes], f"dim {i}")
                for i in range(len(shapes[0]))]
    except ShapeError as e:
        raise a.fail(str(e)) from None


def _value_dtype(a: InferArgs | EvalArgs, name: str, default: str) -> DType:
    """Dtype of an optional const value parameter; ``default`` when it takes its literal default."""
    t = a.type(name)
    return t.dtype if isinstance(t, TensorType) else dtype(default)


# ---------------------------------------------------------------------------------------------
# joining and splitting


@register
class Concat(OpDef):
    """Join ``values`` along ``axis``; with ``interleave`` (equal shapes) the output takes one slice
    from each input in turn. Rank-0 values are joined into a 1-D tensor, as coremltools does."""

    op_type = "concat"

    def infer(self, a: InferArgs) -> list[Type]:
        types = _tensor_types(a, "values")
        dt = types[0].dtype
        known = [t.shape for t in types if t.shape is not None]
        if not known:
            return [TensorType(dt, None)]
        if all(len(s) == 0 for s in known):
            return [TensorType(dt, (len(types),))]
        axis = axis_of(a, "axis", len(known[0]))
        interleave = bool(a.value("interleave"))
        out = _merge_shapes(a, known, skip=None if interleave else axis)
        if interleave:
            out[axis] = dim_sum([out[axis]] * len(types))
        elif len(known) < len(types):
            out[axis] = a.new_symbol()
        else:
            out[axis] = dim_sum([s[axis] for s in known])
        return [TensorType(dt, tuple(out))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        values = list(a["values"])
        if values[0].ndim == 0:
            return [np.stack(values)]
        axis = axis_of(a, "axis", values[0].ndim)
        if bool(a.value("interleave")):
            shape = list(values[0].shape)
            shape[axis] *= len(values)
            return [np.stack(values, axis=axis + 1).reshape(shape)]
        return [np.concatenate(values, axis=axis)]


@register
class Stack(OpDef):
    """Join equal-shape ``values`` along a new dim inserted at ``axis`` (``-rank-1 <= axis <= rank``)."""

    op_type = "stack"

    def infer(self, a: InferArgs) -> list[Type]:
        types = _tensor_types(a, "values")
        known = [t.shape for t in types if t.shape is not None]
        if not known:
            return [TensorType(types[0].dtype, None)]
        out = _merge_shapes(a, known)
        out.insert(axis_of(a, "axis", len(out), extra=1), len(types))
        return [TensorType(types[0].dtype, tuple(out))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        values = list(a["values"])
        return [np.stack(values, axis=axis_of(a, "axis", values[0].ndim, extra=1))]


@register
class Split(OpDef):
    """Split ``x`` along ``axis`` into ``split_sizes`` pieces, or into ``num_splits`` equal pieces."""

    op_type = "split"

    def _sizes(self, a: InferArgs | EvalArgs, dim: Dim) -> list[Dim]:
        num, sizes = a.value("num_splits"), a.value("split_sizes")
        if sizes is not None:
            sizes = as_int_list(sizes)
            if num is not None and int(num) != len(sizes):
                raise a.fail(f"num_splits {int(num)} but split_sizes has {len(sizes)} entries")
            if not sizes or min(sizes) < 0:
                raise a.fail(f"split_sizes {sizes} must be non-empty and non-negative")
            if is_static_dim(dim) and sum(sizes) != int(dim):
                raise a.fail(f"split_sizes {sizes} sum to {sum(sizes)}, not the split dim {dim}")
            return list(sizes)
        if num is None:
            raise a.fail("one of num_splits and split_sizes is required")
        num = int(num)
        if num < 1:
            raise a.fail(f"num_splits {num} must be positive")
        if not is_static_dim(dim):  # the run-time split needs num to divide the size
            return [floordiv(dim, num)] * num
        if int(dim) % num:
            raise a.fail(f"num_splits {num} does not divide the split dim {dim}")
        return [int(dim) // num] * num

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        if x.shape is None:
            return [TensorType(x.dtype, None) for _ in self._sizes(a, fresh_symbol())]
        axis = axis_of(a, "axis", len(x.shape))
        return [TensorType(x.dtype, x.shape[:axis] + (s,) + x.shape[axis + 1:]) for s in self._sizes(a, x.shape[axis])]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = a["x"]
        axis = axis_of(a, "axis", x.ndim)
        sizes = self._sizes(a, x.shape[axis])
        return list(np.split(x, np.cumsum(sizes)[:-1], axis=axis))


@register
class Tile(OpDef):
    """Repeat ``x`` ``reps[i]`` times along dim i (``len(reps) == rank``, every rep >= 1 as in coremltools)."""

    op_type = "tile"

    def _reps(self, a: InferArgs | EvalArgs, reps: Any, rank: int) -> list[int]:
        reps = as_int_list(reps)
        if len(reps) != rank or min(reps, default=1) < 1:
            raise a.fail(f"reps {reps} must have {rank} entries, all >= 1")
        return reps

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        if x.shape is None:
            return [x]
        reps = a.value("reps")
        if reps is None:
            return [TensorType(x.dtype, tuple(a.new_symbol() for _ in x.shape))]
        reps = self._reps(a, reps, len(x.shape))
        return [TensorType(x.dtype, tuple(dims_product([d, r]) for d, r in zip(x.shape, reps)))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = a["x"]
        return [np.tile(x, self._reps(a, a["reps"], x.ndim))]


@register
class Flatten2d(OpDef):
    """``x`` as a matrix ``[prod(shape[:axis]), prod(shape[axis:])]``; ``-rank <= axis <= rank``,
    a negative axis counting from the end (``(3,)`` with axis -1 gives ``(1, 3)``)."""

    op_type = "flatten2d"

    def _axis(self, a: InferArgs | EvalArgs, rank: int) -> int:
        axis = int(np.asarray(a.value("axis")))
        norm = axis + rank if axis < 0 else axis
        if not 0 <= norm <= rank:
            raise a.fail(f"axis {axis} is out of range for rank {rank} (must be in [{-rank}, {rank}])")
        return norm

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        if x.shape is None:
            return [TensorType(x.dtype, (a.new_symbol(), a.new_symbol()))]
        axis = self._axis(a, len(x.shape))
        return [TensorType(x.dtype, (dims_product(x.shape[:axis]), dims_product(x.shape[axis:])))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = a["x"]
        axis = self._axis(a, x.ndim)
        return [x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))]


# ---------------------------------------------------------------------------------------------
# shapes and generated tensors


@register
class Shape(OpDef):
    """The shape of ``x`` as a 1-D int32 tensor of length ``rank(x)``."""

    op_type = "shape"

    def infer(self, a: InferArgs) -> list[Type]:
        rank = a.tensor_type("x").rank
        return [TensorType(int32, (a.new_symbol() if rank is None else rank,))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        return [np.array(np.shape(a["x"]), dtype=np.int32)]


def _shape_from_tensor(a: InferArgs, name: str) -> tuple | None:
    """Dims given by a 1-D int tensor: its values when constant, else fresh symbols of its length."""
    t = a.tensor_type(name)
    if t.rank is not None and t.rank != 1:
        raise a.fail(f"{name} must be 1-D, got {t}")
    v = a.value(name)
    if v is not None:
        dims = as_int_list(v)
        if min(dims, default=0) < 0:
            raise a.fail(f"{name} {dims} has a negative size")
        return tuple(dims)
    n = t.shape[0] if t.shape else None
    return tuple(a.new_symbol() for _ in range(int(n))) if n is not None and is_static_dim(n) else None


@register
class Fill(OpDef):
    """A tensor of shape ``shape`` (run-time values allowed) filled with ``value`` (default 0.0, fp32)."""

    op_type = "fill"

    def infer(self, a: InferArgs) -> list[Type]:
        return [TensorType(_value_dtype(a, "value", "fp32"), _shape_from_tensor(a, "shape"))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        return [np.full(as_int_list(a["shape"]), a["value"], dtype=a.out_types[0].dtype.storage)]


@register
class FillLike(OpDef):
    """A tensor shaped like ``ref_tensor`` filled with ``value``; its dtype is ``value``'s
    (default 0.0, fp32), as coremltools infers."""

    op_type = "fill_like"

    def infer(self, a: InferArgs) -> list[Type]:
        return [TensorType(_value_dtype(a, "value", "fp32"), a.tensor_type("ref_tensor").shape)]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        return [np.full(np.shape(a["ref_tensor"]), a["value"], dtype=a.out_types[0].dtype.storage)]


def _range_length(start: Any, end: Any, step: Any) -> int:
    """``max(0, ceil((end - start) / step))``: exact for integers, in float64 for floats."""
    start, end, step = (np.asarray(v).item() for v in (start, end, step))
    if step == 0:
        raise ValueError("range_1d step must not be 0")
    if all(isinstance(v, int) for v in (start, end, step)):
        return max(0, -((start - end) // step))
    q = (float(end) - float(start)) / float(step)
    if math.isnan(q) or (math.isinf(q) and q > 0):  # an infinite bound, or nan anywhere: no length
        raise ValueError(f"range_1d from {start} to {end} by {step} has no finite length")
    return max(0, math.ceil(q)) if math.isfinite(q) else 0


@register
class Range1d(OpDef):
    """``[start, start + step, ...]`` up to ``end`` (exclusive), like numpy.arange. Float values are
    ``start + i * step`` computed in float64 and rounded once to the dtype (as torch.arange does),
    not accumulated."""

    op_type = "range_1d"

    def infer(self, a: InferArgs) -> list[Type]:
        dt = a.tensor_type("start").dtype
        for name in ("start", "end", "step"):
            if a.tensor_type(name).shape not in (None, (), (1,)):
                raise a.fail(f"{name} must be a scalar, got {a.tensor_type(name)}")
        vals = [a.value(n) for n in ("start", "end", "step")]
        if any(v is None for v in vals):
            return [TensorType(dt, (a.new_symbol(),))]
        try:
            return [TensorType(dt, (_range_length(*vals),))]
        except ValueError as e:
            raise a.fail(str(e)) from None

    def evaluate(self, a: EvalArgs) -> list[Any]:
        start, end, step = a["start"], a["end"], a["step"]
        n = _range_length(start, end, step)
        storage = a.out_types[0].dtype.storage
        if storage.kind in "iu":
            return [(int(np.asarray(start).item()) + int(np.asarray(step).item()) * np.arange(n)).astype(storage)]
        s0, st = float(np.asarray(start).item()), float(np.asarray(step).item())
        return [(s0 + st * np.arange(n, dtype=np.float64)).astype(storage)]


@register
class OneHot(OpDef):
    """One-hot vectors of length ``one_hot_vector_size`` inserted at ``axis`` of the output:
    ``on_value`` where the position equals the index, ``off_value`` elsewhere. An index outside
    ``[0, size)``, negative ones included, gives an all-``off_value`` vector (the NeuralNetwork
    OneHot layer's documented rule; TF one_hot agrees; ONNX would wrap negatives). The dtype is
    that of on/off_value, int32 when both take their defaults (1 and 0), as in coremltools."""

    op_type = "one_hot"

    def _dtype(self, a: InferArgs | EvalArgs) -> DType:
        for name in ("on_value", "off_value"):
            t = a.type(name)
            if isinstance(t, TensorType):
                return t.dtype
        return int32

    def infer(self, a: InferArgs) -> list[Type]:
        indices = a.tensor_type("indices")
        depth_t = a.tensor_type("one_hot_vector_size")
        if depth_t.shape not in (None, (), (1,)):
            raise a.fail(f"one_hot_vector_size must be a scalar, got {depth_t}")
        depth = a.value("one_hot_vector_size")
        if depth is not None and int(np.asarray(depth).item()) < 0:
            raise a.fail(f"one_hot_vector_size {int(np.asarray(depth).item())} is negative")
        size: Dim = a.new_symbol() if depth is None else int(np.asarray(depth).item())
        if indices.shape is None:
            return [TensorType(self._dtype(a), None)]
        out = list(indices.shape)
        out.insert(axis_of(a, "axis", len(out), extra=1), size)
        return [TensorType(self._dtype(a), tuple(out))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        indices = np.asarray(a["indices"], np.int64)
        depth = int(np.asarray(a["one_hot_vector_size"]).item())
        storage = a.out_types[0].dtype.storage
        on = np.asarray(a["on_value"]).astype(storage)
        off = np.asarray(a["off_value"]).astype(storage)
        hot = np.where(indices[..., None] == np.arange(depth), on, off).astype(storage)
        return [np.moveaxis(hot, -1, axis_of(a, "axis", indices.ndim, extra=1))]


@register
class NonZero(OpDef):
    """Indices of the non-zero elements of ``x`` as an int32 ``[N, rank]`` tensor in row-major
    order (NaN counts as non-zero, -0.0 as zero). N is data dependent: a fresh symbol unless ``x``
    is a compile-time constant."""

    op_type = "non_zero"

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        v = a.value("x")
        n: Dim = int(np.count_nonzero(v)) if v is not None else a.new_symbol()
        return [TensorType(int32, (n, a.new_symbol() if x.rank is None else x.rank))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        return [np.argwhere(a["x"]).astype(np.int32)]


@register
class BandPart(OpDef):
    """Keep the band of each innermost matrix where ``(lower < 0 or m - n <= lower) and
    (upper < 0 or n - m <= upper)`` (m = row, n = column); zero elsewhere. "Zero" replaces the
    element (NaN outside the band becomes 0), as the doc's "setting everything outside to zeros"
    and ONNX Trilu do, rather than multiplying by the 0/1 band."""

    op_type = "band_part"

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        if x.rank is not None and x.rank < 2:
            raise a.fail(f"x must have rank >= 2, got {x}")
        return [x]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = a["x"]
        lower, upper = int(np.asarray(a["lower"])), int(np.asarray(a["upper"]))
        m = np.arange(x.shape[-2])[:, None]
        n = np.arange(x.shape[-1])[None, :]
        band = ((lower < 0) | (m - n <= lower)) & ((upper < 0) | (n - m <= upper))
        return [np.where(band, x, np.zeros((), x.dtype))]


@register
class Identity(OpDef):
    """``x`` unchanged: any value (tensor, list, dict)."""

    op_type = "identity"

    def infer(self, a: InferArgs) -> list[Type]:
        return [a.type("x")]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        return [a["x"]]


@register
class Select(OpDef):
    """``a`` where ``cond`` else ``b``, with numpy broadcasting of all three."""

    op_type = "select"

    def infer(self, a: InferArgs) -> list[Type]:
        cond, x, y = (a.tensor_type(n) for n in ("cond", "a", "b"))
        if None in (cond.shape, x.shape, y.shape):
            return [TensorType(x.dtype, None)]
        try:
            return [TensorType(x.dtype, broadcast_shapes(cond.shape, x.shape, y.shape))]
        except ShapeError as e:
            raise a.fail(str(e)) from None

    def evaluate(self, a: EvalArgs) -> list[Any]:
        return [np.where(a["cond"], a["a"], a["b"]).astype(a.out_types[0].dtype.storage, copy=False)]


# ---------------------------------------------------------------------------------------------
# non-maximum suppression


def _corners(boxes: np.ndarray) -> np.ndarray:
    """[B, 4] center-size (x, y, w, h) boxes as [B, 4] corners (x1, y1, x2, y2), in float32."""
    b = boxes.astype(np.float32)
    half = b[:, 2:] * np.float32(0.5)
    return np.concatenate([b[:, :2] - half, b[:, :2] + half], axis=1)


def _iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    """IoU of one corner box with each of ``others``; 0 where the union is empty."""
    lo = np.maximum(box[:2], others[:, :2])
    hi = np.minimum(box[2:], others[:, 2:])
    inter = np.prod(np.clip(hi - lo, 0, None), axis=1)
    area = np.prod(box[2:] - box[:2])
    areas = np.prod(others[:, 2:] - others[:, :2], axis=1)
    union = area + areas - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((union > 0) & (inter > 0), inter / union, np.float32(0))


def nms_select(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float, score_threshold: float | None,
               max_boxes: int, per_class: bool) -> list[int]:
    """Greedy NMS of one batch: box indices in descending score order.

    A box's score is its best class score; boxes scoring below ``score_threshold`` are dropped; a
    box is suppressed by an already selected box (of the same best class when ``per_class``) with
    IoU > ``iou_threshold``. Ties in score keep the lower index first.
    """
    best = scores.astype(np.float32).max(axis=1)
    cls = scores.argmax(axis=1)
    order = np.argsort(-best, kind="stable")
    if score_threshold is not None:
        order = order[best[order] >= score_threshold]
    corners = _corners(boxes)
    chosen: list[int] = []
    for i in order:
        if len(chosen) == max_boxes:
            break
        rivals = np.array([j for j in chosen if not per_class or cls[j] == cls[i]], dtype=np.int64)
        if rivals.size and (_iou(corners[i], corners[rivals]) > iou_threshold).any():
            continue
        chosen.append(int(i))
    return chosen


@register
class NonMaximumSuppression(OpDef):
    """Greedy NMS per batch over center-size boxes (``nms_select``), outputs padded to ``max_boxes``
    (boxes and scores with 0, indices with -1).

    iOS15: boxes ``[n, B, 4]``, scores ``[n, B, K]``; outputs boxes ``[n, max_boxes, 4]``, scores
    ``[n, max_boxes, K]``, indices ``[n, max_boxes]`` and the count ``[n]``. When no box passes
    ``score_threshold`` the best-scoring box is returned with count 1 (the NeuralNetwork NMS layer's
    documented rule, which coremltools' MIL tests also expect).
    iOS17: no score_threshold and no count output; boxes ``[n, 4, B]``, scores ``[n, K, B]`` and the
    outputs ``[n, 4, max_boxes]``, ``[n, K, max_boxes]``, ``[n, max_boxes]``.
    """

    op_type = "non_maximum_suppression"

    def _boxes_last(self) -> bool:
        return opset_index(self.signature.since) >= opset_index("iOS17")

    def infer(self, a: InferArgs) -> list[Type]:
        boxes, scores = a.tensor_type("boxes"), a.tensor_type("scores")
        max_boxes = int(np.asarray(a.value("max_boxes")).item())
        if max_boxes < 0:
            raise a.fail(f"max_boxes {max_boxes} is negative")
        for name, t in (("boxes", boxes), ("scores", scores)):
            if t.rank not in (None, 3):
                raise a.fail(f"{name} must have rank 3, got {t}")
        coord_axis, box_axis = (1, 2) if self._boxes_last() else (2, 1)
        if boxes.shape is not None:
            c = boxes.shape[coord_axis]
            if is_static_dim(c) and int(c) != 4:
                raise a.fail(f"boxes must have 4 coordinates along axis {coord_axis}, got {boxes}")
        n: Dim = a.new_symbol()
        k: Dim = a.new_symbol()
        if boxes.shape is not None and scores.shape is not None:
            try:
                n = merge_dims([boxes.shape[0], scores.shape[0]], "batch")
                merge_dims([boxes.shape[box_axis], scores.shape[box_axis]], "box count")
            except ShapeError as e:
                raise a.fail(str(e)) from None
        elif scores.shape is not None:
            n = scores.shape[0]
        if scores.shape is not None:
            k = scores.shape[coord_axis]
        idx = TensorType(int32, (n, max_boxes))
        if self._boxes_last():
            return [TensorType(boxes.dtype, (n, 4, max_boxes)), TensorType(scores.dtype, (n, k, max_boxes)), idx]
        return [TensorType(boxes.dtype, (n, max_boxes, 4)), TensorType(scores.dtype, (n, max_boxes, k)), idx,
                TensorType(int32, (n,))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        boxes, scores = a["boxes"], a["scores"]
        if self._boxes_last():
            boxes, scores = boxes.transpose(0, 2, 1), scores.transpose(0, 2, 1)
        iou = float(np.asarray(a["iou_threshold"]).item())
        score_thr = None if self._boxes_last() else float(np.asarray(a["score_threshold"]).item())
        max_boxes = int(np.asarray(a["max_boxes"]).item())
        per_class = bool(a["per_class_suppression"])
        n, _, k = scores.shape
        out_boxes = np.zeros((n, max_boxes, 4), boxes.dtype)
        out_scores = np.zeros((n, max_boxes, k), scores.dtype)
        out_idx = np.full((n, max_boxes), -1, np.int32)
        count = np.zeros((n,), np.int32)
        for b in range(n):
            chosen = nms_select(boxes[b], scores[b], iou, score_thr, max_boxes, per_class)
            if not chosen and score_thr is not None and scores.shape[1] and max_boxes:
                chosen = [int(np.argmax(scores[b].astype(np.float32).max(axis=1)))]
            out_boxes[b, :len(chosen)] = boxes[b, chosen]
            out_scores[b, :len(chosen)] = scores[b, chosen]
            out_idx[b, :len(chosen)] = chosen
            count[b] = len(chosen)
        if self._boxes_last():
            return [out_boxes.transpose(0, 2, 1), out_scores.transpose(0, 2, 1), out_idx]
        return [out_boxes, out_scores, out_idx, count]

