"""Rank-5 lowerings of the shape family: reshapes and casts (no layer: the same blob),
transpose (permute), padding, concat and split along C."""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....ir.core import Op, Value
from ..lowering._common import scalar
from ..lowering.cast import read_only_as_indices
from .layout import (
    Layout,
    Rank5Emitter,
    channel_layout,
    chw_layout,
    dims,
    is_static,
    natural_layout,
    shape_text,
    static_shape,
)
from .lowering import input_value, rank5, step_shape

# no layer: the same blob


@rank5("reshape", "squeeze", "expand_dims", "identity", per_step=True)
def _same_elements(e: Rank5Emitter, op: Op) -> None:
    e.alias(op.outputs[0], input_value(op))


@rank5("cast", per_step=True)
def _cast(e: Rank5Emitter, op: Op) -> None:
    """A cast to a float type, or to an integer type of a value that holds integers (an index from
    argmax, say) or that only gather indices read (lowering/cast.py): the same blob (blobs hold
    fp32; Core ML converts an INT32 output feature)."""
    x = input_value(op)
    if str(e.const_param(op, "dtype")) not in ("fp16", "fp32") and not _integral(x) \
            and not read_only_as_indices(op.outputs[0]):  # the embedding layer truncates its float indices
        raise LoweringError("a cast to a non-float type (rank-5 blobs hold floats; no legacy rounding layer)")
    e.alias(op.outputs[0], x)


def _integral(v: Value) -> bool:
    """Whether ``v`` holds whole numbers: an int or bool value, or a float cast or reshape of one."""
    while True:
        dtype = getattr(v.type, "dtype", None)
        if dtype is not None and dtype.name.startswith(("int", "uint", "bool")):
            return True
        op = v.producer
        if op is None or op.type not in ("cast", "reshape", "squeeze", "expand_dims", "identity"):
            return False
        v = input_value(op)


@rank5("transpose")
def _transpose(e: Rank5Emitter, op: Op) -> None:
    """``permute`` of C, H, W of a value whose leading axes are 1 (Seq stays axis 0)."""
    x = input_value(op)
    shape = static_shape(x)
    perm = [int(a) % len(shape) for a in np.asarray(e.const_param(op, "perm")).reshape(-1)]
    rank = len(shape)
    lead = rank - 3
    layout = chw_layout(x, "transpose input")
    moved = [a for i, a in enumerate(perm) if a != i]
    if any(a < lead and shape[a] != 1 for a in moved) or any(perm[i] < lead for i in range(lead, rank)):
        raise LoweringError(f"transpose {perm} of shape {shape} moves a leading axis (legacy permute reorders "
                            f"C, H and W)")
    axes = [perm[i] - lead for i in range(lead, rank)]  # the order of C, H, W
    out_layout = tuple(layout[a] for a in axes)
    params = e.layer("permute", op.name, [e.get(x, layout)], [e.put(op.outputs[0], out_layout)])
    params.axis.extend([0] + [a + 1 for a in axes])


_PAD_MODES = {"constant": "constant", "reflect": "reflection", "replicate": "replication"}


@rank5("pad")
def _pad(e: Rank5Emitter, op: Op) -> None:
    """``padding`` of H and W (constant, reflection, replication) of a [1, C, H, W] value."""
    x = input_value(op)
    layout = chw_layout(x, "pad input")
    pad = [int(d) for d in np.asarray(e.const_param(op, "pad")).reshape(-1)]
    if len(pad) > 4 and any(pad[:-4]):
        raise LoweringError(f"padding {pad} of N or C (legacy padding covers H and W)")
    pad = ([0] * 4 + pad)[-4:]  # MIL pads the last len(pad) / 2 axes
    mode = str(e.const_param(op, "mode"))
    out_layout = chw_layout(op.outputs[0], "pad output")
    params = e.layer("padding", op.name, [e.get(x, layout)], [e.put(op.outputs[0], out_layout)])
    kind = getattr(params, _PAD_MODES[mode])
    kind.SetInParent()
    if mode == "constant":
        kind.value = scalar(e.const_param(op, "constant_val"), "constant_val")
    for start, end in ((pad[0], pad[1]), (pad[2], pad[3])):
        edge = params.paddingAmounts.borderAmounts.add()
        edge.startEdgeSize, edge.endEdgeSize = start, end


@rank5("concat")
def _concat(e: Rank5Emitter, op: Op) -> None:
    values = op.inputs.get("values")
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    if bool(np.asarray(e.param(op, "interleave")).reshape(-1)[0]):
        raise LoweringError("interleaved concat (needs specification version 5)")
    axis = int(e.const_param(op, "axis"))
    blobs: list[str] = []
    for v in values:
        blobs.append(e.get(v, channel_layout(v, axis, "concat")))
    out_layout = channel_layout(op.outputs[0], axis, "concat")
    if len(blobs) == 1:
        e.alias(op.outputs[0], values[0])
        return
    e.layer("concat", op.name, blobs, [e.put(op.outputs[0], out_layout)])
    e.parts[op.outputs[0]] = [(b, e.layouts[v]) for b, v in zip(blobs, values) if e.lookup(v) is not None]


@rank5("split", per_step=True)
def _split(e: Rank5Emitter, op: Op) -> None:
    """``split`` into equal parts along C (the legacy split layer, per step)."""
    x = input_value(op)
    outs = list(op.outputs)
    seq = e.seq(x)
    shape = step_shape(e, x)
    axis = int(np.asarray(e.const_param(op, "axis")).reshape(()))
    axis = axis + len(dims(x)) if axis < 0 else axis
    step_axis = axis - 1 if seq is not None else axis
    if seq is not None and axis == 0:
        raise LoweringError("split along the sequence axis (the legacy split layer splits C)")
    layout = _channel_step_layout(x, shape, step_axis, "split")
    sizes = {int(dims(o)[axis]) for o in outs} if is_static([dims(o)[axis] for o in outs]) else set()
    if len(sizes) != 1:
        raise LoweringError(f"split into parts of sizes {[str(dims(o)[axis]) for o in outs]} (the legacy split "
                            f"layer makes equal parts)")
    part = (sizes.pop(), layout[1], layout[2])
    parts = e.parts.get(x, [])
    if seq is None and len(parts) == len(outs) and all(lay == part for _, lay in parts):
        for o, (blob, lay) in zip(outs, parts):  # the split undoes a concat: its parts
            e.bind(o, blob)
            e.layouts[o] = lay
        return
    blobs = [e.put(o, part, seq) for o in outs]
    e.layer("split", op.name, [e.get(x, layout)], blobs).nOutputs = len(outs)


def _channel_step_layout(x: Value, shape: list, axis: int, what: str) -> Layout:
    """``channel_layout`` of one step's shape ``shape`` (C at ``axis``)."""
    rank = len(shape)
    if rank >= 3 and axis == rank - 3 and natural_layout(shape) is not None:
        return tuple(shape[-3:])  # type: ignore[return-value]
    if rank >= 1 and axis == rank - 1 and all(d == 1 for d in shape[:-1]):
        return (shape[-1], 1, 1)
    raise LoweringError(f"{what} along axis {axis} of shape {shape_text(shape)}: rank-5 layers work along "
                        f"C only")
