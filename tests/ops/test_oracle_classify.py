"""classify against onnxruntime: ArgMax + Gather for the label, ZipMap (ai.onnx.ml) for the dict.

onnxruntime's ArgMax picks the first of tied maxima (select_last_index=0), as Core ML's
classifier output does; ZipMap builds the {label: probability} map.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

from converter.ir.runtime import ListValue
from converter.ir.types import TensorType, int64, string
from tests.oracles.onnx_oracle import onnx_graph

from .harness import run_op

ORACLE = {"classify": "onnxruntime ArgMax + Gather (label) and ai.onnx.ml ZipMap (probability dict)"}


def _ort_classify(p: np.ndarray, classes: list) -> tuple:
    """(label, dict) from onnxruntime; run here because the graph needs the ai.onnx.ml domain."""
    labels = np.array(classes)
    key = "classlabels_strings" if labels.dtype.kind == "U" else "classlabels_int64s"
    nodes = [helper.make_node("Reshape", ["p", "flat"], ["pf"]),
             helper.make_node("ArgMax", ["pf"], ["i"], axis=0, keepdims=0),
             helper.make_node("Gather", ["cls", "i"], ["label"], axis=0),
             helper.make_node("Reshape", ["p", "row"], ["prow"]),
             helper.make_node("ZipMap", ["prow"], ["d"], domain="ai.onnx.ml", **{key: list(classes)})]
    model = onnx_graph(nodes, {"p": p}, ["label", "d"],
                       {"flat": np.array([-1]), "row": np.array([1, -1]), "cls": labels})
    model.opset_import.append(helper.make_opsetid("ai.onnx.ml", 1))
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    label, maps = sess.run(None, {"p": p})
    return label.item(), maps[0]


def _classes(labels: list) -> ListValue:
    dt = string if isinstance(labels[0], str) else int64
    return ListValue(TensorType(dt, ()), [np.asarray(x, dt.storage) for x in labels], False)


CASES = [
    ("strings", ["cat", "dog", "eel", "fox"], (1, 4)),
    ("int64", [7, -3, 2**40, 0], (4,)),
    ("column", ["a", "b", "c"], (3, 1)),
    ("single", [42], (1,)),
]


@pytest.mark.parametrize("name,labels,shape", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("values", ["random", "ties", "negative"])
def test_classify_vs_onnxruntime(name: str, labels: list, shape: tuple, values: str):
    rng = np.random.default_rng(len(labels))
    p = rng.random(shape).astype(np.float32)
    if values == "ties":
        p[...] = 0.25
        p.flat[-1] = 0.1
    elif values == "negative":
        p = -p
    label, probs = run_op("classify", {"probabilities": p}, {"classes": _classes(labels)})
    want_label, want_probs = _ort_classify(p, labels)
    assert label.shape == () and label.item() == want_label
    assert label.dtype.kind == ("U" if isinstance(labels[0], str) else "i")
    assert set(probs) == set(want_probs)  # ZipMap orders int64 keys; a dict's order carries no meaning
    for k, v in want_probs.items():
        assert isinstance(probs[k], float) and probs[k] == v
