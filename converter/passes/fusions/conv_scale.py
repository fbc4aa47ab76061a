"""conv / conv_transpose followed by a multiplication by a per-channel constant -> the scale folded
into the weight (and bias).

    %y = conv(x=%x, weight=%w, bias=%b?, ...)             (or conv_transpose)
    %c = const() [val=...]                                 scalar, [C, 1, 1], [1, C, 1, 1], ...
    %z = mul(x=%y, y=%c)      (either order)       ->      %z = conv(x=%x, weight=%w * c, bias=%b * c, ...)

``c`` multiplies the kernel taps of each output channel (the layout from the op definition:
``scale_output_channels``). A constant that varies over the batch or spatial dims is no scale.
Products are computed in float64 and rounded once to the weight's dtype; not bit-exact (the
original rounds the conv's sum, then the product), as every converter's scale fusion.
"""

from __future__ import annotations

import numpy as np

from ...ir.builder import Builder
from ..rewrite import Match, const, op, optional, rule, var
from ._common import param, per_channel, rebuild


def _check(m: Match) -> str | None:
    c = per_channel(m.value("c"), m.root.outputs[0])
    if isinstance(c, str):
        return c
    if not np.all(np.isfinite(np.asarray(c, np.float64))):
        return "the scale holds inf or NaN (0 * inf in the kernel would differ from the product)"
    return None


@rule(op.mul(x=op.any_of("conv", "conv_transpose")("conv", x=var("x"), weight=const("w"), bias=optional(const("b"))),
             y=const("c")), check=_check, exact=False)
def fuse_conv_scale(b: Builder, m: Match):
    """``conv(x) * c -> conv(x, weight=w * c, bias=bias * c)`` per output channel (module docstring)."""
    conv = m.op("conv")
    c = per_channel(m.value("c"), m.root.outputs[0])
    assert not isinstance(c, str)
    s = np.asarray(c, np.float64)
    w = np.asarray(m.value("w"))
    groups = int(np.asarray(param(conv, "groups")).reshape(-1)[0])
    weight = conv.opdef.scale_output_channels(w.astype(np.float64), s, groups).astype(w.dtype)
    changes = {"weight": b.const(weight)}
    if "b" in m:
        bias = np.asarray(m.value("b"))
        changes["bias"] = b.const((bias.astype(np.float64).reshape(-1) * s).astype(bias.dtype))
    return rebuild(b, m, "conv", **changes)


RULES = [fuse_conv_scale]
