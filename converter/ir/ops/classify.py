"""classify: the output stage of a classifier model (MIL iOS15).

It maps a probability tensor onto the constant class labels and yields the two classifier
outputs Core ML exposes: the predicted label (the class of the largest probability; the first
one on ties) and a dict {label: probability}. Labels are strings or int64 (an int32 constant
is read as int64 labels); dict values are fp64 (MIL's ``Dict[ClassT, double]``). Its outputs
feed the model's outputs only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..opdef import EvalArgs, InferArgs, OpDef, register
from ..runtime import ListValue
from ..types import DictType, ListType, TensorType, Type, fp64, int64, num_elements, string


def class_labels(classes: Any) -> list[Any]:
    """The labels of a ``classes`` constant (a ListValue of scalars or an array) as Python values."""
    items = classes.items if isinstance(classes, ListValue) else np.asarray(classes).reshape(-1)
    return [np.asarray(x).reshape(()).item() for x in items]


def _label_type(a: InferArgs) -> TensorType:
    t = a.type("classes")
    elem = t.elem if isinstance(t, ListType) else t
    if not isinstance(elem, TensorType) or elem.dtype.name not in ("string", "int64", "int32"):
        raise a.fail(f"classes must be strings or int64, got {t}")
    return TensorType(string if elem.dtype == string else int64, ())


@register
class Classify(OpDef):
    """``(classes[argmax(p)], {classes[i]: p[i]})`` over the flattened ``probabilities``."""

    op_type = "classify"

    def infer(self, a: InferArgs) -> list[Type]:
        label = _label_type(a)
        classes = a.value("classes")
        count = num_elements(a.tensor_type("probabilities").shape or (None,))
        if classes is not None and count is not None and len(class_labels(classes)) != count:
            raise a.fail(f"{len(class_labels(classes))} classes for {count} probabilities")
        return [label, DictType(label, TensorType(fp64, ()))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        labels = class_labels(a["classes"])
        p = np.asarray(a["probabilities"]).reshape(-1)
        if len(labels) != p.size:
            raise ValueError(f"{len(labels)} classes for {p.size} probabilities")
        storage = a.out_types[0].dtype.storage
        return [np.asarray(labels[int(np.argmax(p))], storage),
                {lab: float(v) for lab, v in zip(labels, p)}]
