"""Conv (1-3 spatial dims) and the window attributes shared with pooling.

ONNX ``pads`` = [x1_begin, x2_begin, ..., x1_end, x2_end, ...] become MIL's [x1_begin, x1_end,
...]; ``auto_pad`` SAME_UPPER / SAME_LOWER are MIL's 'same' / 'same_lower' (the same formula:
total = max((ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0), the odd cell at the end / start).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...ir.core import Value
from .context import FLOATS, Ctx, Node
from .registry import onnx_op

PAD_TYPES = {"NOTSET": "custom", "VALID": "valid", "SAME_UPPER": "same", "SAME_LOWER": "same_lower"}


@dataclass
class WindowAttrs:
    n_spatial: int
    kernel: list[int]
    strides: list[int]
    dilations: list[int]
    pad_type: str
    pad: list[int]  # MIL order: [begin_0, end_0, begin_1, end_1, ...]

    @property
    def begins(self) -> list[int]:
        return self.pad[0::2]

    @property
    def ends(self) -> list[int]:
        return self.pad[1::2]


def window_attrs(ctx: Ctx, n_spatial: int, kernel: list[int] | None = None) -> WindowAttrs:
    """The kernel/strides/dilations/pads/auto_pad attributes of a conv or pool node, checked."""
    kernel = kernel if kernel is not None else [int(k) for k in ctx.required_attr("kernel_shape")]
    given = ctx.attr("kernel_shape")
    if given is not None and [int(k) for k in given] != list(kernel):
        raise ctx.format_error(f"kernel_shape {list(given)} differs from the weight's {kernel}")

    def per_dim(name: str, default: int) -> list[int]:
        v = ctx.attr(name)
        v = [default] * n_spatial if not v else [int(a) for a in v]
        if len(v) != n_spatial:
            raise ctx.format_error(f"{name} has {len(v)} values for {n_spatial} spatial dims")
        return v

    strides, dilations = per_dim("strides", 1), per_dim("dilations", 1)
    if any(s < 1 for s in strides) or any(d < 1 for d in dilations):
        raise ctx.format_error("strides and dilations must be positive")
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if auto_pad not in PAD_TYPES:
        raise ctx.format_error(f"unknown auto_pad '{auto_pad}'")
    pads = ctx.attr("pads")
    pads = [0] * (2 * n_spatial) if not pads else [int(p) for p in pads]
    if len(pads) != 2 * n_spatial or any(p < 0 for p in pads):
        raise ctx.format_error(f"pads {pads} must hold {2 * n_spatial} non-negative values")
    if auto_pad != "NOTSET" and any(pads):
        raise ctx.format_error(f"pads {pads} given with auto_pad {auto_pad}")
    mil_pad = [p for i in range(n_spatial) for p in (pads[i], pads[i + n_spatial])]
    return WindowAttrs(n_spatial, list(kernel), strides, dilations, PAD_TYPES[auto_pad], mil_pad)


@onnx_op("Conv", versions=(1, 22))
def conv(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, FLOATS)
    w = ctx.input(1, FLOATS)
    if w.type.dtype != x.type.dtype:
        w = ctx.b.cast(x=w, dtype=x.type.dtype.name)
    rank = ctx.rank(x)
    if not 3 <= rank <= 5:
        raise ctx.unsupported(f"{rank - 2} spatial dims (the IR conv takes 1 to 3)")
    wshape = ctx.static_shape(w)
    if wshape is None or len(wshape) != rank:
        raise ctx.format_error(f"the weight must have rank {rank} and a known shape")
    win = window_attrs(ctx, rank - 2, list(wshape[2:]))
    group = int(ctx.attr("group", 1))
    inputs = {"x": x, "weight": w, "strides": np.array(win.strides, np.int32), "pad_type": win.pad_type,
              "pad": np.array(win.pad, np.int32), "dilations": np.array(win.dilations, np.int32), "groups": group}
    if ctx.has(2):
        bias = ctx.input(2, FLOATS)
        inputs["bias"] = bias if bias.type.dtype == x.type.dtype else ctx.b.cast(x=bias, dtype=x.type.dtype.name)
    return [ctx.b.add_op("conv", inputs).outputs[0]]
