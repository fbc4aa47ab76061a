"""DFT, STFT, HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix.

The IR has no FFT: a DFT is two or four ``matmul`` with cos/sin matrices. ONNX holds complex
values as a trailing axis of 2 (real, imaginary; 1 for a real signal). With ``W = 2*pi*k*n/L``:

- forward: ``Y_re = re@cos + im@sin``, ``Y_im = im@cos - re@sin`` (k < L, or k <= L//2 onesided);
- inverse: ``(re@cos - im@sin) / L`` and ``(re@sin + im@cos) / L``;
- inverse onesided (IRFFT, real output of length L): bins k <= L//2 weighted 1 (k = 0 and, L even,
  k = L/2) or 2 (the conjugate-symmetric rest), imaginary parts of the self-conjugate bins ignored
  (their sin column is exactly 0), as numpy's irfft.

Angles are reduced exactly (``k*n mod L``) before cos/sin. A signal shorter than ``dft_length`` is
zero-padded (the matrix just has fewer rows), a longer one truncated. When the length is known at
conversion time the matrices are float64-computed constants rounded to fp32; STFT with a run-time
frame length builds them with ``range_1d``/``cos``/``sin`` ops. The DFT axis and ``dft_length``
must be known at conversion time, except DFT-20's ``axis`` input: a run-time axis selects
among one DFT per possible axis (``cond`` blocks).

Windows: the ONNX formulas (``N' = size`` periodic, ``size - 1`` symmetric): Hann ``sin^2(pi n / N')``,
Hamming ``25/46 - 21/46 cos(2 pi n / N')``, Blackman ``0.42 - 0.5 cos(2 pi n / N') + 0.08 cos(4 pi n / N')``;
a constant array when ``size`` is known, else ops. MelWeightMatrix follows the ONNX definition
(mel(f) = 2595 log10(1 + f/700); num_mel_bins + 2 band edges spaced evenly in mel by
(high - low) / (num_mel_bins + 2), mapped to bins ``floor((dft_length + 1) * f / sample_rate)``,
triangles of peak 1) and is built at conversion time only (refused when an input is a run-time value).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import onnx

from ...ir.builder import Builder
from ...ir.core import Value
from ...ir.types import is_static_dim
from .context import FLOATS, Ctx, Node, normalize_axis
from .registry import onnx_op

# -- windows -----------------------------------------------------------------------------------------

#: a0 + a1 cos(2 pi n / N') + a2 cos(4 pi n / N') (Hann is computed as sin^2, its exact form)
_COSINE_SUMS = {"HammingWindow": (25.0 / 46.0, -21.0 / 46.0, 0.0), "BlackmanWindow": (0.42, -0.5, 0.08)}


def _window_np(op: str, size: int, periodic: bool) -> np.ndarray:
    n = np.arange(size, dtype=np.float64)
    denom = size if periodic else size - 1
    with np.errstate(all="ignore"):
        x = n / denom
        if op == "HannWindow":
            return np.sin(np.pi * x) ** 2
        a0, a1, a2 = _COSINE_SUMS[op]
        return a0 + a1 * np.cos(2 * np.pi * x) + a2 * np.cos(4 * np.pi * x)


def _window_ops(ctx: Ctx, op: str, size: Value, periodic: bool) -> Value:
    b = ctx.b
    n = b.cast(x=b.range_1d(start=np.int32(0), end=size, step=np.int32(1)), dtype="fp32")
    denom = b.cast(x=size if periodic else b.sub(x=size, y=np.int32(1)), dtype="fp32")
    x = b.real_div(x=n, y=denom)
    if op == "HannWindow":
        s = b.sin(x=b.mul(x=x, y=np.float32(math.pi)))
        return b.mul(x=s, y=s)
    a0, a1, a2 = _COSINE_SUMS[op]
    y = b.add(x=b.mul(x=b.cos(x=b.mul(x=x, y=np.float32(2 * math.pi))), y=np.float32(a1)), y=np.float32(a0))
    if a2:
        y = b.add(x=y, y=b.mul(x=b.cos(x=b.mul(x=x, y=np.float32(4 * math.pi))), y=np.float32(a2)))
    return y


@onnx_op("HannWindow", "HammingWindow", "BlackmanWindow", versions=(17, 28))
def window(ctx: Ctx, node: Node) -> list[Value | np.ndarray]:
    periodic = bool(int(ctx.attr("periodic", 1)))
    out_type = int(ctx.attr("output_datatype", onnx.TensorProto.FLOAT))
    known = ctx.const_input(0)
    if known is not None:
        size = int(np.asarray(known).reshape(-1)[0])
        if size < 0:
            raise ctx.format_error(f"size must not be negative, got {size}")
        w = _window_np(node.op_type, size, periodic)
        return [w.astype(onnx.helper.tensor_dtype_to_np_dtype(out_type))]
    size = ctx.input(0, ("int32",))
    if size.type.shape not in ((), None):
        size = ctx.b.reshape(x=size, shape=np.zeros(0, np.int32))
    return [_window_ops(ctx, node.op_type, size, periodic)]


# -- DFT ---------------------------------------------------------------------------------------------


def _tables(rows: int, cols: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """cos / sin of 2*pi*r*c/length for r < rows, c < cols, angles reduced exactly; values that are
    zero in exact arithmetic are exactly zero."""
    m = np.outer(np.arange(rows, dtype=np.int64), np.arange(cols, dtype=np.int64)) % length
    angle = 2 * np.pi * m / length
    cos, sin = np.cos(angle), np.sin(angle)
    cos[(4 * m) % length == 0] = np.round(cos[(4 * m) % length == 0])  # multiples of pi/2: exact
    sin[(4 * m) % length == 0] = np.round(sin[(4 * m) % length == 0])
    return cos, sin


def _matrices(inverse: bool, onesided: bool, rows: int, length: int) -> dict[str, np.ndarray]:
    """The constant matrices: names re_re, im_re (-> real out) and re_im, im_im (-> imaginary out)."""
    if inverse and onesided:  # rows are bins k (< length//2 + 1), columns samples n
        cos, sin = _tables(rows, length, length)
        w = np.full((rows, 1), 2.0)
        w[0] = 1.0
        if length % 2 == 0 and rows > length // 2:
            w[length // 2] = 1.0
        return {"re_re": w * cos / length, "im_re": -w * sin / length}
    cols = length // 2 + 1 if onesided else length
    cos, sin = _tables(rows, cols, length)
    if inverse:
        return {"re_re": cos / length, "im_re": -sin / length, "re_im": sin / length, "im_im": cos / length}
    return {"re_re": cos, "im_re": sin, "re_im": -sin, "im_im": cos}


def _runtime_matrices(ctx: Ctx, rows: Value, length: Value, onesided: bool) -> dict[str, Value]:
    """Forward-DFT matrices for a length known only at run time (rows = length)."""
    b = ctx.b
    cols = b.add(x=b.floor_div(x=length, y=np.int32(2)), y=np.int32(1)) if onesided else length
    r = b.expand_dims(x=b.range_1d(start=np.int32(0), end=rows, step=np.int32(1)), axes=[1])
    c = b.expand_dims(x=b.range_1d(start=np.int32(0), end=cols, step=np.int32(1)), axes=[0])
    m = b.mod(x=b.mul(x=r, y=c), y=length)
    angle = b.real_div(x=b.mul(x=b.cast(x=m, dtype="fp32"), y=np.float32(2 * math.pi)), y=b.cast(x=length, dtype="fp32"))
    # exact zeros where the exact value is 0 (sin at multiples of pi, cos at odd multiples of pi/2)
    zero = np.float32(0.0)
    sin = b.select(cond=b.equal(x=b.mod(x=b.mul(x=m, y=np.int32(2)), y=length), y=np.int32(0)), a=zero,
                   b=b.sin(x=angle))
    cos = b.select(cond=b.equal(x=b.mod(x=b.mul(x=m, y=np.int32(4)), y=b.mul(x=length, y=np.int32(2))), y=length),
                   a=zero, b=b.cos(x=angle))
    neg_sin = b.mul(x=sin, y=np.float32(-1.0))
    return {"re_re": cos, "im_re": sin, "re_im": neg_sin, "im_im": cos}


def dft_last_axis(ctx: Ctx, re: Value, im: Value | None, mats: dict[str, Value | np.ndarray]) -> tuple[Value, Value | None]:
    """(real, imaginary or None) of the transform of ``re + i im`` along their last axis."""
    b = ctx.b

    def mm(x: Value, key: str) -> Value:
        m = mats[key]
        return b.matmul(x=x, y=m.astype(np.float32) if isinstance(m, np.ndarray) else m)

    def combine(key_re: str, key_im: str) -> Value:
        y = mm(re, key_re)
        return y if im is None else b.add(x=y, y=mm(im, key_im))

    out_re = combine("re_re", "im_re")
    out_im = combine("re_im", "im_im") if "re_im" in mats else None
    return out_re, out_im


def _split_complex(ctx: Ctx, x: Value) -> tuple[Value, Value | None]:
    c = x.type.shape[-1]
    if c not in (1, 2):
        raise ctx.unsupported(f"the last axis (real/imaginary) must have size 1 or 2, has {c}")
    re = ctx.b.gather(x=x, indices=np.int32(0), axis=-1)
    im = ctx.b.gather(x=x, indices=np.int32(1), axis=-1) if c == 2 else None
    return re, im


def _join_complex(ctx: Ctx, re: Value, im: Value | None) -> Value:
    if im is None:
        return ctx.b.expand_dims(x=re, axes=[-1])
    return ctx.b.stack(values=(re, im), axis=-1)


def _take_first(ctx: Ctx, x: Value, count: int) -> Value:
    """The first ``count`` entries of ``x``'s last axis."""
    r = ctx.rank(x)
    return ctx.b.slice_by_index(x=x, begin=[0] * r, end=[0] * (r - 1) + [count], begin_mask=[True] * r,
                                end_mask=[True] * (r - 1) + [False])


def _dft(ctx: Ctx, x: Value, axis: int, length: int | None, inverse: bool, onesided: bool) -> Value:
    b = ctx.b
    rank = ctx.rank(x)
    if not 0 <= axis <= rank - 2:
        raise ctx.format_error(f"axis {axis} is not a signal axis of a rank-{rank} input")
    n = x.type.shape[axis]
    if not is_static_dim(n):
        raise ctx.unsupported("the length of the DFT axis must be known at conversion time")
    n = int(n)
    if length is None:
        length = 2 * (n - 1) if inverse and onesided else n
    if length < 1:
        raise ctx.format_error(f"dft_length must be positive, got {length}")
    if onesided and not inverse and x.type.shape[-1] == 2:
        raise ctx.unsupported("a one-sided forward DFT takes a real signal (last axis of size 1)")
    re, im = _split_complex(ctx, x)
    perm = [d for d in range(rank - 1) if d != axis] + [axis]
    moved = perm != list(range(rank - 1))
    if moved:
        re = b.transpose(x=re, perm=perm)
        im = b.transpose(x=im, perm=perm) if im is not None else None
    rows = min(n, length // 2 + 1) if inverse and onesided else min(n, length)
    if rows < n:
        re = _take_first(ctx, re, rows)
        im = _take_first(ctx, im, rows) if im is not None else None
    y_re, y_im = dft_last_axis(ctx, re, im, _matrices(inverse, onesided, rows, length))  # type: ignore[arg-type]
    if moved:
        back = [perm.index(d) for d in range(rank - 1)]
        y_re = b.transpose(x=y_re, perm=back)
        y_im = b.transpose(x=y_im, perm=back) if y_im is not None else None
    return _join_complex(ctx, y_re, y_im)


def _const_int(ctx: Ctx, i: int, what: str) -> int | None:
    if not ctx.has(i):
        return None
    return int(np.asarray(ctx.require_const(i, what)).reshape(-1)[0])


@onnx_op("DFT", versions=(17, 17))
def dft17(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, FLOATS)
    axis = normalize_axis(ctx, int(ctx.attr("axis", 1)), ctx.rank(x))
    return [_dft(ctx, x, axis, _const_int(ctx, 1, "dft_length"), bool(ctx.attr("inverse", 0)),
                 bool(ctx.attr("onesided", 0)))]


@onnx_op("DFT", versions=(20, 28))
def dft20(ctx: Ctx, node: Node) -> list[Value]:
    """A run-time ``axis`` selects among one DFT per possible axis (a chain of ``cond``)."""
    x = ctx.input(0, FLOATS)
    length = _const_int(ctx, 1, "dft_length")
    inverse, onesided = bool(ctx.attr("inverse", 0)), bool(ctx.attr("onesided", 0))
    rank = ctx.rank(x)
    if not ctx.has(2) or ctx.const_input(2) is not None:
        axis = _const_int(ctx, 2, "axis")
        axis = normalize_axis(ctx, -2 if axis is None else axis, rank)
        return [_dft(ctx, x, axis, length, inverse, onesided)]
    b = ctx.b
    given = ctx.input(2, ("int32",))
    if given.type.shape != ():
        given = b.reshape(x=given, shape=np.zeros(0, np.int32))
    axis_v = b.select(cond=b.less(x=given, y=np.int32(0)), a=b.add(x=given, y=np.int32(rank)), b=given)

    def valid(a: int) -> bool:  # an axis the transform is defined for (others are malformed input)
        n = x.type.shape[a]
        if not is_static_dim(n):
            return True  # refused with the reason by _dft
        return (length if length is not None else 2 * (int(n) - 1) if inverse and onesided else int(n)) >= 1

    candidates = [a for a in range(rank - 1) if valid(a)]
    if not candidates:
        raise ctx.format_error("no axis of the input can be transformed")

    def chain(nb: Builder, k: int) -> list[Value]:
        a = candidates[k]
        if k == len(candidates) - 1:
            return [_dft(dataclasses.replace(ctx, b=nb), x, a, length, inverse, onesided)]
        return list(nb.cond(nb.equal(x=axis_v, y=np.int32(a)),
                            lambda tb: [_dft(dataclasses.replace(ctx, b=tb), x, a, length, inverse, onesided)],
                            lambda fb: chain(fb, k + 1)))

    return chain(b, 0)


# -- STFT --------------------------------------------------------------------------------------------


def _scalar_int(ctx: Ctx, i: int) -> Value:
    v = ctx.input(i, ("int32",))
    return v if v.type.shape == () else ctx.b.reshape(x=v, shape=np.zeros(0, np.int32))


@onnx_op("STFT", versions=(17, 28))
def stft(ctx: Ctx, node: Node) -> list[Value]:
    """Frames gathered with an index matrix [frames, frame_length] (from the run-time step and
    length when they are not constants), windowed, then the DFT of each frame."""
    b = ctx.b
    x = ctx.input(0, FLOATS)
    if ctx.rank(x) != 3:
        raise ctx.format_error(f"signal must be [batch, length, 1 or 2], has rank {ctx.rank(x)}")
    onesided = bool(int(ctx.attr("onesided", 1)))
    if onesided and x.type.shape[-1] == 2:
        raise ctx.unsupported("a one-sided STFT takes a real signal (last axis of size 1)")
    win = ctx.optional_input(2, FLOATS)
    step_c, flen_c = ctx.const_input(1), ctx.const_input(3)
    sig_len = x.type.shape[1]
    if flen_c is not None:
        flen_c = int(np.asarray(flen_c).reshape(-1)[0])
    elif not ctx.has(3):
        if win is not None:
            wl = win.type.shape[0]
            flen_c = int(wl) if is_static_dim(wl) else None
        else:
            flen_c = int(sig_len) if is_static_dim(sig_len) else None
    if step_c is not None and flen_c is not None and is_static_dim(sig_len):
        step = int(np.asarray(step_c).reshape(-1)[0])
        if step < 1 or flen_c < 1 or flen_c > int(sig_len):
            raise ctx.format_error(f"frame_step {step} / frame_length {flen_c} do not fit a signal of {sig_len}")
        frames = (int(sig_len) - flen_c) // step + 1
        idx = (np.arange(frames)[:, None] * step + np.arange(flen_c)[None, :]).astype(np.int32)
        framed = b.gather(x=x, indices=idx, axis=1)  # [batch, frames, F, C]
        mats: dict = _matrices(False, onesided, flen_c, flen_c)
    else:
        step = _scalar_int(ctx, 1)
        if ctx.has(3):
            flen = _scalar_int(ctx, 3)
        elif win is not None:
            flen = b.gather(x=b.shape(x=win), indices=np.int32(0), axis=0)
        else:
            flen = b.gather(x=b.shape(x=x), indices=np.int32(1), axis=0)
        total = b.gather(x=b.shape(x=x), indices=np.int32(1), axis=0)
        frames = b.add(x=b.floor_div(x=b.sub(x=total, y=flen), y=step), y=np.int32(1))
        starts = b.mul(x=b.range_1d(start=np.int32(0), end=frames, step=np.int32(1)), y=step)
        offs = b.range_1d(start=np.int32(0), end=flen, step=np.int32(1))
        idx = b.add(x=b.expand_dims(x=starts, axes=[1]), y=b.expand_dims(x=offs, axes=[0]))
        framed = b.gather(x=x, indices=idx, axis=1)
        mats = _runtime_matrices(ctx, flen, flen, onesided)
    if win is not None:
        framed = b.mul(x=framed, y=b.expand_dims(x=win, axes=[-1]))
    re, im = _split_complex(ctx, framed)  # [batch, frames, F]
    y_re, y_im = dft_last_axis(ctx, re, im, mats)
    return [_join_complex(ctx, y_re, y_im)]


# -- MelWeightMatrix ---------------------------------------------------------------------------------


def mel_weight_matrix(num_mel_bins: int, dft_length: int, sample_rate: int, lower_hz: float,
                      upper_hz: float) -> np.ndarray:
    """[dft_length // 2 + 1, num_mel_bins] triangles of peak 1 (see the module docstring)."""
    def mel(f: float) -> float:
        return 2595.0 * math.log10(1.0 + f / 700.0)

    low, high = mel(lower_hz), mel(upper_hz)
    step = (high - low) / (num_mel_bins + 2)
    edges_mel = low + step * np.arange(num_mel_bins + 2, dtype=np.float64)
    edges_hz = 700.0 * (10.0 ** (edges_mel / 2595.0) - 1.0)
    bins = np.floor((dft_length + 1) * edges_hz / sample_rate).astype(np.int64)
    out = np.zeros((dft_length // 2 + 1, num_mel_bins), np.float64)
    for i in range(num_mel_bins):
        lo, mid, hi = (int(v) for v in bins[i:i + 3])
        if mid == lo:
            out[mid, i] = 1.0
        else:
            j = np.arange(lo, mid + 1)
            out[j, i] = (j - lo) / (mid - lo)
        if hi > mid:
            j = np.arange(mid, hi)
            out[j, i] = (hi - j) / (hi - mid)
    return out


@onnx_op("MelWeightMatrix", versions=(17, 28))
def mel_weights(ctx: Ctx, node: Node) -> list[np.ndarray]:
    vals = [np.asarray(ctx.require_const(i, name)).reshape(-1)[0]
            for i, name in enumerate(("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz",
                                      "upper_edge_hertz"))]
    num, length, rate = int(vals[0]), int(vals[1]), int(vals[2])
    if num < 1 or length < 1 or rate < 1:
        raise ctx.format_error(f"num_mel_bins {num}, dft_length {length} and sample_rate {rate} must be positive")
    try:
        m = mel_weight_matrix(num, length, rate, float(vals[3]), float(vals[4]))
    except IndexError:
        raise ctx.format_error("the band edges fall outside the spectrogram bins") from None
    out_type = int(ctx.attr("output_datatype", onnx.TensorProto.FLOAT))
    return [m.astype(onnx.helper.tensor_dtype_to_np_dtype(out_type))]
