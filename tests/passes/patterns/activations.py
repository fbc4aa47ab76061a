"""Activation and normalization patterns (converter/passes/fusions/: fuse_activations,
fuse_normalizations): the decomposed forms, with the arrangement, operand orders and parameters
drawn.

Tolerances (the property test compares final outputs, after up to 8 random ops downstream):

- relu6, leaky_relu, prelu: 0 (bit-identical up to the sign of a zero, which compares equal).
- gelu, silu, softsign, softplus: rtol 2e-6, atol 1e-6. Alone, decomposition and fused op are at
  most 1 ulp apart (relative 1.2e-7) beyond an absolute 1e-7 (measured on 2e5 inputs, see
  tests/passes/test_fusions_activations.py); random ops downstream (a sub of nearly equal values,
  a product) turn that ulp into a somewhat larger error. Measured: with rtol = atol = 1e-7 the
  property test fails within 3000 examples (2.4e-7 absolute, 1.9e-7 relative: 2 ulps); with
  rtol = atol = 1e-6 it passed 3 x 1500 examples; the bound keeps a factor 2 of that.
- layer_norm, instance_norm: rtol 1e-5, atol 1e-5, with the pattern's input squashed to (-1, 1)
  by tanh and epsilon >= 1e-3: the mean's rounding (at most 6e-8 on such rows) is amplified by up
  to 1/sqrt(epsilon) = 32 and by gamma (< 2.5), about 5e-6 at worst. Without the squashing, the
  random program's values (1e3 and more, with small spread) make a layer norm so ill-conditioned
  that decomposition and fused op differ in the leading digits: no tolerance would be honest.
  Passed 3 x 1500 examples at that bound.
- softplus's input is clipped to [-80, 80]: above 88.7 the decomposition overflows to inf where
  softplus is finite (documented in softplus.py), a difference no tolerance covers.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from converter.ir.builder import Builder
from converter.ir.core import Value
from converter.passes.fusions._params import static_shape

from . import Sprinkle

ROUNDING = dict(rtol=2e-6, atol=1e-6)
NORM = dict(rtol=1e-5, atol=1e-5)


def _f32(v: float) -> np.float32:
    return np.float32(v)


def _mul(b: Builder, x: Value, y, swap: bool) -> Value:
    return b.mul(x=y, y=x) if swap else b.mul(x=x, y=y)


def _gelu_exact(b: Builder, x: Value, draw) -> Value:
    if draw(st.booleans()):
        s = b.real_div(x=x, y=_f32(np.sqrt(2.0)))
    else:
        s = _mul(b, x, _f32(1 / np.sqrt(2.0)), draw(st.booleans()))
    inner = b.add(x=b.erf(x=s), y=_f32(1.0))
    return _half_x_inner(b, x, inner, draw)


def _half_x_inner(b: Builder, x: Value, inner: Value, draw) -> Value:
    arrangement = draw(st.sampled_from(["half_x", "half_last", "half_inner"]))
    sw = draw(st.booleans())
    if arrangement == "half_x":
        return _mul(b, _mul(b, x, _f32(0.5), sw), inner, draw(st.booleans()))
    if arrangement == "half_last":
        return _mul(b, _mul(b, x, inner, sw), _f32(0.5), draw(st.booleans()))
    return _mul(b, x, _mul(b, inner, _f32(0.5), sw), draw(st.booleans()))


def _gelu_tanh(b: Builder, x: Value, draw) -> Value:
    cube = b.pow(x=x, y=_f32(3.0)) if draw(st.booleans()) else _mul(b, b.mul(x=x, y=x), x, draw(st.booleans()))
    poly = b.add(x=x, y=_mul(b, cube, _f32(0.044715), draw(st.booleans())))
    t = b.tanh(x=_mul(b, poly, _f32(np.sqrt(2.0 / np.pi)), draw(st.booleans())))
    return _half_x_inner(b, x, b.add(x=_f32(1.0), y=t), draw)


def _silu(b: Builder, x: Value, draw) -> Value:
    return _mul(b, x, b.sigmoid(x=x), draw(st.booleans()))


def _leaky_max(b: Builder, x: Value, draw) -> Value:
    alpha = _f32(draw(st.sampled_from([0.01, 0.1, 0.2, 0.3, 0.65])))
    n = _mul(b, x, alpha, draw(st.booleans()))
    return b.maximum(x=n, y=x) if draw(st.booleans()) else b.maximum(x=x, y=n)


def _leaky_select(b: Builder, x: Value, draw) -> Value:
    alpha = _f32(draw(st.sampled_from([0.1, 0.3, 1.5, -0.4])))
    n = _mul(b, x, alpha, draw(st.booleans()))
    cond = draw(st.sampled_from(["greater", "greater_equal", "less", "less_equal"]))
    c = getattr(b, cond)(x=x, y=_f32(0.0))
    return b.select(cond=c, a=x, b=n) if cond.startswith("greater") else b.select(cond=c, a=n, b=x)


def _as_rank3(b: Builder, x: Value) -> tuple[Value, list[int]] | None:
    """x reshaped to [1, C, W] (C = its first dim for rank 2, else 1), with x's shape to go back."""
    shape = static_shape(x)
    if not shape:
        return None
    c = shape[0] if len(shape) == 2 else 1
    return b.reshape(x=x, shape=np.asarray([1, c, -1], np.int32)), shape


def _prelu(b: Builder, x: Value, draw) -> Value | None:
    """relu(x) + alpha * min(x, 0) (or Keras' relu(x) - alpha * relu(-x)) with one alpha per channel."""
    r = _as_rank3(b, x)
    if r is None:
        return None
    x3, shape = r
    c = static_shape(x3)[1]
    alpha = np.asarray(draw(st.lists(st.sampled_from([0.05, 0.25, 0.4, 0.75, 1.5]), min_size=c, max_size=c)),
                       np.float32).reshape(c, 1)
    pos = b.relu(x=x3)
    if draw(st.booleans()):
        neg = _mul(b, b.minimum(x=x3, y=_f32(0.0)), alpha, draw(st.booleans()))
        y = b.add(x=pos, y=neg) if draw(st.booleans()) else b.add(x=neg, y=pos)
    else:
        r_neg = b.relu(x=b.mul(x=x3, y=_f32(-1.0)))
        y = b.add(x=pos, y=_mul(b, r_neg, -alpha, False)) if draw(st.booleans()) else b.sub(
            x=pos, y=_mul(b, r_neg, alpha, True))
    return b.reshape(x=y, shape=np.asarray(shape, np.int32))


def _relu6(b: Builder, x: Value, draw) -> Value:
    form = draw(st.sampled_from(["clip", "max_min", "min_max", "relu_min"]))
    if form == "clip":
        return b.clip(x=x, alpha=_f32(0.0), beta=_f32(6.0))
    if form == "max_min":
        return b.minimum(x=_f32(6.0), y=b.maximum(x=x, y=_f32(0.0)))
    if form == "min_max":
        return b.maximum(x=b.minimum(x=_f32(6.0), y=x), y=_f32(0.0))
    return b.minimum(x=b.relu(x=x), y=_f32(6.0))


def _softplus(b: Builder, x: Value, draw) -> Value:
    z = b.clip(x=x, alpha=_f32(-80.0), beta=_f32(80.0))
    e = b.exp(x=z)
    return b.log(x=b.add(x=e, y=_f32(1.0)) if draw(st.booleans()) else b.add(x=_f32(1.0), y=e))


def _softsign(b: Builder, x: Value, draw) -> Value:
    d = b.add(x=b.abs(x=x), y=_f32(1.0))
    return b.real_div(x=x, y=d)


def _normalize(b: Builder, z: Value, axes: list[int], draw) -> Value:
    """The hand-written normalization of ``z`` over ``axes`` (keep_dims), epsilon drawn >= 1e-3."""
    rank = len(z.type.shape)
    written = [a - rank if draw(st.booleans()) else a for a in axes]
    mean = b.reduce_mean(x=z, axes=np.asarray(written, np.int32), keep_dims=True)
    c = b.sub(x=z, y=mean)
    sq = draw(st.sampled_from(["mul", "square", "pow"]))
    sq_v = b.mul(x=c, y=c) if sq == "mul" else b.square(x=c) if sq == "square" else b.pow(x=c, y=_f32(2.0))
    var = b.reduce_mean(x=sq_v, axes=np.asarray(axes, np.int32), keep_dims=True)
    ve = b.add(x=var, y=_f32(draw(st.sampled_from([1e-3, 4e-3, 2e-2]))))
    if draw(st.booleans()):
        eps = draw(st.sampled_from([None, 1e-12, 3e-3]))
        r = b.rsqrt(x=ve) if eps is None else b.rsqrt(x=ve, epsilon=_f32(eps))
        return _mul(b, c, r, draw(st.booleans()))
    return b.real_div(x=c, y=b.sqrt(x=ve))


def _layer_norm(b: Builder, x: Value, draw) -> Value | None:
    t = x.type
    if not t.shape:
        return None
    z = b.tanh(x=x)
    n = _normalize(b, z, [len(t.shape) - 1], draw)
    shape = static_shape(x)
    if shape is None:
        return n
    d = shape[-1]
    if draw(st.booleans()):
        gamma = np.linspace(0.4, 2.2, d, dtype=np.float32)[::-1].copy()
        n = _mul(b, n, gamma, draw(st.booleans()))
    if draw(st.booleans()):
        n = b.add(x=n, y=np.linspace(-0.3, 0.45, d, dtype=np.float32))
    return n


def _instance_layouts(shape: list[int]) -> list[list[int]]:
    """The [1, C, W] and [1, C, H, W] views of ``shape``'s elements with C >= 2 channels (so
    gamma/beta are per channel, not a scalar the layer_norm rules take) and >= 2 elements per
    channel, whose non-unit sizes differ from ``shape``'s: a reshape that only inserts unit axes
    is scaffolding, which remove_scaffolding sinks the whole normalization below (to a rank-2
    layer_norm with per-row gamma that no instance_norm rule can take)."""
    n = int(np.prod(shape))
    own = [d for d in shape if d != 1]
    out = []
    for c in range(2, n // 2 + 1):
        if n % c:
            continue
        w = n // c
        out.append([1, c, w])
        out.extend([1, c, h, w // h] for h in range(2, w // 2 + 1) if w % h == 0)
    return [s for s in out if [d for d in s if d != 1] != own]


def _instance_norm(b: Builder, x: Value, draw) -> Value | None:
    shape = static_shape(x)
    layouts = _instance_layouts(shape) if shape else []
    if not layouts:
        return None
    layout = draw(st.sampled_from(layouts))
    c = layout[1]
    z = b.reshape(x=b.tanh(x=x), shape=np.asarray(layout, np.int32))
    n = _normalize(b, z, list(range(2, len(layout))), draw)
    one = [1] * (len(layout) - 2)
    if draw(st.booleans()):
        n = _mul(b, n, np.linspace(0.6, 1.9, c, dtype=np.float32).reshape(c, *one), draw(st.booleans()))
    if draw(st.booleans()):
        n = b.add(x=n, y=np.linspace(-0.5, 0.25, c, dtype=np.float32).reshape(1, c, *one))
    return b.reshape(x=n, shape=np.asarray(shape, np.int32))


SPRINKLES = [
    Sprinkle("gelu exact decomposed", _gelu_exact, fires="fuse_activations", **ROUNDING),
    Sprinkle("gelu tanh decomposed", _gelu_tanh, fires="fuse_activations", **ROUNDING),
    Sprinkle("x * sigmoid(x)", _silu, fires="silu", **ROUNDING),
    Sprinkle("max(x, alpha x)", _leaky_max, fires="leaky_relu_from_max"),
    Sprinkle("select(x > 0, x, alpha x)", _leaky_select, fires="fuse_activations"),
    Sprinkle("relu(x) + alpha min(x, 0), per channel", _prelu, fires="fuse_activations"),
    Sprinkle("relu6 as clip / min / max", _relu6, fires="fuse_activations"),
    Sprinkle("log(1 + exp(x))", _softplus, fires="softplus", **ROUNDING),
    Sprinkle("x / (1 + |x|)", _softsign, fires="softsign", **ROUNDING),
    Sprinkle("layer norm by hand", _layer_norm, fires="fuse_normalizations", **NORM),
    Sprinkle("instance norm by hand", _instance_norm, fires="fuse_normalizations", **NORM),
]
