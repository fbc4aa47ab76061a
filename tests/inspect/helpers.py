"""Shared by the inspect tests: the models they read, and coremltools' reading of a file."""

from __future__ import annotations

import json
from pathlib import Path

from ..conftest import MODELS, REPO

DEEPLAB = MODELS / "real/9de70cc9_DeepLabV3Int8LUT.mlmodel"  # image input, 8-bit LUT weights
CLASSIFIER = MODELS / "builder/image_classifier_preprocessed.mlmodel"
FLEXIBLE = MODELS / "builder/flexible_shape_range.mlmodel"
ENUMERATED = MODELS / "builder/flexible_image_sizes.mlmodel"
FP16_PROGRAM = MODELS / "torch/cnn_bn_mlprogram_fp16.mlpackage"
ML_CLASSIFIER = MODELS / "real/764eeca3_ChineseClassifier.mlpackage"
PIPELINE = MODELS / "builder/pipeline_two_nn.mlmodel"
LOOP = MODELS / "builder/control_flow_loop.mlmodel"
REFUSED = MODELS / "real/21560b2e_NamesDT.mlmodel"  # a pipeline of a dict vectorizer and trees
SCHEMA_PATH = REPO / "docs" / "schemas" / "inspect.schema.json"


def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


def ct_spec(path: Path):  # noqa: ANN201 - a coremltools Model protobuf message
    """The model as coremltools reads it (its own protobuf classes, not ours)."""
    import coremltools as ct

    return ct.utils.load_spec(str(path))


def write_webnn_graph(folder: Path) -> Path:
    """A small WebNN graph file: y = relu(x + c) with x a float32 [2, 3] input."""
    import numpy as np

    from ..webnn_frontend.modules import graph_doc, op

    x = np.ones((2, 3), np.float32)
    doc = graph_doc([op("add", ("a", "x"), ("b", "c"), outputs="s"), op("relu", ("input", "s"), outputs="y")],
                    {"y": "y"}, inputs={"x": x}, constants={"c": x})
    path = folder / "g.webnn.json"
    path.write_text(json.dumps(doc))
    return path
