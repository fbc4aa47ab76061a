"""reduce_mean over all spatial dims, keeping them -> global average pooling (avg_pool whose window
is the whole input), for targets that have a global pooling op and prefer it (WebNN's
``averagePool2d`` without a window, NeuralNetwork's global pooling layer). Not in the default
(MIL) pipeline: coremltools keeps reduce_mean there.

    %z = reduce_mean(x=%x: [N, C, H, W], axes=[2, 3] (or [-2, -1]), keep_dims=True)
        ->
    %z = avg_pool(x=%x, kernel_sizes=[H, W], strides=[1, 1], pad_type="valid")

1 to 3 spatial dims (avg_pool's range), static sizes (the window is the input's size), float
dtypes. Not bit-exact: the two ops may sum in another order; the result is the same mean up to
float rounding.
"""

from __future__ import annotations

import numpy as np

from ...ir.builder import Builder
from ...ir.shapes import ShapeError, normalize_axes
from ...ir.types import TensorType, is_static_dim
from ..rewrite import Match, const, op, rule, var


def _spatial(m: Match) -> list[int] | str:
    t = m["x"].type
    if not isinstance(t, TensorType) or t.shape is None:
        return "the rank of x is unknown"
    rank = len(t.shape)
    if not 3 <= rank <= 5:
        return f"x has rank {rank}; avg_pool takes 1 to 3 spatial dims after [N, C]"
    if t.dtype.name not in ("fp16", "fp32"):
        return f"x is {t.dtype.name}; avg_pool takes floats"
    try:
        axes = sorted(normalize_axes([int(a) for a in np.asarray(m.value("axes")).reshape(-1)], rank))
    except ShapeError as e:
        return str(e)
    if axes != list(range(2, rank)):
        return f"axes {axes} are not all the spatial dims {list(range(2, rank))} of a rank-{rank} x"
    sizes = t.shape[2:]
    if not all(is_static_dim(d) for d in sizes):
        return f"the spatial dims {list(sizes)} are not static (the window is their size)"
    return [int(d) for d in sizes]


def _check(m: Match) -> str | None:
    s = _spatial(m)
    return s if isinstance(s, str) else None


@rule(op.reduce_mean(x=var("x"), axes=const("axes"), keep_dims=True), check=_check, exact=False)
def reduce_mean_to_global_avg_pool(b: Builder, m: Match):
    """``reduce_mean(x, spatial axes, keep_dims) -> avg_pool(x, window = spatial sizes)`` (module docstring)."""
    sizes = _spatial(m)
    assert not isinstance(sizes, str)
    return b.avg_pool(x=m["x"], kernel_sizes=np.asarray(sizes, np.int32), strides=np.ones(len(sizes), np.int32),
                      pad_type="valid", exclude_padding_from_average=False)


RULES = [reduce_mean_to_global_avg_pool]
