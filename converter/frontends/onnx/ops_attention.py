"""Attention (opsets 23-25) and RotaryEmbedding (23) as IR ops.

Attention is written out in matmul / softmax rather than MIL's ``scaled_dot_product_attention``,
which has no scale, softcap, causal offset or debug output. The order is ONNX's: Q and K are both
multiplied by sqrt(scale) (default scale 1/sqrt(head_size)); K and V heads are repeated for
grouped-query attention (kv head h serves q heads h*r .. h*r+r-1, numpy ``repeat``); softcap
(``c * tanh(qk / c)``) comes before the additive bias; the bias sums the attention mask (bool:
False -> -inf; a mask shorter than the keys is padded with -inf), the causal frontier ``j <= i +
offset`` (offset = past length, or ``nonpad_kv_seqlen - q_len`` per batch), the sliding window
(opset 25) and the ``nonpad_kv_seqlen`` padding; a query row whose bias is all -inf gives zeros
(not NaN) in Y and the mode-3 output. ``qk_matmul_output`` modes (as the spec and onnxruntime; ONNX's
reference gives the softcapped scores in mode 0 too): 0 the raw scores, 1 softcapped, 2 softcapped +
bias, 3 the softmax.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir.core import Value
from ...ir.types import is_static_dim
from .context import FLOATS, Ctx, Node
from .registry import onnx_op
from .shape_util import dims, reshape_to

_NEG_INF = -np.inf


def _split_heads(ctx: Ctx, x: Value, heads: int) -> Value:
    """[B, S, heads*hs] -> [B, heads, S, hs]."""
    n, s, hidden = dims(x)
    if not is_static_dim(hidden) or hidden % heads:
        raise ctx.format_error(f"hidden size {hidden} is not a multiple of {heads} heads")
    return ctx.b.transpose(x=reshape_to(ctx, x, [n, s, heads, hidden // heads]), perm=[0, 2, 1, 3])


def _repeat_heads(ctx: Ctx, x: Value, reps: int) -> Value:
    """[B, H, S, d] -> [B, H*reps, S, d], each head repeated ``reps`` times in place."""
    n, h, s, d = dims(x)
    tiled = ctx.b.tile(x=ctx.b.expand_dims(x=x, axes=[2]), reps=[1, 1, reps, 1, 1])
    return reshape_to(ctx, tiled, [n, h * reps, s, d])


def _where_bias(ctx: Ctx, allowed: Value, like: Value) -> Value:
    """0 where ``allowed``, -inf elsewhere, shaped like ``allowed`` (the 0s are a tensor of that
    shape: coremltools types a select of two scalars as a scalar, whatever the condition's shape)."""
    b = ctx.b
    zeros = b.mul(x=b.cast(x=allowed, dtype=like.type.dtype.name), y=ctx.const(0.0, like))
    return b.select(cond=allowed, a=zeros, b=ctx.const(_NEG_INF, like))


class _Bias:
    """The additive attention bias, kept as a numpy array while it is known at conversion time."""

    def __init__(self, ctx: Ctx, like: Value) -> None:
        self.ctx, self.like = ctx, like
        self.static: np.ndarray | None = None
        self.runtime: Value | None = None

    def add_static(self, arr: np.ndarray) -> None:
        self.static = arr if self.static is None else self.static + arr

    def add_runtime(self, v: Value) -> None:
        self.runtime = v if self.runtime is None else self.ctx.b.add(x=self.runtime, y=v)

    def value(self) -> Value | None:
        if self.static is None:
            return self.runtime
        s = self.ctx.const(self.static, self.like)
        return s if self.runtime is None else self.ctx.b.add(x=self.runtime, y=s)


def _frontier(left: int, right: int, causal: bool) -> list[tuple[str, int]]:
    """Conditions on ``diff = i + offset - j`` as (op, bound) pairs: causal diff >= 0, window
    diff <= left and -diff <= right."""
    conds = []
    if causal:
        conds.append(("greater_equal", 0))
    if left >= 0:
        conds.append(("less_equal", left))
    if right >= 0:
        conds.append(("greater_equal", -right))
    return conds


def _position_bias(ctx: Ctx, bias: _Bias, sq: int, skv: int, offset: int | Value, causal: bool,
                   left: int, right: int) -> None:
    conds = _frontier(left, right, causal)
    if not conds:
        return
    i = np.arange(sq).reshape(sq, 1)
    j = np.arange(skv).reshape(1, skv)
    if isinstance(offset, int):
        diff = i + offset - j
        allowed = np.ones((sq, skv), bool)
        for op, bound in conds:
            allowed &= diff >= bound if op == "greater_equal" else diff <= bound
        bias.add_static(np.where(allowed, 0.0, _NEG_INF))
        return
    b = ctx.b  # per-batch offset [B] (int32): diff [B, q, kv]
    off = b.reshape(x=offset, shape=np.asarray([-1, 1, 1], np.int32))
    diff = b.add(x=off, y=b.const((i - j).astype(np.int32)))
    allowed = None
    for op, bound in conds:
        c = b.add_op(op, {"x": diff, "y": b.const(np.int32(bound))}).outputs[0]
        allowed = c if allowed is None else b.logical_and(x=allowed, y=c)
    bias.add_runtime(b.expand_dims(x=_where_bias(ctx, allowed, bias.like), axes=[1]))


def _mask_bias(ctx: Ctx, bias: _Bias, skv: int) -> None:
    b = ctx.b
    m = ctx.input(3)
    if m.type.dtype.name == "bool":
        m = _where_bias(ctx, m, bias.like)
    else:
        m = ctx.widen(m, FLOATS)
        if m.type.dtype != bias.like.type.dtype:
            m = b.cast(x=m, dtype=bias.like.type.dtype.name)
    last = m.type.shape[-1]
    if not is_static_dim(last):
        raise ctx.unsupported("attn_mask needs a static last dimension")
    if int(last) < skv:
        m = b.pad(x=m, pad=np.asarray([0, skv - int(last)], np.int32), mode="constant",
                  constant_val=ctx.const(_NEG_INF, bias.like))
    bias.add_runtime(m)


@onnx_op("Attention", versions=(23, 25))
def attention(ctx: Ctx, node: Node) -> list[Value | None]:
    b = ctx.b
    q, k, v = (ctx.input(i, FLOATS) for i in range(3))
    dt = q.type.dtype.name
    k, v = (x if x.type.dtype.name == dt else b.cast(x=x, dtype=dt) for x in (k, v))
    rank3 = ctx.rank(q) == 3
    if rank3:
        qh, kvh = ctx.attr("q_num_heads"), ctx.attr("kv_num_heads")
        if not qh or not kvh:
            raise ctx.format_error("3-D inputs need the q_num_heads and kv_num_heads attributes")
        q, k, v = _split_heads(ctx, q, qh), _split_heads(ctx, k, kvh), _split_heads(ctx, v, kvh)
    elif ctx.rank(q) != 4:
        raise ctx.format_error(f"Q must have rank 3 or 4, has {ctx.rank(q)}")
    has_past = ctx.has(4) or ctx.has(5)
    if has_past:
        if not (ctx.has(4) and ctx.has(5)):
            raise ctx.format_error("past_key and past_value must be given together")
        past_k, past_v = ctx.input(4, FLOATS), ctx.input(5, FLOATS)
        past_len = past_k.type.shape[2]
        k = b.concat(values=(b.cast(x=past_k, dtype=dt) if past_k.type.dtype.name != dt else past_k, k), axis=2)
        v = b.concat(values=(b.cast(x=past_v, dtype=dt) if past_v.type.dtype.name != dt else past_v, v), axis=2)
    present_k, present_v = k, v
    nonpad = ctx.optional_input(6, ("int32",)) if node.version >= 24 else None
    if nonpad is not None and has_past:
        raise ctx.format_error("nonpad_kv_seqlen cannot be combined with past_key / past_value")

    n, hq, sq, head = dims(q)
    hk, skv = dims(k)[1], dims(k)[2]
    scale = ctx.attr("scale")
    if scale is None:
        if not is_static_dim(head):
            raise ctx.unsupported("the default scale needs a static head size")
        scale = 1.0 / math.sqrt(head)
    if hq != hk:
        if not (is_static_dim(hq) and is_static_dim(hk)):
            raise ctx.unsupported("grouped-query attention needs static head counts")
        if hq % hk:
            raise ctx.format_error(f"{hq} query heads are not a multiple of {hk} key/value heads")
        k, v = _repeat_heads(ctx, k, hq // hk), _repeat_heads(ctx, v, hq // hk)
    root = ctx.const(math.sqrt(scale), q)
    scores = b.matmul(x=b.mul(x=q, y=root), y=b.mul(x=k, y=root), transpose_y=True)
    raw = scores
    softcap = float(ctx.attr("softcap", 0.0) or 0.0)
    if softcap > 0:
        c = ctx.const(softcap, q)
        scores = b.mul(x=b.tanh(x=b.real_div(x=scores, y=c)), y=c)

    causal = bool(ctx.attr("is_causal", 0))
    left = int(ctx.attr("left_window_size", -1)) if node.version >= 25 else -1
    right = int(ctx.attr("right_window_size", -1)) if node.version >= 25 else -1
    bias = _Bias(ctx, q)
    positional = causal or left >= 0 or right >= 0
    if (positional or ctx.has(3) or nonpad is not None) and not (is_static_dim(sq) and is_static_dim(skv)):
        raise ctx.unsupported("masks and causal attention need static sequence lengths")
    if ctx.has(3):
        _mask_bias(ctx, bias, skv)
    if positional:
        if nonpad is not None:
            offset: int | Value = b.sub(x=nonpad, y=b.const(np.int32(sq)))
        elif has_past:
            if not is_static_dim(past_len):
                raise ctx.unsupported("causal attention with a past of unknown length")
            offset = int(past_len)
        else:
            offset = 0
        _position_bias(ctx, bias, int(sq), int(skv), offset, causal, left, right)
    if nonpad is not None:
        keys = b.const(ctx.arange(int(skv), "the key positions"))
        valid = b.less(x=keys, y=b.reshape(x=nonpad, shape=np.asarray([-1, 1], np.int32)))
        bias.add_runtime(b.reshape(x=_where_bias(ctx, valid, q), shape=np.asarray([-1, 1, 1, int(skv)], np.int32)))

    bias_v = bias.value()
    biased = scores if bias_v is None else b.add(x=scores, y=bias_v)
    logits = biased
    precision = ctx.attr("softmax_precision")
    if precision == 1 and dt == "fp16":  # FLOAT: softmax in fp32
        logits = b.cast(x=logits, dtype="fp32")
    probs = b.softmax(x=logits, axis=-1)
    guard = _fully_masked_rows(ctx, bias, bias_v)
    if guard is not None:
        probs = b.select(cond=guard, a=ctx.const(0.0, probs), b=probs)
    if probs.type.dtype.name != dt:
        probs = b.cast(x=probs, dtype=dt)
    y = b.matmul(x=probs, y=v)
    if rank3:
        y = reshape_to(ctx, b.transpose(x=y, perm=[0, 2, 1, 3]), [n, sq, -1])
    mode = int(ctx.attr("qk_matmul_output_mode", 0) or 0)
    debug = {0: raw, 1: scores, 2: biased, 3: probs}.get(mode)
    if debug is None:
        raise ctx.format_error(f"qk_matmul_output_mode must be 0..3, not {mode}")
    return [y, present_k, present_v, debug]


def _fully_masked_rows(ctx: Ctx, bias: _Bias, bias_v: Value | None) -> Value | np.ndarray | None:
    """Where a query row's bias is -inf everywhere (those rows must give zeros, not NaN)."""
    if bias_v is None:
        return None
    if bias.runtime is None:
        rows = np.isneginf(bias.static.max(axis=-1, keepdims=True))
        return rows if rows.any() else None
    b = ctx.b
    return b.equal(x=b.reduce_max(x=bias_v, axes=[-1], keep_dims=True), y=ctx.const(_NEG_INF, bias_v))


@onnx_op("RotaryEmbedding", versions=(23, 23))
def rotary_embedding(ctx: Ctx, node: Node) -> list[Value]:
    """x * cos + rotate(x) * sin on the first ``rotary_embedding_dim`` features of each head; the
    halves are the two contiguous halves, or even / odd features when ``interleaved``."""
    b = ctx.b
    x = ctx.input(0, FLOATS)
    cos, sin = ctx.input(1, FLOATS), ctx.input(2, FLOATS)
    cos, sin = (c if c.type.dtype == x.type.dtype else b.cast(x=c, dtype=x.type.dtype.name) for c in (cos, sin))
    shape = dims(x)
    if len(shape) == 4:  # [B, H, S, hs] -> [B, S, H, hs]
        xs = b.transpose(x=x, perm=[0, 2, 1, 3])
    elif len(shape) == 3:
        heads = int(ctx.attr("num_heads", 0) or 0)
        if not heads or not is_static_dim(shape[2]) or shape[2] % heads:
            raise ctx.format_error("a 3-D input needs num_heads dividing its hidden size")
        xs = reshape_to(ctx, x, [shape[0], shape[1], heads, shape[2] // heads])
    else:
        raise ctx.format_error(f"input must have rank 3 or 4, has {len(shape)}")
    head = dims(xs)[3]
    if not is_static_dim(head):
        raise ctx.unsupported("the head size must be static")
    rot = int(ctx.attr("rotary_embedding_dim", 0) or 0) or head
    if rot > head or rot % 2:
        raise ctx.format_error(f"rotary_embedding_dim {rot} must be even and at most the head size {head}")
    if ctx.has(3):
        pos = ctx.input(3, ("int32",))
        cos = b.gather(x=cos, indices=pos, axis=0)
        sin = b.gather(x=sin, indices=pos, axis=0)
    cos, sin = b.expand_dims(x=cos, axes=[-2]), b.expand_dims(x=sin, axes=[-2])  # [B, S, 1, rot/2]
    xr = xs if rot == head else _last_slice(ctx, xs, 0, rot)
    interleaved = bool(ctx.attr("interleaved", 0))
    if interleaved:
        pairs = reshape_to(ctx, xr, [*dims(xr)[:3], rot // 2, 2])
        x1 = b.squeeze(x=_last_slice(ctx, pairs, 0, 1), axes=[-1])
        x2 = b.squeeze(x=_last_slice(ctx, pairs, 1, 2), axes=[-1])
    else:
        x1, x2 = _last_slice(ctx, xr, 0, rot // 2), _last_slice(ctx, xr, rot // 2, rot)
    real = b.sub(x=b.mul(x=cos, y=x1), y=b.mul(x=sin, y=x2))
    imag = b.add(x=b.mul(x=sin, y=x1), y=b.mul(x=cos, y=x2))
    if interleaved:
        out = reshape_to(ctx, b.stack(values=(real, imag), axis=-1), dims(xr))
    else:
        out = b.concat(values=(real, imag), axis=-1)
    if rot != head:
        out = b.concat(values=(out, _last_slice(ctx, xs, rot, head)), axis=-1)
    if len(shape) == 4:
        return [b.transpose(x=out, perm=[0, 2, 1, 3])]
    return [reshape_to(ctx, out, shape)]


def _last_slice(ctx: Ctx, x: Value, start: int, stop: int) -> Value:
    """``x[..., start:stop]``."""
    r = ctx.rank(x)
    begin = [0] * (r - 1) + [start]
    end = [0] * (r - 1) + [stop]
    mask = [True] * (r - 1) + [False]
    return ctx.b.slice_by_index(x=x, begin=np.asarray(begin, np.int32), end=np.asarray(end, np.int32),
                                begin_mask=mask, end_mask=mask)
