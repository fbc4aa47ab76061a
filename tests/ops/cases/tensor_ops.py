"""Registry cases: concat, split, stack, tile, flatten2d, shape, fill, fill_like, range_1d, one_hot,
non_zero, band_part, identity, select, non_maximum_suppression."""

import numpy as np

from converter.ir.runtime import ListValue
from converter.ir.types import scalar, tensor
from tests.ops.harness import Case

_rng = np.random.default_rng(5)
_x = _rng.standard_normal((2, 3, 4)).astype(np.float32)
_y = _rng.standard_normal((2, 5, 4)).astype(np.float32)
_i = _rng.integers(-5, 5, (3, 4)).astype(np.int32)
_h = _rng.standard_normal((4, 4)).astype(np.float16)


def _boxes(n: int, count: int, classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    r = np.random.default_rng(seed)
    centers = r.uniform(0, 10, (n, count, 2))
    sizes = r.uniform(1, 4, (n, count, 2))
    scores = r.permutation(n * count * classes).reshape(n, count, classes) / (n * count * classes)
    return np.concatenate([centers, sizes], -1).astype(np.float32), scores.astype(np.float32)


_bx, _sc = _boxes(2, 6, 3, 0)

CASES = [
    Case("concat", {"values": [_x, _y, _x]}, {"axis": 1}),
    Case("concat", {"values": [_x, _x]}, {"axis": -1, "interleave": True}, id="interleave"),
    Case("concat", {"values": [np.int32(1), np.int32(2)]}, {"axis": 0}, id="scalars"),
    Case("concat", {"values": [_x, np.zeros((2, 0, 4), np.float32)]}, {"axis": 1}, id="empty_part"),
    Case("stack", {"values": [_x, _x]}, {"axis": -1}),
    Case("stack", {"values": [_i, _i, _i]}, {"axis": 1}, id="int32"),
    Case("split", {"x": _y}, {"axis": 1, "split_sizes": [2, 0, 3]}, id="sizes"),
    Case("split", {"x": _x}, {"axis": -1, "num_splits": 2}, id="num_splits"),
    Case("tile", {"x": _i}, {"reps": [2, 1]}),
    Case("tile", {"x": _i, "reps": np.array([1, 3], np.int32)}, input_types={"reps": tensor("int32", (2,))},
         fresh_ok="a size comes from a run-time value (reps)", id="runtime_reps"),
    Case("flatten2d", {"x": _x}, id="default_axis"),
    Case("flatten2d", {"x": _x}, {"axis": -3}, id="axis_neg"),
    Case("flatten2d", {"x": _x}, {"axis": 3}, id="axis_rank"),
    Case("shape", {"x": _x}),
    Case("shape", {"x": np.float32(1.0)}, id="scalar"),
    Case("fill", {}, {"shape": [2, 3], "value": np.int32(7)}, id="const_shape"),
    Case("fill", {"shape": np.array([2, 0, 3], np.int32)}, input_types={"shape": tensor("int32", (3,))},
         fresh_ok="a size comes from a run-time value (shape)", id="runtime_shape_default_value"),
    Case("fill_like", {"ref_tensor": _i}, {"value": np.float16(0.5)}, opset="iOS16"),
    Case("fill_like", {"ref_tensor": _x}, opset="iOS16", id="default"),
    Case("range_1d", {}, {"start": np.int32(7), "end": np.int32(-4), "step": np.int32(-3)}, id="int_negative_step"),
    Case("range_1d", {"start": np.float32(0.5), "end": np.float32(3.0), "step": np.float32(0.75)}, id="fp32_runtime"),
    Case("range_1d", {}, {"start": np.float16(1), "end": np.float16(0), "step": np.float16(1)}, id="empty"),
    Case("one_hot", {"indices": np.array([[0, 3], [-1, 5]], np.int32)}, {"one_hot_vector_size": 4}),
    Case("one_hot", {"indices": np.array([2, 0, 1], np.int32), "one_hot_vector_size": np.int32(3)},
         {"axis": 0, "on_value": 2.5, "off_value": -1.0}, input_types={"one_hot_vector_size": scalar("int32")},
         fresh_ok="a size comes from a run-time value (one_hot_vector_size)", id="runtime_size_axis0"),
    Case("non_zero", {"x": np.array([[0.0, -0.0, np.nan], [1.0, 0.0, 2.0]], np.float32)},
         fresh_ok="the count of non-zero elements is data"),
    Case("non_zero", {}, {"x": np.array([True, False, True])}, id="const"),
    Case("band_part", {"x": _rng.standard_normal((2, 4, 5)).astype(np.float32)}, {"lower": 1, "upper": 0}),
    Case("band_part", {"x": _i}, id="default_keeps_all"),
    Case("identity", {"x": _h}),
    Case("identity", {"x": ListValue(tensor("fp32", (2,)), [np.ones(2, np.float32)])}, id="list"),
    Case("select", {"cond": _rng.integers(0, 2, (3, 1)).astype(bool), "a": _i, "b": np.int32(-1)}),
    Case("select", {"cond": np.array(True), "a": _h, "b": _h[:1]}, id="fp16"),
    Case("non_maximum_suppression", {"boxes": _bx, "scores": _sc},
         {"iou_threshold": 0.2, "score_threshold": 0.3, "max_boxes": 4}, id="ios15"),
    Case("non_maximum_suppression", {"boxes": _bx, "scores": _sc},
         {"iou_threshold": 0.2, "score_threshold": 2.0, "max_boxes": 3, "per_class_suppression": True},
         id="ios15_none_pass"),
    Case("non_maximum_suppression", {"boxes": _bx.transpose(0, 2, 1).copy(), "scores": _sc.transpose(0, 2, 1).copy()},
         {"iou_threshold": 0.3, "max_boxes": 8, "per_class_suppression": True}, opset="iOS17", id="ios17"),
]
