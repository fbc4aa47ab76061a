"""Tensor transformations: reshape, reshape_like, transpose, squeeze, expand_dims, slicing
(slice_by_index, slice_by_size, slice_update), reverse, reverse_sequence.

Shape inference follows coremltools' type inference wherever it is sound, because coremltools
re-infers the types of every program we emit: ranks must agree with it. Where coremltools guesses
a static size for a symbolic dimension (``x[0:2]`` on an unknown dim is *not* always 2) we give a
fresh symbol instead, unless the size is the same for every value the symbol may take.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..opdef import EvalArgs, InferArgs, OpDef, opset_index, register
from ..shapes import ShapeError, dim_prod, normalize_axes, normalize_axis
from ..symexpr import ceildiv, exact_quotient, floordiv
from ..types import Dim, Symbol, TensorType, Type, fresh_symbol, is_static_dim, num_elements
from ._util import as_int_list

_UNKNOWN: Any = object()  # a slice bound not known at compile time
_MAX_DIM = 2**31 - 1  # MIL sizes are int32 (the shape op returns int32)


def axis_of(a: InferArgs | EvalArgs, name: str, rank: int, *, extra: int = 0) -> int:
    """The const axis parameter ``name`` normalised to [0, rank + extra); fails with the op's name."""
    try:
        return normalize_axis(int(np.asarray(a.value(name))), rank + extra, what=name)
    except ShapeError as e:
        raise a.fail(str(e)) from None


def dims_product(dims: Any) -> Dim:
    """Product of dims: 0 if any static dim is 0, else an int or an expression of the symbols."""
    dims = list(dims)
    if any(is_static_dim(d) and int(d) == 0 for d in dims):
        return 0
    return dim_prod(dims)


def merge_dims(dims: list[Dim], what: str) -> Dim:
    """One dim for sizes that must be equal at run time: the static one if any (statics must
    agree), else the first symbol."""
    statics = {int(d) for d in dims if is_static_dim(d)}
    if len(statics) > 1:
        raise ShapeError(f"{what}: sizes {sorted(statics)} differ")
    return statics.pop() if statics else dims[0]


def _bool_mask(a: InferArgs | EvalArgs, name: str, rank: int) -> list[bool]:
    v = a.value(name)
    if v is None:
        return [False] * rank
    mask = [bool(m) for m in np.asarray(v).reshape(-1)]
    if len(mask) != rank:
        raise a.fail(f"{name} has {len(mask)} entries for a rank-{rank} input")
    return mask


# ---------------------------------------------------------------------------------------------
# reshape


def resolve_reshape(x_dims: tuple | None, target: list[int], right_aligned_zeros: bool,
                    fail: Callable[[str], Exception]) -> list[Dim]:
    """Output dims of a reshape of ``x_dims`` (None = unknown rank) to ``target``.

    ``0`` copies a dim of ``x``: the dim at the same index before iOS17 (then ``len(target)`` must
    equal the rank), counted from the right from iOS17 (a 0 with no matching dim gives 1).
    ``-1`` takes whatever size keeps the element count (at most one ``-1``).
    """
    if target.count(-1) > 1:
        raise fail(f"shape {target} has more than one -1")
    if any(t < -1 for t in target):
        raise fail(f"shape {target} has a negative size other than -1")
    out: list[Dim] = list(target)
    if 0 in target:
        if x_dims is None:
            out = [fresh_symbol() if t == 0 else t for t in out]
        elif right_aligned_zeros:
            offset = len(x_dims) - len(target)
            out = [(x_dims[i + offset] if i + offset >= 0 else 1) if t == 0 else t for i, t in enumerate(target)]
        else:
            if len(target) != len(x_dims):
                raise fail(f"a 0 in shape {target} needs len(shape) == rank of x ({len(x_dims)})")
            out = [x_dims[i] if t == 0 else t for i, t in enumerate(target)]
    if -1 in target:
        i = target.index(-1)
        out[i] = fresh_symbol() if x_dims is None else _infer_minus_one(x_dims, out[:i] + out[i + 1:], target, fail)
    if x_dims is not None:
        n_in, n_out = num_elements(x_dims), num_elements(out)
        if n_in is not None and n_out is not None and n_in != n_out:
            raise fail(f"cannot reshape {list(x_dims)} ({n_in} elements) to {target} ({n_out} elements)")
    return out


def _infer_minus_one(x_dims: tuple, known: list[Dim], target: list[int], fail: Callable[[str], Exception]) -> Dim:
    """The size a -1 stands for: x's element count over the other target dims. Dims common to
    both sides cancel (``[s, 3, 4] -> [-1, 12]`` gives ``s``); what is left divides as polynomials
    (``[2*s, 6] -> [-1, 3]`` gives ``4*s``), or by a constant with floor division (the run-time
    reshape needs it exact); a symbolic divisor that does not divide gives a fresh symbol."""
    t_static = math.prod(int(d) for d in known if is_static_dim(d))
    if t_static == 0:
        raise fail(f"cannot infer the -1 of shape {target}: another dim is 0")
    if any(is_static_dim(d) and int(d) == 0 for d in x_dims):
        return 0
    rest_x = [d for d in x_dims if not is_static_dim(d)]
    rest_t = [d for d in known if not is_static_dim(d)]
    for d in list(rest_t):
        if d in rest_x:
            rest_x.remove(d)
            rest_t.remove(d)
    x_static = math.prod(int(d) for d in x_dims if is_static_dim(d))
    num = dim_prod(rest_x) * x_static
    if not rest_t:
        if is_static_dim(num):
            if int(num) % t_static:
                raise fail(f"cannot reshape {list(x_dims)} to {target}: {int(num)} elements do not divide by "
                           f"{t_static}")
            return int(num) // t_static
        q = exact_quotient(num, t_static)
        return q if q is not None else floordiv(num, t_static)
    q = exact_quotient(num, dim_prod(rest_t) * t_static)
    return q if q is not None else fresh_symbol()


@register
class Reshape(OpDef):
    """``x`` with the same elements in row-major order and shape ``shape`` (0 = copy a dim of x,
    -1 = infer; iOS17 aligns 0s to the right). ``shape`` may be computed at run time: then the
    output rank is its length, with fresh symbolic dims."""

    op_type = "reshape"

    def _right_aligned(self) -> bool:
        return opset_index(self.signature.since) >= opset_index("iOS17")

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        shape_t = a.tensor_type("shape")
        if shape_t.rank is not None and shape_t.rank != 1:
            raise a.fail(f"shape must be 1-D, got {shape_t}")
        target = a.value("shape")
        if target is not None:
            return [TensorType(x.dtype, tuple(resolve_reshape(x.shape, as_int_list(target),
                                                              self._right_aligned(), a.fail)))]
        length = shape_t.shape[0] if shape_t.shape else None
        if length is None or not is_static_dim(length):
            return [TensorType(x.dtype, None)]
        return [TensorType(x.dtype, tuple(a.new_symbol() for _ in range(int(length))))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = a["x"]
        out = resolve_reshape(x.shape, as_int_list(a["shape"]), self._right_aligned(), a.fail)
        return [x.reshape([int(d) for d in out])]


@register
class ReshapeLike(OpDef):
    """``x`` reshaped to the concatenation of ``ref_tensors[i].shape[begins[i]:ends[i]]``
    (``[begins[i]:]`` where ``end_masks[i]``)."""

    op_type = "reshape_like"

    @staticmethod
    def _out_dims(a: InferArgs | EvalArgs, ref_shapes: list[tuple | None]) -> list[Dim] | None:
        begins, ends, masks = a.value("begins"), a.value("ends"), a.value("end_masks")
        if begins is None or ends is None or masks is None:
            raise a.fail("begins, ends and end_masks must be compile-time constants")
        if not len(ref_shapes) == len(begins) == len(ends) == len(masks):
            raise a.fail(f"{len(ref_shapes)} ref_tensors but {len(begins)} begins, {len(ends)} ends, "
                         f"{len(masks)} end_masks")
        out: list[Dim] = []
        for shape, b, e, m in zip(ref_shapes, begins, ends, masks):
            if shape is None:
                return None
            out.extend(shape[int(b):] if bool(m) else shape[int(b):int(e)])
        return out

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        refs = a.types("ref_tensors")
        if not all(isinstance(t, TensorType) for t in refs):
            raise a.fail("ref_tensors must all be tensors")
        out = self._out_dims(a, [t.shape for t in refs])
        if out is not None and x.shape is not None:
            n_in, n_out = num_elements(x.shape), num_elements(out)
            if n_in is not None and n_out is not None and n_in != n_out:
                raise a.fail(f"cannot reshape {list(x.shape)} ({n_in} elements) to {list(out)} ({n_out} elements)")
        return [TensorType(x.dtype, None if out is None else tuple(out))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        out = self._out_dims(a, [np.shape(r) for r in a["ref_tensors"]])
        return [a["x"].reshape([int(d) for d in out])]


# ---------------------------------------------------------------------------------------------
# permutations and unit dims


@register
class Transpose(OpDef):
    """Permute the dims of ``x``: output dim i is input dim ``perm[i]`` (negative entries allowed)."""

    op_type = "transpose"

    def _perm(self, a: InferArgs | EvalArgs, rank: int) -> list[int]:
        perm = as_int_list(a.value("perm"))
        try:
            perm = normalize_axes(perm, rank, what="perm")
        except ShapeError as e:
            raise a.fail(str(e)) from None
        if len(perm) != rank:
            raise a.fail(f"perm {perm} has {len(perm)} entries for a rank-{rank} input")
        return perm

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        if x.shape is None:
            n = len(as_int_list(a.value("perm")))
            return [TensorType(x.dtype, tuple(a.new_symbol() for _ in range(n)))]
        perm = self._perm(a, len(x.shape))
        return [TensorType(x.dtype, tuple(x.shape[p] for p in perm))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = a["x"]
        return [np.transpose(x, self._perm(a, x.ndim))]


def _squeezed_axes(a: InferArgs | EvalArgs, dims: tuple) -> list[int]:
    """Axes that squeeze removes: the requested ones (all by default) whose size is statically 1.

    Requested dims of another size are kept (PyTorch semantics, per the MIL doc). A symbolic dim is
    assumed not to be 1, as coremltools does: the output rank is part of the program's type.
    """
    axes_v = a.value("axes")
    if axes_v is None:
        axes = range(len(dims))
    else:
        try:
            axes = normalize_axes(as_int_list(axes_v), len(dims))
        except ShapeError as e:
            raise a.fail(str(e)) from None
    return sorted(i for i in axes if is_static_dim(dims[i]) and int(dims[i]) == 1)


@register
class Squeeze(OpDef):
    """Remove size-1 dims (``axes``, default all). Which dims go is decided by the input *type*,
    so a symbolic dim that is 1 at run time is kept and the result matches the inferred rank."""

    op_type = "squeeze"

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        if x.shape is None:
            return [TensorType(x.dtype, None)]
        gone = set(_squeezed_axes(a, x.shape))
        return [TensorType(x.dtype, tuple(d for i, d in enumerate(x.shape) if i not in gone))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = a["x"]
        declared = a.type("x").shape
        return [np.squeeze(x, axis=tuple(_squeezed_axes(a, declared if declared is not None else x.shape)))]


@register
class ExpandDims(OpDef):
    """Insert size-1 dims so that they sit at ``axes`` of the output (``-rank-1 <= axis <= rank``)."""

    op_type = "expand_dims"

    def _axes(self, a: InferArgs | EvalArgs, rank: int) -> list[int]:
        axes = as_int_list(a.value("axes"))
        try:
            return sorted(normalize_axes(axes, rank + len(axes)))
        except ShapeError as e:
            raise a.fail(str(e)) from None

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        if x.shape is None:
            return [TensorType(x.dtype, None)]
        out = list(x.shape)
        for ax in self._axes(a, len(out)):
            out.insert(ax, 1)
        return [TensorType(x.dtype, tuple(out))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = a["x"]
        return [np.expand_dims(x, tuple(self._axes(a, x.ndim)))]


# ---------------------------------------------------------------------------------------------
# slicing


def slice_len(size: int, begin: int | None, end: int | None, stride: int) -> int:
    """Number of elements Python/numpy slicing ``[begin:end:stride]`` takes from ``size`` elements."""
    return len(range(*slice(begin, end, stride).indices(size)))


def _slice_dim(dim: Dim, begin: Any, end: Any, stride: int) -> Dim:
    """Size of a sliced dim. For a symbolic dim: an expression of it when the slice length is one
    for every size the dim allows (``x[1:]`` gives ``n - 1``, ``x[::2]`` gives ``(n + 1) floordiv 2``),
    else a static size when it does not depend on the size, else a fresh symbol (a clamped slice
    such as ``x[2:]`` on a size that may be below 2 is ``max(n - 2, 0)``, which the dim algebra has
    no form for). The slice length is monotone in the size between breakpoints near |begin| and
    |end| (linear when |stride| = 1), so testing the sizes at those points and at both ends of the
    dim's range decides the static and the unchanged case."""
    if begin is _UNKNOWN or end is _UNKNOWN:
        return fresh_symbol()
    if is_static_dim(dim):
        return slice_len(int(dim), begin, end, stride)
    if isinstance(dim, Symbol) and dim.choices:
        sizes = sorted(dim.choices)
        lo, hi = sizes[0], sizes[-1]
    else:
        lo_b, hi_b = dim.bounds()
        lo, hi = max(lo_b or 0, 0), min(_MAX_DIM if hi_b is None else hi_b, _MAX_DIM)
        marks = {abs(v) + k for v in (begin, end) if v is not None for k in (-1, 0, 1, 2)}
        sizes = sorted({lo, hi} | {n for n in marks if lo <= n <= hi})
    lens = [slice_len(n, begin, end, stride) for n in sizes]
    affine = _affine_slice_len(begin, end, stride, lo, hi)
    if affine is not None:
        alpha, beta = affine
        if all(ceildiv(alpha * n + beta, abs(stride)) == m for n, m in zip(sizes, lens)):
            return ceildiv(dim * alpha + beta, abs(stride))
    if abs(stride) == 1 and lens == sizes:
        return dim
    if len(set(lens)) == 1:
        return lens[0]
    return fresh_symbol()


def _affine_slice_len(begin: int | None, end: int | None, stride: int, lo: int, hi: int) -> tuple[int, int] | None:
    """(alpha, beta) such that the slice of a dim of size n has ``ceildiv(alpha*n + beta, |stride|)``
    elements for every n in [lo, hi], when that holds. Numpy clamps a bound into the dim; a bound
    beyond every size the dim allows (an INT_MAX end sentinel) is clamped the same way for all of
    them, and for sizes beyond |bound| nothing is clamped: either way the start and stop are affine
    in n, as (coefficient of n, constant)."""
    step = abs(stride)
    reach = 0  # sizes below this clamp some bound differently

    def at(v: int | None, default: tuple[int, int]) -> tuple[int, int]:
        nonlocal reach
        if v is None:
            return default
        if stride > 0:
            if v >= 0:
                if v >= hi:
                    return (1, 0)  # min(v, n) = n
                reach = max(reach, v)
                return (0, v)
            if -v >= hi:
                return (0, 0)  # max(n + v, 0) = 0
            reach = max(reach, -v)
            return (1, v)
        if v >= 0:
            if v >= hi - 1:
                return (1, -1)  # min(v, n - 1) = n - 1
            reach = max(reach, v + 1)
            return (0, v)
        if -v > hi:
            return (0, -1)  # n + v < 0 clamps to -1 (before the start)
        reach = max(reach, -v + 1)
        return (1, v)

    if stride > 0:
        b, e = at(begin, (0, 0)), at(end, (1, 0))
        alpha, beta = e[0] - b[0], e[1] - b[1]
    else:
        b, e = at(begin, (1, -1)), at(end, (0, -1))
        alpha, beta = b[0] - e[0], b[1] - e[1]
    if lo < reach:
        return None
    if ceildiv(alpha * lo + beta, step) < 0:
        return None
    if alpha < 0 and (hi >= _MAX_DIM or ceildiv(alpha * hi + beta, step) < 0):
        return None
    return alpha, beta


class _SliceByIndexBase(OpDef):
    """Shared parsing of numpy-style slice parameters (begin/end/stride and the three masks)."""

    def _params(self, a: InferArgs | EvalArgs, rank: int) -> tuple[list, list, list[int], list[bool]]:
        """(begins, ends, strides, squeeze) with masked bounds as None and unknown ones as _UNKNOWN."""
        stride_v = a.value("stride")
        strides = [1] * rank if stride_v is None else as_int_list(stride_v)
        if len(strides) != rank:
            raise a.fail(f"stride has {len(strides)} entries for a rank-{rank} input")
        if 0 in strides:
            raise a.fail(f"stride {strides} has a 0")
        bmask, emask, squeeze = (_bool_mask(a, n, rank) for n in ("begin_mask", "end_mask", "squeeze_mask"))
        bounds = []
        for name in ("begin", "end"):
            v = a.value(name)
            t = a.type(name)
            n = len(as_int_list(v)) if v is not None else (t.shape[0] if isinstance(t, TensorType) and t.shape else None)
            if n is not None and is_static_dim(n) and int(n) != rank:
                raise a.fail(f"{name} has {n} entries for a rank-{rank} input")
            bounds.append([_UNKNOWN] * rank if v is None else as_int_list(v))
        begins = [None if m else b for b, m in zip(bounds[0], bmask)]
        ends = [None if m else e for e, m in zip(bounds[1], emask)]
        return begins, ends, strides, squeeze

    def _sliced_dims(self, a: InferArgs, x: TensorType) -> tuple | None:
        if x.shape is None:
            return None
        begins, ends, strides, squeeze = self._params(a, len(x.shape))
        return tuple(_slice_dim(d, b, e, s)
                     for d, b, e, s, sq in zip(x.shape, begins, ends, strides, squeeze) if not sq)

    def _index(self, a: EvalArgs, rank: int) -> tuple:
        """The numpy index: slices, and a plain index at ``begin`` (0 if masked) for squeezed dims."""
        begins, ends, strides, squeeze = self._params(a, rank)
        return tuple((0 if b is None else b) if sq else slice(b, e, s)
                     for b, e, s, sq in zip(begins, ends, strides, squeeze))


@register
class SliceByIndex(_SliceByIndexBase):
    """``x[begin[0]:end[0]:stride[0], ...]`` with numpy semantics (negative indices and strides,
    clamping, empty results); ``begin_mask``/``end_mask`` drop a bound, ``squeeze_mask`` takes the
    single element at ``begin`` and removes the dim."""

    op_type = "slice_by_index"

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        return [TensorType(x.dtype, self._sliced_dims(a, x))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = a["x"]
        return [np.asarray(x[self._index(a, x.ndim)])]


@register
class SliceUpdate(_SliceByIndexBase):
    """``x`` with the slice ``x[begin:end:stride, ...]`` (slice_by_index semantics) replaced by
    ``update``, whose shape is the slice's shape."""

    op_type = "slice_update"

    def infer(self, a: InferArgs) -> list[Type]:
        x, update = a.tensor_type("x"), a.tensor_type("update")
        if update.rank == 0:
            raise a.fail("a rank-0 update is not supported")
        sliced = self._sliced_dims(a, x)
        if sliced is not None and update.shape is not None:
            if len(sliced) != len(update.shape) or any(
                    is_static_dim(s) and is_static_dim(u) and int(s) != int(u) for s, u in zip(sliced, update.shape)):
                raise a.fail(f"update has shape {list(update.shape)}, the slice has {[str(d) for d in sliced]}")
        return [x]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x, update = a["x"], a["update"]
        out = x.copy()
        index = self._index(a, x.ndim)
        if out[index].shape != update.shape:
            raise a.fail(f"update has shape {list(update.shape)}, the slice has {list(out[index].shape)}")
        out[index] = update
        return [out]


@register
class SliceBySize(OpDef):
    """``x[begin[i] : begin[i] + size[i]]`` per dim; size -1 takes the rest of the dim. A negative
    begin counts from the end. The slice must lie inside ``x`` (a size is exact, never clamped)."""

    op_type = "slice_by_size"

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        if x.shape is None:
            return [TensorType(x.dtype, None)]
        rank = len(x.shape)
        sizes, begins = a.value("size"), a.value("begin")
        sizes = None if sizes is None else as_int_list(sizes)
        begins = None if begins is None else as_int_list(begins)
        for name, v in (("size", sizes), ("begin", begins)):
            if v is not None and len(v) != rank:
                raise a.fail(f"{name} has {len(v)} entries for a rank-{rank} input")
        if sizes is None:
            return [TensorType(x.dtype, tuple(a.new_symbol() for _ in range(rank)))]
        out = []
        for i, (d, s) in enumerate(zip(x.shape, sizes)):
            if s >= 0:
                if begins is not None and is_static_dim(d):
                    b = begins[i] + int(d) if begins[i] < 0 else begins[i]
                    if not 0 <= b <= b + s <= int(d):
                        raise a.fail(f"slice [{b}:{b + s}] of dim {i} is outside its size {d}")
                out.append(s)
            elif s != -1:
                raise a.fail(f"size {sizes} has a negative entry other than -1")
            elif begins is None:
                out.append(a.new_symbol())
            elif begins[i] < 0:  # the slice lies inside x: the last -begin elements
                out.append(-begins[i])
            else:
                if is_static_dim(d) and begins[i] > int(d):
                    raise a.fail(f"slice [{begins[i]}:] of dim {i} is outside its size {d}")
                out.append(d - begins[i])
        return [TensorType(x.dtype, tuple(out))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = a["x"]
        index = []
        for i, (d, b, s) in enumerate(zip(x.shape, as_int_list(a["begin"]), as_int_list(a["size"]))):
            b = b + d if b < 0 else b
            e = d if s == -1 else b + s
            if not 0 <= b <= e <= d:
                raise a.fail(f"slice [{b}:{e}] of dim {i} is outside its size {d}")
            index.append(slice(b, e))
        return [x[tuple(index)]]


# ---------------------------------------------------------------------------------------------
# reversal


@register
class Reverse(OpDef):
    """Reverse ``x`` along ``axes`` (all dims when absent; an empty list reverses nothing)."""

    op_type = "reverse"

    def infer(self, a: InferArgs) -> list[Type]:
        x = a.tensor_type("x")
        if x.shape is not None:
            self._axes(a, len(x.shape))
        return [x]

    def _axes(self, a: InferArgs | EvalArgs, rank: int) -> tuple[int, ...]:
        axes = a.value("axes")
        if axes is None:
            return tuple(range(rank))
        try:
            return tuple(normalize_axes(as_int_list(axes), rank))
        except ShapeError as e:
            raise a.fail(str(e)) from None

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = a["x"]
        return [np.flip(x, self._axes(a, x.ndim))]


@register
class ReverseSequence(OpDef):
    """For each index ``i`` along ``batch_axis``, reverse the first ``lengths[i]`` elements along
    ``seq_axis`` and keep the rest (``0 <= lengths[i] <= x.shape[seq_axis]``)."""

    op_type = "reverse_sequence"

    def _axes(self, a: InferArgs | EvalArgs, rank: int) -> tuple[int, int]:
        seq, batch = axis_of(a, "seq_axis", rank), axis_of(a, "batch_axis", rank)
        if seq == batch:
            raise a.fail(f"seq_axis and batch_axis are both {seq}")
        return seq, batch

    def infer(self, a: InferArgs) -> list[Type]:
        x, lengths = a.tensor_type("x"), a.tensor_type("lengths")
        if lengths.rank not in (None, 1):
            raise a.fail(f"lengths must be 1-D, got {lengths}")
        if x.shape is not None:
            _, batch = self._axes(a, len(x.shape))
            n = lengths.shape[0] if lengths.shape else None
            if n is not None and is_static_dim(n) and is_static_dim(x.shape[batch]) and int(n) != x.shape[batch]:
                raise a.fail(f"lengths has {n} entries, x has {x.shape[batch]} along batch_axis {batch}")
        return [x]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = a["x"]
        seq, batch = self._axes(a, x.ndim)
        lengths = np.asarray(a["lengths"], np.int64).reshape(-1)
        steps = x.shape[seq]
        if lengths.shape[0] != x.shape[batch] or ((lengths < 0) | (lengths > steps)).any():
            raise a.fail(f"lengths {lengths.tolist()} must have {x.shape[batch]} entries in [0, {steps}]")
        t = np.arange(steps)
        src = np.where(t < lengths[:, None], lengths[:, None] - 1 - t, t)  # [batch, seq]
        if batch > seq:
            src = src.T
        shape = [1] * x.ndim
        shape[batch], shape[seq] = x.shape[batch], steps
        return [np.take_along_axis(x, np.broadcast_to(src.reshape(shape), x.shape), axis=seq)]
