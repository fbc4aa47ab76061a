"""non_maximum_suppression: ONNX NonMaxSuppression with the selection order made MIL's, then
gathered and padded to ``max_boxes``.

MIL's NMS (converter/ir/ops/tensor_ops.py ``nms_select``) ranks boxes by their best class score
(ties: lower index first), drops those below ``score_threshold`` (iOS15, kept when >= it), keeps a
box unless an already kept box (of the same best class with ``per_class_suppression``) overlaps it
with IoU > ``iou_threshold``, stops at ``max_boxes`` in all, and pads boxes/scores with 0 and
indices with -1 (iOS15 also returns the count, and the best box alone when none passes).

ONNX NonMaxSuppression suppresses per class with ``max_output_boxes_per_class`` and leaves the
order among equal scores open (onnxruntime's heap compares scores only). So it is fed *rank scores*
instead of the scores: box ``i`` scores ``B - position of i`` in a stable descending sort of the
best scores (TopK: ties by lower index), 0 when it fails the threshold, and NMS keeps scores
> 0.5. Its processing order is then exactly MIL's. Per-class suppression gives each box its rank
score in its best class only (0 elsewhere), so one ONNX class = one MIL class; merging the classes
in rank order and cutting at ``max_boxes`` is MIL's global stop (a class never needs more than
``max_boxes`` of its own). The IoU is ONNX's center-point form (center_point_box=1), which computes
corners, areas and the ratio as MIL's formula does in float32. ``iou_threshold`` outside [0, 1]
(onnxruntime refuses it): above 1 (or NaN) nothing is ever suppressed, as with 1; below 0 every box
after the first of its class is suppressed, which is one box per class. NaN scores follow numpy:
a box with a NaN class score has a NaN best score and the first NaN's class (onnxruntime's
ReduceMax / ArgMax skip NaN), sorts after every number and never passes a threshold.
"""

from __future__ import annotations

import math

import numpy as np

from ....ir.core import Op
from ....ir.opdef import opset_index
from ..emitter import OnnxEmitter, onnx_type
from ._common import bool_param, float_param, int_param, reduce_node
from .registry import lowering


def _boxes_last(op: Op) -> bool:
    """iOS17's layout: boxes [n, 4, B], scores [n, K, B] (iOS15: [n, B, 4], [n, B, K])."""
    return opset_index(op.opdef.signature.since) >= opset_index("iOS17")


@lowering("non_maximum_suppression", kind="decomposed",
          note="NonMaxSuppression over rank scores (MIL's order, per-class as one ONNX class per best class), "
               "TopK merge, GatherND, Pad to max_boxes")
def _nms(e: OnnxEmitter, op: Op) -> None:
    last = _boxes_last(op)
    max_boxes = int_param(e, op, "max_boxes")
    per_class = bool_param(e, op, "per_class_suppression")
    iou = float_param(e, op, "iou_threshold")
    boxes, scores = e.input(op, "boxes"), e.input(op, "scores")
    if last:  # to [n, B, 4] and [n, B, K]
        boxes = e.node("Transpose", [boxes], perm=[0, 2, 1])
        scores = e.node("Transpose", [scores], perm=[0, 2, 1])
    zero = e.constant(np.float32(0))
    f32 = e.dtype(op.inputs["scores"]).name == "fp32"
    scores32 = scores if f32 else e.cast(scores, "fp32")
    # a box's best score and class as numpy's max / argmax give them: a NaN score wins (onnxruntime's
    # ReduceMax and ArgMax skip it), the first NaN's class
    nan_scores = e.cast(e.node("IsNaN", [scores32]), "fp32")
    has_nan = e.node("Greater", [reduce_node(e, "ReduceMax", nan_scores, [2], keepdims=False), zero])
    best = e.node("Where", [has_nan, e.constant(np.float32(np.nan)),
                            reduce_node(e, "ReduceMax", scores32, [2], keepdims=False)])  # [n, B]
    n_boxes = e.node("Shape", [best], start=1, end=2)  # [1]

    # rank score: B for the best box, ..., 1 for the last (stable descending order of best, NaN
    # last as numpy sorts it: TopK would put NaN first, so NaN sorts as -inf, then moves behind)
    is_nan = e.node("IsNaN", [best])
    finite_first = e.node("Where", [is_nan, e.constant(np.float32(-np.inf)), best])
    order = e.node("TopK", [finite_first, n_boxes], 2, axis=1, largest=1, sorted=1)[1]
    numbers = e.cast(e.node("Not", [e.node("GatherElements", [is_nan, order], axis=1)]), "fp32")
    nan_last = e.node("TopK", [numbers, n_boxes], 2, axis=1, largest=1, sorted=1)[1]
    order = e.node("GatherElements", [order, nan_last], axis=1)
    count_down = e.cast(e.node("Range", [e.node("Squeeze", [n_boxes]), e.constant(np.int64(0)),
                                         e.constant(np.int64(-1))]), "fp32")
    descending = e.node("Expand", [count_down, e.node("Shape", [best])])
    rank = e.node("ScatterElements", [descending, order, descending], axis=1)
    if not last:  # iOS15: score_threshold, and the best box alone when none passes it
        threshold = e.constant(np.float32(float_param(e, op, "score_threshold")))
        passes = e.node("GreaterOrEqual", [best, threshold])
        any_passes = reduce_node(e, "ReduceMax", e.cast(passes, "fp32"), [1], keepdims=True)  # [n, 1]
        fallback = e.node("And", [e.node("Equal", [any_passes, zero]),
                                  e.node("Equal", [rank, e.cast(n_boxes, "fp32")])])
        rank = e.node("Where", [e.node("Or", [passes, fallback]), rank, zero])

    if per_class:
        best_class = e.node("Where", [has_nan, e.node("ArgMax", [nan_scores], axis=2, keepdims=0),
                                      e.node("ArgMax", [scores32], axis=2, keepdims=0)])
        best_class = e.node("Unsqueeze", [best_class, e.int64s([1])])
        n_classes = e.node("Squeeze", [e.node("Shape", [scores32], start=2, end=3)])
        classes = e.node("Reshape", [e.node("Range", [e.constant(np.int64(0)), n_classes, e.constant(np.int64(1))]),
                                     e.int64s([1, -1, 1])])
        nms_scores = e.node("Where", [e.node("Equal", [best_class, classes]),
                                      e.node("Unsqueeze", [rank, e.int64s([1])]), zero])  # [n, K, B]
    else:
        nms_scores = e.node("Unsqueeze", [rank, e.int64s([1])])  # [n, 1, B]
    per_class_max, iou_used = max_boxes, iou
    if iou < 0:  # every IoU (>= 0) exceeds it: one box per class
        per_class_max, iou_used = min(max_boxes, 1), 0.0
    elif math.isnan(iou) or iou > 1:  # never exceeded
        iou_used = 1.0
    boxes32 = boxes if e.dtype(op.inputs["boxes"]).name == "fp32" else e.cast(boxes, "fp32")
    selected = e.node("NonMaxSuppression", [boxes32, nms_scores, e.int64s([per_class_max]),
                                            e.constant(np.array([iou_used], np.float32)),
                                            e.constant(np.array([0.5], np.float32))], center_point_box=1)

    # the kept boxes' rank scores in an [n, B] grid; the top max_boxes of it is MIL's order
    batch_box = e.node("Gather", [selected, e.int64s([0, 2])], axis=1)  # [S, 2]
    grid = e.node("ScatterND", [e.node("ConstantOfShape", [e.node("Shape", [best])]), batch_box,
                                e.node("GatherND", [rank, batch_box])])
    k = e.node("Min", [e.int64s([max_boxes]), n_boxes])
    top, picked = e.node("TopK", [grid, k], 2, axis=1, largest=1, sorted=1)  # [n, k]
    valid = e.node("Greater", [top, zero])
    missing = e.node("Sub", [e.int64s([max_boxes]), k])  # padding up to max_boxes
    indices = e.node("Where", [valid, picked, e.constant(np.int64(-1))])
    pads2 = e.node("Concat", [e.int64s([0, 0, 0]), missing], axis=0)
    e.node("Cast", [e.node("Pad", [indices, pads2, e.constant(np.int64(-1))])], [e.out(op, 2)],
           to=onnx_type(e.dtype(op.outputs[2])))
    rows = e.node("Unsqueeze", [e.node("Where", [valid, picked, e.constant(np.int64(0))]), e.int64s([2])])
    valid3 = e.node("Unsqueeze", [valid, e.int64s([2])])
    pads3 = e.node("Concat", [e.int64s([0, 0, 0, 0]), missing, e.int64s([0])], axis=0)
    for index, data, key in ((0, boxes, "boxes"), (1, scores, "scores")):
        dt = e.dtype(op.inputs[key])
        gathered = e.node("GatherND", [data, rows], batch_dims=1)  # [n, k, 4 | K]
        cleared = e.node("Where", [valid3, gathered, e.scalar(0, dt)])
        if last:
            padded = e.node("Pad", [cleared, pads3, e.scalar(0, dt)])
            e.node("Transpose", [padded], [e.out(op, index)], perm=[0, 2, 1])
        else:
            e.node("Pad", [cleared, pads3, e.scalar(0, dt)], [e.out(op, index)])
    if not last:
        reduce_node(e, "ReduceSum", e.cast(valid, "int32"), [1], keepdims=False, outputs=[e.out(op, 3)])
