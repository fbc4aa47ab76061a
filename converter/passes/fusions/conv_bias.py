"""conv / conv_transpose followed by adding (or subtracting) a per-channel constant -> the conv's bias.

    %y = conv(x=%x, weight=%w, bias=%b?, ...)             (or conv_transpose)
    %c = const() [val=...]                                 scalar, [C, 1, 1], [1, C, 1, 1], ...
    %z = add(x=%y, y=%c)      (either order)       ->      %z = conv(x=%x, weight=%w, bias=%b + c, ...)
    %z = sub(x=%y, y=%c)                           ->      %z = conv(x=%x, weight=%w, bias=%b - c, ...)
    %z = sub(x=%c, y=%y)                           ->      %z = conv(x=%x, weight=-%w, bias=c - %b, ...)

A missing bias counts as zeros. The constant must broadcast along the output channels only: one
that varies over the batch or spatial dims is no bias. Not bit-exact: the conv rounds once
(``acc + (b + c)``) where the original rounds twice (``(acc + b) + c``); every converter does this
fusion. Weights may be computed at run time (iOS17) for the add/sub forms; ``c - conv`` negates the
weight and so needs it constant.
"""

from __future__ import annotations

import numpy as np

from ...ir.builder import Builder
from ..rewrite import Match, Refuse, const, op, optional, rule, var
from ._common import per_channel, rebuild

CONVS = ("conv", "conv_transpose")


def _conv(weight=None):
    return op.any_of(*CONVS)("conv", x=var("x"), weight=weight if weight is not None else var("w"),
                             bias=optional(const("b")))


def _bias_dtype(m: Match) -> np.dtype:
    return (m["b"] if "b" in m else m["w"]).type.dtype.storage


def _new_bias(m: Match, sign_c: float, sign_b: float) -> np.ndarray:
    c = per_channel(m.value("c"), m.root.outputs[0])
    if isinstance(c, str):
        raise Refuse(c)
    b = np.zeros(c.shape, np.float64) if "b" not in m else np.asarray(m.value("b"), np.float64).reshape(-1)
    return (sign_b * b + sign_c * np.asarray(c, np.float64)).astype(_bias_dtype(m))


def _check(m: Match) -> str | None:
    c = per_channel(m.value("c"), m.root.outputs[0])
    return c if isinstance(c, str) else None


@rule(op.add(x=_conv(), y=const("c")), check=_check, exact=False)
def fuse_conv_add_bias(b: Builder, m: Match):
    """``conv(x) + c -> conv(x, bias=bias + c)`` for a per-channel (or scalar) ``c`` (module docstring)."""
    return rebuild(b, m, "conv", bias=b.const(_new_bias(m, 1.0, 1.0)))


@rule(op.sub(x=_conv(), y=const("c")), check=_check, exact=False)
def fuse_conv_sub_bias(b: Builder, m: Match):
    """``conv(x) - c -> conv(x, bias=bias - c)`` for a per-channel (or scalar) ``c`` (module docstring)."""
    return rebuild(b, m, "conv", bias=b.const(_new_bias(m, -1.0, 1.0)))


@rule(op.sub(x=const("c"), y=_conv(const("w"))), check=_check, exact=False)
def fuse_const_sub_conv_bias(b: Builder, m: Match):
    """``c - conv(x) -> conv(x, weight=-weight, bias=c - bias)`` (module docstring); negating the
    weight is exact."""
    w = np.asarray(m.value("w"))
    return rebuild(b, m, "conv", weight=b.const(np.negative(w)), bias=b.const(_new_bias(m, 1.0, -1.0)))


RULES = [fuse_conv_add_bias, fuse_conv_sub_bias, fuse_const_sub_conv_bias]
