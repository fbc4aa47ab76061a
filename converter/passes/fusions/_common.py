"""What the conv/linear fusions share: reading an op's parameters with their defaults, rebuilding
an op with some inputs replaced, and reading a constant that broadcasts as one value per channel."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.builder import Builder
from ...ir.core import Op, Value
from ...ir.opdef import param
from ...ir.types import TensorType, is_static_dim
from ..rewrite import Match


def flag(op: Op, key: str) -> bool:
    return bool(np.asarray(param(op, key)).reshape(-1)[0])


def rebuild(b: Builder, m: Match, name: str, **changes: Any) -> Value:
    """The op matched as ``name`` built again with ``changes`` to its inputs (other inputs kept;
    a change to None drops that input)."""
    old = m.op(name)
    inputs: dict[str, Any] = dict(old.inputs)
    inputs.update(changes)
    order = {k: i for i, k in enumerate(old.opdef.signature.inputs)}
    keys = sorted((k for k, v in inputs.items() if v is not None), key=lambda k: order.get(k, len(order)))
    new = b.add_op(old.type, {k: inputs[k] for k in keys})
    return new.outputs[0]


def static_dim(v: Value, axis: int) -> int | str:
    """Size of ``v``'s dim ``axis`` (a reason string when it is unknown or symbolic)."""
    t = v.type
    if not isinstance(t, TensorType) or t.shape is None or len(t.shape) <= axis:
        return f"the rank of '{v.name}' is unknown"
    d = t.shape[axis]
    return int(d) if is_static_dim(d) else f"dim {axis} of '{v.name}' is not static ({d})"


def per_channel(c: np.ndarray, out: Value, *, last: bool = False) -> np.ndarray | str:
    """``c`` as a vector of one value per channel of ``out`` (dim 1 of ``[N, C, *spatial]``, or
    with ``last`` the last dim: a linear's output features), when it broadcasts against ``out`` as
    a scalar or along that dim only (for ``[N, C, H, W]``: ``[]``, ``[1]``, ``[C, 1, 1]``,
    ``[1, C, 1, 1]``); else the reason it does not."""
    t = out.type
    if not isinstance(t, TensorType) or t.shape is None:
        return f"the rank of '{out.name}' is unknown"
    rank = len(t.shape)
    axis = rank - 1 if last else 1
    channels = static_dim(out, axis)
    if isinstance(channels, str):
        return channels
    c = np.asarray(c)
    if c.ndim > rank:
        return f"the constant has rank {c.ndim}, more than the {rank} of '{out.name}' (it would broadcast it)"
    if c.size == 1:
        return np.full(channels, c.reshape(-1)[0], dtype=c.dtype)
    aligned = (1,) * (rank - c.ndim) + c.shape
    for i, n in enumerate(aligned):
        if i != axis and n != 1:
            where = f"dim {i}, not the last" if last else "the batch dim" if i == 0 else "a spatial dim"
            return f"the constant of shape {list(c.shape)} varies along {where} (axis {i} of {rank}): not per channel"
    if aligned[axis] != channels:
        return f"the constant has {aligned[axis]} values along the channel dim, '{out.name}' has {channels} channels"
    return c.reshape(-1)
