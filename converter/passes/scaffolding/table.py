"""Which ops commute with removing size-1 axes, and how their axis arguments are rewritten.

For a value ``X`` in a frame (rank R, unit axes A: ``X = expand_dims(x, A)``), an op ``f`` in this
table satisfies ``squeeze(f(X, ...), A') == f'(x, ...)`` where ``f'`` is the same op with the
arguments given below, and ``A'`` the output's frame. Why each holds:

- **elementwise, unary** (``UNARY``): every output element is a function of the input element at
  the same index and of scalar parameters (alpha, beta, epsilon, dtype, mode: checked to be
  scalars at match time, so ``prelu``/``softplus_parametric`` with their per-channel vectors are
  not here). Removing axes of size 1 renumbers indices without changing the pairing. A' = A.
- **elementwise, binary / select** (``BINARY``, ``select``): numpy broadcasting pairs dims
  right-aligned. Every data input is either in the same frame (same rank R, 1 on A: broadcasting
  then pairs the same non-A dims at low rank, and gives 1 on A) or a constant, which is padded to
  rank R with leading 1s, must be 1 on A, and is squeezed on A (kept as is when it does not reach
  any axis of A). The output is then 1 on A and rank R: A' = A.
- **reductions** ``reduce_*(axes, keep_dims)``: the set of elements reduced together is the same
  whether or not axes of size 1 are listed, so axes in A are dropped from ``axes`` and the others
  renumbered; refused when only unit axes are reduced (an empty list means "all" in MIL). With
  keep_dims the output keeps A; without, A' is A's place among the axes that remain.
  ``reduce_argmax/argmin(axis)``: the index along a non-A axis is the same; refused on an A axis.
- **softmax(axis)**: normalises along one axis, which must not be in A; renumbered.
- **transpose(perm)**: output axis j is input axis perm[j]; the unit axes go to A' = {j: perm[j]
  in A}, and the low perm is perm without the A entries, renumbered. When that is the identity,
  the transpose only moved unit axes (a reshape) and no low op is needed.
- **concat(values, axis)**: every value in the frame (or a constant as for binary ops); the axis
  must not be in A; renumbered (``interleave`` unchanged).

Everything else (conv, pools, batch_norm, prelu, l2_norm, layer_norm, matmul, linear, slicing,
...) has semantics tied to particular axes of its rank and is not in the table: a region meeting
it is left alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ...ir.core import Op, Value
from ...ir.opdef import NO_DEFAULT
from .axes import Frame

UNARY = frozenset({
    "abs", "acos", "asin", "atan", "atanh", "cast", "ceil", "clamped_relu", "clip", "cos", "cosh", "elu", "erf",
    "exp", "exp2", "floor", "gelu", "inverse", "leaky_relu", "linear_activation", "log", "logical_not", "relu",
    "relu6", "round", "rsqrt", "scaled_tanh", "sigmoid", "sigmoid_hard", "sign", "silu", "sin", "sinh", "softplus",
    "softsign", "sqrt", "square", "tan", "tanh", "threshold", "thresholded_relu",
})
BINARY = frozenset({
    "add", "sub", "mul", "real_div", "floor_div", "mod", "pow", "maximum", "minimum", "equal", "not_equal",
    "greater", "greater_equal", "less", "less_equal", "logical_and", "logical_or", "logical_xor",
})
REDUCE = frozenset({
    "reduce_l1_norm", "reduce_l2_norm", "reduce_log_sum", "reduce_log_sum_exp", "reduce_max", "reduce_mean",
    "reduce_min", "reduce_prod", "reduce_sum", "reduce_sum_square",
})


@dataclass(frozen=True)
class Lowering:
    """How one op is computed at low rank: its outputs' frames and its rewritten axis arguments."""

    out_frames: tuple[Frame, ...]
    params: dict[str, np.ndarray] = field(default_factory=dict)


Lower = Callable[[Op, Frame], "Lowering | str"]


@dataclass(frozen=True)
class Commutes:
    """An op kind of the table: its inputs that live in the frame (``data``) and its lowering."""

    data: tuple[str, ...]
    lower: Lower


def _param(op: Op, key: str) -> object:
    """The constant value of ``key`` (its signature default when absent); NO_DEFAULT when it is
    bound to a value that is not a constant."""
    arg = op.inputs.get(key)
    if arg is None:
        spec = op.opdef.signature.inputs.get(key) if op.opdef is not None else None
        return spec.default if spec is not None else NO_DEFAULT
    if isinstance(arg, Value) and arg.is_const:
        return arg.const_val
    return NO_DEFAULT


def _ints(x: object) -> list[int]:
    return [int(a) for a in np.asarray(x).reshape(-1)]


def _out_rank_is(op: Op, frame: Frame) -> str | None:
    shape = getattr(op.outputs[0].type, "shape", None)
    if shape is None or len(shape) != frame.rank:
        return f"its output is not of rank {frame.rank}"
    return None


def _scalar_params(op: Op, data: tuple[str, ...]) -> str | None:
    for key, arg in op.inputs.items():
        if key in data:
            continue
        if not isinstance(arg, Value) or not arg.is_const:
            return f"its parameter '{key}' is not a constant"
        if np.asarray(arg.const_val).size != 1:
            return f"its parameter '{key}' is not a scalar"
    return None


def _elementwise(data: tuple[str, ...]) -> Lower:
    def lower(op: Op, frame: Frame) -> Lowering | str:
        why = _scalar_params(op, data) or _out_rank_is(op, frame)
        return why if why is not None else Lowering((frame,))
    return lower


def _kept_frame(frame: Frame, reduced: set[int], keep_dims: bool) -> Frame:
    if keep_dims:
        return frame
    remaining = [a for a in range(frame.rank) if a not in reduced]
    return Frame(len(remaining), tuple(remaining.index(a) for a in frame.axes if a not in reduced))


def _reduce(op: Op, frame: Frame) -> Lowering | str:
    axes_arg = op.inputs.get("axes")
    keep = _param(op, "keep_dims")
    if keep is NO_DEFAULT:
        return "keep_dims is not a constant"
    keep_dims = bool(np.asarray(keep).reshape(-1)[0]) if keep is not None else False
    if axes_arg is None:
        return Lowering((_kept_frame(frame, set(range(frame.rank)), keep_dims),))
    axes = _param(op, "axes")
    if axes is NO_DEFAULT:
        return "its axes are not a constant"
    reduced = {frame.normalize(a) for a in _ints(axes)}
    if not reduced:
        return "it reduces over no axis"
    kept = sorted(a for a in reduced if a not in frame.axes)
    if not kept:
        return f"it reduces only over unit axes {sorted(reduced)}"
    low = np.array([frame.low_axis(a) for a in kept], dtype=np.int32)
    return Lowering((_kept_frame(frame, reduced, keep_dims),), {"axes": low})


def _one_axis(key: str) -> Lower:
    def lower(op: Op, frame: Frame) -> Lowering | str:
        value = _param(op, key)
        if value is NO_DEFAULT or value is None:
            return f"its {key} is not a constant"
        axis = frame.normalize(_ints(value)[0])
        if axis in frame.axes:
            return f"its {key} {axis} is one of the unit axes {list(frame.axes)}"
        out = Lowering((frame,), {key: np.array(frame.low_axis(axis), dtype=np.int32)})
        if op.type.startswith("reduce_arg"):
            keep = _param(op, "keep_dims")
            if keep is NO_DEFAULT:
                return "keep_dims is not a constant"
            keep_dims = bool(np.asarray(keep).reshape(-1)[0]) if keep is not None else False
            out = Lowering((_kept_frame(frame, {axis}, keep_dims),), out.params)
        return out
    return lower


def _transpose(op: Op, frame: Frame) -> Lowering | str:
    perm = _param(op, "perm")
    if perm is NO_DEFAULT or perm is None:
        return "its perm is not a constant"
    p = [frame.normalize(a) for a in _ints(perm)]
    if sorted(p) != list(range(frame.rank)):
        return f"perm {p} is not a permutation of rank {frame.rank}"
    out_axes = tuple(sorted(j for j, a in enumerate(p) if a in frame.axes))
    low = np.array([frame.low_axis(a) for a in p if a not in frame.axes], dtype=np.int32)
    return Lowering((Frame(frame.rank, out_axes),), {"perm": low})


TABLE: dict[str, Commutes] = {
    **{t: Commutes(("x",), _elementwise(("x",))) for t in UNARY},
    **{t: Commutes(("x", "y"), _elementwise(("x", "y"))) for t in BINARY},
    "select": Commutes(("cond", "a", "b"), _elementwise(("cond", "a", "b"))),
    **{t: Commutes(("x",), _reduce) for t in REDUCE},
    "reduce_argmax": Commutes(("x",), _one_axis("axis")),
    "reduce_argmin": Commutes(("x",), _one_axis("axis")),
    "softmax": Commutes(("x",), _one_axis("axis")),
    "concat": Commutes(("values",), _one_axis("axis")),
    "transpose": Commutes(("x",), _transpose),
}
