"""Independent oracle: run a small ONNX graph with onnxruntime (or onnx.reference as fallback).

onnxruntime and the ONNX reference evaluator are implementations of ONNX op semantics written by
other people; comparing our numpy kernels against them on the same inputs checks our kernels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

ONNX_OPSET = 21


def _elem_type(arr: np.ndarray) -> int:
    return helper.np_dtype_to_tensor_dtype(np.asarray(arr).dtype)


def onnx_graph(
    nodes: Sequence[onnx.NodeProto],
    inputs: dict[str, np.ndarray],
    outputs: Sequence[str],
    initializers: dict[str, np.ndarray] | None = None,
    opset: int = ONNX_OPSET,
) -> onnx.ModelProto:
    g_inputs = [helper.make_tensor_value_info(k, _elem_type(v), list(np.shape(v))) for k, v in inputs.items()]
    g_outputs = [onnx.ValueInfoProto(name=o) for o in outputs]  # types left to ONNX inference
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()]
    graph = helper.make_graph(list(nodes), "oracle", g_inputs, g_outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def run_onnx(
    nodes: Sequence[onnx.NodeProto],
    inputs: dict[str, np.ndarray],
    outputs: Sequence[str],
    initializers: dict[str, np.ndarray] | None = None,
    *,
    opset: int = ONNX_OPSET,
    engine: str = "ort",
) -> list[np.ndarray]:
    """Run a graph. ``engine``: "ort" (onnxruntime) or "reference" (onnx.reference)."""
    model = onnx_graph(nodes, inputs, outputs, initializers, opset)
    if engine == "ort":
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.log_severity_level = 3
        sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        return [np.asarray(x) for x in sess.run(list(outputs), {k: np.asarray(v) for k, v in inputs.items()})]
    from onnx.reference import ReferenceEvaluator

    ref = ReferenceEvaluator(model)
    return [np.asarray(x) for x in ref.run(list(outputs), {k: np.asarray(v) for k, v in inputs.items()})]


def run_onnx_node(
    op_type: str,
    inputs: dict[str, np.ndarray],
    attrs: dict[str, Any] | None = None,
    *,
    n_outputs: int = 1,
    initializers: dict[str, np.ndarray] | None = None,
    input_order: Sequence[str] | None = None,
    opset: int = ONNX_OPSET,
    engine: str = "ort",
) -> list[np.ndarray]:
    """Run a one-node ONNX model; ``input_order`` lists node inputs ("" for an omitted optional)."""
    order = list(input_order) if input_order is not None else list(inputs) + list(initializers or {})
    outs = [f"out{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, order, outs, **(attrs or {}))
    return run_onnx([node], inputs, outs, initializers, opset=opset, engine=engine)
