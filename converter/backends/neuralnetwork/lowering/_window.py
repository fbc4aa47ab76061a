"""What the convolution and pooling lowerings share: reading an op's window parameters, writing the
NeuralNetwork padding messages, and giving 1-D data the H axis the 2-D layers need.

``convolution`` and ``pooling`` act on the last three axes ``[C, H, W]`` (leading axes are batch),
so MIL's ``[N, C, H, W]`` goes in as is and ``[N, C, W]`` gets a unit H axis (``expandDims`` before,
``squeeze`` after) with the window widened to ``[1, k]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ....errors import LoweringError
from ....ir.core import Op, Value
from ..emitter import NetworkEmitter, rank, static_shape

Pads = list[tuple[int, int]]


def ints(e: NetworkEmitter, op: Op, key: str) -> list[int]:
    """A compile-time int-list parameter (its default when absent)."""
    return [int(v) for v in np.asarray(e.const_param(op, key)).reshape(-1)]


def text(e: NetworkEmitter, op: Op, key: str) -> str:
    return str(np.asarray(e.const_param(op, key)).reshape(-1)[0])


def flag(e: NetworkEmitter, op: Op, key: str) -> bool:
    return bool(np.asarray(e.const_param(op, key)).reshape(-1)[0])


@dataclass
class WindowParams:
    """An op's window as the layers see it: per spatial axis kernel, stride, dilation and the
    padding rule ('valid', 'same', 'same_lower' or explicit (before, after) amounts)."""

    kernel: list[int]
    strides: list[int]
    dilations: list[int]
    pad_type: str
    pads: Pads

    def effective(self, i: int) -> int:
        return (self.kernel[i] - 1) * self.dilations[i] + 1

    def same_pads(self, sizes: list[int], lower: bool) -> Pads:
        """The explicit amounts of 'same' / 'same_lower' for static ``sizes`` (the IR's rule)."""
        out = []
        for i, n in enumerate(sizes):
            s = self.strides[i]
            total = max((-(-n // s) - 1) * s + self.effective(i) - n, 0)
            small, big = total // 2, total - total // 2
            out.append((big, small) if lower else (small, big))
        return out

    def widened(self) -> WindowParams:
        """The 1-D window as a 2-D one over a unit H axis."""
        return WindowParams([1, *self.kernel], [1, *self.strides], [1, *self.dilations], self.pad_type,
                            [(0, 0), *self.pads])


def read_window(e: NetworkEmitter, op: Op, kernel: list[int], *, dilations: bool = True) -> WindowParams:
    n = len(kernel)
    strides = ints(e, op, "strides")
    dil = ints(e, op, "dilations") if dilations else [1] * n
    pad_type = text(e, op, "pad_type")
    pads: Pads = [(0, 0)] * n
    if pad_type == "custom":
        flat = ints(e, op, "pad")
        pads = [(flat[2 * i], flat[2 * i + 1]) for i in range(n)]
        pad_type = "custom" if any(b or a for b, a in pads) else "valid"
    return WindowParams(list(kernel), strides, dil, pad_type, pads)


def spatial_sizes(v: Value) -> list[int] | None:
    """The static spatial sizes of ``[N, C, *spatial]`` (None when any dim is symbolic)."""
    shape = static_shape(v)
    return None if shape is None else shape[2:]


def set_2d_padding(params: object, win: WindowParams) -> None:
    """ConvolutionLayerParams / PoolingLayerParams padding: valid (with explicit amounts for
    'custom'), or same with the asymmetry mode of 'same' (odd unit after) / 'same_lower' (before)."""
    from ....formats.proto import NeuralNetwork_pb2 as nn

    if win.pad_type in ("same", "same_lower"):
        params.same.asymmetryMode = (nn.SamePadding.BOTTOM_RIGHT_HEAVY if win.pad_type == "same"  # type: ignore[attr-defined]
                                     else nn.SamePadding.TOP_LEFT_HEAVY)
        return
    params.valid.SetInParent()  # type: ignore[attr-defined]
    if win.pad_type == "custom":
        for before, after in win.pads:
            edge = params.valid.paddingAmounts.borderAmounts.add()  # type: ignore[attr-defined]
            edge.startEdgeSize, edge.endEdgeSize = before, after


def set_3d_padding(params: object, win: WindowParams, sizes: list[int] | None, what: str) -> None:
    """Convolution3D / Pooling3D padding: VALID, SAME (odd unit back/bottom/right, as MIL's 'same')
    or CUSTOM amounts; 'same_lower' only as amounts computed from static sizes."""
    enum = type(params)
    if win.pad_type == "same":
        params.paddingType = enum.SAME  # type: ignore[attr-defined]
        return
    pads = win.pads
    if win.pad_type == "same_lower":
        if sizes is None:
            raise LoweringError(f"{what}: 'same_lower' padding of a 3-D window needs static spatial sizes "
                                "(Convolution3D/Pooling3D have no top-left-heavy SAME)")
        pads = win.same_pads(sizes, lower=True)
    if not any(b or a for b, a in pads):
        params.paddingType = enum.VALID  # type: ignore[attr-defined]
        return
    params.paddingType = enum.CUSTOM  # type: ignore[attr-defined]
    (f, bk), (t, bt), (le, r) = pads
    params.customPaddingFront, params.customPaddingBack = f, bk  # type: ignore[attr-defined]
    params.customPaddingTop, params.customPaddingBottom = t, bt  # type: ignore[attr-defined]
    params.customPaddingLeft, params.customPaddingRight = le, r  # type: ignore[attr-defined]


def spatial_rank(v: Value, what: str) -> int:
    r = rank(v)
    if not 3 <= r <= 5:
        raise LoweringError(f"{what} must have 1 to 3 spatial dims (rank 3 to 5), got rank {r}")
    return r - 2


def expand_h(e: NetworkEmitter, blob: str, name: str) -> str:
    """``[N, C, W]`` -> ``[N, C, 1, W]`` (an ``expandDims`` layer)."""
    out = e.fresh(f"{name}_2d")
    e.layer("expandDims", f"{name}_2d", [blob], [out]).axes.append(-2)
    return out


def squeeze_h(e: NetworkEmitter, blob: str, out: str, name: str) -> None:
    """``[N, C, 1, W]`` -> ``[N, C, W]`` into ``out``."""
    e.layer("squeeze", f"{name}_1d", [blob], [out]).axes.append(-2)
