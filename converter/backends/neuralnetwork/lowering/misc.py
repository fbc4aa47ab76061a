"""non_maximum_suppression -> NonMaximumSuppression; _const_symbolic (a constant: loaded where read);
the ops with no NeuralNetwork form at all (lists, states)."""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....ir.core import Op
from ..emitter import NetworkEmitter
from ._common import scalar
from .registry import lowering, unsupported

unsupported("NeuralNetwork models have no list values (coremltools emulates them with resized tensors; not "
            "done here)", "make_list", "list_length", "list_read", "list_write", "list_gather", "list_scatter")
unsupported("NeuralNetwork models have no state (states need an ML program, iOS18)", "read_state",
            "coreml_update_state")

_LOWEST = float(np.finfo(np.float32).min)


@lowering("_const_symbolic", note="a constant: loadConstantND where a layer reads it")
def _const_symbolic(e: NetworkEmitter, op: Op) -> None:
    for v in op.outputs:
        if e.const(v) is None:
            raise LoweringError("its value is not known at conversion time")


def _transposed(e: NetworkEmitter, blob: str, base: str) -> str:
    """``blob`` with its last two axes swapped (rank 3)."""
    out = e.fresh(base)
    e.layer("transpose", base, [blob], [out]).axes.extend([0, 2, 1])
    return out


@lowering("non_maximum_suppression", note="NonMaximumSuppression; iOS17 (coordinates first, no score "
                                          "threshold): transposes around it and the lowest score threshold")
def _nms(e: NetworkEmitter, op: Op) -> None:
    boxes, scores = e.blob(op.inputs["boxes"]), e.blob(op.inputs["scores"])
    boxes_last = len(op.outputs) == 3  # iOS17: [n, 4, B], [n, K, B]; no count output
    if boxes_last:
        boxes = _transposed(e, boxes, f"{op.name}_boxes_in")
        scores = _transposed(e, scores, f"{op.name}_scores_in")
        outs = [e.fresh(f"{op.name}_{k}") for k in ("boxes", "scores")] + [e.define(op.outputs[2]),
                                                                         e.fresh(f"{op.name}_count")]
    else:
        outs = [e.define(v) for v in op.outputs]
    p = e.layer("NonMaximumSuppression", op.name, [boxes, scores], outs)
    p.iouThreshold = scalar(e.const_param(op, "iou_threshold"), "iou_threshold")
    p.scoreThreshold = _LOWEST if boxes_last else scalar(e.const_param(op, "score_threshold"), "score_threshold")
    max_boxes = int(np.asarray(e.const_param(op, "max_boxes")).reshape(()))
    if max_boxes < 1:
        raise LoweringError(f"max_boxes {max_boxes}: the layer returns at least one box")
    p.maxBoxes = max_boxes
    p.perClassSuppression = bool(e.const_param(op, "per_class_suppression"))
    if boxes_last:
        for blob, v, k in zip(outs[:2], op.outputs[:2], ("boxes", "scores")):
            e.layer("transpose", f"{op.name}_{k}", [blob], [e.define(v)]).axes.extend([0, 2, 1])
