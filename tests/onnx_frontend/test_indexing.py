"""Indexing mappings (ops_indexing.py) where ONNX and MIL differ: negative indices (MIL's iOS18
gather/scatter call them out of range), TopK / ArgMax tie order and select_last_index, OneHot's
negative and out-of-range indices, run-time k / axis / values, NonZero's layout, masks off the
diagonal. Oracle: onnxruntime on the same one-node model; values are distinct and asymmetric so
a swapped axis, operand or direction fails. Each case runs with the parameter as a graph input
(the run-time path) and, where the mapping has one, as an initializer (the conversion-time path).
"""

from __future__ import annotations

import numpy as np
import pytest

from .ort_oracle import check

X34 = np.array([[3.0, -1.5, 7.25, 0.5], [2.0, 9.0, -4.0, 6.5], [-8.0, 1.25, 5.0, -0.75]], np.float32)
CONST_OR_RUNTIME = pytest.mark.parametrize("consts", [(), (1,)], ids=["runtime", "const"])


@CONST_OR_RUNTIME
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_negative_indices_count_from_the_end(axis, consts):
    idx = np.array([[-1, 0], [-3, 2]], np.int64) if axis == 0 else np.array([-1, 1, -4, 2], np.int64)
    check("Gather", [X34, idx], {"axis": axis}, consts=consts)


def test_gather_scalar_index_and_bool_data():
    check("Gather", [np.array([[True, False], [False, False], [True, True]]), np.array(-2, np.int64)], {"axis": 0})


@CONST_OR_RUNTIME
def test_gather_elements_negative_indices(consts):
    idx = np.array([[-1, 0, 2, -4], [1, -2, -3, 3]], np.int64)
    check("GatherElements", [X34, idx], {"axis": 1}, consts=consts)
    check("GatherElements", [X34, np.array([[-1, 0, 1, -2]], np.int64)], {"axis": 0}, consts=consts)


@CONST_OR_RUNTIME
def test_gather_nd_negative_indices_with_batch_dims(consts):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) * 1.5 - 7
    check("GatherND", [x, np.array([[[-1, 0], [1, -1]], [[0, -4], [-3, 2]]], np.int64)], {"batch_dims": 1},
          consts=consts)
    check("GatherND", [x, np.array([[-1, 2], [0, -3]], np.int64)], consts=consts)


@pytest.mark.parametrize("reduction", ["add", "mul", "max", "min"])
def test_scatter_elements_reductions_with_duplicate_negative_indices(reduction):
    data = X34.copy()
    idx = np.array([[-1, 3, 0], [1, -3, 1]], np.int64)  # -1 and 3 hit the same column
    upd = np.array([[1.5, -2.0, 4.0], [0.5, 3.0, -6.0]], np.float32)
    check("ScatterElements", [data, idx, upd], {"axis": 1, "reduction": reduction}, opset=18)


def test_scatter_elements_none_with_negative_indices():
    check("ScatterElements", [X34, np.array([[-2, 0, 1]], np.int64), np.array([[10.0, 20.0, 30.0]], np.float32)],
          {"axis": 0})


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd_reductions_and_negative_indices(reduction):
    idx = np.array([[-1, 1], [0, -1]], np.int64) if reduction == "none" else np.array([[-1, 1], [2, 1], [0, -1]],
                                                                                          np.int64)
    upd = np.array([5.5, -3.0, 8.0], np.float32)[: len(idx)]
    check("ScatterND", [X34, idx, upd], {"reduction": reduction}, opset=18)


@CONST_OR_RUNTIME
@pytest.mark.parametrize("largest", [1, 0])
def test_topk_ties_come_lower_index_first(largest, consts):
    x = np.array([[2.0, 5.0, 2.0, 5.0, 1.0, 2.0], [7.0, 7.0, -1.0, 7.0, -1.0, 0.0]], np.float32)
    check("TopK", [x, np.array([4], np.int64)], {"largest": largest}, n_out=2, consts=consts)
    check("TopK", [x.T.copy(), np.array([3], np.int64)], {"axis": 0, "largest": largest}, n_out=2, consts=consts)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_arg_extremes_with_ties_and_select_last_index(op, last, keepdims):
    x = np.array([[4, 9, 9, -2, 4], [-2, -2, 0, 9, -2], [5, 1, 5, 1, 5]], np.int32)
    for axis in (0, 1):
        check(op, [x], {"axis": axis, "keepdims": keepdims, "select_last_index": last})


def test_hardmax_marks_the_first_of_tied_maxima():
    x = np.array([[1.0, 3.0, 3.0, -1.0], [2.0, 0.0, 2.0, 2.0]], np.float32)
    check("Hardmax", [x], {"axis": 1})
    check("Hardmax", [x], {"axis": 0})


def test_where_broadcasts_and_keeps_small_int_types():
    cond = np.array([[True], [False], [True]])
    check("Where", [cond, np.array([1, -2, 3, -4], np.int8), np.array([[100], [-100], [7]], np.int8)])


@pytest.mark.parametrize("consts", [(), (1,), (1, 2)], ids=["runtime", "const-depth", "const-depth-values"])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot_negative_indices_wrap_and_out_of_range_is_off(axis, consts):
    idx = np.array([[0, -1, 3], [-4, 4, -5]], np.int64)  # -4 wraps to 0; 4 and -5 are out of range
    check("OneHot", [idx, np.array(4, np.int64), np.array([-2.5, 7.0], np.float32)], {"axis": axis}, consts=consts)


@pytest.mark.parametrize("consts", [(), (0, 1, 2)], ids=["runtime", "const"])
def test_range_float_and_negative_int_steps(consts):
    check("Range", [np.array(1.5, np.float32), np.array(-2.0, np.float32), np.array(-0.75, np.float32)], consts=consts)
    check("Range", [np.array(10, np.int64), np.array(-3, np.int64), np.array(-4, np.int64)], consts=consts)


@CONST_OR_RUNTIME
@pytest.mark.parametrize("op", ["CumSum", "CumProd"])
@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_scans_on_each_axis(op, exclusive, reverse, consts):
    # onnxruntime 1.32 has no CumProd kernel (opset 26): onnx's reference evaluator is its oracle
    oracle = {"oracle": "reference", "opset": 26} if op == "CumProd" else {}
    x = np.array([[[1.5, -2.0, 3.0], [0.5, 4.0, -1.0]], [[2.0, 0.25, -3.0], [1.0, -0.5, 2.5]]], np.float32)
    for axis in (0, 1, -1):
        check(op, [x, np.array(axis, np.int64)], {"exclusive": exclusive, "reverse": reverse}, consts=consts,
              **oracle)


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [-2, -1, 0, 1, 3])
def test_trilu_bands_off_the_diagonal(upper, k):
    x = (np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5) - 11.5) * 1.25
    check("Trilu", [x, np.array(k, np.int64)], {"upper": upper})
    check("Trilu", [x, np.array(k, np.int64)], {"upper": upper}, consts=(1,))


@pytest.mark.parametrize("k", [-1, 0, 2])
def test_eye_like_offsets_and_dtype(k):
    check("EyeLike", [np.zeros((3, 5), np.float32)], {"k": k})
    check("EyeLike", [np.zeros((4, 2), np.float32)], {"k": k, "dtype": 6})  # int32


def test_non_zero_is_rank_by_count():
    check("NonZero", [np.array([[0.0, 1.5, 0.0], [-2.0, 0.0, 3.0]], np.float32)])


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_compress_along_an_axis_or_the_flattened_input(axis):
    cond = np.array([False, True, True]) if axis in (0, None) else np.array([True, False, False, True])
    check("Compress", [X34, cond], {} if axis is None else {"axis": axis})


@pytest.mark.parametrize("time_axis,batch_axis", [(0, 1), (1, 0)])
def test_reverse_sequence_axes(time_axis, batch_axis):
    x = np.arange(20, dtype=np.float32).reshape(4, 5) * 0.5 - 3
    lengths = np.array([4, 1, 3, 2, 4], np.int64) if batch_axis == 1 else np.array([5, 1, 3, 2], np.int64)
    check("ReverseSequence", [x, lengths], {"time_axis": time_axis, "batch_axis": batch_axis})


@CONST_OR_RUNTIME
def test_gather_elements_indices_smaller_than_the_data(consts):
    idx = np.array([[-1, 2], [0, -4]], np.int64)  # [2, 2] into [3, 4] along axis 1
    check("GatherElements", [X34, idx], {"axis": 1}, consts=consts)


@pytest.mark.parametrize("reduction", ["none", "add", "max"])
def test_scatter_elements_indices_smaller_than_the_data(reduction):
    idx = np.array([[-1, 0], [2, -3]], np.int64)
    upd = np.array([[10.5, -20.0], [30.0, 40.25]], np.float32)
    check("ScatterElements", [X34, idx, upd], {"axis": 1, "reduction": reduction}, opset=18)
    check("ScatterElements", [X34, np.array([[-1], [0]], np.int64), np.array([[5.0], [-6.0]], np.float32)],
          {"axis": 0, "reduction": reduction}, opset=18)


@pytest.mark.parametrize("mode,starts", [("linear", [1, 3]), ("circular", [4, 2])])
def test_tensor_scatter_writes_from_each_batch_rows_index(mode, starts):
    cache = np.arange(2 * 3 * 5 * 4, dtype=np.float32).reshape(2, 3, 5, 4)
    update = -np.arange(2 * 3 * 2 * 4, dtype=np.float32).reshape(2, 3, 2, 4) - 1
    check("TensorScatter", [cache, update, np.array(starts, np.int64)], {"mode": mode}, opset=24)


@pytest.mark.parametrize("sorted_", [1, 0])
def test_unique_flattened(sorted_):
    x = np.array([[2.5, -1.0, 7.0], [2.5, 0.0, -1.0], [9.0, 7.0, 2.5]], np.float32)
    check("Unique", [x], {"sorted": sorted_}, n_out=4)
    check("Unique", [np.array([3, -2, 3, 3, 8, -2, 0], np.int64)], {"sorted": sorted_}, n_out=4)


@pytest.mark.parametrize("sorted_", [1, 0])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_unique_slices_along_an_axis(axis, sorted_):
    x = np.array([[[1, 0], [2, 5]], [[1, 0], [2, 4]], [[1, 0], [2, 5]], [[0, 9], [3, 3]]], np.int64)
    x = np.moveaxis(x, 0, axis % 3).copy()
    check("Unique", [x], {"axis": axis, "sorted": sorted_}, n_out=4)
