"""Registry cases: gather, gather_along_axis, gather_nd, scatter, scatter_along_axis, scatter_nd."""

import numpy as np

from converter.ir.types import Symbol, tensor
from tests.ops.harness import Case

_rng = np.random.default_rng(7)
_x = _rng.standard_normal((2, 3, 4)).astype(np.float32)
_xi = _rng.integers(-50, 50, (3, 5)).astype(np.int32)
_xh = _rng.standard_normal((4, 3)).astype(np.float16)


def _i32(*v):
    return np.array(v, np.int32)


CASES = [
    Case("gather", {"x": _x, "indices": _i32([2, -1], [0, 1])}, {"axis": 1}, id="negative_index"),
    Case("gather", {"x": _xi, "indices": np.int32(-2)}, {"axis": -1}, id="scalar_index"),
    Case("gather", {"x": _x, "indices": _i32([2, 0, 2], [1, 1, 0])}, {"axis": 2, "batch_dims": 1}, opset="iOS16",
         id="ios16_batch_dims"),
    Case("gather", {"x": _xh, "indices": np.array([3, 0], np.uint8)}, {"validate_indices": True}, opset="iOS17",
         id="ios17_uint8"),
    Case("gather_along_axis", {"x": _x, "indices": _rng.integers(-4, 4, (2, 3, 5)).astype(np.int32)}, {"axis": -1}),
    Case("gather_along_axis", {"x": _xi, "indices": _rng.integers(0, 3, (2, 5)).astype(np.int16)}, opset="iOS17",
         id="ios17_int16"),
    Case("gather_nd", {"x": _x, "indices": _i32([[1, 2], [0, -1]], [[0, 0], [1, 1]])},
         input_types={"indices": tensor("int32", (Symbol("s2"), Symbol("s2"), 2))}),
    Case("gather_nd", {"x": _x, "indices": _i32([[2], [0]], [[1], [1]])}, {"batch_dims": 1}, opset="iOS16",
         id="ios16_batch_dims"),
    Case("gather_nd", {"x": _xi, "indices": np.zeros((2, 0), np.int32)}, opset="iOS17", id="ios17_empty_rows"),
    Case("scatter", {"data": _x, "indices": _i32(2, 0, 2), "updates": np.ones((2, 3, 4), np.float32)},
         {"axis": 1, "mode": "add"}, id="duplicates_add"),
    Case("scatter", {"data": _xi, "indices": _i32(-1, 1), "updates": _xi[:2]}, {"mode": "update"}, id="update"),
    Case("scatter", {"data": _xi, "indices": _i32(4, 0), "updates": _xi[:, :2]}, {"axis": 1, "mode": "max",
                                                                                 "validate_indices": True},
         opset="iOS17", id="ios17_max"),
    Case("scatter_along_axis", {"data": _x, "indices": _rng.integers(0, 3, (2, 2, 4)).astype(np.int32),
                                "updates": np.full((2, 2, 4), 2.0, np.float32)}, {"axis": 1, "mode": "mul"}),
    Case("scatter_along_axis", {"data": _xh, "indices": _i32([0, 1, 2], [2, 2, 2]),
                                "updates": np.ones((2, 3), np.float16)}, {"mode": "sub"}, opset="iOS17",
         id="ios17_sub"),
    Case("scatter_nd", {"data": _x, "indices": _i32([0, 2], [1, -1], [0, 2]),
                        "updates": np.full((3, 4), 3.0, np.float32)}, {"mode": "div"}),
    Case("scatter_nd", {"data": _xi, "indices": _i32([[1]], [[1]]), "updates": np.full((2, 1, 5), 9, np.int32)},
         {"mode": "min"}, opset="iOS17", id="ios17_min"),
]
