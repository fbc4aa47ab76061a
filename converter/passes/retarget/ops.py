"""Re-targeting rules for ordinary ops whose meaning or parameters changed between opsets.

- gather / scatter family, up to iOS17+: iOS15/16 read a negative index from the end; iOS17 calls
  it out of range. Constant indices are rewritten; indices computed at run time go through
  ``select(indices < 0, indices + size, indices)`` (the rewrite coremltools' docs give).
- conv / conv_transpose, down from iOS17: a bias computed at run time becomes an ``add`` after the
  convolution; a conv_transpose weight computed at run time has no earlier form.
- reshape, both ways: iOS17 aligns the 0s of ``shape`` to the right, iOS15/16 copy the dim at the
  same index; a constant shape whose 0s stand for static dims gets those dims written out.
- crop_resize, both ways: iOS15/16 ``roi [N, 1, 4|5, 1, 1]`` (output ``[N, B|1, C, h, w]``) and
  iOS17 ``boxes [N, 4]`` + ``box_indices [N]`` (output ``[N, C, h, w]``) are rewritten into each
  other with reshape / slice / concat / cast / tile ops around the crop.
- non_maximum_suppression between iOS16 and iOS17 (score_threshold and the count output removed,
  boxes transposed) is refused.
Each rule ends with the shared parameter / dtype step (``generic``).
"""

from __future__ import annotations

import numpy as np

from ...ir.core import Op, Value
from ...ir.opdef import get_opdef
from ...ir.shapes import normalize_axis
from ...ir.types import TensorType, is_static_dim
from .context import Context, Refusal
from .generic import generic


def _tensor(v: object) -> TensorType:
    assert isinstance(v, Value) and isinstance(v.type, TensorType)
    return v.type


def _i32(ctx: Context, anchor: Op, val: object, name: str) -> Value:
    return ctx.const(anchor, np.asarray(val, np.int32), "int32", name)


# ---------------------------------------------------------------------------------------------
# gather / scatter: negative indices


_DATA = {"gather": "x", "gather_along_axis": "x", "gather_nd": "x",
         "scatter": "data", "scatter_along_axis": "data", "scatter_nd": "data"}


def _indexed_dims(ctx: Context, op: Op) -> tuple[list[int], list[object]]:
    """(axes of the data that indices count along, their sizes (ints or symbols))."""
    data = _tensor(op.inputs[_DATA[op.type]])
    if data.shape is None:
        raise Refusal("the data's rank is unknown, so negative indices cannot be wrapped")
    if op.type.endswith("_nd"):
        k = _tensor(op.inputs["indices"]).shape
        if k is None or not is_static_dim(k[-1]):
            raise Refusal("the index depth of a gather_nd / scatter_nd is unknown")
        b = int(np.asarray(ctx.value(op.inputs["batch_dims"]))) if "batch_dims" in op.inputs else 0
        axes = list(range(b, b + int(k[-1])))
    else:
        axis = op.inputs.get("axis")
        axes = [normalize_axis(int(np.asarray(ctx.value(axis))) if axis is not None else 0, len(data.shape))]
    return axes, [data.shape[a] for a in axes]


def wrap_negative_indices(ctx: Context, op: Op) -> None:
    idx_v = op.inputs["indices"]
    assert isinstance(idx_v, Value)
    idx_t = _tensor(idx_v)
    if idx_t.dtype.kind == "uint":
        generic(ctx, op)
        return
    axes, sizes = _indexed_dims(ctx, op)
    nd = op.type.endswith("_nd")
    if ctx.is_const(idx_v):
        idx = np.asarray(ctx.value(idx_v))
        if not (idx < 0).any():
            generic(ctx, op)
            return
        if all(is_static_dim(s) for s in sizes):
            size = np.asarray([int(s) for s in sizes], np.int64).reshape(-1 if nd else ())
            wrapped = np.where(idx < 0, idx + size, idx).astype(idx.dtype)
            ctx.set_input(op, "indices", ctx.const(op, wrapped, idx_t.dtype, f"{op.name}_indices"))
            generic(ctx, op)
            return
    name = f"{op.name}_indices"
    if all(is_static_dim(s) for s in sizes):
        size = _i32(ctx, op, [int(s) for s in sizes] if nd else int(sizes[0]), f"{name}_size")
    else:
        shape = ctx.op(op, "shape", {"x": op.inputs[_DATA[op.type]]}, f"{name}_data_shape").outputs[0]
        size = ctx.op(op, "gather", {"x": shape, "indices": _i32(ctx, op, axes if nd else axes[0], f"{name}_axes")},
                      f"{name}_size").outputs[0]
    idx = idx_v
    if idx_t.dtype.name != "int32":
        idx = ctx.op(op, "cast", {"x": idx, "dtype": ctx.const(op, np.array("int32"), "string", f"{name}_dtype")},
                     f"{name}_int32").outputs[0]
    negative = ctx.op(op, "less", {"x": idx, "y": _i32(ctx, op, 0, f"{name}_zero")}, f"{name}_negative").outputs[0]
    shifted = ctx.op(op, "add", {"x": idx, "y": size}, f"{name}_shifted").outputs[0]
    wrapped = ctx.op(op, "select", {"cond": negative, "a": shifted, "b": idx}, f"{name}_wrapped").outputs[0]
    ctx.set_input(op, "indices", wrapped)
    generic(ctx, op)


# ---------------------------------------------------------------------------------------------
# conv / conv_transpose: run-time weight and bias


def split_run_time_bias(ctx: Context, op: Op) -> None:
    if op.type == "conv_transpose" and not ctx.is_const(op.inputs["weight"]):  # type: ignore[arg-type]
        raise Refusal(f"a conv_transpose weight computed at run time has no {ctx.target} form")
    bias = op.inputs.get("bias")
    if not isinstance(bias, Value) or ctx.is_const(bias):
        generic(ctx, op)
        return
    out = _tensor(op.outputs[0])
    if out.shape is None:
        raise Refusal("a run-time bias on an output of unknown rank")
    inputs = {k: v for k, v in op.inputs.items() if k != "bias"}
    conv = ctx.op(op, op.type, inputs, f"{op.name}_no_bias")
    spatial = list(range(1, len(out.shape) - 1))
    column = ctx.op(op, "expand_dims", {"x": bias, "axes": _i32(ctx, op, spatial, f"{op.name}_bias_axes")},
                    f"{op.name}_bias").outputs[0]
    add = ctx.op(op, "add", {"x": conv.outputs[0], "y": column}, op.name, [op.outputs[0].name])
    ctx.replace(op, add.outputs)


# ---------------------------------------------------------------------------------------------
# reshape: where the 0s of shape point


def resolve_zero_dims(ctx: Context, op: Op) -> None:
    shape_v, x = op.inputs["shape"], _tensor(op.inputs["x"])
    assert isinstance(shape_v, Value)
    if not ctx.is_const(shape_v):
        length = _tensor(shape_v).shape
        if x.shape is not None and length is not None and length[0] == len(x.shape):
            generic(ctx, op)  # 0s then mean the same dim in both readings
            return
        raise Refusal(f"a run-time shape may hold 0s, which {ctx.target} reads differently (iOS17 aligns them right)")
    shape = np.asarray(ctx.value(shape_v)).reshape(-1)
    if not (shape == 0).any() or (x.shape is not None and len(x.shape) == shape.size):
        generic(ctx, op)
        return
    out = _tensor(op.outputs[0]).shape
    if out is None or not all(is_static_dim(out[i]) for i in np.flatnonzero(shape == 0)):
        raise Refusal(f"shape {shape.tolist()} copies dims by position, which {ctx.target} reads differently, "
                      "and the dims it copies are not static")
    explicit = np.where(shape == 0, [int(d) if is_static_dim(d) else 0 for d in out], shape).astype(np.int32)
    ctx.set_input(op, "shape", _i32(ctx, op, explicit, f"{op.name}_shape"))
    generic(ctx, op)


# ---------------------------------------------------------------------------------------------
# crop_resize: roi <-> boxes + box_indices


_CROP_PARAMS = ("target_height", "target_width", "normalized_coordinates", "spatial_scale", "box_coordinate_mode",
                "sampling_mode", "pad_value")


def _crop_params(ctx: Context, op: Op) -> dict[str, Value]:
    """The crop's other parameters the target takes (pad_value is checked like any added one)."""
    sig = get_opdef("crop_resize", ctx.target).signature
    out: dict[str, Value] = {}
    for key in _CROP_PARAMS:
        v = op.inputs.get(key)
        if isinstance(v, Value):
            if key not in sig.inputs:
                if float(np.asarray(ctx.value(v))) != 0.0:
                    raise Refusal(f"pad_value other than 0 has no {ctx.target} form")
                continue
            out[key] = v
    return out


def roi_to_boxes(ctx: Context, op: Op) -> None:
    roi, x = op.inputs["roi"], _tensor(op.inputs["x"])
    rt = _tensor(roi)
    if rt.shape is None or not is_static_dim(rt.shape[2]):
        raise Refusal("the roi's coordinate count is unknown")
    coords = int(rt.shape[2])
    n = rt.shape[0]
    name = op.name
    flat = ctx.op(op, "reshape", {"x": roi, "shape": _i32(ctx, op, [-1, coords], f"{name}_roi_shape")},
                  f"{name}_roi").outputs[0]
    params = _crop_params(ctx, op)
    if coords == 5:
        first = ctx.op(op, "slice_by_index", {
            "x": flat, "begin": _i32(ctx, op, [0, 0], f"{name}_index_begin"),
            "end": _i32(ctx, op, [0, 1], f"{name}_index_end"),
            "end_mask": ctx.const(op, np.array([True, False]), "bool", f"{name}_index_end_mask"),
            "squeeze_mask": ctx.const(op, np.array([False, True]), "bool", f"{name}_index_squeeze")},
            f"{name}_index_float").outputs[0]
        indices = ctx.op(op, "cast", {"x": first, "dtype": ctx.const(op, np.array("int32"), "string", f"{name}_int32")},
                         f"{name}_box_indices").outputs[0]
        boxes = ctx.op(op, "slice_by_index", {
            "x": flat, "begin": _i32(ctx, op, [0, 1], f"{name}_boxes_begin"),
            "end": _i32(ctx, op, [0, 5], f"{name}_boxes_end"),
            "end_mask": ctx.const(op, np.array([True, True]), "bool", f"{name}_boxes_end_mask")},
            f"{name}_boxes").outputs[0]
        crop = ctx.op(op, "crop_resize", {"x": op.inputs["x"], "boxes": boxes, "box_indices": indices, **params},
                      f"{name}_crop").outputs[0]
        out = ctx.op(op, "expand_dims", {"x": crop, "axes": _i32(ctx, op, [1], f"{name}_axes")}, name,
                     [op.outputs[0].name])
        ctx.replace(op, out.outputs)
        return
    batch = None if x.shape is None else x.shape[0]
    if not (is_static_dim(n) and batch is not None and is_static_dim(batch)):
        raise Refusal("a 4-coordinate roi (every box on every image) needs a static box count and batch")
    n, batch = int(n), int(batch)
    per_box = ctx.op(op, "expand_dims", {"x": flat, "axes": _i32(ctx, op, [1], f"{name}_each_axes")},
                     f"{name}_each").outputs[0]
    tiled = ctx.op(op, "tile", {"x": per_box, "reps": _i32(ctx, op, [1, batch, 1], f"{name}_reps")},
                   f"{name}_tiled").outputs[0]
    boxes = ctx.op(op, "reshape", {"x": tiled, "shape": _i32(ctx, op, [n * batch, 4], f"{name}_boxes_shape")},
                   f"{name}_boxes").outputs[0]
    indices = _i32(ctx, op, np.tile(np.arange(batch), n), f"{name}_box_indices")
    crop = ctx.op(op, "crop_resize", {"x": op.inputs["x"], "boxes": boxes, "box_indices": indices, **params},
                  f"{name}_crop").outputs[0]
    shape = [n, batch, *(int(d) for d in _tensor(crop).shape[1:])]
    out = ctx.op(op, "reshape", {"x": crop, "shape": _i32(ctx, op, shape, f"{name}_out_shape")}, name,
                 [op.outputs[0].name])
    ctx.replace(op, out.outputs)


def boxes_to_roi(ctx: Context, op: Op) -> None:
    boxes, x = op.inputs["boxes"], _tensor(op.inputs["x"])
    bt = _tensor(boxes)
    name = op.name
    float_dt = x.dtype.name
    string = np.array(float_dt)
    indices = op.inputs.get("box_indices")
    if indices is None:
        if bt.shape is None or not is_static_dim(bt.shape[0]):
            raise Refusal("default box_indices over a box count that is not static")
        indices = _i32(ctx, op, np.arange(int(bt.shape[0])), f"{name}_box_indices")
    index_f = ctx.op(op, "cast", {"x": indices, "dtype": ctx.const(op, string, "string", f"{name}_index_dtype")},
                     f"{name}_index_float").outputs[0]
    column = ctx.op(op, "expand_dims", {"x": index_f, "axes": _i32(ctx, op, [1], f"{name}_index_axes")},
                    f"{name}_index_column").outputs[0]
    if bt.dtype.name != float_dt:
        boxes = ctx.op(op, "cast", {"x": boxes, "dtype": ctx.const(op, string, "string", f"{name}_boxes_dtype")},
                       f"{name}_boxes_float").outputs[0]
    rows = ctx.op(op, "concat", {"values": (column, boxes), "axis": _i32(ctx, op, 1, f"{name}_concat_axis")},
                  f"{name}_rows").outputs[0]
    roi = ctx.op(op, "reshape", {"x": rows, "shape": _i32(ctx, op, [-1, 1, 5, 1, 1], f"{name}_roi_shape")},
                 f"{name}_roi").outputs[0]
    crop = ctx.op(op, "crop_resize", {"x": op.inputs["x"], "roi": roi, **_crop_params(ctx, op)},
                  f"{name}_crop").outputs[0]
    out = ctx.op(op, "squeeze", {"x": crop, "axes": _i32(ctx, op, [1], f"{name}_axes")}, name, [op.outputs[0].name])
    ctx.replace(op, out.outputs)


# ---------------------------------------------------------------------------------------------
# refused


def nms_layout_changed(ctx: Context, op: Op) -> None:
    raise Refusal("non_maximum_suppression changed in iOS17 (score_threshold and the box-count output removed, "
                  "boxes and scores transposed): not translated")
