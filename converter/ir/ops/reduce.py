"""Reductions and other ops along axes: reduce_*, reduce_argmax/argmin, cumsum, topk, argsort.

Shared conventions (MIL's, as coremltools defines them):

- ``axes`` None reduces every axis; an empty ``axes`` list reduces none, so the op degenerates to
  its elementwise part (``reduce_l1_norm`` -> ``abs``, ``reduce_sum_square`` -> ``square``,
  ``reduce_mean`` -> identity), as numpy's ``axis=()``, ONNX's ``noop_with_empty_axes=1`` and
  WebNN's ``axes: []`` do. Negative axes count from the end; a repeated axis is an error.
- Accumulation: fp16 and fp32 inputs are computed in fp32 and rounded to the output dtype once at
  the end (fp16 sums of many terms would otherwise lose most of their bits). int32 inputs of
  sum/prod/sum_square/l1_norm use exact integer arithmetic wrapping modulo 2**32 (as numpy, torch
  and coremltools' value inference do; onnxruntime saturates instead); the real-valued ones (mean,
  l2_norm, log_sum, log_sum_exp) are computed in fp64 and truncated toward zero, as coremltools'
  value inference does (saturating, NaN -> int32 min).
- NaN propagates through every reduction; sums of -0.0 are -0.0 (IEEE). Max/min of an empty set are -inf/+inf (the int32
  range ends for int32), log_sum(_exp) of an empty set is -inf, sums 0 and products 1 (ONNX's
  identities; mean is NaN). Arg-reductions over an empty axis are an error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..opdef import EvalArgs, InferArgs, OpDef, register
from ..shapes import ShapeError, normalize_axes, normalize_axis
from ..types import DType, TensorType, Type, dtype, int32, is_static_dim
from ._util import as_int_list

# Index dtypes the iOS17 ``output_dtype`` / ``output_indices_dtype`` parameters may name.
_INDEX_DTYPES = ("int32", "uint16")


def _axes_or_fail(a: InferArgs | EvalArgs, axes: Any, rank: int) -> list[int]:
    try:
        return normalize_axes(as_int_list(axes), rank)
    except ShapeError as e:
        raise a.fail(str(e)) from None


def _axis_or_fail(a: InferArgs | EvalArgs, axis: Any, rank: int) -> int:
    try:
        return normalize_axis(int(np.asarray(axis)), rank)
    except ShapeError as e:
        raise a.fail(str(e)) from None


def _static_axis(a: InferArgs, rank: int) -> int | None:
    """The normalized ``axis``; None when a non-const op computes it (known only after folding)."""
    axis = a.value("axis")
    return None if axis is None else _axis_or_fail(a, axis, rank)


def _reduced_shape(shape: tuple, axes: list[int], keep_dims: bool) -> tuple:
    if keep_dims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _index_dtype(a: InferArgs, name: str) -> DType:
    """The dtype named by an iOS17 index-dtype parameter (int32 before iOS17)."""
    if name not in a.opdef.signature.inputs:
        return int32
    value = a.value(name)
    if value is None:
        raise a.fail(f"'{name}' must be a compile-time string")
    text = str(np.asarray(value)).lower()
    if text not in _INDEX_DTYPES:
        raise a.fail(f"'{name}' must be one of {', '.join(_INDEX_DTYPES)}, got '{text}'")
    return dtype(text)


# ---------------------------------------------------------------------------------------------
# reduce_* over a set of axes


def _sum(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    # A non-empty float sum starts from -0.0, the IEEE additive identity, so that a sum of -0.0s
    # stays -0.0 (numpy's pairwise summation would start from +0.0); an empty sum is +0.0.
    nonempty = all(x.shape[i] for i in axes)
    return np.sum(x, axis=axes, keepdims=keep, initial=-0.0 if x.dtype.kind == "f" and nonempty else 0)


def _mean(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    count = int(np.prod([x.shape[i] for i in axes]))  # 0 for an empty set: 0 / 0 = NaN
    return _sum(x, axes, keep) / count


def _max(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    lowest = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    return np.max(x, axis=axes, keepdims=keep, initial=lowest)


def _min(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    highest = np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).max
    return np.min(x, axis=axes, keepdims=keep, initial=highest)


def _log_sum_exp(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    # Shift by the (finite) maximum so exp() neither overflows nor underflows; an infinite or NaN
    # maximum is not subtracted (inf - inf would turn +inf or all -inf inputs into NaN).
    m = np.max(x, axis=axes, keepdims=True, initial=-np.inf)
    shift = np.where(np.isfinite(m), m, 0.0)
    s = np.log(_sum(np.exp(x - shift), axes, True)) + shift
    return s if keep else np.squeeze(s, axis=axes)


_KERNELS: dict[str, Callable[[np.ndarray, tuple[int, ...], bool], np.ndarray]] = {
    "reduce_sum": _sum,
    "reduce_prod": lambda x, ax, k: np.prod(x, axis=ax, keepdims=k),
    "reduce_mean": _mean,
    "reduce_max": _max,
    "reduce_min": _min,
    "reduce_l1_norm": lambda x, ax, k: _sum(np.abs(x), ax, k),
    "reduce_l2_norm": lambda x, ax, k: np.sqrt(_sum(x * x, ax, k)),
    "reduce_sum_square": lambda x, ax, k: _sum(x * x, ax, k),
    "reduce_log_sum": lambda x, ax, k: np.log(_sum(x, ax, k)),
    "reduce_log_sum_exp": _log_sum_exp,
}

# Ops whose result is not an integer for integer inputs: computed in fp64, truncated (see module doc).
_REAL_VALUED = frozenset({"reduce_mean", "reduce_l2_norm", "reduce_log_sum", "reduce_log_sum_exp"})


class _ReduceAxes(OpDef):
    """Reduction over ``axes`` (None = all) with optional ``keep_dims``; output dtype = input dtype."""

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        keep = a.value("keep_dims")
        axes = a.value("axes")
        if (a.has("axes") and axes is None) or keep is None:
            return [TensorType(x.dtype, None)]  # axes/keep_dims computed by a constexpr op
        if x.shape is None:
            return [TensorType(x.dtype, () if axes is None and not keep else None)]
        rank = len(x.shape)
        axes_n = list(range(rank)) if axes is None else _axes_or_fail(a, axes, rank)
        return [TensorType(x.dtype, _reduced_shape(x.shape, axes_n, bool(keep)))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = a["x"]
        axes = a.value("axes")
        axes_n = tuple(range(x.ndim)) if axes is None else tuple(_axes_or_fail(a, axes, x.ndim))
        if self.op_type in ("reduce_max", "reduce_min"):
            work = x  # exact in any dtype
        elif x.dtype.kind == "f":
            work = x.astype(np.float32)
        else:
            work = x.astype(np.float64 if self.op_type in _REAL_VALUED else np.int64)
        with np.errstate(all="ignore"):
            r = np.asarray(_KERNELS[self.op_type](work, axes_n, bool(a.value("keep_dims"))))
            if x.dtype.kind != "f" and r.dtype.kind == "f":
                r = _truncate_to_int(r, x.dtype)
            return [r.astype(a.out_types[0].dtype.storage)]


def _truncate_to_int(r: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Round toward zero and saturate; NaN becomes the lowest value (onnxruntime's and x86's
    answer, made explicit because a float-to-int cast of NaN or out-of-range values is undefined)."""
    lo, hi = np.iinfo(dt).min, np.iinfo(dt).max
    return np.where(np.isnan(r), lo, np.clip(np.trunc(r), lo, hi)).astype(dt)


def _reduce(op_type: str, doc: str) -> type[OpDef]:
    cls = type(op_type.title().replace("_", ""), (_ReduceAxes,), {"op_type": op_type, "__doc__": doc})
    return register(cls)


_reduce("reduce_sum", "Sum over ``axes``.")
_reduce("reduce_prod", "Product over ``axes`` (int32 wraps modulo 2**32).")
_reduce("reduce_mean", "Arithmetic mean over ``axes`` (int32: truncated toward zero).")
_reduce("reduce_max", "Maximum over ``axes``; NaN propagates.")
_reduce("reduce_min", "Minimum over ``axes``; NaN propagates.")
_reduce("reduce_l1_norm", "Sum of absolute values over ``axes``.")
_reduce("reduce_l2_norm", "sqrt(sum(x**2)) over ``axes``.")
_reduce("reduce_sum_square", "sum(x**2) over ``axes``.")
_reduce("reduce_log_sum", "log(sum(x)) over ``axes``.")
_reduce("reduce_log_sum_exp", "log(sum(exp(x))) over ``axes``, computed as max + log(sum(exp(x - max))).")


# ---------------------------------------------------------------------------------------------
# reduce_argmax / reduce_argmin


class _ReduceArg(OpDef):
    """Index of the extreme value along ``axis``.

    MIL leaves ties unspecified; this kernel returns the first index (numpy, coremltools' value
    inference, ONNX ``select_last_index=0``). NaN counts as the extreme: the first NaN wins.
    iOS17 adds ``output_dtype`` (int32 or uint16).
    """

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        out_dt = _index_dtype(a, "output_dtype")
        keep = a.value("keep_dims")
        if x.shape is None or keep is None:
            return [TensorType(out_dt, None)]
        if not x.shape:
            raise a.fail(f"{self.op_type} needs an input of rank >= 1, got a scalar")
        axis = _static_axis(a, len(x.shape))
        if axis is None:
            return [TensorType(out_dt, None)]
        if x.shape[axis] == 0:
            raise a.fail(f"{self.op_type} over axis {axis} of size 0 has no answer")
        return [TensorType(out_dt, _reduced_shape(x.shape, [axis], bool(keep)))]

    def kernel(self, x: np.ndarray, axis: int) -> np.ndarray:
        raise NotImplementedError

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = a["x"]
        axis = _axis_or_fail(a, a.value("axis"), x.ndim)
        idx = self.kernel(x, axis)
        if a.value("keep_dims"):
            idx = np.expand_dims(idx, axis)
        return [np.asarray(idx).astype(a.out_types[0].dtype.storage)]


@register
class ReduceArgmax(_ReduceArg):
    __doc__ = _ReduceArg.__doc__
    op_type = "reduce_argmax"

    def kernel(self, x: np.ndarray, axis: int) -> np.ndarray:
        return np.argmax(x, axis=axis)


@register
class ReduceArgmin(_ReduceArg):
    __doc__ = _ReduceArg.__doc__
    op_type = "reduce_argmin"

    def kernel(self, x: np.ndarray, axis: int) -> np.ndarray:
        return np.argmin(x, axis=axis)


# ---------------------------------------------------------------------------------------------
# cumsum


@register
class Cumsum(OpDef):
    """Cumulative sum along ``axis``; ``exclusive`` starts from 0, ``reverse`` runs from the end.

    Any axis in [-rank, rank) is accepted (coremltools' checker allows only -1 among negative axes,
    an artefact its docs do not state). fp16 accumulates in fp32 and rounds each output once;
    int32 wraps modulo 2**32.
    """

    op_type = "cumsum"

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        if x.shape is not None:
            if not x.shape:
                raise a.fail("cumsum needs an input of rank >= 1, got a scalar")
            _static_axis(a, len(x.shape))
        return [x]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = a["x"]
        axis = _axis_or_fail(a, a.value("axis"), x.ndim)
        work = x.astype(np.float32 if x.dtype.kind == "f" else np.int64)
        if a.value("reverse"):
            work = np.flip(work, axis)
        out = np.cumsum(work, axis=axis)
        if a.value("exclusive"):
            # Shift by one along the axis: out[i] = sum of the elements strictly before i.
            head = np.zeros_like(np.take(out, [0], axis=axis))
            out = np.concatenate([head, np.delete(out, -1, axis=axis)], axis=axis)
        if a.value("reverse"):
            out = np.flip(out, axis)
        return [out.astype(x.dtype)]


# ---------------------------------------------------------------------------------------------
# topk / argsort


def _stable_order(x: np.ndarray, axis: int, ascending: bool) -> np.ndarray:
    """Indices sorting ``x`` along ``axis``; equal values keep their index order in both directions.

    Descending order sorts the negation (widened for integers, exact for floats) so that ties
    still come out lowest index first, as ONNX TopK specifies. NaN sorts after every number in
    both directions (numpy's order, and what coremltools' value inference does via argsort(-x)).
    """
    key = x if ascending else (-x if x.dtype.kind == "f" else -x.astype(np.int64))
    return np.argsort(key, axis=axis, kind="stable")


@register
class Topk(OpDef):
    """The ``k`` largest (or, with ``ascending``, smallest) values along ``axis`` and their indices.

    Ties keep index order (see ``_stable_order``). iOS16 adds ``sort`` (False leaves the order
    unspecified; this kernel always sorts, which is one valid order) and ``return_indices``
    (False drops the second output). iOS17 adds small-integer dtypes, ``k = -1`` for the whole
    axis and ``output_indices_dtype`` (int32 or uint16; only with ``return_indices``).
    """

    op_type = "topk"

    def _returns_indices(self, a: InferArgs | EvalArgs) -> bool:
        return "return_indices" not in self.signature.inputs or bool(a.value("return_indices"))

    def _k(self, a: InferArgs | EvalArgs, size: Any) -> Any:
        """The output size along ``axis`` (a fresh symbol when k is not a literal yet)."""
        if a.value("k") is None:
            return a.new_symbol()
        k = int(np.asarray(a.value("k")))
        if k == -1 and "output_indices_dtype" in self.signature.inputs:
            return size
        if k < 0:
            raise a.fail(f"k must be >= 0, got {k}")
        if is_static_dim(size) and k > int(size):
            raise a.fail(f"k = {k} is larger than the axis size {size}")
        return k

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        returns_indices = self._returns_indices(a)
        if not returns_indices and a.has("output_indices_dtype"):
            raise a.fail("'output_indices_dtype' may only be set when return_indices is True")
        idx_dt = _index_dtype(a, "output_indices_dtype") if returns_indices else int32
        if x.shape is not None and not x.shape:
            raise a.fail("topk needs an input of rank >= 1, got a scalar")
        axis = None if x.shape is None else _static_axis(a, len(x.shape))
        shape = None
        if axis is not None:
            shape = x.shape[:axis] + (self._k(a, x.shape[axis]),) + x.shape[axis + 1:]
        values = TensorType(x.dtype, shape)
        return [values, TensorType(idx_dt, shape)] if returns_indices else [values]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = a["x"]
        axis = _axis_or_fail(a, a.value("axis"), x.ndim)
        k = self._k(a, x.shape[axis])
        order = _stable_order(x, axis, bool(a.value("ascending")))
        idx = np.take(order, np.arange(k), axis=axis)
        values = np.take_along_axis(x, idx, axis=axis)
        if not self._returns_indices(a):
            return [values]
        return [values, idx.astype(a.out_types[1].dtype.storage)]


@register
class Argsort(OpDef):
    """Indices that sort ``x`` along ``axis`` (descending unless ``ascending``); ties keep index order."""

    op_type = "argsort"

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        if x.shape is not None:
            if not x.shape:
                raise a.fail("argsort needs an input of rank >= 1, got a scalar")
            _static_axis(a, len(x.shape))
        return [TensorType(int32, x.shape)]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = a["x"]
        axis = _axis_or_fail(a, a.value("axis"), x.ndim)
        return [_stable_order(x, axis, bool(a.value("ascending"))).astype(np.int32)]
