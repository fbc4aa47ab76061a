"""Small shape helpers the spatial / attention / recurrent mappings share.

`dims` reads a value's shape (ints where static, symbols elsewhere); `reshape_to` reshapes to
dims that may hold at most one unknown (it becomes -1) and otherwise builds the target shape at
run time from the input's ``shape``; `static_dims` refuses, naming what needs the sizes, when a
mapping cannot work without them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...ir.core import Value
from ...ir.types import Dim, is_static_dim
from .context import Ctx


def dims(v: Value) -> list[Dim]:
    return [int(d) if is_static_dim(d) else d for d in v.type.shape]


def static_dims(ctx: Ctx, v: Value, what: str) -> list[int]:
    """The shape of ``v`` as ints; UnsupportedError naming ``what`` when a dim is unknown."""
    shape = v.type.shape
    if shape is None or not all(is_static_dim(d) for d in shape):
        raise ctx.unsupported(f"{what} needs a static shape, got {list(shape) if shape is not None else 'unknown'}")
    return [int(d) for d in shape]


def reshape_to(ctx: Ctx, x: Value, target: Sequence[Dim | Value]) -> Value:
    """``x`` reshaped to ``target`` (ints, symbols, or scalar int32 IR values). One unknown entry
    becomes -1; with more, the shape is assembled at run time (symbols must be dims of ``x``)."""
    unknown = [i for i, d in enumerate(target) if not (isinstance(d, int) or is_static_dim(d))]
    if len(unknown) <= 1:
        shape = [-1 if i in unknown else int(d) for i, d in enumerate(target)]
        return ctx.b.reshape(x=x, shape=np.asarray(shape, np.int32))
    b = ctx.b
    x_dims = list(x.type.shape)
    x_shape = None
    parts = []
    for d in target:
        if isinstance(d, Value):
            parts.append(b.reshape(x=d, shape=np.asarray([1], np.int32)))
        elif isinstance(d, int) or is_static_dim(d):
            parts.append(b.const(np.asarray([int(d)], np.int32)))
        else:
            if d not in x_dims:
                raise ctx.unsupported(f"cannot reshape to {list(target)}: size {d} is unknown")
            if x_shape is None:
                x_shape = b.shape(x=x)
            parts.append(b.slice_by_size(x=x_shape, begin=np.asarray([x_dims.index(d)], np.int32),
                                         size=np.asarray([1], np.int32)))
    return b.reshape(x=x, shape=b.concat(values=tuple(parts), axis=0))
