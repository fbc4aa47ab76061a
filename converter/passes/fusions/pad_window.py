"""An explicit constant pad of the spatial dims before a conv or pooling -> the op's own padding.

    %p = pad(x=%x, pad=[0, 0, 0, 0, t, b, l, r], mode="constant", constant_val=0.0)
    %z = conv(x=%p, weight=%w, pad_type="valid", ...)
        ->
    %z = conv(x=%x, weight=%w, pad_type="custom", pad=[t, b, l, r], ...)    (custom pads add up)

The same for ``avg_pool`` (zero padding; only with ``exclude_padding_from_average=False``, where
the op's padding counts in the divisor as the explicit zeros did) and ``max_pool`` (only a pad with
``-inf``: max_pool's own padding never wins, which zeros would against negative inputs). Exact:
the op reads the same padded values in the same order. Refused: padding of the batch or channel
dims, ``same``/``same_lower`` pad types (their padding depends on the input size), ``ceil_mode``
(whether a last window starting in the padding is dropped depends on there being padding), and
other pad modes.
"""

from __future__ import annotations

import numpy as np

from ...ir.builder import Builder
from ...ir.types import TensorType
from ..rewrite import Match, const, op, optional, rule, var
from ._common import flag, param, rebuild


def _widths(m: Match) -> list[tuple[int, int]] | str:
    """The pad's (before, after) per spatial dim, or why it cannot move into the op."""
    t = m["x"].type
    if not isinstance(t, TensorType) or t.shape is None:
        return "the rank of the padded value is unknown"
    rank = len(t.shape)
    p = [int(v) for v in np.asarray(m.value("p")).reshape(-1)]
    widths = [(0, 0)] * (rank - len(p) // 2) + [(p[i], p[i + 1]) for i in range(0, len(p), 2)]
    if any(widths[0]) or any(widths[1]):
        return f"the pad {p} pads the batch or channel dim, not only the spatial dims"
    return widths[2:]


def _check(m: Match) -> str | None:
    window = m.root
    pad_type = str(np.asarray(param(window, "pad_type")).reshape(-1)[0])
    if pad_type not in ("valid", "custom"):
        return f"pad_type '{pad_type}' derives its padding from the input size"
    if window.type != "conv" and flag(window, "ceil_mode"):
        return "ceil_mode is set: dropping a last window that starts in the padding depends on there being padding"
    if window.type == "avg_pool" and flag(window, "exclude_padding_from_average"):
        return "exclude_padding_from_average is set: the explicit zeros count in the average, the op's padding would not"
    if window.type == "max_pool":
        v = 0.0 if "v" not in m else float(np.asarray(m.value("v")).reshape(-1)[0])
        if v != -np.inf:
            return f"the pad value is {v}, not -inf: max_pool's own padding never wins the max, padding with {v} can"
    w = _widths(m)
    return w if isinstance(w, str) else None


def _into_window(b: Builder, m: Match):
    window = m.root
    widths = _widths(m)
    assert not isinstance(widths, str)
    pad_type = str(np.asarray(param(window, "pad_type")).reshape(-1)[0])
    own = [int(v) for v in np.asarray(param(window, "pad")).reshape(-1)] if pad_type == "custom" else [0] * (2 * len(widths))
    merged = [own[2 * i + j] + widths[i][j] for i in range(len(widths)) for j in (0, 1)]
    return rebuild(b, m, "window", x=m["x"], pad_type="custom", pad=np.asarray(merged, np.int32))


def _pad(value):
    return op.pad("pad", x=var("x"), pad=const("p"), mode="constant", constant_val=value)


@rule(op.conv("window", x=_pad(0.0)), check=_check)
def fuse_pad_conv(b: Builder, m: Match):
    """``conv(pad(x, zeros on spatial dims)) -> conv(x, custom pad)`` (module docstring)."""
    return _into_window(b, m)


@rule(op.avg_pool("window", x=_pad(0.0)), check=_check)
def fuse_pad_avg_pool(b: Builder, m: Match):
    """``avg_pool(pad(x, zeros on spatial dims)) -> avg_pool(x, custom pad)`` when the padding
    counts in the average (module docstring)."""
    return _into_window(b, m)


@rule(op.max_pool("window", x=_pad(optional(const("v")))), check=_check)
def fuse_pad_max_pool(b: Builder, m: Match):
    """``max_pool(pad(x, -inf on spatial dims)) -> max_pool(x, custom pad)`` (module docstring)."""
    return _into_window(b, m)


RULES = [fuse_pad_conv, fuse_pad_avg_pool, fuse_pad_max_pool]
