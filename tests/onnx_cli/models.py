"""ONNX models the ONNX command tests build: small graphs made with onnx.helper, and one model
exported by torch.onnx.export (random weights)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..conftest import REPO


def mlp(path: Path, *, opset: int = 17) -> Path:
    """y = relu(x @ W + B) with x float32 [batch, 4] (a dim_param), metadata_props, a producer."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "W")
    b = numpy_helper.from_array(np.array([0.5, -1.0, 2.0], np.float32), "B")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Add", ["h", "B"], ["h2"]),
             helper.make_node("Relu", ["h2"], ["y"])]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])], [w, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="tests",
                          producer_version="7.1", model_version=3, doc_string="a small MLP")
    helper.set_model_props(m, {"author": "Ada", "license": "MIT", "task": "demo"})
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)
    return path


def int_gather(path: Path) -> Path:
    """An int64 index input (the IR reads it as int32) and a float table: y = Gather(T, idx) * 2, and
    the int64 count of elements above 0 (an int64 output)."""
    t = numpy_helper.from_array(np.arange(20, dtype=np.float32).reshape(5, 4) - 7, "T")
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    zero = numpy_helper.from_array(np.array(0.0, np.float32), "zero")
    nodes = [helper.make_node("Gather", ["T", "idx"], ["g"], axis=0), helper.make_node("Mul", ["g", "two"], ["y"]),
             helper.make_node("Greater", ["y", "zero"], ["pos"]),
             helper.make_node("Cast", ["pos"], ["posi"], to=TensorProto.INT64),
             helper.make_node("ReduceSum", ["posi"], ["count"], keepdims=0)]
    g = helper.make_graph(nodes, "gather", [helper.make_tensor_value_info("idx", TensorProto.INT64, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4]),
                           helper.make_tensor_value_info("count", TensorProto.INT64, [])], [t, two, zero])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)
    return path


def refused(path: Path, *, external: bool = False) -> Path:
    """A model with a node of a custom domain (which the converter refuses) and a 360 kB weight
    (in an external data file ``NAME.data`` with ``external``)."""
    w = numpy_helper.from_array(np.ones((300, 300), np.float32), "W")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"]),
             helper.make_node("Frobnicate", ["h"], ["y"], domain="com.example")]
    g = helper.make_graph(nodes, "refused", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 300])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 300])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    if external:
        onnx.save(m, path, save_as_external_data=True, location=path.name + ".data", size_threshold=1024)
    else:
        onnx.save(m, path)
    return path


def torch_cnn(path: Path) -> Path:
    """A small conv net exported by torch.onnx.export (TorchScript exporter, opset 17, batch named N)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(8, 4, 3), nn.Flatten(), nn.Linear(4 * 6 * 6, 5), nn.Softmax(-1)).eval()
    with torch.no_grad():
        m[1].running_mean.normal_()
        m[1].running_var.uniform_(0.5, 2.0)
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (torch.randn(2, 3, 16, 16),), f, input_names=["image"], output_names=["probs"],
                          opset_version=17, dynamo=False, dynamic_axes={"image": {0: "N"}, "probs": {0: "N"}})
    path.write_bytes(f.getvalue())
    return path


def cli_subprocess(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``python -m cli ARGS`` in a process of its own."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "cli", *map(str, args)], capture_output=True, text=True, env=env,
                          cwd=cwd or REPO, timeout=300)
