"""Lower one IR function to the body of model.js's ``build()``: builder calls, in program order.

Every op is tried, so one conversion reports every op that has no WebNN form (`UnsupportedError`
listing each with its name and reason), not just the first. A classifier's ``classify`` op is not
a graph op: the graph outputs the probabilities (under the model's probability output name) and
model.js maps them to labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import UnsupportedError
from ...ir.core import Function, Op, Value
from ...ir.ops.classify import class_labels
from ...ir.types import DictType, TensorType
from .emitter import DATA_TYPES, NCHW_TO_NHWC, GraphEmitter, LoweringError, Operand, _Unavailable
from .jsliteral import js_comment, js_string
from .lowering import LOWERINGS, UNSUPPORTED, load_all
from .weights import WeightFile


@dataclass
class Classifier:
    """How model.js turns the probability output into a label."""

    labels: list[Any]
    probability_output: str
    label_output: str | None


@dataclass
class LoweredGraph:
    inputs: dict[str, dict[str, Any]]  # feature name -> {dataType, shape}
    outputs: dict[str, dict[str, Any]]
    body: list[str]
    classifier: Classifier | None = None
    stats: dict[str, int] = field(default_factory=dict)
    unused_inputs: list[str] = field(default_factory=list)  # model inputs no output depends on (not in the graph)


def _descriptor(v: Value, what: str) -> dict[str, Any]:
    t = v.type
    if not isinstance(t, TensorType):
        raise LoweringError(f"{what} '{v.name}' is a {t}; WebNN inputs and outputs are tensors")
    if t.shape is None or not all(isinstance(d, int) for d in t.shape):
        raise LoweringError(f"{what} '{v.name}' has no static shape ({t}); fix its size with --input-shape")
    if t.dtype.name not in DATA_TYPES:
        raise LoweringError(f"{what} '{v.name}' has data type {t.dtype.name}, which WebNN has no form for")
    return {"dataType": DATA_TYPES[t.dtype.name], "shape": [int(d) for d in t.shape]}


def lower_function(fn: Function, weights: WeightFile, *, layout: str = "nchw", precision: str = "fp32",
                   source: str | None = None, refused: Mapping[Op, str] | None = None) -> LoweredGraph:
    """``refused``: ops left in ``fn`` that an earlier step could not turn into graph ops (control
    flow that could not be flattened, `converter.passes.unroll`), with why; reported as they are."""
    refused = refused or {}
    load_all()
    e = GraphEmitter(fn, weights, layout=layout, precision=precision)
    problems: list[str] = []
    inputs: dict[str, dict[str, Any]] = {}
    unused_inputs: list[str] = []
    for v in fn.inputs:
        if not v.uses:
            # nothing reads it: a WebNN graph has only the inputs its outputs depend on (Chromium
            # refuses a dispatch that binds any other), so model.js neither declares nor takes it
            unused_inputs.append(v.name)
            continue
        try:
            desc = _descriptor(v, "input")
        except LoweringError as err:
            problems.append(str(err))
            continue
        inputs[v.name] = desc
        e.set_comment(f"input {v.name}")
        operand = Operand(e.fresh("input"), tuple(desc["shape"]), desc["dataType"])
        e.raw_line(f"const {operand.js} = builder.input({js_string(v.name)}, inputs[{js_string(v.name)}]);")
        compute = e.data_type(v.type.dtype)  # type: ignore[union-attr]
        if compute != operand.dtype:
            operand = e.emit("cast", operand, compute, shape=operand.shape, dtype=compute)
        if e.layout == "nhwc" and len(operand.shape) == 4 and _feeds_only_spatial_ops(e, v):
            # an image: to NHWC at the input, so its preprocessing (scale, bias) runs in NHWC and the
            # graph's only input transpose is here (the constants are transposed at conversion time)
            shape = [operand.shape[i] for i in NCHW_TO_NHWC]
            operand = e.emit("transpose", operand, shape=shape, dtype=operand.dtype, perm=NCHW_TO_NHWC,
                             permutation=list(NCHW_TO_NHWC))
        e.bind(v, operand)

    classifier: Classifier | None = None
    failed: set[Value] = set()  # outputs of ops already reported
    for op in fn.block.ops:
        if op.type == "const":
            continue
        e.set_comment(f"{op.type} {op.name}")
        if op.type == "classify":
            try:
                classifier = _classify(e, fn, op)
            except _Unavailable:
                continue
            except LoweringError as err:
                problems.append(f"{op.type} '{op.name}': {err}")
            continue
        if op in refused:
            problems.append(f"{op.type} '{op.name}': {refused[op]}")
            continue
        low = LOWERINGS.get(op.type)
        try:
            if low is None:
                raise LoweringError(UNSUPPORTED.get(op.type, "no WebNN lowering"))
            low.fn(e, op)
        except _Unavailable:
            failed.update(op.outputs)  # an input whose producer was already reported
        except LoweringError as err:
            failed.update(op.outputs)
            problems.append(f"{op.type} '{op.name}': {err}")

    outputs: dict[str, dict[str, Any]] = {}
    returned: dict[str, str] = {}
    used: set[str] = set()
    e.set_comment("outputs")
    for v in fn.outputs:
        name = v.name
        if v in failed or isinstance(v.type, DictType) or (classifier is not None and name == classifier.label_output):
            continue
        try:
            desc = _descriptor(v, "output")
            operand = e.get(v)
        except _Unavailable:
            continue
        except LoweringError as err:
            problems.append(str(err))
            continue
        if operand.dtype != desc["dataType"]:
            operand = e.emit("cast", operand, desc["dataType"], shape=operand.shape, dtype=desc["dataType"])
        elif operand.js in used or operand.js.startswith(("input", "c")):
            operand = e.emit("identity", operand, shape=operand.shape, dtype=operand.dtype)
        used.add(operand.js)
        outputs[name] = desc
        returned[name] = operand.js
    if problems:
        count = f"{len(problems)} ops have" if len(problems) > 1 else "1 op has"
        raise UnsupportedError(f"{count} no WebNN form: " + "; ".join(problems), file=source)
    e.set_comment("")
    e.raw_line("return builder.build({" + ", ".join(f"{js_string(k)}: {js}" for k, js in returned.items()) + "});")
    stats = dict(e.stats)
    return LoweredGraph(inputs, outputs, e.lines, classifier, stats, unused_inputs)


_SPATIAL_OPS = {"conv", "conv_transpose", "max_pool", "avg_pool", "l2_pool"}
_PREPROCESSING_OPS = {"add", "sub", "mul", "real_div"}


def _feeds_only_spatial_ops(e: GraphEmitter, v: Value) -> bool:
    """Whether every use of ``v``, followed through elementwise ops with a constant other operand
    (an image's scale and bias), is the ``x`` of a conv or pool (which work in NHWC in NHWC mode)."""
    users = v.users()
    if not users or any(u is v for u in fn_outputs(v)):
        return False
    for op in users:
        if op.type in _SPATIAL_OPS:
            if op.inputs.get("x") is not v:
                return False
            continue
        if op.type not in _PREPROCESSING_OPS:
            return False
        others = [x for x in op.inputs.values() if x is not v]
        if any(not isinstance(x, Value) or e.value_of(x) is None for x in others) or len(op.outputs) != 1:
            return False
        y = op.outputs[0]
        if len(getattr(y.type, "shape", None) or ()) != 4 or not _feeds_only_spatial_ops(e, y):
            return False
    return True


def fn_outputs(v: Value) -> list[Value]:
    """``v`` if it is an output of its block (a block output is a use that is not an op)."""
    return [v] if any(not isinstance(u.user, Op) for u in v.uses) else []


def _classify(e: GraphEmitter, fn: Function, op: Op) -> Classifier:
    """Bind the probability output (a dict in Core ML) to the probabilities tensor."""
    raw = op.inputs["classes"].const_val
    if raw is None:
        raise LoweringError("the class labels must be a constant")
    labels = class_labels(raw)
    label_value, dict_value = op.outputs
    outputs = {v: v.name for v in fn.outputs}
    if dict_value not in outputs and label_value not in outputs:
        raise LoweringError("neither classifier output is a model output")
    probs_v = op.inputs["probabilities"]
    probs = e.get(probs_v)
    prob_name = outputs.get(dict_value)
    if prob_name is None:
        raise LoweringError("the probability output is not a model output")
    flat = probs
    if probs.rank != 1:
        flat = e.emit("reshape", probs, [int(np.prod(probs.shape))], shape=[int(np.prod(probs.shape))],
                      dtype=probs.dtype)
    # The graph returns the probabilities under the dict output's name.
    dict_value_type = TensorType(probs_v.type.dtype, (len(labels),))  # type: ignore[union-attr]
    e.bind(dict_value, flat)
    dict_value.type = dict_value_type  # the lowered function's copy: WebNN returns a tensor here
    return Classifier([_label(x) for x in labels], prob_name, outputs.get(label_value))


def _label(x: Any) -> Any:
    if isinstance(x, bytes):
        return x.decode("utf-8", "replace")
    return x


__all__ = ["Classifier", "LoweredGraph", "js_comment", "lower_function"]
