"""Registry cases: reductions, arg-reductions, cumsum, topk, argsort."""

import numpy as np

from tests.ops.harness import Case

_rng = np.random.default_rng(0)
_x = _rng.standard_normal((2, 3, 4)).astype(np.float32)
_h = _x.astype(np.float16)
_i = _rng.integers(-9, 9, (2, 3, 4)).astype(np.int32)
_pos = np.abs(_x) + 0.5

_REDUCE = ["reduce_sum", "reduce_prod", "reduce_mean", "reduce_max", "reduce_min", "reduce_l1_norm",
           "reduce_l2_norm", "reduce_sum_square", "reduce_log_sum", "reduce_log_sum_exp"]

CASES = []
for _op in _REDUCE:
    _in = _pos if _op == "reduce_log_sum" else _x
    CASES += [
        Case(_op, {"x": _in}, id="all-axes"),
        Case(_op, {"x": _in}, {"axes": [0, -1], "keep_dims": True}, id="keep-dims"),
        Case(_op, {"x": _in.astype(np.float16)}, {"axes": [1]}, id="fp16"),
        Case(_op, {"x": np.abs(_i) + 1 if _op == "reduce_log_sum" else _i}, {"axes": [-2]}, id="int32"),
        Case(_op, {"x": _in}, {"axes": np.zeros(0, np.int32)}, id="empty-axes"),
    ]

for _op in ["reduce_argmax", "reduce_argmin"]:
    CASES += [
        Case(_op, {"x": _x}, id="default-axis"),
        Case(_op, {"x": _i}, {"axis": 1, "keep_dims": True}, id="int32-keep"),
        Case(_op, {"x": _h}, {"axis": 0, "output_dtype": "uint16"}, opset="iOS17", id="iOS17-uint16"),
    ]

CASES += [
    Case("cumsum", {"x": _x}, id="default"),
    Case("cumsum", {"x": _i}, {"axis": -1, "exclusive": True, "reverse": True}, id="int32-excl-rev"),
    Case("cumsum", {"x": _h}, {"axis": 1, "exclusive": True}, id="fp16-excl"),
    Case("topk", {"x": _x}, {"k": 2}, id="iOS15"),
    Case("topk", {"x": _i}, {"k": 3, "axis": 1, "ascending": True}, opset="iOS16", id="iOS16"),
    Case("topk", {"x": _x}, {"k": 2, "return_indices": False}, opset="iOS16", id="iOS16-values-only"),
    Case("topk", {"x": _i.astype(np.int8)}, {"k": -1, "axis": 0, "output_indices_dtype": "uint16"},
         opset="iOS17", id="iOS17-all-uint16"),
    Case("topk", {"x": _h}, {"k": np.int16(2), "sort": False}, opset="iOS17", id="iOS17-k-int16"),
    Case("argsort", {"x": _x}, id="descending"),
    Case("argsort", {"x": _i}, {"axis": 0, "ascending": True}, id="int32-ascending"),
]
