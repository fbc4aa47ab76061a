"""conv / conv_transpose followed by batch_norm -> one conv with the normalization folded in.

    %y = conv(x=%x, weight=%w, bias=%b?, ...)                  (or conv_transpose)
    %z = batch_norm(x=%y, mean=%m, variance=%v, gamma=%g?, beta=%be?, epsilon=eps?)
        ->
    %z = conv(x=%x, weight=%w * s, bias=(%b - %m) * s + %be, ...)    s = %g / sqrt(%v + eps), per output channel

batch_norm computes ``gamma * (y - mean) / sqrt(variance + epsilon) + beta`` per channel (axis 1);
gamma defaults to 1, beta to 0, epsilon to the op's default, a missing conv bias to 0 (the fused
conv then gets one). The scale multiplies the kernel taps of each *output* channel, laid out as the
op definition says (``scale_output_channels``: conv ``[C_out, C_in/g, *K]``, conv_transpose
``[C_in, C_out/g, *K]`` per group). The folded weight and bias are computed in float64 and
rounded once to the weight's dtype. Not bit-exact (the conv rounds once where conv then
batch_norm round several times); every converter does this fusion (coremltools:
``fuse_conv_batchnorm``).
"""

from __future__ import annotations

import numpy as np

from ...ir.builder import Builder
from ..rewrite import Match, const, op, optional, rule, var
from ._common import param, rebuild, static_dim


def _vector(m: Match, name: str, default: float, n: int) -> np.ndarray:
    if name not in m:
        return np.full(n, default, np.float64)
    return np.asarray(m.value(name), np.float64).reshape(-1)


def _check(m: Match) -> str | None:
    channels = static_dim(m.root.outputs[0], 1)
    if isinstance(channels, str):
        return channels
    if param(m.root, "epsilon") is None:
        return "epsilon is not a constant"
    s, bias = folded_scale_bias(m, channels)
    if not (np.all(np.isfinite(s)) and np.all(np.isfinite(bias))):
        return "the folded scale is not finite (variance + epsilon <= 0, or inf/NaN parameters)"
    return None


def folded_scale_bias(m: Match, channels: int) -> tuple[np.ndarray, np.ndarray]:
    """Per channel, in float64: the scale ``s = gamma / sqrt(variance + epsilon)`` of the weight
    and the new bias ``(bias - mean) * s + beta``."""
    eps = float(np.asarray(param(m.root, "epsilon"), np.float64).reshape(-1)[0])
    mean, var_ = _vector(m, "mean", 0.0, channels), _vector(m, "var", 1.0, channels)
    gamma, beta = _vector(m, "gamma", 1.0, channels), _vector(m, "beta", 0.0, channels)
    with np.errstate(all="ignore"):
        s = gamma / np.sqrt(var_ + eps)
        return s, (_vector(m, "b", 0.0, channels) - mean) * s + beta


@rule(op.batch_norm(x=op.any_of("conv", "conv_transpose")("conv", x=var("x"), weight=const("w"),
                                                          bias=optional(const("b"))),
                    mean=const("mean"), variance=const("var"), gamma=optional(const("gamma")),
                    beta=optional(const("beta"))), check=_check, exact=False)
def fuse_conv_batchnorm(b: Builder, m: Match):
    """conv / conv_transpose + batch_norm -> conv with folded weight and bias (module docstring)."""
    conv = m.op("conv")
    channels = static_dim(m.root.outputs[0], 1)
    assert isinstance(channels, int)
    s, bias = folded_scale_bias(m, channels)
    w = np.asarray(m.value("w"))
    groups = int(np.asarray(param(conv, "groups")).reshape(-1)[0])
    weight = conv.opdef.scale_output_channels(w.astype(np.float64), s, groups).astype(w.dtype)
    bias_dtype = (m["b"] if "b" in m else m["w"]).type.dtype.storage
    return rebuild(b, m, "conv", weight=b.const(weight), bias=b.const(bias.astype(bias_dtype)))


RULES = [fuse_conv_batchnorm]
