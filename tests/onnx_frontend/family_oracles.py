"""Shared by the per-family tests (test_attention / test_normalize / test_recurrent / test_spatial):

- `ort_check`: one ONNX node on chosen inputs, run by onnxruntime (the oracle) and through
  ONNX -> IR -> our interpreter; every output compared.
- `node_suite_results`: the ONNX node-suite cases whose model holds one of the given op types
  (their expected outputs written by ONNX's authors), converted and run once per session.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import onnxruntime as ort
from onnx import helper as h
from onnx import numpy_helper

from converter.frontends.onnx import load_onnx
from converter.ir.interpreter import run

from .node_suite import Result, node_cases, run_case


@lru_cache(maxsize=1)
def _cases():
    return node_cases()


def node_suite_results(op_types: set[str]) -> dict[str, Result]:
    return {c.name: run_case(c) for c in _cases() if set(c.ops) & op_types}


def one_node_model(op, inputs, attrs=None, opset=21, n_outputs=1, consts=()):
    """A model of one ``op`` node; ``inputs`` may hold None for an absent optional input; the
    inputs whose positions are in ``consts`` are initializers, the others graph inputs."""
    names = [f"i{k}" if x is not None else "" for k, x in enumerate(inputs)]
    given = [(n, x) for k, (n, x) in enumerate(zip(names, inputs)) if x is not None and k not in consts]
    inits = [numpy_helper.from_array(x, n) for k, (n, x) in enumerate(zip(names, inputs)) if k in consts]
    ins = [h.make_tensor_value_info(n, h.np_dtype_to_tensor_dtype(x.dtype), x.shape) for n, x in given]
    outs = [f"y{k}" for k in range(n_outputs)]
    g = h.make_graph([h.make_node(op, names, outs, **(attrs or {}))], "g", ins,
                     [h.make_tensor_value_info(o, 0, None) for o in outs], initializer=inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)]), dict(given)


def ort_check(op, inputs, attrs=None, opset=21, n_outputs=1, rtol=1e-4, atol=1e-5, consts=()):
    """Assert our outputs match onnxruntime's for one node; returns ours."""
    model, feeds = one_node_model(op, inputs, attrs, opset, n_outputs, consts)
    from onnx import shape_inference

    model = shape_inference.infer_shapes(model, strict_mode=True)
    for o in model.graph.output:  # an output inference left untyped: the first input's type
        if not o.type.tensor_type.elem_type:
            o.type.tensor_type.elem_type = h.np_dtype_to_tensor_dtype(inputs[0].dtype)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    got = run(load_onnx(model), feeds)
    for k, w in enumerate(want):
        g = got[f"y{k}"]
        assert g.shape == w.shape, f"output {k}: shape {g.shape}, onnxruntime {w.shape}"
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"output {k}")
    return got
