"""Registry cases: reshape, reshape_like, transpose, squeeze, expand_dims, slicing, reverse,
reverse_sequence."""

import numpy as np

from converter.ir.types import tensor
from tests.ops.harness import Case

_rng = np.random.default_rng(3)
_x = _rng.standard_normal((2, 3, 4)).astype(np.float32)
_i = _rng.integers(-9, 9, (2, 1, 3, 1)).astype(np.int32)
_h = _rng.standard_normal((4, 6)).astype(np.float16)
_b = _rng.integers(0, 2, (3, 4)).astype(bool)

CASES = [
    Case("reshape", {"x": _x}, {"shape": [4, -1]}, id="infer"),
    Case("reshape", {"x": _x}, {"shape": [0, -1, 2]}, id="copy_and_infer"),
    Case("reshape", {"x": _x}, {"shape": [0, -1]}, opset="iOS17", id="ios17_copy_last"),
    Case("reshape", {"x": _x}, {"shape": [1, 0, -1, 0]}, opset="iOS17", id="ios17_right_aligned_zero"),
    Case("reshape", {"x": _h}, {"shape": np.array([3, 8], np.int16)}, opset="iOS17", id="ios17_int16_shape"),
    Case("reshape", {"x": _x, "shape": np.array([6, 2, 2], np.int32)}, input_types={"shape": tensor("int32", (3,))},
         fresh_ok="a size comes from a run-time value (shape)", id="runtime_shape"),
    Case("reshape", {"x": np.float32(2.5)}, {"shape": [1, 1]}, id="scalar"),
    Case("reshape_like", {"x": _x, "ref_tensors": [np.zeros((4, 5), np.float32), np.zeros((1, 3, 2), np.int32)]},
         {"begins": (0, 1), "ends": (1, 0), "end_masks": (False, True)}, opset="iOS16"),
    Case("reshape_like", {"x": _h, "ref_tensors": [np.zeros((6, 4), np.float16)]},
         {"begins": (0,), "ends": (2,), "end_masks": (False,)}, opset="iOS17", id="ios17"),
    Case("transpose", {"x": _x}, {"perm": [2, 0, 1]}),
    Case("transpose", {"x": _i}, {"perm": [-1, 0, -2, 1]}, id="negative_perm"),
    Case("squeeze", {"x": _i}, id="all"),
    Case("squeeze", {"x": _i}, {"axes": [1, -4]}, id="ignores_non_unit_axis"),
    Case("squeeze", {"x": np.ones((1, 1), np.float32)}, id="to_scalar"),
    Case("expand_dims", {"x": _x}, {"axes": [0, -1]}),
    Case("expand_dims", {"x": np.float32(1.0)}, {"axes": [0]}, id="scalar"),
    Case("slice_by_index", {"x": _x, "begin": np.array([0, 1, 0], np.int32), "end": np.array([2, 3, 4], np.int32)},
         fresh_ok="a size comes from a run-time value (begin, end)", id="runtime_bounds"),
    Case("slice_by_index", {"x": _x}, {"begin": [1, -1, 3], "end": [0, 0, 0], "stride": [1, -1, -2],
                                       "begin_mask": [False, False, False], "end_mask": [True, True, True]},
         fresh_ok="x[3::-2] clamps 3 to size - 1 on sizes below 4 (a min)", id="negative_strides"),
    Case("slice_by_index", {"x": _x}, {"begin": [1, 0, 0], "end": [2, 3, 4], "squeeze_mask": [True, False, False],
                                       "end_mask": [False, True, True]}, id="squeeze"),
    Case("slice_by_index", {"x": _x}, {"begin": [-1, -2, 4], "end": [0, 0, 1], "squeeze_mask": [True, True, False]},
         id="squeeze_to_empty"),
    Case("slice_by_index", {"x": _b}, {"begin": np.array([0, 1], np.int8), "end": np.array([3, 3], np.int8)},
         opset="iOS17", fresh_ok="x[0:3] clamps 3 to sizes below 3 (a min)", id="ios17_int8"),
    Case("slice_by_size", {"x": _x, "begin": np.array([1, 0, 1], np.int32)}, {"size": [1, -1, 2]},
         fresh_ok="a size comes from a run-time value (begin)"),
    Case("slice_by_size", {"x": _x, "begin": np.array([-1, 0, 2], np.int32), "size": np.array([1, 2, -1], np.int32)},
         fresh_ok="a size comes from a run-time value (begin, size)", id="runtime"),
    Case("slice_update", {"x": _x, "update": np.zeros((2, 3, 2), np.float32)},
         {"begin": [0, 2, 3], "end": [2, 0, 0], "stride": [1, -1, -2], "end_mask": [False, True, True]},
         opset="iOS18"),
    Case("slice_update", {"x": _i, "update": np.array([7, 8, 9], np.int32)},
         {"begin": [1, 0, 0, 0], "end": [2, 1, 3, 1], "squeeze_mask": [True, True, False, True]}, opset="iOS18",
         id="squeeze"),
    Case("reverse", {"x": _x}, id="all"),
    Case("reverse", {"x": _x}, {"axes": [-1, 0]}, id="axes"),
    Case("reverse_sequence", {"x": _x, "lengths": np.array([3, 1], np.int32)}, {"seq_axis": 1, "batch_axis": 0}),
    Case("reverse_sequence", {"x": _x, "lengths": np.array([0, 2, 4], np.int32)}, {"seq_axis": -1, "batch_axis": 1},
         id="axes_1_2"),
    Case("reverse_sequence", {"x": _x, "lengths": np.array([1, 2, 0, 2], np.int8)}, {"seq_axis": 0, "batch_axis": 2},
         opset="iOS17", id="ios17_batch_after_seq"),
]
