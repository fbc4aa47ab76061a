"""Gather and scatter: gather, gather_along_axis, gather_nd, scatter, scatter_along_axis, scatter_nd.

Index range by opset: up to iOS16 an index may be negative and counts from the end
(``-size <= i < size``); from iOS17 only ``0 <= i < size`` is in range (the MIL doc calls negative
indices out of bounds). An out-of-range index makes evaluate() raise: Core ML raises too when
``validate_indices`` is set, and its behaviour is undefined otherwise, so the reference kernel
refuses rather than invent a value. With ``validate_indices`` and constant indices, infer()
rejects out-of-range values at compile time, as coremltools does.

Scatter modes (update, add, sub, mul, div, max, min) apply the updates one after another in
row-major order of ``updates``, as the MIL doc's sequential definition reads: with duplicate
indices the last update wins in ``update`` mode and the others accumulate (``sub`` subtracts each
update, ``div`` divides by each; integer ``div`` truncates each quotient toward zero, like
real_div on int32).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...errors import EvaluationError
from ..opdef import EvalArgs, InferArgs, OpDef, opset_index, register
from ..shapes import ShapeError
from ..types import Dim, TensorType, Type, is_static_dim
from .tensor_transform import axis_of, merge_dims

_MODES = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.true_divide,
    "max": np.maximum,
    "min": np.minimum,
}


class _Indexed(OpDef):
    """Index validation shared by the gather and scatter ops."""

    def _negative_ok(self) -> bool:
        return opset_index(self.signature.since) < opset_index("iOS17")

    def _in_range(self, idx: np.ndarray, size: Any) -> np.ndarray:
        lo = -np.asarray(size) if self._negative_ok() else 0
        return (idx >= lo) & (idx < size)

    def indices(self, idx: Any, size: Any) -> np.ndarray:
        """``idx`` as non-negative int64 positions (``size`` broadcasts against it)."""
        idx = np.asarray(idx, np.int64)
        ok = self._in_range(idx, size)
        if not ok.all():
            bad = idx[~ok][:5].tolist()
            allowed = "[-size, size)" if self._negative_ok() else "[0, size) (negative indices are out of range from iOS17)"
            raise EvaluationError(f"indices {bad} out of range for size {np.asarray(size).tolist()}; allowed {allowed}")
        return np.where(idx < 0, idx + size, idx)

    def check_const_indices(self, a: InferArgs, size: Any) -> None:
        """With validate_indices, reject constant out-of-range indices (static sizes only)."""
        if "validate_indices" not in self.signature.inputs or not bool(a.value("validate_indices")):
            return
        idx = a.value("indices")
        sizes = np.atleast_1d(np.asarray(size, dtype=object))
        if idx is None or not all(is_static_dim(s) for s in sizes):
            return
        size_arr = np.asarray([int(s) for s in sizes]).reshape(np.shape(size))
        if not self._in_range(np.asarray(idx, np.int64), size_arr).all():
            raise a.fail(f"validate_indices: constant indices out of range [0, {np.asarray(size).tolist()})")


def _compatible(a: InferArgs, what: str, got: tuple | None, want: tuple | None) -> None:
    if got is None or want is None:
        return
    if len(got) != len(want) or any(is_static_dim(g) and is_static_dim(w) and int(g) != int(w)
                                    for g, w in zip(got, want)):
        raise a.fail(f"{what} has shape {[str(d) for d in got]}, expected {[str(d) for d in want]}")


def _merged(a: InferArgs, xs: tuple, ys: tuple, what: str) -> list[Dim]:
    try:
        return [merge_dims([x, y], what) for x, y in zip(xs, ys)]
    except ShapeError as e:
        raise a.fail(str(e)) from None


# ---------------------------------------------------------------------------------------------
# gathers


@register
class Gather(_Indexed):
    """``x`` indexed along ``axis`` by ``indices``; output shape
    ``x.shape[:axis] + indices.shape[batch_dims:] + x.shape[axis+1:]``. With ``batch_dims`` (iOS16+)
    the leading dims of ``x`` and ``indices`` are paired, as in tf.gather."""

    op_type = "gather"

    def _batch_dims(self, a: InferArgs | EvalArgs, idx_rank: int, axis: int) -> int:
        if "batch_dims" not in self.signature.inputs:
            return 0
        b = int(np.asarray(a.value("batch_dims")))
        b = b + idx_rank if b < 0 else b
        if not 0 <= b <= min(axis, idx_rank):
            raise a.fail(f"batch_dims {b} must be in [0, min(axis {axis}, rank(indices) {idx_rank})]")
        return b

    def infer(self, a: InferArgs) -> list[Type]:
        x, ind = a.tensor_type("x"), a.tensor_type("indices")
        if x.shape is None or ind.shape is None:
            return [TensorType(x.dtype, None)]
        axis = axis_of(a, "axis", len(x.shape))
        b = self._batch_dims(a, len(ind.shape), axis)
        batch = _merged(a, x.shape[:b], ind.shape[:b], "batch dim")
        self.check_const_indices(a, x.shape[axis])
        return [TensorType(x.dtype, tuple(batch) + x.shape[b:axis] + ind.shape[b:] + x.shape[axis + 1:])]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = a["x"]
        axis = axis_of(a, "axis", x.ndim)
        idx = self.indices(a["indices"], x.shape[axis])
        b = self._batch_dims(a, idx.ndim, axis)
        if b == 0:
            return [np.take(x, idx, axis=axis)]
        out_shape = x.shape[:axis] + idx.shape[b:] + x.shape[axis + 1:]
        nb = math.prod(x.shape[:b])
        xs = x.reshape((nb,) + x.shape[b:])
        ids = idx.reshape((nb,) + idx.shape[b:])
        parts = [np.take(xs[i], ids[i], axis=axis - b) for i in range(nb)]
        return [np.stack(parts).reshape(out_shape) if parts else np.empty(out_shape, x.dtype)]


@register
class GatherAlongAxis(_Indexed):
    """``out[..., i, ...] = x[..., indices[..., i, ...], ...]`` along ``axis``; ``indices`` has the
    rank of ``x`` and its size in every other dim (output shape = indices shape)."""

    op_type = "gather_along_axis"

    def infer(self, a: InferArgs) -> list[Type]:
        x, ind = a.tensor_type("x"), a.tensor_type("indices")
        if x.shape is None or ind.shape is None:
            return [TensorType(x.dtype, ind.shape)]
        if len(x.shape) != len(ind.shape):
            raise a.fail(f"indices has rank {len(ind.shape)}, x has rank {len(x.shape)}")
        axis = axis_of(a, "axis", len(x.shape))
        out = _merged(a, x.shape[:axis] + x.shape[axis + 1:], ind.shape[:axis] + ind.shape[axis + 1:], "non-axis dim")
        out.insert(axis, ind.shape[axis])
        self.check_const_indices(a, x.shape[axis])
        return [TensorType(x.dtype, tuple(out))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = a["x"]
        axis = axis_of(a, "axis", x.ndim)
        return [np.take_along_axis(x, self.indices(a["indices"], x.shape[axis]), axis=axis)]


@register
class GatherNd(_Indexed):
    """Each row ``indices[..., :]`` (length k) picks ``x[row]``: output shape
    ``indices.shape[:-1] + x.shape[batch_dims + k:]``; with ``batch_dims`` (iOS16+) the leading dims
    of ``x`` and ``indices`` are paired."""

    op_type = "gather_nd"

    def _batch_dims(self, a: InferArgs | EvalArgs) -> int:
        return int(np.asarray(a.value("batch_dims"))) if "batch_dims" in self.signature.inputs else 0

    def infer(self, a: InferArgs) -> list[Type]:
        x, ind = a.tensor_type("x"), a.tensor_type("indices")
        b = self._batch_dims(a)
        if x.shape is None or ind.shape is None or not ind.shape or not is_static_dim(ind.shape[-1]):
            return [TensorType(x.dtype, None)]
        k = int(ind.shape[-1])
        if b < 0 or b + k > len(x.shape) or b >= len(ind.shape):
            raise a.fail(f"batch_dims {b} + index length {k} must be <= rank(x) {len(x.shape)}, "
                         f"and batch_dims < rank(indices) {len(ind.shape)}")
        batch = _merged(a, x.shape[:b], ind.shape[:b], "batch dim")
        self.check_const_indices(a, x.shape[b:b + k])
        return [TensorType(x.dtype, tuple(batch) + ind.shape[b:-1] + x.shape[b + k:])]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x, ind = a["x"], np.asarray(a["indices"])
        b, k = self._batch_dims(a), ind.shape[-1]
        idx = self.indices(ind, np.asarray(x.shape[b:b + k], np.int64))
        out_shape = ind.shape[:-1] + x.shape[b + k:]
        nb, rows = math.prod(x.shape[:b]), math.prod(ind.shape[b:-1])
        xs = x.reshape((nb,) + x.shape[b:])
        flat = idx.reshape(nb, rows, k)
        picked = xs[(np.arange(nb)[:, None],) + tuple(flat[..., j] for j in range(k))]
        return [np.broadcast_to(picked, (nb, rows) + x.shape[b + k:]).reshape(out_shape)]


# ---------------------------------------------------------------------------------------------
# scatters


class _Scatter(_Indexed):
    """Shared kernel: apply ``updates`` to positions of a copy of ``data`` under ``mode``."""

    def _mode(self, a: InferArgs | EvalArgs) -> str:
        mode = str(np.asarray(a.value("mode")))
        if mode != "update" and mode not in _MODES:
            raise a.fail(f"mode '{mode}' is not one of update, {', '.join(_MODES)}")
        return mode

    def destinations(self, a: EvalArgs, data: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """Flat positions in ``data`` of each element of ``updates`` (row-major)."""
        raise NotImplementedError

    def evaluate(self, a: EvalArgs) -> list[Any]:
        data, updates = a["data"], np.asarray(a["updates"])
        dest = self.destinations(a, data, np.asarray(a["indices"])).reshape(-1)
        vals = updates.reshape(-1)
        out = data.copy().reshape(-1)
        mode = self._mode(a)
        if mode == "update":
            last = len(dest) - 1 - np.unique(dest[::-1], return_index=True)[1]
            out[dest[last]] = vals[last]
        elif mode == "div" and out.dtype.kind in "iu":
            for d, v in zip(dest.tolist(), vals.tolist()):
                out[d] = int(int(out[d]) / v)
        else:
            with np.errstate(all="ignore"):
                _MODES[mode].at(out, dest, vals)
        return [out.reshape(data.shape)]


@register
class Scatter(_Scatter):
    """``data`` with slices ``updates[..., i, ...]`` applied at ``data[..., indices[i], ...]`` along
    ``axis``; ``indices`` is 1-D and ``updates.shape = data.shape[:axis] + [len(indices)] +
    data.shape[axis+1:]``."""

    op_type = "scatter"

    def infer(self, a: InferArgs) -> list[Type]:
        data, ind, upd = (a.tensor_type(n) for n in ("data", "indices", "updates"))
        self._mode(a)
        if ind.rank not in (None, 1):
            raise a.fail(f"indices must be 1-D, got {ind}")
        if data.shape is not None:
            axis = axis_of(a, "axis", len(data.shape))
            if ind.shape is not None:
                _compatible(a, "updates", upd.shape, data.shape[:axis] + ind.shape + data.shape[axis + 1:])
            self.check_const_indices(a, data.shape[axis])
        return [data]

    def destinations(self, a: EvalArgs, data: np.ndarray, idx: np.ndarray) -> np.ndarray:
        axis = axis_of(a, "axis", data.ndim)
        upd_shape = data.shape[:axis] + idx.shape + data.shape[axis + 1:]
        if np.shape(a["updates"]) != upd_shape:
            raise EvaluationError(f"updates has shape {list(np.shape(a['updates']))}, expected {list(upd_shape)}")
        coords = np.indices(upd_shape)
        coords[axis] = self.indices(idx, data.shape[axis])[coords[axis]]
        return np.ravel_multi_index(tuple(coords), data.shape)


@register
class ScatterAlongAxis(_Scatter):
    """``out[..., indices[..., i, ...], ...] (mode)= updates[..., i, ...]`` along ``axis``;
    ``indices`` and ``updates`` share a shape of the rank of ``data``, equal to it off ``axis``."""

    op_type = "scatter_along_axis"

    def infer(self, a: InferArgs) -> list[Type]:
        data, ind, upd = (a.tensor_type(n) for n in ("data", "indices", "updates"))
        self._mode(a)
        _compatible(a, "updates", upd.shape, ind.shape)
        if data.shape is not None and ind.shape is not None:
            axis = axis_of(a, "axis", len(data.shape))
            _compatible(a, "indices", ind.shape, data.shape[:axis] + (ind.shape[axis],) + data.shape[axis + 1:])
            self.check_const_indices(a, data.shape[axis])
        return [data]

    def destinations(self, a: EvalArgs, data: np.ndarray, idx: np.ndarray) -> np.ndarray:
        axis = axis_of(a, "axis", data.ndim)
        if np.shape(a["updates"]) != idx.shape:
            raise EvaluationError(f"updates has shape {list(np.shape(a['updates']))}, indices {list(idx.shape)}")
        coords = np.indices(idx.shape)
        coords[axis] = self.indices(idx, data.shape[axis])
        return np.ravel_multi_index(tuple(coords), data.shape)


@register
class ScatterNd(_Scatter):
    """Each row ``indices[..., :]`` (length k) addresses the slice ``data[row]``, updated by
    ``updates[...]``; ``updates.shape = indices.shape[:-1] + data.shape[k:]``."""

    op_type = "scatter_nd"

    def infer(self, a: InferArgs) -> list[Type]:
        data, ind, upd = (a.tensor_type(n) for n in ("data", "indices", "updates"))
        self._mode(a)
        if data.shape is not None and ind.shape and is_static_dim(ind.shape[-1]):
            k = int(ind.shape[-1])
            if k > len(data.shape):
                raise a.fail(f"index length {k} exceeds rank(data) {len(data.shape)}")
            _compatible(a, "updates", upd.shape, ind.shape[:-1] + data.shape[k:])
            self.check_const_indices(a, data.shape[:k])
        return [data]

    def destinations(self, a: EvalArgs, data: np.ndarray, idx: np.ndarray) -> np.ndarray:
        k = idx.shape[-1]
        want = idx.shape[:-1] + data.shape[k:]
        if np.shape(a["updates"]) != want:
            raise EvaluationError(f"updates has shape {list(np.shape(a['updates']))}, expected {list(want)}")
        rows = self.indices(idx, np.asarray(data.shape[:k], np.int64))
        lead = np.ravel_multi_index(tuple(np.moveaxis(rows, -1, 0)), data.shape[:k]) if k else np.zeros(
            idx.shape[:-1], np.int64)
        tail = math.prod(data.shape[k:])
        return lead[..., None] * tail + np.arange(tail)
