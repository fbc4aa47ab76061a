"""Convolution: conv, conv_transpose, conv_quantized, and the sliding-window arithmetic pooling shares.

Layouts are MIL's: ``x`` is ``[N, C, *spatial]`` with 1 to 3 spatial dims; conv weights are
``[C_out, C_in / groups, *K]``, conv_transpose weights ``[C_in, C_out / groups, *K]``.
Kernels accumulate in fp32 (fp16 inputs are widened) and round once to the output dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..opdef import EvalArgs, InferArgs, OpDef, register
from ..shapes import never_positive
from ..symexpr import ceildiv, floordiv
from ..types import Dim, TensorType, Type, fresh_symbol, is_static_dim
from ._util import as_int_list

# sees the shape of an intermediate result before it is allocated (EvalArgs.check_intermediate)
Check = Callable[[tuple[int, ...]], None]

# pad_type values and how 'same' splits an odd total: 'same' puts the extra row/column after
# (bottom/right, TF's SAME), 'same_lower' before.
PAD_TYPES = ("valid", "same", "custom", "same_lower")


def str_param(a: InferArgs | EvalArgs, name: str) -> str:
    """A const string parameter (or its default) as a Python str."""
    return str(np.asarray(a.value(name)).reshape(-1)[0])


def num_spatial_dims(a: InferArgs | EvalArgs) -> int:
    """Spatial rank of ``x`` (rank - 2); expression defaults are sized by it."""
    rank = a.rank("x")
    if rank is None:
        raise a.fail("the rank of 'x' must be known to default the window parameters")
    return rank - 2


@dataclass(frozen=True)
class Window:
    """Kernel placement along the spatial dims: sizes, strides, dilations and padding rule."""

    kernel: tuple[Dim, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pad_type: str
    custom_pad: tuple[tuple[int, int], ...]
    ceil_mode: bool = False

    def effective(self, i: int) -> Dim:
        """The dilated kernel extent ``(k - 1) * d + 1`` (an expression for a symbolic kernel)."""
        k = self.kernel[i]
        return (int(k) - 1) * self.dilations[i] + 1 if is_static_dim(k) else (k - 1) * self.dilations[i] + 1

    def pad(self, i: int, n: int) -> tuple[int, int]:
        """(before, after) zero padding of spatial dim ``i`` for input length ``n``."""
        if self.pad_type == "valid":
            return 0, 0
        if self.pad_type == "custom":
            return self.custom_pad[i]
        s = self.strides[i]
        total = max((-(-n // s) - 1) * s + int(self.effective(i)) - n, 0)
        small, big = total // 2, total - total // 2
        return (small, big) if self.pad_type == "same" else (big, small)

    def pads(self, in_sizes: tuple[int, ...]) -> list[tuple[int, int]]:
        return [self.pad(i, n) for i, n in enumerate(in_sizes)]

    def out_size(self, i: int, n: int) -> int:
        """Output length of spatial dim ``i`` for input length ``n`` (MIL's formula, with ceil_mode)."""
        s, k = self.strides[i], int(self.effective(i))
        if self.pad_type in ("same", "same_lower"):
            return -(-n // s)
        before, after = self.pad(i, n)
        if not self.ceil_mode:
            return (n + before + after - k) // s + 1
        out = (n + before + after - k + s - 1) // s + 1
        # As documented for MIL pooling: drop a last window that starts in the right padding, but
        # only when there is padding (PyTorch drops it unconditionally).
        if before + after > 0 and (out - 1) * s >= n + before:
            out -= 1
        return out

    def out_dim(self, i: int, n: Dim) -> Dim | None:
        """Output length of spatial dim ``i`` for a possibly symbolic input length: the formula of
        ``out_size`` as an expression; None where ceil_mode's dropped last window depends on the
        size (ceil_mode with padding)."""
        s, k = self.strides[i], self.effective(i)
        if self.pad_type in ("same", "same_lower"):
            return ceildiv(n, s)
        before, after = self.custom_pad[i] if self.pad_type == "custom" else (0, 0)
        if not self.ceil_mode:
            return floordiv(n + before + after - k, s) + 1
        if before + after == 0:
            return floordiv(n - k + s - 1, s) + 1
        return None

    def out_dims(self, a: InferArgs, in_dims: tuple[Dim, ...]) -> tuple[Dim, ...]:
        """Output spatial dims: sizes, or expressions of symbolic sizes (``out_dim``)."""
        dims: list[Dim] = []
        for i, n in enumerate(in_dims):
            k = self.effective(i)
            if not (is_static_dim(n) and is_static_dim(k)):
                d = self.out_dim(i, n)
                if d is None:
                    d = fresh_symbol()
                elif never_positive(d):
                    raise a.fail(f"spatial dim {i}: the window ({k} after dilation) cannot fit the padded input "
                                 f"of size {n} (output size {d})")
                dims.append(d)
                continue
            size = self.out_size(i, int(n))
            if size <= 0:
                raise a.fail(f"spatial dim {i}: the window ({k} after dilation) does not fit the padded input "
                             f"of size {n} (output size {size})")
            dims.append(size)
        return tuple(dims)

    def out_sizes(self, in_sizes: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(self.out_size(i, n) for i, n in enumerate(in_sizes))

    def padded(self, x: np.ndarray, fill: float, check: Check | None = None) -> tuple[np.ndarray, tuple[int, ...]]:
        """``x`` padded with ``fill`` so every output window is in range, and the output sizes.

        Beyond the explicit padding this adds the overhang ceil_mode's last window needs. ``check``
        (`EvalArgs.check_intermediate`) sees the padded shape before it is allocated.
        """
        in_sizes = x.shape[2:]
        outs = tuple(self.out_size(i, n) for i, n in enumerate(in_sizes))
        widths = [(0, 0), (0, 0)]
        for i, (n, (before, after)) in enumerate(zip(in_sizes, self.pads(in_sizes))):
            overhang = max((outs[i] - 1) * self.strides[i] + int(self.effective(i)) - (n + before + after), 0)
            widths.append((before, after + overhang))
        if check is not None:
            check(tuple(n + b + e for n, (b, e) in zip(x.shape, widths)))
        return np.pad(x, widths, constant_values=fill), outs

    def taps(self, outs: tuple[int, ...]) -> Iterator[tuple[tuple[int, ...], tuple[slice, ...]]]:
        """For each kernel position: its index and the strided slice of the padded input it reads."""
        for kidx in np.ndindex(*(int(k) for k in self.kernel)):
            yield kidx, (slice(None), slice(None)) + tuple(
                slice(k * d, k * d + s * (o - 1) + 1, s)
                for k, d, s, o in zip(kidx, self.dilations, self.strides, outs)
            )


def read_window(a: InferArgs | EvalArgs, kernel: tuple[Dim, ...], *, dilations: bool = True,
                ceil_mode: bool = False) -> Window:
    """Read and check strides / dilations / pad_type / pad for a window of ``len(kernel)`` dims."""
    n = len(kernel)
    strides = as_int_list(a.value("strides"))
    dil = as_int_list(a.value("dilations")) if dilations else [1] * n
    for name, vals in (("strides", strides), ("dilations", dil)):
        if len(vals) != n:
            raise a.fail(f"{name} has {len(vals)} values for {n} spatial dims")
        if any(v < 1 for v in vals):
            raise a.fail(f"{name} must be positive, got {vals}")
    pad_type = str_param(a, "pad_type")
    if pad_type not in PAD_TYPES:
        raise a.fail(f"pad_type must be one of {', '.join(PAD_TYPES)}, got '{pad_type}'")
    if pad_type == "same_lower" and a.opset == "iOS15":
        raise a.fail("pad_type 'same_lower' needs iOS16 or later")
    custom: tuple[tuple[int, int], ...] = ((0, 0),) * n
    if pad_type == "custom":  # 'pad' is ignored for the other pad types
        pad = as_int_list(a.value("pad"))
        if len(pad) != 2 * n:
            raise a.fail(f"pad has {len(pad)} values; custom padding of {n} spatial dims needs {2 * n}")
        if any(p < 0 for p in pad):
            raise a.fail(f"pad must be non-negative, got {pad}")
        custom = tuple((pad[2 * i], pad[2 * i + 1]) for i in range(n))
    return Window(tuple(kernel), tuple(strides), tuple(dil), pad_type, custom, ceil_mode)


def _check_bias(a: InferArgs, c_out: Dim) -> None:
    if not a.has("bias"):
        return
    shape = a.tensor_type("bias").shape
    if shape is None:
        return
    if len(shape) != 1 or (is_static_dim(shape[0]) and is_static_dim(c_out) and int(shape[0]) != int(c_out)):
        raise a.fail(f"bias must have shape [{c_out}] (the output channels), got {list(shape)}")


def _check_operand_ranks(a: InferArgs, x: TensorType, w: TensorType) -> list[Type] | None:
    """Rank checks shared by conv and conv_transpose; the result type when shapes are too unknown
    to infer more (unknown rank of x, or unknown weight shape), else None."""
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    rank = len(x.shape)
    if not 3 <= rank <= 5:
        raise a.fail(f"x must have 1 to 3 spatial dims (rank 3 to 5), got rank {rank}")
    if w.shape is None:
        return [TensorType(x.dtype, (x.shape[0],) + tuple(fresh_symbol() for _ in range(rank - 1)))]
    if len(w.shape) != rank:
        raise a.fail(f"weight must have rank {rank} like x, got shape {list(w.shape)}")
    return None


def _groups(a: InferArgs | EvalArgs) -> int:
    g = int(np.asarray(a.value("groups")).reshape(-1)[0])
    if g < 1:
        raise a.fail(f"groups must be positive, got {g}")
    return g


def _divides(a: InferArgs, what: str, n: Dim, groups: int) -> None:
    if is_static_dim(n) and int(n) % groups:
        raise a.fail(f"{what} ({n}) is not divisible by groups ({groups})")


def _with_bias(a: EvalArgs, y: np.ndarray) -> np.ndarray:
    if a.has("bias"):
        y = y + np.asarray(a["bias"], np.float32).reshape((1, -1) + (1,) * (y.ndim - 2))
    return y


# ---------------------------------------------------------------------------------------------
# conv


def conv_forward(x: np.ndarray, w: np.ndarray, groups: int, win: Window, check: Check | None = None) -> np.ndarray:
    """Grouped, strided, dilated cross-correlation in fp32: ``[N, C, *D]`` -> ``[N, C_out, *D_out]``.

    One batched matmul per kernel position (channels reduced by BLAS), no im2col copy.
    """
    xp, outs = win.padded(x.astype(np.float32, copy=False), 0.0, check)
    n, c = x.shape[:2]
    c_out = w.shape[0]
    wg = w.astype(np.float32, copy=False).reshape((groups, c_out // groups, c // groups) + w.shape[2:])
    y = np.zeros((n, groups, c_out // groups, math.prod(outs)), np.float32)
    for kidx, window in win.taps(outs):
        y += wg[(Ellipsis,) + kidx] @ xp[window].reshape(n, groups, c // groups, y.shape[-1])
    return y.reshape((n, c_out) + outs)


class SpatialDefaults(OpDef):
    """The MIL expression defaults of windowed ops: ``strides = [1] * num_spatial_dims``,
    ``dilations = [1] * num_spatial_dims``, ``pad = [0] * 2 * num_spatial_dims``."""

    def default_strides(self, a: InferArgs | EvalArgs) -> list[int]:
        return [1] * num_spatial_dims(a)

    def default_dilations(self, a: InferArgs | EvalArgs) -> list[int]:
        return [1] * num_spatial_dims(a)

    def default_pad(self, a: InferArgs | EvalArgs) -> list[int]:
        return [0] * (2 * num_spatial_dims(a))


class _ConvBase(SpatialDefaults):
    """Shared shape inference of conv and conv_quantized."""

    def infer(self, a: InferArgs) -> list[Type]:
        x, w = a.tensor_type("x"), a.tensor_type("weight")
        early = _check_operand_ranks(a, x, w)
        if early is not None:
            return early
        groups = _groups(a)
        c_in, c_out = x.shape[1], w.shape[0]
        _divides(a, "input channels", c_in, groups)
        _divides(a, "output channels", c_out, groups)
        if is_static_dim(c_in) and is_static_dim(w.shape[1]) and int(c_in) // groups != int(w.shape[1]):
            raise a.fail(f"weight has {w.shape[1]} input channels per group; x has {c_in} channels "
                         f"in {groups} groups")
        _check_bias(a, c_out)
        win = read_window(a, tuple(w.shape[2:]))
        return [TensorType(x.dtype, (x.shape[0], c_out) + win.out_dims(a, tuple(x.shape[2:])))]

    def weight(self, a: EvalArgs) -> np.ndarray:
        return np.asarray(a["weight"])

    @staticmethod
    def scale_output_channels(weight: np.ndarray, scale: np.ndarray, groups: int) -> np.ndarray:
        """``weight`` with the kernel of output channel ``o`` multiplied by ``scale[o]`` (the
        layout ``[C_out, C_in / groups, *K]``: output channels lead, whatever ``groups``). For
        fusions that fold a per-channel scale into the weight."""
        return weight * np.asarray(scale).reshape((-1,) + (1,) * (weight.ndim - 1))

    def evaluate(self, a: EvalArgs) -> list[Any]:
        w = self.weight(a)
        win = read_window(a, tuple(w.shape[2:]))
        with np.errstate(all="ignore"):  # inf and NaN propagate as IEEE says
            y = _with_bias(a, conv_forward(np.asarray(a["x"]), w, _groups(a), win, a.check_intermediate))
        return [y.astype(a.out_types[0].dtype.storage)]


@register
class Conv(_ConvBase):
    """N-d convolution (cross-correlation) with groups, strides, dilations and padding.

    From iOS17 weight and bias may be computed at run time and have another float type than x;
    the output keeps x's dtype.
    """

    op_type = "conv"


@register
class ConvQuantized(_ConvBase):
    """conv whose uint8 weights dequantize as ``w * quant_scale + quant_bias`` (linear, per tensor or
    per output channel).

    'lut' is rejected: the op has no lookup-table input, and coremltools cannot lower it either.
    The bias is added as its plain value, without dequantization, as coremltools' NeuralNetwork
    lowering passes it through.
    """

    op_type = "conv_quantized"

    def infer(self, a: InferArgs) -> list[Type]:
        qtype = str_param(a, "quantization_type")
        if qtype != "linear":
            raise a.fail(f"quantization_type '{qtype}' is not supported (only 'linear' has the parameters it needs)")
        nbits = int(np.asarray(a.value("nbits")).reshape(-1)[0])
        if not 1 <= nbits <= 8:
            raise a.fail(f"nbits must be in [1, 8], got {nbits}")
        w = a.value("weight")
        if w is not None and np.asarray(w).size and int(np.max(w)) >= 1 << nbits:
            raise a.fail(f"weight holds {int(np.max(w))}, beyond {nbits}-bit range")
        w_shape = a.tensor_type("weight").shape
        c_out = w_shape[0] if w_shape else None
        for name in ("quant_scale", "quant_bias"):
            size = np.asarray(a.value(name)).size
            if size != 1 and (c_out is None or not is_static_dim(c_out) or size != int(c_out)):
                raise a.fail(f"{name} must hold 1 value or one per output channel ({c_out}), got {size}")
        return super().infer(a)

    def weight(self, a: EvalArgs) -> np.ndarray:
        q = np.asarray(a["weight"]).astype(np.float32)
        per_channel = (-1,) + (1,) * (q.ndim - 1)
        scale = np.asarray(a["quant_scale"], np.float32).reshape(per_channel)
        bias = np.asarray(a["quant_bias"], np.float32).reshape(per_channel)
        return q * scale + bias


# ---------------------------------------------------------------------------------------------
# conv_transpose


def conv_transpose_forward(x: np.ndarray, w: np.ndarray, groups: int, strides: tuple[int, ...],
                           dilations: tuple[int, ...], crop_before: tuple[int, ...],
                           out_sizes: tuple[int, ...], check: Check | None = None) -> np.ndarray:
    """Transposed convolution in fp32: every input element scatters ``w`` into the full output
    (length ``(D - 1) * s + (K - 1) * d + 1``), which is then cropped to
    ``[crop_before, crop_before + out)``; positions past the full output are zeros.
    """
    n, c = x.shape[:2]
    in_sizes, kernel = x.shape[2:], w.shape[2:]
    og = w.shape[1]
    full = [(i - 1) * s + (k - 1) * d + 1 for i, k, s, d in zip(in_sizes, kernel, strides, dilations)]
    size = tuple(max(f, b + o) for f, b, o in zip(full, crop_before, out_sizes))
    if check is not None:
        check((n, groups, og) + size)
    y = np.zeros((n, groups, og) + size, np.float32)
    xg = x.astype(np.float32, copy=False).reshape(n, groups, c // groups, math.prod(in_sizes))
    wg = w.astype(np.float32, copy=False).reshape((groups, c // groups, og) + kernel)
    for kidx in np.ndindex(*kernel):
        contrib = np.swapaxes(wg[(Ellipsis,) + kidx], 1, 2) @ xg  # [N, G, Og, P]
        target = (slice(None),) * 3 + tuple(
            slice(k * d, k * d + s * (i - 1) + 1, s) for k, d, s, i in zip(kidx, dilations, strides, in_sizes))
        y[target] += contrib.reshape((n, groups, og) + in_sizes)
    crop = (slice(None),) * 3 + tuple(slice(b, b + o) for b, o in zip(crop_before, out_sizes))
    return y[crop].reshape((n, groups * og) + tuple(out_sizes))


@register
class ConvTranspose(SpatialDefaults):
    """Transposed convolution (the gradient of conv with respect to its input).

    Output sizes: ``output_shape`` when given, else ``(D-1)*s + (K-1)*d + 1`` minus the custom pads
    ('valid': no pads, 'same': ``D*s``). The full result is cropped at the start by the pad_type's
    before-padding (custom: ``pad[2i]``; same: TF's ``max(full - out, 0) // 2``) and cut or
    zero-extended at the end to the output size. Core ML documents no crop rule for
    ``output_shape``; this one keeps conv_transpose unchanged when coremltools adds
    ``output_shape`` to it, and matches TF's conv2d_transpose (its only producer).
    """

    op_type = "conv_transpose"
    _PAD_TYPES = ("valid", "same", "custom")

    def _window(self, a: InferArgs | EvalArgs, kernel: tuple[Dim, ...]) -> Window:
        win = read_window(a, kernel)
        if win.pad_type not in self._PAD_TYPES:
            raise a.fail(f"conv_transpose pad_type must be one of {', '.join(self._PAD_TYPES)}, got '{win.pad_type}'")
        return win

    def _output_shape(self, a: InferArgs | EvalArgs, rank: int) -> list[int] | None:
        if not a.has("output_shape"):
            return None
        shape = as_int_list(a.value("output_shape"))
        if len(shape) != rank:
            raise a.fail(f"output_shape must list all {rank} output dims [N, C_out, *spatial], got {shape}")
        if any(d < 1 for d in shape[2:]):
            raise a.fail(f"output_shape must be positive, got {shape}")
        return shape

    def infer(self, a: InferArgs) -> list[Type]:
        x, w = a.tensor_type("x"), a.tensor_type("weight")
        early = _check_operand_ranks(a, x, w)
        if early is not None:
            return early
        rank = len(x.shape)
        groups = _groups(a)
        c_in = x.shape[1]
        _divides(a, "input channels", c_in, groups)
        if is_static_dim(c_in) and is_static_dim(w.shape[0]) and int(c_in) != int(w.shape[0]):
            raise a.fail(f"weight is for {w.shape[0]} input channels, x has {c_in}")
        c_out = w.shape[1] * groups
        _check_bias(a, c_out)
        win = self._window(a, tuple(w.shape[2:]))
        given = self._output_shape(a, rank)
        if given is not None:
            if is_static_dim(c_out) and given[1] != c_out:
                raise a.fail(f"output_shape has {given[1]} channels, the weight gives {c_out}")
            return [TensorType(x.dtype, (x.shape[0], c_out) + tuple(given[2:]))]
        dims = []
        for i, n in enumerate(x.shape[2:]):
            size = self._out_size(win, i, n)
            if never_positive(size):
                raise a.fail(f"spatial dim {i}: padding {win.custom_pad[i]} removes the whole output")
            dims.append(size)
        return [TensorType(x.dtype, (x.shape[0], c_out) + tuple(dims))]

    @staticmethod
    def scale_output_channels(weight: np.ndarray, scale: np.ndarray, groups: int) -> np.ndarray:
        """``weight`` with every tap feeding output channel ``o`` multiplied by ``scale[o]``. The
        layout is ``[C_in, C_out / groups, *K]``: input channel ``i`` of group ``g = i // (C_in /
        groups)`` feeds output channels ``g * (C_out / groups) + j`` through ``weight[i, j]``."""
        c_in, og = weight.shape[0], weight.shape[1]
        spatial = (1,) * (weight.ndim - 2)
        grouped = weight.reshape((groups, c_in // groups) + weight.shape[1:])
        return (grouped * np.asarray(scale).reshape((groups, 1, og) + spatial)).reshape(weight.shape)

    @staticmethod
    def _out_size(win: Window, i: int, n: Dim) -> Dim:
        """Output length for input length ``n`` (an expression when ``n`` or the kernel is symbolic)."""
        if win.pad_type == "same":
            return n * win.strides[i]
        return (n - 1) * win.strides[i] + win.effective(i) - sum(win.custom_pad[i])

    @staticmethod
    def _crop_before(win: Window, i: int, n: int, out: int) -> int:
        if win.pad_type == "same":  # TF: half the excess of the full result, the odd one at the end
            return max((n - 1) * win.strides[i] + int(win.effective(i)) - out, 0) // 2
        return win.custom_pad[i][0]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x, w = np.asarray(a["x"]), np.asarray(a["weight"])
        win = self._window(a, tuple(w.shape[2:]))
        given = self._output_shape(a, x.ndim)
        spatial = range(x.ndim - 2)
        outs = tuple(given[2:]) if given is not None else tuple(self._out_size(win, i, x.shape[2 + i]) for i in spatial)
        crop = tuple(self._crop_before(win, i, x.shape[2 + i], outs[i]) for i in spatial)
        with np.errstate(all="ignore"):
            y = _with_bias(a, conv_transpose_forward(x, w, _groups(a), win.strides, win.dilations, crop, outs,
                                                     a.check_intermediate))
        return [y.astype(a.out_types[0].dtype.storage)]
