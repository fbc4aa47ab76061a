"""One-node ONNX models run by onnxruntime (the oracle) and by ONNX -> IR -> our interpreter.

``check(op, inputs, attrs, consts=..., oracle=...)``: inputs listed in ``consts`` become initializers (so a
mapping's conversion-time path is taken), the others graph inputs (its run-time path); output
types come from onnx's shape inference. Every output is compared: exactly for integer / bool
results, with onnx's tolerances (rtol 1e-3, atol 1e-7) or the given ones for floats.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper as h
from onnx import numpy_helper

from converter.frontends.onnx import load_onnx

from .feeding import run_program as run


def one_node_model(op: str, inputs: Sequence[np.ndarray | None], attrs: dict | None = None, *, n_out: int = 1,
                   consts: Sequence[int] = (), opset: int = 21) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    names = [f"i{k}" if x is not None else "" for k, x in enumerate(inputs)]
    graph_inputs, inits, feeds = [], [], {}
    for k, (n, x) in enumerate(zip(names, inputs)):
        if x is None:
            continue
        if k in consts:
            inits.append(numpy_helper.from_array(np.asarray(x), n))
        else:
            graph_inputs.append(h.make_tensor_value_info(n, h.np_dtype_to_tensor_dtype(x.dtype), x.shape))
            feeds[n] = x
    outs = [f"y{k}" for k in range(n_out)]
    g = h.make_graph([h.make_node(op, names, outs, **(attrs or {}))], "g", graph_inputs,
                     [h.make_empty_tensor_value_info(o) for o in outs], initializer=inits)
    model = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    return onnx.shape_inference.infer_shapes(model, strict_mode=True), feeds


def ours(op: str, inputs: Sequence[np.ndarray | None], attrs: dict | None = None, *, n_out: int = 1,
         consts: Sequence[int] = (), opset: int = 21) -> list[np.ndarray]:
    """Our outputs (ONNX -> IR -> interpreter), for tests whose oracle is a formula."""
    model, feeds = one_node_model(op, inputs, attrs, n_out=n_out, consts=consts, opset=opset)
    got = run(load_onnx(model), feeds)
    return [np.asarray(got[f"y{k}"]) for k in range(n_out)]


def check(op: str, inputs: Sequence[np.ndarray | None], attrs: dict | None = None, *, n_out: int = 1,
          consts: Sequence[int] = (), opset: int = 21, rtol: float = 1e-3, atol: float = 1e-7,
          oracle: str = "onnxruntime") -> list[np.ndarray]:
    """Assert our results equal the oracle's (onnxruntime, or onnx's ReferenceEvaluator with
    ``oracle="reference"`` where onnxruntime lacks the kernel or the numpy type); returns them."""
    model, feeds = one_node_model(op, inputs, attrs, n_out=n_out, consts=consts, opset=opset)
    if oracle == "reference":
        from onnx.reference import ReferenceEvaluator

        want = [np.asarray(w) for w in ReferenceEvaluator(model).run(None, feeds)]
        narrow = {"int4": np.int8, "int2": np.int8, "uint4": np.uint8, "uint2": np.uint8}
        want = [w.astype(narrow[w.dtype.name]) if w.dtype.name in narrow else w for w in want]
    else:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        want = sess.run(None, feeds)
    got = run(load_onnx(model), feeds)
    for k, w in enumerate(want):
        g = np.asarray(got[f"y{k}"])
        assert g.shape == w.shape, f"output {k}: shape {g.shape}, onnxruntime {w.shape}"
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g.astype(np.int64), w.astype(np.int64), err_msg=f"output {k}")
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"output {k}")
    return want
