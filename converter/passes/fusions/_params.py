"""What the activation and normalization fusions ask of the constants they fold into an op.

- `close_to`: a constant that stands for an irrational number (sqrt(2), sqrt(2/pi)) is accepted
  when it is that number rounded to its own dtype, within 2 units of that dtype's epsilon
  (relative): what every exporter writes (torch's ``x / math.sqrt(2)`` is fp32 1.4142135), never a
  different number (1.414 is refused: fusing it would change results beyond rounding).
- `scalar`: one value (any shape of size 1).
- `along`: the axes along which a broadcast parameter varies, to tell a scalar from a per-channel
  or a per-normalized-shape constant.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.core import Value
from ...ir.types import TensorType, is_static_dim


def scalar(arr: Any) -> float | None:
    """The value of a constant of size 1, else None."""
    a = np.asarray(arr)
    return float(a.reshape(-1)[0]) if a.size == 1 and a.dtype.kind in "fiu" else None


def close_to(arr: Any, target: float) -> str | None:
    """None when ``arr`` is one value equal to ``target`` rounded to its dtype (see the module
    docstring), else the reason it is not."""
    a = np.asarray(arr)
    v = scalar(a)
    if v is None:
        return f"{_show(a)} is not a scalar"
    eps = float(np.finfo(a.dtype).eps) if a.dtype.kind == "f" else 0.0
    if abs(v - target) > 2 * eps * abs(target):
        return f"{v!r} is not {target!r} to {a.dtype.name} precision"
    return None


def _show(a: np.ndarray) -> str:
    return repr(a.tolist()) if a.size <= 8 else f"an array of shape {list(a.shape)}"


def static_shape(v: Value) -> list[int] | None:
    """``v``'s shape when every size is known."""
    t = v.type
    if not isinstance(t, TensorType) or t.shape is None or not all(is_static_dim(d) for d in t.shape):
        return None
    return [int(d) for d in t.shape]


def rank_of(v: Value) -> int | None:
    t = v.type
    return len(t.shape) if isinstance(t, TensorType) and t.shape is not None else None


def aligned(arr: Any, rank: int) -> np.ndarray | None:
    """``arr`` reshaped to ``rank`` dims as broadcasting aligns it (leading 1s); None if it has more."""
    a = np.asarray(arr)
    if a.ndim > rank:
        return None
    return a.reshape((1,) * (rank - a.ndim) + a.shape)


def varying_axes(a: np.ndarray) -> list[int]:
    """The axes along which a broadcast constant (already `aligned`) has more than one entry."""
    return [i for i, d in enumerate(a.shape) if d != 1]


def storage(v: Value) -> type:
    """The numpy scalar type of ``v``'s dtype."""
    t = v.type
    assert isinstance(t, TensorType)
    return t.dtype.storage.type
