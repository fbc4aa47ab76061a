"""Spatial data movement: pad, crop, the block rearrangements (depth_to_space, space_to_depth,
pixel_shuffle, pixel_unshuffle, batch_to_space, space_to_batch) and sliding_windows.

``reorganizeData`` DEPTH_TO_SPACE / SPACE_TO_DEPTH put the block offset outermost in the channel
index (the proto's example), which is MIL's depth_to_space / space_to_depth; PIXEL_SHUFFLE puts it
innermost (PyTorch's order). pixel_unshuffle has no mode: SPACE_TO_DEPTH then a ``gather`` of the
channels into the inner order. The batch/space ops move the batch axis to the channel position
(``transpose``) and use the same layers, as coremltools does, for square blocks; other blocks are
reshapes and transposes of rank <= 5 (static shapes).
"""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....formats.proto import NeuralNetwork_pb2 as nn
from ....ir.core import Op, Value
from ..emitter import NetworkEmitter, rank, static_shape
from ._common import single, x_blob
from ._window import ints, text
from .registry import lowering, unsupported

_PADDING_KINDS = {"constant": "constant", "reflect": "reflection", "replicate": "replication"}


def _set_border(amounts: nn.BorderAmounts, pairs: list[tuple[int, int]]) -> None:
    for before, after in pairs:
        edge = amounts.borderAmounts.add()
        edge.startEdgeSize, edge.endEdgeSize = before, after


@lowering("pad", note="padding (last two axes of rank >= 3, any mode) or constantPad (constant, any axes; spec 4)")
def _pad(e: NetworkEmitter, op: Op) -> None:
    x: Value = op.inputs["x"]
    r = rank(x)
    mode = text(e, op, "mode")
    value = float(np.asarray(e.const_param(op, "constant_val")).reshape(-1)[0]) if mode == "constant" else 0.0
    pad_v = e.const(op.inputs["pad"])
    if pad_v is None:
        if mode != "constant":
            raise LoweringError(f"'{mode}' padding by run-time amounts: only constantPad takes its amounts as an input")
        p = single(e, op, "constantPad", [e.blob(x), e.blob(op.inputs["pad"])])
        p.value = value
        return
    flat = [int(v) for v in np.asarray(pad_v).reshape(-1)]
    pairs = [(0, 0)] * (r - len(flat) // 2) + [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]
    last_two = [(0, 0)] * max(2 - r, 0) + pairs[-2:]
    if r >= 3 and not any(b or a for b, a in pairs[:-2]):
        _padding_layer(e, op.name, e.blob(x), e.define(op.outputs[0]), mode, value, last_two)
        return
    if mode == "constant":
        p = single(e, op, "constantPad")
        p.value = value
        p.padAmounts.extend(v for pair in pairs for v in pair)
        return
    if r < 3:  # the padding layer needs rank >= 3: pad [1, (1,) H, W] and drop the leading 1s
        lead = list(range(3 - r))
        grown = e.fresh(f"{op.name}_rank3")
        e.layer("expandDims", f"{op.name}_rank3", [e.blob(x)], [grown]).axes.extend(lead)
        padded = e.fresh(f"{op.name}_padded")
        _padding_layer(e, f"{op.name}_padded", grown, padded, mode, value, last_two)
        e.layer("squeeze", op.name, [padded], [e.define(op.outputs[0])]).axes.extend(lead)
        return
    raise LoweringError(f"'{mode}' padding of axes other than the last two: the padding layer pads only H and W")


def _padding_layer(e: NetworkEmitter, name: str, src: str, out: str, mode: str, value: float,
                   pairs: list[tuple[int, int]]) -> None:
    p = e.layer("padding", name, [src], [out])
    kind = _PADDING_KINDS[mode]
    getattr(p, kind).SetInParent()
    if kind == "constant":
        p.constant.value = value
    _set_border(p.paddingAmounts, pairs)


@lowering("crop", note="crop (cropAmounts)")
def _crop(e: NetworkEmitter, op: Op) -> None:
    (top, bottom), (left, right) = (ints(e, op, "crop_height"), ints(e, op, "crop_width"))
    _set_border(single(e, op, "crop").cropAmounts, [(top, bottom), (left, right)])


def _reorganize(e: NetworkEmitter, name: str, src: str, out: str, mode: int, block: int) -> None:
    """A reorganizeData layer (Core ML requires blockSize >= 2: callers handle block 1)."""
    p = e.layer("reorganizeData", name, [src], [out])
    p.mode, p.blockSize = mode, block
    if mode == nn.ReorganizeDataLayerParams.PIXEL_SHUFFLE:
        e.state.need(5, "reorganizeData PIXEL_SHUFFLE")


_REORGANIZE = {"depth_to_space": ("block_size", nn.ReorganizeDataLayerParams.DEPTH_TO_SPACE),
               "space_to_depth": ("block_size", nn.ReorganizeDataLayerParams.SPACE_TO_DEPTH),
               "pixel_shuffle": ("upscale_factor", nn.ReorganizeDataLayerParams.PIXEL_SHUFFLE)}


@lowering(*_REORGANIZE, note="reorganizeData (PIXEL_SHUFFLE: spec 5)")
def _block_rearrange(e: NetworkEmitter, op: Op) -> None:
    key, mode = _REORGANIZE[op.type]
    block = int(np.asarray(e.const_param(op, key)).reshape(-1)[0])
    if block == 1:  # the identity; Core ML refuses blockSize 1
        e.bind(op.outputs[0], x_blob(e, op))
        return
    _reorganize(e, op.name, x_blob(e, op), e.define(op.outputs[0]), mode, block)


@lowering("pixel_unshuffle", kind="decomposed", note="reorganizeData SPACE_TO_DEPTH + gather of the channels")
def _pixel_unshuffle(e: NetworkEmitter, op: Op) -> None:
    """pixel_unshuffle's channel ``c * f^2 + b`` is SPACE_TO_DEPTH's ``b * C + c`` (b: offset in the block)."""
    f = int(np.asarray(e.const_param(op, "downscale_factor")).reshape(-1)[0])
    shape = static_shape(op.inputs["x"])
    c = shape[1] if shape is not None else op.inputs["x"].type.shape[1]  # type: ignore[union-attr]
    if not isinstance(c, (int, np.integer)):
        raise LoweringError("pixel_unshuffle needs a static channel count (the channel order is a constant gather)")
    if f == 1:
        e.bind(op.outputs[0], x_blob(e, op))
        return
    s2d = e.fresh(f"{op.name}_s2d")
    _reorganize(e, f"{op.name}_s2d", x_blob(e, op), s2d, nn.ReorganizeDataLayerParams.SPACE_TO_DEPTH, f)
    k = np.arange(int(c) * f * f)
    order = e.load_constant(None, ((k % (f * f)) * int(c) + k // (f * f)).astype(np.float32), f"{op.name}_order")
    e.layer("gather", op.name, [s2d, order], [e.define(op.outputs[0])]).axis = -3


def _transpose_nc(e: NetworkEmitter, src: str, name: str, out: str | None = None) -> str:
    """``[N, C, H, W]`` <-> ``[C, N, H, W]``."""
    dst = out or e.fresh(name)
    e.layer("transpose", name, [src], [dst]).axes.extend([1, 0, 2, 3])
    return dst


def _blocks(e: NetworkEmitter, op: Op) -> tuple[int, int]:
    bh, bw = ints(e, op, "block_shape")
    return bh, bw


def _static_nchw(v: Value, what: str) -> list[int]:
    shape = static_shape(v)
    if shape is None:
        raise LoweringError(f"{what} with unequal block sizes needs static shapes (reshapes with fixed sizes)")
    return shape


def _chain(e: NetworkEmitter, op: Op, src: str, steps: list[tuple[str, list[int]]], out: str) -> str:
    """``reshapeStatic`` / ``transpose`` layers one after the other; the last writes ``out``."""
    for i, (kind, values) in enumerate(steps):
        dst = out if i == len(steps) - 1 else e.fresh(f"{op.name}_{i}")
        params = e.layer("reshapeStatic" if kind == "reshape" else "transpose", f"{op.name}_{i}", [src], [dst])
        (params.targetShape if kind == "reshape" else params.axes).extend(values)
        src = dst
    return src


@lowering("batch_to_space", kind="decomposed", note="transpose + reorganizeData DEPTH_TO_SPACE + transpose + crop "
                                                    "(square blocks; others: reshapes and transposes of rank <= 5)")
def _batch_to_space(e: NetworkEmitter, op: Op) -> None:
    """Batch ``(i_h * b + i_w) * N + n`` is DEPTH_TO_SPACE's channel order once batch and channels
    swap places."""
    bh, bw = _blocks(e, op)
    crops = np.asarray(e.const_param(op, "crops")).astype(int).tolist()
    cropped = any(v for pair in crops for v in pair)
    src = x_blob(e, op)
    if (bh, bw) == (1, 1) and not cropped:
        e.bind(op.outputs[0], src)
        return
    out = e.define(op.outputs[0])
    moved = src if (bh, bw) == (1, 1) else e.fresh(f"{op.name}_uncropped") if cropped else out
    if (bh, bw) == (1, 1):
        pass
    elif bh == bw:
        t = _transpose_nc(e, src, f"{op.name}_cn")
        d2s = e.fresh(f"{op.name}_d2s")
        _reorganize(e, f"{op.name}_d2s", t, d2s, nn.ReorganizeDataLayerParams.DEPTH_TO_SPACE, bh)
        _transpose_nc(e, d2s, f"{op.name}_nc", moved)
    else:  # [bh, bw*n*c, h, w] -> H interleaved; then [bw, n, c, H, w] -> W interleaved
        nb, c, h, w = _static_nchw(op.inputs["x"], "batch_to_space")
        n = nb // (bh * bw)
        _chain(e, op, src, [
            ("reshape", [bh, bw * n * c, h, w]), ("transpose", [1, 2, 0, 3]), ("reshape", [bw, n, c, h * bh, w]),
            ("transpose", [1, 2, 3, 4, 0]), ("reshape", [n, c, h * bh, w * bw])], moved)
    if cropped:
        _set_border(e.layer("crop", op.name, [moved], [out]).cropAmounts, [tuple(crops[0]), tuple(crops[1])])


@lowering("space_to_batch", kind="decomposed", note="padding + transpose + reorganizeData SPACE_TO_DEPTH + transpose "
                                                    "(square blocks; others: reshapes and transposes of rank <= 5)")
def _space_to_batch(e: NetworkEmitter, op: Op) -> None:
    bh, bw = _blocks(e, op)
    pads = np.asarray(e.const_param(op, "paddings")).astype(int).tolist()
    src = x_blob(e, op)
    if any(v for pair in pads for v in pair):
        padded = e.fresh(f"{op.name}_padded")
        p = e.layer("padding", f"{op.name}_padded", [src], [padded])
        p.constant.value = 0.0
        _set_border(p.paddingAmounts, [tuple(pads[0]), tuple(pads[1])])
        src = padded
    if (bh, bw) == (1, 1):  # only the padding
        e.bind(op.outputs[0], src)
        return
    out = e.define(op.outputs[0])
    if bh == bw:
        t = _transpose_nc(e, src, f"{op.name}_cn")
        moved = e.fresh(f"{op.name}_s2d")
        _reorganize(e, f"{op.name}_s2d", t, moved, nn.ReorganizeDataLayerParams.SPACE_TO_DEPTH, bh)
        _transpose_nc(e, moved, op.name, out)
        return
    n, c, hh, ww = _static_nchw(op.inputs["x"], "space_to_batch")
    hh, ww = hh + sum(pads[0]), ww + sum(pads[1])
    h, w = hh // bh, ww // bw
    _chain(e, op, src, [
        ("reshape", [n, c, hh, w, bw]), ("transpose", [4, 0, 1, 2, 3]), ("reshape", [bw * n * c, h, bh, w]),
        ("transpose", [2, 0, 1, 3]), ("reshape", [bh * bw * n, c, h, w])], out)


@lowering("sliding_windows", note="slidingWindows")
def _sliding_windows(e: NetworkEmitter, op: Op) -> None:
    p = single(e, op, "slidingWindows")
    p.axis = int(np.asarray(e.const_param(op, "axis")).reshape(-1)[0])
    p.windowSize = int(np.asarray(e.const_param(op, "size")).reshape(-1)[0])
    p.step = int(np.asarray(e.const_param(op, "stride")).reshape(-1)[0])


unsupported("no NeuralNetwork layer samples at arbitrary coordinates (no grid-sample layer); cropResize and "
            "resizeBilinear sample only axis-aligned grids", "resample", "affine")
