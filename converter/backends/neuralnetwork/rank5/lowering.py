"""The rank-5 lowering table: IR ops that legacy layers (specification versions 1-3) compute
exactly, on values whose leading (batch, sequence) axes are 1 (see layout.py).

Covered: conv / conv_transpose (constant weights), max/avg/l2 pooling (ceil_mode as
includeLastPixel where the sizes agree), reductions and argmax along C, H, W (global pooling for
max/mean over H and W), batch_norm, lrn, linear / matmul with a constant matrix (innerProduct), the
activation kinds, prelu, unary functions, clip/relu6 and silu (decomposed), add/sub/mul/div with
constants (alpha, ``bias``, ``scale``) and add/sub/mul/max/min of equal shapes, concat, softmax
along C, transpose of C/H/W (permute), padding, nearest and bilinear upsampling (resizeBilinear,
version 3, when the factors are not integers or the sampling is not DEFAULT), and reshape /
squeeze / expand_dims / identity / casts (no layer: the same blob), slice_by_index of one of C,
H, W (slice). Anything else raises LoweringError with why, and the backend lists every such op in
one error.

Sequences (layout.py): the lowerings registered ``per_step`` take them — the reshapes, casts,
activations, unary functions, clip/silu, add/sub/mul with a per-step constant, binary ops of two
sequences, innerProduct, the embedding (one index per step) and the recurrent layers
(recurrent.py); any other op reading a sequence is refused. Flexible H and W: convolution,
pooling (not ceil_mode), batch_norm, prelu, activations, unary functions, scalar add/mul, binary
ops of equal shapes and the reshapes keep them.

The lowerings live in family modules (shapes.py, elementwise.py, spatial.py, reduce.py,
dense.py, recurrent.py, slicing.py), registered here with ``rank5``; the package imports them.
"""

from __future__ import annotations

from collections.abc import Callable

from ....errors import LoweringError
from ....ir.core import Op, Value
from .layout import (
    Layout,
    Rank5Emitter,
    dims,
    is_static,
    natural_layout,
    op_value,
    shape_text,
)

Rank5Fn = Callable[[Rank5Emitter, Op], None]
RANK5_LOWERINGS: dict[str, Rank5Fn] = {}
#: op types whose lowering reads sequences (module docstring); the others refuse them
PER_STEP: set[str] = set()


def rank5(*op_types: str, per_step: bool = False) -> Callable[[Rank5Fn], Rank5Fn]:
    def register(fn: Rank5Fn) -> Rank5Fn:
        for t in op_types:
            RANK5_LOWERINGS[t] = fn
            if per_step:
                PER_STEP.add(t)
        return fn
    return register


def step_shape(e: Rank5Emitter, v: Value) -> list:
    """The shape of one step of ``v`` (``[1, ..]`` for a sequence ``[S, 1, ..]``), else its shape;
    symbolic H and W included."""
    shape = dims(v)
    return shape[1:] if e.seq(v) is not None else shape


def input_value(op: Op, key: str = "x") -> Value:
    v = op_value(op, key)
    if v is None:
        raise LoweringError(f"input '{key}' is missing")
    return v


def float_tensor(v: Value) -> None:
    dtype = getattr(v.type, "dtype", None)
    if dtype is None or dtype.name not in ("fp16", "fp32", "fp64"):
        raise LoweringError(f"'{v.name}' is {v.type}; rank-5 networks compute on float tensors only")


def natural(v: Value) -> Layout:
    """The layout of a model feature (the simple rule; flexible H and W allowed, not C);
    LoweringError when it has none. A sequence input's layout is ``natural_step``'s."""
    shape = dims(v)
    layout = natural_layout(shape)
    if layout is None:
        raise LoweringError(f"'{v.name}' of shape {shape_text(shape)} has a batch axis > 1")
    if not is_static(layout[:1]) or (len(shape) < 3 and not is_static(layout)):
        raise LoweringError(f"'{v.name}' of shape {shape_text(shape)}: a flexible channel count "
                            f"(rank-5 features may vary in Seq, H and W only)")
    return layout


