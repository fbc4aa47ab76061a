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
    """2-D bilinear / nearest: MIL's resample. Cubic, or 3-D (volumetric): written out with gathers
    (`_sample_nd`), as ONNX's reference samples."""
    b = ctx.b
    x = ctx.input(0, FLOATS)
    grid = ctx.input(1, FLOATS)
    mode = ctx.attr("mode", "bilinear")
    if mode not in ("bilinear", "linear", "nearest", "bicubic", "cubic"):
        raise ctx.format_error(f"mode '{mode}' is not valid")
    align = bool(ctx.attr("align_corners", 0))
    padding = ctx.attr("padding_mode", "zeros")
    mil_padding = {"zeros": "constant", "border": "border",
                   "reflection": "reflection" if align else "symmetric"}.get(padding)
    if mil_padding is None:
        raise ctx.format_error(f"padding_mode '{padding}' is not valid")
    if grid.type.dtype != x.type.dtype:
        grid = b.cast(x=grid, dtype=x.type.dtype.name)
    if mode in _GRID_MODES and ctx.rank(x) == 4:
        return [b.resample(x=x, coordinates=grid, sampling_mode=_GRID_MODES[mode], padding_mode=mil_padding,
                           padding_value=ctx.const(0.0, x), coordinates_mode="normalized_minus_one_to_one",
                           align_corners=align)]
    kind = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    return [_sample_nd(ctx, x, grid, kind, padding, align)]


def _reflect(ctx: Ctx, v: Value, lo: float, hi: float) -> Value:
    """ONNX's reflection of coordinates into [lo, hi] (repeated mirroring at the bounds)."""
    b = ctx.b
    span = hi - lo

    def fold(d: Value) -> tuple[Value, Value]:
        n = b.floor(x=b.real_div(x=d, y=np.float32(span)))
        r = b.sub(x=d, y=b.mul(x=n, y=np.float32(span)))
        even = b.equal(x=b.mod(x=n, y=np.float32(2.0)), y=np.float32(0.0))
        return r, even

    r_lo, even_lo = fold(b.sub(x=np.float32(lo), y=v))
    r_hi, even_hi = fold(b.sub(x=v, y=np.float32(hi)))
    below = b.select(cond=even_lo, a=b.add(x=r_lo, y=np.float32(lo)), b=b.sub(x=np.float32(hi), y=r_lo))
    above = b.select(cond=even_hi, a=b.sub(x=np.float32(hi), y=r_hi), b=b.add(x=r_hi, y=np.float32(lo)))
    return b.select(cond=b.less(x=v, y=np.float32(lo)), a=below,
                    b=b.select(cond=b.greater(x=v, y=np.float32(hi)), a=above, b=v))


def _cubic_weights(ctx: Ctx, t: Value) -> list[Value]:
    b, a = ctx.b, -0.75

    def outer(u: Value) -> Value:
        return b.sub(x=b.mul(x=b.add(x=b.mul(x=b.sub(x=b.mul(x=u, y=np.float32(a)), y=np.float32(5 * a)), y=u),
                                     y=np.float32(8 * a)), y=u), y=np.float32(4 * a))

    def inner(u: Value) -> Value:
        return b.add(x=b.mul(x=b.mul(x=b.sub(x=b.mul(x=u, y=np.float32(a + 2)), y=np.float32(a + 3)), y=u), y=u),
                     y=np.float32(1.0))

    s = b.sub(x=np.float32(1.0), y=t)
    return [outer(b.add(x=t, y=np.float32(1.0))), inner(t), inner(s), outer(b.add(x=s, y=np.float32(1.0)))]


def _sample_nd(ctx: Ctx, x: Value, grid: Value, kind: str, padding: str, align: bool) -> Value:
    """GridSample as ONNX's reference computes it, for any number of spatial dims: denormalize each
    coordinate; nearest rounds half to even; a coordinate outside the bounds ([-0.5, d - 0.5], or
    [0, d - 1] with align_corners) is clamped (border) or reflected (reflection); then each tap
    (floor + [0, 1] linear, floor + [-1..2] cubic, A = -0.75) reads 0 outside the image (zeros),
    the clamped index (border) or the reflected one (reflection), and the weighted taps are summed.
    Values come from one gather over the flattened spatial dims per tap combination."""
    import itertools

    b = ctx.b
    xs = static_dims(ctx, x, "GridSample")
    n, c, spatial = xs[0], xs[1], xs[2:]
    k = len(spatial)
    gs = dims(grid)
    out_sp = gs[1:-1]
    if len(out_sp) != k or gs[-1] != k:
        raise ctx.format_error(f"grid shape {gs} does not fit an input of shape {xs}")
    q = 1
    for d in out_sp:
        if not is_static_dim(d):
            raise ctx.unsupported("the grid needs a static shape")
        q *= int(d)
    dt = x.type.dtype.name
    g = b.cast(x=grid, dtype="fp32") if dt != "fp32" else grid
    g = b.reshape(x=g, shape=np.asarray([n, q, k], np.int32))
    coords = []
    for axis in range(k):  # grid's last dim lists x (the last spatial axis) first
        d = spatial[axis]
        v = b.squeeze(x=b.slice_by_size(x=g, begin=[0, 0, k - 1 - axis], size=[-1, -1, 1]), axes=[2])
        if align:
            v = b.mul(x=b.add(x=v, y=np.float32(1.0)), y=np.float32((d - 1) / 2))
        else:
            v = b.real_div(x=b.sub(x=b.mul(x=b.add(x=v, y=np.float32(1.0)), y=np.float32(d)), y=np.float32(1.0)),
                           y=np.float32(2.0))
        if kind == "nearest":
            v = b.round(x=v)
        lo, hi = (0.0, d - 1.0) if align else (-0.5, d - 0.5)
        if padding == "border":
            v = b.select(cond=b.logical_or(x=b.less(x=v, y=np.float32(lo)), y=b.greater(x=v, y=np.float32(hi))),
                         a=b.minimum(x=b.maximum(x=v, y=np.float32(0.0)), y=np.float32(d - 1)), b=v)
        elif padding == "reflection":
            v = _reflect(ctx, v, lo, hi)
        coords.append((v, d, lo, hi))
    per_axis = []  # per axis: list of (index int32 [N, Q], weight fp32 [N, Q] or None, inside bool or None)
    for v, d, lo, hi in coords:
        if kind == "nearest":
            base, offsets, weights = b.cast(x=v, dtype="int32"), (0,), [None]
        else:
            f = b.floor(x=v)
            t = b.sub(x=v, y=f)
            base = b.cast(x=f, dtype="int32")
            if kind == "linear":
                offsets, weights = (0, 1), [b.sub(x=np.float32(1.0), y=t), t]
            else:
                offsets, weights = (-1, 0, 1, 2), _cubic_weights(ctx, t)
        taps = []
        for off, w in zip(offsets, weights):
            i = b.add(x=base, y=np.int32(off)) if off else base
            inside = None
            if padding == "zeros":
                inside = b.logical_and(x=b.greater_equal(x=i, y=np.int32(0)), y=b.less(x=i, y=np.int32(d)))
            elif padding == "reflection":
                refl = _reflect(ctx, b.cast(x=i, dtype="fp32"), lo, hi)
                i = b.cast(x=b.floor(x=refl), dtype="int32")
            i = b.minimum(x=b.maximum(x=i, y=np.int32(0)), y=np.int32(d - 1))
            taps.append((i, w, inside))
        per_axis.append(taps)
    flat = b.reshape(x=x, shape=np.asarray([n, c, int(np.prod(spatial))], np.int32))
    strides = [int(np.prod(spatial[a + 1:])) for a in range(k)]
    total = None
    for combo in itertools.product(*per_axis):
        index, weight, inside = None, None, None
        for (i, w, ins), stride in zip(combo, strides):
            term = b.mul(x=i, y=np.int32(stride)) if stride != 1 else i
            index = term if index is None else b.add(x=index, y=term)
            if w is not None:
                weight = w if weight is None else b.mul(x=weight, y=w)
            if ins is not None:
                inside = ins if inside is None else b.logical_and(x=inside, y=ins)
        idx = b.tile(x=b.expand_dims(x=index, axes=[1]), reps=[1, c, 1])
        val = b.gather_along_axis(x=flat, indices=idx, axis=np.int32(2))  # [N, C, Q]
        if dt != "fp32":
            val = b.cast(x=val, dtype="fp32")
        if inside is not None:
            val = b.select(cond=b.expand_dims(x=inside, axes=[1]), a=val, b=np.float32(0.0))
        if weight is not None:
            val = b.mul(x=val, y=b.expand_dims(x=weight, axes=[1]))
        total = val if total is None else b.add(x=total, y=val)
    y = b.reshape(x=total, shape=np.asarray([n, c, *[int(d) for d in out_sp]], np.int32))
    return y if dt == "fp32" else b.cast(x=y, dtype=dt)


def _int_scalar(ctx: Ctx, vec: Value, i: int) -> Value:
    b = ctx.b
    return b.squeeze(x=b.slice_by_size(x=vec, begin=np.asarray([i], np.int32), size=np.asarray([1], np.int32)),
                     axes=[0])


def _grid_axis(ctx: Ctx, n: Value, align: bool) -> Value:
    """Normalized coordinates of ``n`` (run-time int32 scalar) pixel centres, as ONNX's AffineGrid:
    (2i + 1) / n - 1, or with align_corners -1 + 2i / (n - 1) (-1 alone when n == 1)."""
    b = ctx.b
    i = b.cast(x=b.range_1d(start=np.int32(0), end=n, step=np.int32(1)), dtype="fp32")
    nf = b.cast(x=n, dtype="fp32")
    if align:
        step = b.real_div(x=np.float32(2.0), y=b.maximum(x=b.sub(x=nf, y=np.float32(1.0)), y=np.float32(1.0)))
        return b.sub(x=b.mul(x=i, y=step), y=np.float32(1.0))
    return b.sub(x=b.real_div(x=b.add(x=b.mul(x=i, y=np.float32(2.0)), y=np.float32(1.0)), y=nf), y=np.float32(1.0))


@onnx_op("AffineGrid", versions=(20, 20))
def affine_grid(ctx: Ctx, node: Node) -> list[Value]:
    """grid[n, (d,) h, w] = theta[n] @ (x_w, y_h, (z_d,) 1) over normalized pixel centres; ``size``
    may be a run-time tensor (the grid's spatial dims are then symbolic)."""
    b = ctx.b
    theta = ctx.input(0, ("fp32",))
    size = ctx.input(1, ("int32",))
    nsp = dims(size)[0]
    if nsp not in (4, 5):
        raise ctx.format_error(f"size must hold 4 (2-D) or 5 (3-D) values, holds {nsp}")
    align = bool(ctx.attr("align_corners", 0))
    spatial = [_grid_axis(ctx, _int_scalar(ctx, size, 2 + k), align) for k in range(nsp - 2)]  # (D,) H, W
    k = len(spatial)
    coords = []  # x (last axis) first, then y, (z), each broadcast over the spatial grid
    for j in reversed(range(k)):
        shape = [1] * k
        shape[j] = -1
        coords.append(b.reshape(x=spatial[j], shape=np.asarray(shape, np.int32)))
    zero = None
    for c in coords:
        z = b.mul(x=c, y=np.float32(0.0))
        zero = z if zero is None else b.add(x=zero, y=z)
    homo = b.stack(values=tuple(b.add(x=c, y=zero) for c in coords) + (b.add(x=zero, y=np.float32(1.0)),), axis=-1)
    theta_t = b.transpose(x=theta, perm=[0, 2, 1])  # [N, k+1, k]
    theta_t = b.expand_dims(x=theta_t, axes=list(range(1, k)))  # [N, 1.., k+1, k]: batch dims N, (1,) 1
    return [b.matmul(x=b.expand_dims(x=homo, axes=[0]), y=theta_t)]


@onnx_op("CenterCropPad", versions=(18, 18))
def center_crop_pad(ctx: Ctx, node: Node) -> list[Value]:
    """Per axis: crop from max(d - s, 0) // 2, then zero-pad max(s - d, 0) with the smaller half
    first; ``shape`` may be a run-time tensor."""
    b = ctx.b
    x = ctx.input(0)
    shape = static_dims(ctx, x, "CenterCropPad")
    rank = len(shape)
    axes_attr = ctx.attr("axes")
    axes = list(range(rank)) if not axes_attr else [int(a) + rank if int(a) < 0 else int(a) for a in axes_attr]
    target = ctx.const_input(1)
    if target is not None:
        begin, end, pads = [0] * rank, list(shape), [0] * (2 * rank)
        for a, s in zip(axes, [int(v) for v in target.reshape(-1)]):
            d = shape[a]
            begin[a] = max(d - s, 0) // 2
            end[a] = begin[a] + min(s, d)
            extra = max(s - d, 0)
            pads[2 * a], pads[2 * a + 1] = extra // 2, extra - extra // 2
        y = b.slice_by_index(x=x, begin=np.asarray(begin, np.int32), end=np.asarray(end, np.int32))
        if any(pads):
            y = _zero_pad(ctx, y, np.asarray(pads, np.int32))
        return [y]
    s_vec = ctx.input(1, ("int32",))
    full = [b.const(np.asarray([d], np.int32)) for d in shape]
    zeros = [b.const(np.asarray([0], np.int32)) for _ in shape]
    begin, end, pad_parts = list(zeros), list(full), [z for z in zeros for _ in (0, 1)]
    for i, a in enumerate(axes):
        s = b.slice_by_size(x=s_vec, begin=np.asarray([i], np.int32), size=np.asarray([1], np.int32))
        d = full[a]
        begin[a] = b.floor_div(x=b.maximum(x=b.sub(x=d, y=s), y=np.int32(0)), y=np.int32(2))
        end[a] = b.add(x=begin[a], y=b.minimum(x=s, y=d))
        extra = b.maximum(x=b.sub(x=s, y=d), y=np.int32(0))
        half = b.floor_div(x=extra, y=np.int32(2))
        pad_parts[2 * a], pad_parts[2 * a + 1] = half, b.sub(x=extra, y=half)
    y = b.slice_by_index(x=x, begin=b.concat(values=tuple(begin), axis=0), end=b.concat(values=tuple(end), axis=0))
    return [_zero_pad(ctx, y, b.concat(values=tuple(pad_parts), axis=0))]


def _zero_pad(ctx: Ctx, x: Value, pads) -> Value:
    """Zero padding of every dim by ``pads`` ([before_0, after_0, ...]); pad takes floats, so
    integer tensors are padded in fp32 (exact up to 2^24) and cast back."""
    b = ctx.b
    dt = x.type.dtype.name
    y = x if dt in FLOATS else b.cast(x=x, dtype="fp32")
    y = b.pad(x=y, pad=pads, mode="constant", constant_val=ctx.const(0.0, y))
    return y if dt in FLOATS else b.cast(x=y, dtype=dt)


@onnx_op("MaxUnpool", versions=(11, 22))
def max_unpool(ctx: Ctx, node: Node) -> list[Value]:
    """Scatter X into zeros of the unpooled shape at MaxPool's flat indices (over the whole tensor),
    then zero-extend at the end to ``output_shape`` when given."""
    b = ctx.b
    x = ctx.input(0, FLOATS)
    idx = ctx.input(1, ("int32",))
    shape = static_dims(ctx, x, "MaxUnpool")
    nsp = len(shape) - 2
    kernel = [int(k) for k in ctx.required_attr("kernel_shape")]
    strides = _ints(ctx, "strides", nsp, 1)
    pads = _ints(ctx, "pads", 2 * nsp, 0)
    inferred = shape[:2] + [(shape[2 + i] - 1) * strides[i] - pads[i] - pads[nsp + i] + kernel[i] for i in range(nsp)]
    total = int(np.prod(inferred))
    flat = b.const(np.zeros(total, x.type.dtype.storage))
    y = b.scatter(data=flat, indices=b.reshape(x=idx, shape=np.asarray([-1], np.int32)),
                  updates=b.reshape(x=x, shape=np.asarray([-1], np.int32)), axis=np.int32(0), mode="update")
    y = b.reshape(x=y, shape=np.asarray(inferred, np.int32))
    if not ctx.has(2):
        return [y]
    want = ctx.const_input(2)
    if want is not None:
        extra = [int(w) - d for w, d in zip(want.reshape(-1), inferred)]
        if any(e < 0 for e in extra):
            raise ctx.format_error(f"output_shape {want.tolist()} is smaller than the unpooled shape {inferred}")
        return [y if not any(extra) else _zero_pad(ctx, y, np.asarray([v for e in extra for v in (0, e)], np.int32))]
    want_v = ctx.input(2, ("int32",))
    extra = b.sub(x=want_v, y=b.const(np.asarray(inferred, np.int32)))
    pads_v = b.reshape(x=b.stack(values=(b.mul(x=extra, y=np.int32(0)), extra), axis=1), shape=np.asarray([-1], np.int32))
    return [_zero_pad(ctx, y, pads_v)]


@onnx_op("Col2Im", versions=(18, 18))
def col2im(ctx: Ctx, node: Node) -> list[Value]:
    """The adjoint of im2col, as a grouped conv_transpose: input [N, C*prod(K), L] is reshaped to
    [N, C*prod(K), *blocks], and kernel position k of channel c goes to output channel c through a
    one-hot kernel; strides, dilations and pads are the conv_transpose's own."""
    b = ctx.b
    x = ctx.input(0, FLOATS)
    image = [int(v) for v in ctx.require_const(1, "image_shape").reshape(-1)]
    block = [int(v) for v in ctx.require_const(2, "block_shape").reshape(-1)]
    nsp = len(image)
    if len(block) != nsp:
        raise ctx.format_error(f"image_shape {image} and block_shape {block} differ in length")
    strides, dil = _ints(ctx, "strides", nsp, 1), _ints(ctx, "dilations", nsp, 1)
    pads = _ints(ctx, "pads", 2 * nsp, 0)
    n, ck, _ = dims(x)
    taps = int(np.prod(block))
    if not is_static_dim(ck) or ck % taps:
        raise ctx.format_error(f"input dim 1 ({ck}) is not a multiple of the block size {taps}")
    channels = ck // taps
    blocks = [(image[i] + pads[i] + pads[nsp + i] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1
              for i in range(nsp)]
    cols = b.reshape(x=x, shape=np.asarray([-1 if not is_static_dim(n) else int(n), ck, *blocks], np.int32))
    eye = np.eye(taps, dtype=x.type.dtype.storage).reshape([taps, 1, *block])
    weight = np.tile(eye, (channels,) + (1,) * (nsp + 1))  # [C*taps, 1, *K], groups = C
    pad = [v for i in range(nsp) for v in (pads[i], pads[nsp + i])]
    return [b.conv_transpose(x=cols, weight=b.const(weight), pad_type="custom", pad=np.asarray(pad, np.int32),
                             strides=np.asarray(strides, np.int32), dilations=np.asarray(dil, np.int32),
                             groups=np.int32(channels))]


def _roi_axis(ctx: Ctx, start: Value, length: Value, size: int, pooled: int, ratio: int):
    """Sample positions along one axis of every RoI ([R, pooled * ratio]) -> the two taps' indices
    and weights, zeroed where the sample is outside [-1, size] (ONNX RoiAlign's bilinear rule: a
    position is clamped at 0, and from size - 1 on both taps are the last pixel)."""
    b = ctx.b
    k = np.asarray([p + (i + 0.5) / ratio for p in range(pooled) for i in range(ratio)], np.float32)
    bin_size = b.real_div(x=length, y=np.float32(pooled))
    pos = b.add(x=b.expand_dims(x=start, axes=[1]), y=b.mul(x=b.expand_dims(x=bin_size, axes=[1]), y=k))
    valid = b.logical_and(x=b.greater_equal(x=pos, y=np.float32(-1.0)), y=b.less_equal(x=pos, y=np.float32(size)))
    y = b.maximum(x=pos, y=np.float32(0.0))
    low_f = b.floor(x=y)
    at_end = b.greater_equal(x=low_f, y=np.float32(size - 1))
    last = b.add(x=b.mul(x=low_f, y=np.float32(0.0)), y=np.float32(size - 1))  # (a tensor: see _where_bias)
    low_f = b.select(cond=at_end, a=last, b=low_f)
    y = b.select(cond=at_end, a=low_f, b=y)
    frac = b.sub(x=y, y=low_f)
    zero = b.mul(x=frac, y=np.float32(0.0))
    w_low = b.select(cond=valid, a=b.sub(x=np.float32(1.0), y=frac), b=zero)
    w_high = b.select(cond=valid, a=frac, b=zero)
    low = b.cast(x=low_f, dtype="int32")
    high = b.select(cond=at_end, a=low, b=b.add(x=low, y=np.int32(1)))
    return [(low, w_low), (high, w_high)]


@onnx_op("RoiAlign", versions=(16, 22))
def roi_align(ctx: Ctx, node: Node) -> list[Value]:
    """Each RoI's bins sampled on a ratio x ratio grid of bilinear points (gathers from the RoI's
    image), averaged ('avg') or, as ONNX defines 'max', the max over samples of the max of the four
    weighted corner values. sampling_ratio 0 (an adaptive, data-dependent grid) is refused."""
    b = ctx.b
    x = ctx.input(0, FLOATS)
    n, c, height, width = static_dims(ctx, x, "RoiAlign")
    rois = ctx.input(1, ("fp32",))
    batch = ctx.input(2, ("int32",))
    ratio = int(ctx.attr("sampling_ratio", 0))
    if ratio <= 0:
        raise ctx.unsupported("sampling_ratio 0 (a grid sized from each RoI's values) is not supported")
    oh, ow = int(ctx.attr("output_height", 1)), int(ctx.attr("output_width", 1))
    scale = float(ctx.attr("spatial_scale", 1.0))
    half_pixel = ctx.attr("coordinate_transformation_mode", "half_pixel") == "half_pixel"
    mode = ctx.attr("mode", "avg")
    if mode not in ("avg", "max"):
        raise ctx.format_error(f"mode '{mode}' is not avg or max")
    offset = 0.5 if half_pixel else 0.0

    def col(i: int) -> Value:
        v = b.squeeze(x=b.slice_by_size(x=rois, begin=[0, i], size=[-1, 1]), axes=[1])
        return b.sub(x=b.mul(x=v, y=np.float32(scale)), y=np.float32(offset))

    x1, y1, x2, y2 = (col(i) for i in range(4))
    roi_w, roi_h = b.sub(x=x2, y=x1), b.sub(x=y2, y=y1)
    if not half_pixel:
        roi_w, roi_h = b.maximum(x=roi_w, y=np.float32(1.0)), b.maximum(x=roi_h, y=np.float32(1.0))
    ys = _roi_axis(ctx, y1, roi_h, height, oh, ratio)  # [R, oh*ratio] each
    xs = _roi_axis(ctx, x1, roi_w, width, ow, ratio)  # [R, ow*ratio] each
    images = b.gather(x=x, indices=batch, axis=0)  # [R, C, H, W]
    if images.type.dtype.name != "fp32":
        images = b.cast(x=images, dtype="fp32")
    flat = b.reshape(x=images, shape=np.asarray([-1, c, height * width], np.int32))
    terms = []
    for yi, wy in ys:
        for xi, wx in xs:
            idx = b.add(x=b.expand_dims(x=b.mul(x=yi, y=np.int32(width)), axes=[2]), y=b.expand_dims(x=xi, axes=[1]))
            w = b.mul(x=b.expand_dims(x=wy, axes=[2]), y=b.expand_dims(x=wx, axes=[1]))  # [R, oh*r, ow*r]
            idx = b.tile(x=b.reshape(x=idx, shape=np.asarray([-1, 1, oh * ratio * ow * ratio], np.int32)),
                         reps=[1, c, 1])
            val = b.gather_along_axis(x=flat, indices=idx, axis=np.int32(2))  # [R, C, P]
            terms.append(b.mul(x=val, y=b.reshape(x=w, shape=np.asarray([-1, 1, oh * ratio * ow * ratio], np.int32))))
    if mode == "avg":
        acc = terms[0]
        for t in terms[1:]:
            acc = b.add(x=acc, y=t)
    else:
        acc = terms[0]
        for t in terms[1:]:
            acc = b.maximum(x=acc, y=t)
    grid = b.reshape(x=acc, shape=np.asarray([-1, c, oh, ratio, ow, ratio], np.int32))
    reduce = b.reduce_mean if mode == "avg" else b.reduce_max
    y = reduce(x=grid, axes=[3, 5], keep_dims=False)
    return [y if x.type.dtype.name == "fp32" else b.cast(x=y, dtype=x.type.dtype.name)]


@onnx_op("DeformConv", versions=(19, 22))
def deform_conv(ctx: Ctx, node: Node) -> list[Value]:
    """2-D deformable convolution as ONNX's reference: each kernel tap of each output position reads
    the input bilinearly (taps outside the image read 0) at its regular position plus the learned
    offset (offset channel (g*kH*kW + tap)*2 + {0: h, 1: w}), times the optional mask; the samples
    [N, C*kH*kW, oH*oW] then meet the weight in one grouped matmul (+ bias)."""
    b = ctx.b
    x = ctx.input(0, FLOATS)
    dt = x.type.dtype.name
    if dt != "fp32":
        x = b.cast(x=x, dtype="fp32")
    n, c, height, width = static_dims(ctx, x, "DeformConv (2-D only)") if ctx.rank(x) == 4 else (None,) * 4
    if n is None:
        raise ctx.unsupported(f"only 2-D DeformConv is supported, X has rank {ctx.rank(x)}")
    w = ctx.input(1, ("fp32",))
    oc, cg, kh, kw = static_dims(ctx, w, "DeformConv's weight")
    off = ctx.input(2, ("fp32",))
    _, off_ch, oh, ow = static_dims(ctx, off, "DeformConv's offset")
    group, ogroups = int(ctx.attr("group", 1)), int(ctx.attr("offset_group", 1))
    sh, sw = _ints(ctx, "strides", 2, 1)
    dh, dw = _ints(ctx, "dilations", 2, 1)
    pt, pl, _, _ = _ints(ctx, "pads", 4, 0)
    k, p = kh * kw, oh * ow
    if c != cg * group or oc % group or c % ogroups or off_ch != ogroups * k * 2:
        raise ctx.format_error(f"shapes do not fit: X {[n, c, height, width]}, W {[oc, cg, kh, kw]}, offset "
                               f"channels {off_ch}, group {group}, offset_group {ogroups}")
    off = b.reshape(x=off, shape=np.asarray([n, ogroups, k, 2, p], np.int32))
    taps_h = np.repeat(np.arange(kh) * dh, kw)[:, None]
    taps_w = np.tile(np.arange(kw) * dw, kh)[:, None]
    rows = (np.arange(oh) * sh - pt).repeat(ow)[None, :]
    cols = np.tile(np.arange(ow) * sw - pl, oh)[None, :]
    axes = []
    for i, (base, size) in enumerate(((taps_h + rows, height), (taps_w + cols, width))):
        pos = b.add(x=b.squeeze(x=b.slice_by_size(x=off, begin=[0, 0, 0, i, 0], size=[-1, -1, -1, 1, -1]), axes=[3]),
                    y=base.astype(np.float32))  # [N, G, K, P]
        f = b.floor(x=pos)
        t = b.sub(x=pos, y=f)
        lo = b.cast(x=f, dtype="int32")
        corners = []
        for idx, wgt in ((lo, b.sub(x=np.float32(1.0), y=t)), (b.add(x=lo, y=np.int32(1)), t)):
            inside = b.logical_and(x=b.greater_equal(x=idx, y=np.int32(0)), y=b.less(x=idx, y=np.int32(size)))
            wgt = b.select(cond=inside, a=wgt, b=b.mul(x=wgt, y=np.float32(0.0)))
            corners.append((b.minimum(x=b.maximum(x=idx, y=np.int32(0)), y=np.int32(size - 1)), wgt))
        axes.append(corners)
    per = c // ogroups
    flat = b.reshape(x=x, shape=np.asarray([n, ogroups, per, height * width], np.int32))
    total = None
    for yi, wy in axes[0]:
        for xi, wx in axes[1]:
            idx = b.reshape(x=b.add(x=b.mul(x=yi, y=np.int32(width)), y=xi), shape=np.asarray([n, ogroups, 1, k * p],
                                                                                            np.int32))
            val = b.gather_along_axis(x=flat, indices=b.tile(x=idx, reps=[1, 1, per, 1]), axis=np.int32(3))
            wgt = b.reshape(x=b.mul(x=wy, y=wx), shape=np.asarray([n, ogroups, 1, k * p], np.int32))
            term = b.mul(x=val, y=wgt)
            total = term if total is None else b.add(x=total, y=term)
    if ctx.has(4):
        mask = ctx.input(4, ("fp32",))
        total = b.mul(x=total, y=b.reshape(x=mask, shape=np.asarray([n, ogroups, 1, k * p], np.int32)))
    samples = b.reshape(x=total, shape=np.asarray([n, group, cg * k, p], np.int32))
    weight = b.reshape(x=w, shape=np.asarray([1, group, oc // group, cg * k], np.int32))
    y = b.reshape(x=b.matmul(x=weight, y=samples), shape=np.asarray([n, oc, oh, ow], np.int32))
    if ctx.has(3):
        y = b.add(x=y, y=b.reshape(x=ctx.input(3, ("fp32",)), shape=np.asarray([1, oc, 1, 1], np.int32)))
    return [y if dt == "fp32" else b.cast(x=y, dtype=dt)]
