"""``classify`` (converter/ir/ops/classify.py): the classifier outputs under their Core ML names.

- the label: ``Gather(labels, ArgMax(flatten(p), select_last_index=0))``, a rank-0 string or int64
  tensor (the first class of tied maxima, as Core ML picks);
- the probability dict, by the conversion's ``classifier`` option (`program_to_onnx`):
  ``"tensor"`` (default, plain ONNX): the flattened probabilities ``[C]`` in class order (the
  labels are in the output's doc_string); ``"zipmap"``: ONNX-ML ``ZipMap`` (ai.onnx.ml 1) over the
  probabilities as ``[1, C]`` fp32, a sequence of one ``{label: probability}`` map (ZipMap's values
  are float; MIL's dict holds them as double).
"""

from __future__ import annotations

import json

import numpy as np
from onnx import TensorProto, helper

from ....errors import LoweringError
from ....ir.core import Op
from ....ir.ops.classify import class_labels
from ..emitter import OnnxEmitter, onnx_type
from .registry import lowering


@lowering("classify", kind="decomposed",
          note="ArgMax + Gather for the label; the probabilities as a tensor, or ONNX-ML ZipMap (option)")
def _classify(e: OnnxEmitter, op: Op) -> None:
    classes = e.param(op, "classes")
    if classes is None:
        raise LoweringError("the class labels must be known at conversion time")
    labels = class_labels(classes)
    strings = isinstance(labels[0], str)
    table = np.array(labels) if strings else np.array(labels, np.int64)
    pv = op.inputs["probabilities"]
    flat = e.node("Reshape", [e.name(pv), e.int64s([-1])])
    scores = flat if e.dtype(pv).name == "fp32" else e.cast(flat, "fp32")
    index = e.node("ArgMax", [scores], axis=0, keepdims=0, select_last_index=0)
    e.node("Gather", [e.constant(table), index], [e.out(op, 0)], axis=0)
    probs = op.outputs[1]
    doc = "class probabilities; class labels in order: " + json.dumps(labels)
    if e.options.get("classifier", "tensor") == "zipmap":
        e.use_domain("ai.onnx.ml", 1)
        key = "classlabels_strings" if strings else "classlabels_int64s"
        row = e.node("Reshape", [scores, e.int64s([1, -1])])
        e.node("ZipMap", [row], [e.out(op, 1)], domain="ai.onnx.ml", **{key: labels})
        map_type = helper.make_map_type_proto(TensorProto.STRING if strings else TensorProto.INT64,
                                              helper.make_tensor_type_proto(TensorProto.FLOAT, []))
        e.output_infos[probs] = helper.make_value_info(probs.name, helper.make_sequence_type_proto(map_type), doc)
        return
    e.node("Identity", [flat], [e.out(op, 1)])
    e.output_infos[probs] = helper.make_tensor_value_info(probs.name, onnx_type(e.dtype(pv)), [len(labels)], doc)
