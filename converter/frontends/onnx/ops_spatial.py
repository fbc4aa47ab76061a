"""ConvTranspose, DepthToSpace, SpaceToDepth, GridSample, AffineGrid and the other spatial ops.

- ConvTranspose: ONNX's explicit pads, ``auto_pad`` and ``output_shape`` are resolved to begin /
  end pads with ONNX's rule (total = s*(D-1) + output_padding + (K-1)*d + 1 - out; SAME_UPPER puts
  the odd one at the end, NOTSET/SAME_LOWER at the start). MIL's conv_transpose takes custom pads;
  ``output_padding`` beyond the end pad (rows no input reaches: zero + bias) is given as MIL's
  ``output_shape``, whose rule crops the start pad and zero-extends the end.
- DepthToSpace DCR is MIL's depth_to_space; CRD is pixel_shuffle (channel c*f*f + i*f + j).
- GridSample: MIL's resample with (x, y) grids normalized to [-1, 1]. ONNX reflects about pixel
  centres with align_corners and about the image edges without (MIL 'reflection' / 'symmetric').
"""

from __future__ import annotations

import numpy as np

from ...ir.core import Value
from ...ir.types import is_static_dim
from .context import FLOATS, Ctx, Node
from .registry import onnx_op
from .shape_util import dims, static_dims


def _ints(ctx: Ctx, name: str, n: int, default: int) -> list[int]:
    got = ctx.attr(name)
    vals = [default] * n if not got else [int(v) for v in got]
    if len(vals) != n:
        raise ctx.format_error(f"'{name}' must have {n} values, has {len(vals)}")
    return vals


@onnx_op("ConvTranspose", versions=(1, 22))
def conv_transpose(ctx: Ctx, node: Node) -> list[Value]:
    b = ctx.b
    x = ctx.input(0, FLOATS)
    w = ctx.input(1, FLOATS)
    if w.type.dtype != x.type.dtype:
        w = b.cast(x=w, dtype=x.type.dtype.name)
    shape = dims(x)
    wshape = static_dims(ctx, w, "ConvTranspose's weight")
    nsp = len(shape) - 2
    if nsp < 1 or len(wshape) != nsp + 2:
        raise ctx.format_error(f"x (rank {len(shape)}) and W (rank {len(wshape)}) do not fit")
    kernel = [int(k) for k in (ctx.attr("kernel_shape") or wshape[2:])]
    strides = _ints(ctx, "strides", nsp, 1)
    dil = _ints(ctx, "dilations", nsp, 1)
    out_pad = _ints(ctx, "output_padding", nsp, 0)
    group = int(ctx.attr("group", 1))
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    pads = _ints(ctx, "pads", 2 * nsp, 0)
    out_shape = ctx.attr("output_shape")
    if out_shape:
        out_shape = [int(v) for v in out_shape][-nsp:]
    spatial = shape[2:]
    need_static = bool(out_shape) or auto_pad in ("SAME_UPPER", "SAME_LOWER")
    if need_static and not all(is_static_dim(d) for d in spatial):
        raise ctx.unsupported("output_shape / SAME padding need static spatial input sizes")
    begin, end, outs = [], [], []
    for i in range(nsp):
        full = (kernel[i] - 1) * dil[i] + 1
        if out_shape or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            n = int(spatial[i])
            target = out_shape[i] if out_shape else n * strides[i]
            total = strides[i] * (n - 1) + out_pad[i] + full - target
            if (auto_pad == "SAME_UPPER") != (node.version == 1):  # opset 1 states the split the other way
                pb, pe = total // 2, total - total // 2
            else:
                pb, pe = total - total // 2, total // 2
        elif auto_pad == "VALID":
            pb, pe = 0, 0
        elif auto_pad == "NOTSET":
            pb, pe = pads[i], pads[i + nsp]
        else:
            raise ctx.format_error(f"auto_pad '{auto_pad}' is not valid")
        if pb < 0:  # (a negative end pad is zero-extension, as output_padding)
            raise ctx.unsupported(f"negative start padding {pb} from output_shape {out_shape}")
        begin.append(pb)
        end.append(pe)
        outs.append(None if not is_static_dim(spatial[i]) else
                    strides[i] * (int(spatial[i]) - 1) + out_pad[i] + full - pb - pe)
    mil_pad = []
    extend = False
    for i in range(nsp):
        mil_pad += [begin[i], max(end[i] - out_pad[i], 0)]  # the output sizes say the rest
        extend |= out_pad[i] > end[i]
    args = {"x": x, "weight": w, "pad_type": "custom", "pad": np.asarray(mil_pad, np.int32),
            "strides": np.asarray(strides, np.int32), "dilations": np.asarray(dil, np.int32),
            "groups": np.int32(group)}
    if ctx.has(2):
        bias = ctx.input(2, FLOATS)
        args["bias"] = bias if bias.type.dtype == x.type.dtype else b.cast(x=bias, dtype=x.type.dtype.name)
    if extend:
        if any(o is None for o in outs) or not all(is_static_dim(d) for d in shape[:1]):
            raise ctx.unsupported("output_padding past the end padding needs static input sizes")
        args["output_shape"] = np.asarray([int(shape[0]), wshape[1] * group, *outs], np.int32)
    return [b.conv_transpose(**args)]


@onnx_op("DepthToSpace", versions=(11, 28))
def depth_to_space(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, FLOATS)
    f = int(ctx.required_attr("blocksize"))
    mode = ctx.attr("mode", "DCR")
    if mode == "DCR":
        return [ctx.b.depth_to_space(x=x, block_size=np.int32(f))]
    if mode == "CRD":
        return [ctx.b.pixel_shuffle(x=x, upscale_factor=np.int32(f))]
    raise ctx.format_error(f"mode '{mode}' is not DCR or CRD")


@onnx_op("SpaceToDepth", versions=(13, 28))
def space_to_depth(ctx: Ctx, node: Node) -> list[Value]:
    """DCR (opset 28 adds ``mode``; before it, DCR only) is MIL's space_to_depth, CRD pixel_unshuffle."""
    x = ctx.input(0, FLOATS)
    f = np.int32(int(ctx.required_attr("blocksize")))
    mode = ctx.attr("mode", "DCR") if node.version >= 28 else "DCR"
    if mode == "DCR":
        return [ctx.b.space_to_depth(x=x, block_size=f)]
    if mode == "CRD":
        return [ctx.b.pixel_unshuffle(x=x, downscale_factor=np.uint32(f))]
    raise ctx.format_error(f"mode '{mode}' is not DCR or CRD")


_GRID_MODES = {"bilinear": "bilinear", "linear": "bilinear", "nearest": "nearest"}


@onnx_op("GridSample", versions=(16, 22))
def grid_sample(ctx: Ctx, node: Node) -> list[Value]:
    b = ctx.b
    x = ctx.input(0, FLOATS)
    grid = ctx.input(1, FLOATS)
    if ctx.rank(x) != 4:
        raise ctx.unsupported(f"only 2-D (rank-4) GridSample is supported, x has rank {ctx.rank(x)}")
    mode = ctx.attr("mode", "bilinear")
    if mode not in _GRID_MODES:
        raise ctx.unsupported(f"mode '{mode}' (MIL's resample samples bilinear or nearest)")
    align = bool(ctx.attr("align_corners", 0))
    padding = ctx.attr("padding_mode", "zeros")
    mil_padding = {"zeros": "constant", "border": "border",
                   "reflection": "reflection" if align else "symmetric"}.get(padding)
    if mil_padding is None:
        raise ctx.format_error(f"padding_mode '{padding}' is not valid")
    if grid.type.dtype != x.type.dtype:
        grid = b.cast(x=grid, dtype=x.type.dtype.name)
    return [b.resample(x=x, coordinates=grid, sampling_mode=_GRID_MODES[mode], padding_mode=mil_padding,
                       padding_value=ctx.const(0.0, x), coordinates_mode="normalized_minus_one_to_one",
                       align_corners=align)]
