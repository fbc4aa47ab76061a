"""Indexing ops lowered to NeuralNetwork layers (lowering/indexing.py): written, read back by the
NeuralNetwork frontend and run; the oracle is numpy written here from the MIL definitions (strided
slicing with masks, np.take / take_along_axis, fancy indexing for gather_nd, np.add.at & co for
scatters applied one update after another, np.cumsum variants, stable argsort, one-hot by
comparison). Shapes are non-symmetric and the layer kinds are asserted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import converter
from converter.errors import UnsupportedError
from tests.nn_backend.test_lowerings_shape import (
    M,
    N,
    arr,
    convert,
    kinds,
    layer_kinds,
    run_again,
    same,
    same_with_shape,
    spec_version,
    with_shape,
)

# ---------------------------------------------------------------------------------------------
# slices


def test_slice_by_index_with_strides_negative_bounds_and_masks(tmp_path: Path) -> None:
    x = arr(4, 5, 6)

    def body(b, x):
        return b.slice_by_index(x=x, begin=[1, 3, -1], end=[4, 4, 0], stride=[2, 1, -2], begin_mask=[False, True, False],
                                end_mask=[False, False, True], name="y")

    path, out = convert(tmp_path, {"x": x}, body)
    same(out["y"], x[1:4:2, :4, -1::-2])
    assert kinds(path) == {"sliceStatic"}


def test_slice_by_index_end_mask_keeps_the_rest(tmp_path: Path) -> None:
    x = arr(4, 5, 6)

    def body(b, x):
        return b.slice_by_index(x=x, begin=[1, -4, 5], end=[4, 0, 1], stride=[2, 1, -3],
                                begin_mask=[False, False, False], end_mask=[False, True, False], name="y")

    path, out = convert(tmp_path, {"x": x}, body)
    same(out["y"], x[1:4:2, -4:, 5:1:-3])
    assert kinds(path) == {"sliceStatic"}


def _squeezing(b, x):
    return [*with_shape(b, b.slice_by_index(x=x, begin=[0, 2, 1], end=[0, 3, 5], begin_mask=[True, False, False],
                                            end_mask=[True, False, False], squeeze_mask=[False, True, False],
                                            name="mid")),
            *with_shape(b, b.slice_by_index(x=x, begin=[0, -1, 0], end=[0, 0, 0], begin_mask=[True, False, True],
                                            end_mask=[True, False, True], squeeze_mask=[False, True, False],
                                            name="last")),
            *with_shape(b, b.slice_by_index(x=x, begin=[3, 4, -2], end=[4, 5, 6], begin_mask=[False, True, False],
                                            squeeze_mask=[False, True, True], name="masked"))]


def _squeezed_want(x: np.ndarray) -> dict[str, np.ndarray]:
    # a squeezed dim takes the element at begin, 0 when begin is masked (MIL)
    return {"mid": x[:, 2, 1:5], "last": x[:, -1, :], "masked": x[3:4, 0, -2]}


def test_squeeze_masks_are_one_spec_5_slice_without_a_target(tmp_path: Path) -> None:
    x = arr(4, 5, 6)
    path, out = convert(tmp_path, {"x": x}, _squeezing, flexible={"x": (N, 5, 6)})
    for k, want in _squeezed_want(x).items():
        same_with_shape(out, k, want)
    assert dict(layer_kinds(path)) == {"sliceStatic": 3, "getShape": 3} and spec_version(path) == 5


def test_squeeze_masks_under_an_ios13_target_are_a_slice_and_a_squeeze(tmp_path: Path) -> None:
    x = arr(4, 5, 6)
    path, out = convert(tmp_path, {"x": x}, _squeezing, target="iOS13", flexible={"x": (N, 5, 6)})
    for k, want in _squeezed_want(x).items():
        same_with_shape(out, k, want)
    assert dict(layer_kinds(path)) == {"sliceStatic": 3, "squeeze": 3, "getShape": 3} and spec_version(path) == 4


def test_slices_of_a_flexible_dim(tmp_path: Path) -> None:
    x = arr(5, 6)

    def body(b, x):
        return [b.slice_by_index(x=x, begin=[1, 1], end=[0, 5], stride=[1, 2], end_mask=[True, False], name="a"),
                b.slice_by_index(x=x, begin=[0, 0], end=[-1, 0], end_mask=[False, True], name="c")]

    path, out = convert(tmp_path, {"x": x}, body, flexible={"x": (N, 6)})
    same(out["a"], x[1:, 1:5:2])
    same(out["c"], x[:-1, :])
    x2 = arr(3, 6)
    again = run_again(path, {"x": x2})
    same(again["a"], x2[1:, 1:5:2])
    same(again["c"], x2[:-1, :])
    assert kinds(path) == {"sliceStatic"}


def test_slice_by_index_with_run_time_bounds_is_slice_dynamic(tmp_path: Path) -> None:
    x = arr(4, 5, 6)
    begin, end = np.array([1, -4, 0], np.int32), np.array([3, 5, 0], np.int32)

    def body(b, x, begin, end):
        return b.slice_by_index(x=x, begin=begin, end=end, stride=[1, 2, 1], end_mask=[False, False, True], name="y")

    path, out = convert(tmp_path, {"x": x, "begin": begin, "end": end}, body)
    same(out["y"], x[1:3, -4:5:2, 0:])
    assert kinds(path) == {"sliceDynamic"}


def test_slice_by_index_with_a_run_time_begin_and_a_constant_end(tmp_path: Path) -> None:
    x = arr(4, 5, 6)
    begin = np.array([3, -4, 1], np.int32)

    def body(b, x, begin):
        return b.slice_by_index(x=x, begin=begin, end=[0, 5, 4], stride=[-1, 2, 1], end_mask=[True, False, False],
                                name="y")

    path, out = convert(tmp_path, {"x": x, "begin": begin}, body)
    same(out["y"], x[3::-1, -4:5:2, 1:4])
    assert dict(layer_kinds(path)) == {"sliceDynamic": 1}  # the end in the layer's endIds


def test_slice_by_size_constant_begin_counts_negative_begins_from_the_end(tmp_path: Path) -> None:
    x = arr(4, 5, 6)

    def body(b, x):
        return [b.slice_by_size(x=x, begin=[1, -3, 0], size=[2, -1, 4], name="a"),
                b.slice_by_size(x=x, begin=[-2, 0, -6], size=[2, 3, 6], name="c")]

    path, out = convert(tmp_path, {"x": x}, body)
    same(out["a"], x[1:3, -3:, 0:4])
    same(out["c"], x[-2:, 0:3, :])
    assert kinds(path) == {"sliceStatic"}


def test_slice_by_size_with_a_run_time_begin(tmp_path: Path) -> None:
    x = arr(4, 5, 6)
    begin = np.array([1, -2, 2], np.int32)

    def body(b, x, begin):
        return b.slice_by_size(x=x, begin=begin, size=[3, 2, -1], name="y")

    path, out = convert(tmp_path, {"x": x, "begin": begin}, body, flexible={"x": (N, 5, 6)})
    same(out["y"], x[1:4, 3:5, 2:])
    assert layer_kinds(path)["sliceDynamic"] == 1 and "getShape" in kinds(path)
    again = run_again(path, {"x": x[:3], "begin": np.array([-3, 0, -1], np.int32)})
    same(again["y"], x[0:3, 0:2, 5:])


@pytest.mark.parametrize("target, layers", [(None, {"sliceBySize": 1}), ("iOS13", {"sliceDynamic": 1})])
def test_slice_by_size_along_one_axis_from_a_run_time_start(tmp_path: Path, target: str | None,
                                                            layers: dict[str, int]) -> None:
    """The begin the NeuralNetwork frontend makes of a sliceBySize layer: zeros but one run-time value."""
    x = arr(3, 7, 2)
    start = np.array([4], np.int32)

    def body(b, x, start):
        begin = b.concat(values=(np.zeros(1, np.int32), start, np.zeros(1, np.int32)), axis=0)
        return b.slice_by_size(x=x, begin=begin, size=[-1, 3, 2], name="y")

    path, out = convert(tmp_path, {"x": x, "start": start}, body, target=target, flexible={"x": (N, 7, 2)})
    same(out["y"], x[:, 4:7])
    same(run_again(path, {"x": x, "start": np.array([-5], np.int32)})["y"], x[:, 2:5])
    got = layer_kinds(path)
    assert all(got[k] == n for k, n in layers.items()) and ("sliceBySize" in got) == (target is None)
    if target is None:
        assert "sliceDynamic" not in got  # the begin vector is still built (its concat), unread


def test_slice_update_at_strided_and_squeezed_positions(tmp_path: Path) -> None:
    x = arr(4, 5, 6)
    u1 = arr(2, 5)
    u2 = arr(2, 5, 6)

    def body(b, x, u1, u2):
        return [b.slice_update(x=x, update=u1, begin=[3, 0, 2], end=[0, 5, 3], stride=[-2, 1, 1],
                               end_mask=[True, False, False], squeeze_mask=[False, False, True], name="a"),
                b.slice_update(x=x, update=u2, begin=[1, 0, 0], end=[3, 0, 0], end_mask=[False, True, True],
                               name="c")]

    path, out = convert(tmp_path, {"x": x, "u1": u1, "u2": u2}, body, opset="iOS18")
    want = x.copy()
    want[3::-2, 0:5, 2] = u1
    same(out["a"], want)
    want = x.copy()
    want[1:3] = u2
    same(out["c"], want)
    assert dict(layer_kinds(path)) == {"scatterND": 2, "loadConstantND": 2}


# ---------------------------------------------------------------------------------------------
# gathers


def test_gather_constant_and_run_time_indices_with_negatives(tmp_path: Path) -> None:
    x = arr(3, 5, 2)
    idx = np.array([[4, -1, 0], [-5, 2, 2]], np.int32)

    def body(b, x, idx):
        return [b.gather(x=x, indices=np.array([-2, 0, 4, 1], np.int32), axis=1, name="const"),
                b.gather(x=x, indices=idx, axis=-2, name="run")]

    path, out = convert(tmp_path, {"x": x, "idx": idx}, body)
    same(out["const"], np.take(x, [-2, 0, 4, 1], axis=1))
    same(out["run"], np.take(x, idx, axis=1))
    assert layer_kinds(path)["gather"] == 2


def test_gather_along_axis(tmp_path: Path) -> None:
    x = arr(3, 4)
    idx = np.array([[2, 0, 1, -1], [0, 0, -3, 1]], np.int32)
    path, out = convert(tmp_path, {"x": x, "idx": idx},
                        lambda b, x, idx: b.gather_along_axis(x=x, indices=idx, axis=0, name="y"))
    same(out["y"], np.take_along_axis(x, np.where(idx < 0, idx + 3, idx), axis=0))
    assert kinds(path) == {"gatherAlongAxis"}


def test_gather_nd_negative_indices_are_made_non_negative(tmp_path: Path) -> None:
    x = arr(3, 4, 5)
    idx = np.array([[2, -1], [-3, 1], [0, 3]], np.int32)

    def body(b, x, idx):
        return [b.gather_nd(x=x, indices=np.array([[-1, 0], [1, -4]], np.int32), name="const"),
                b.gather_nd(x=x, indices=idx, name="run")]

    path, out = convert(tmp_path, {"x": x, "idx": idx}, body)
    same(out["const"], x[[-1, 1], [0, -4]])
    same(out["run"], x[idx[:, 0], idx[:, 1]])
    k = layer_kinds(path)
    assert k["gatherND"] == 2 and k["lessThan"] == 1  # only the run-time indices need wrapping


def test_gather_nd_from_ios17_reads_indices_as_they_are(tmp_path: Path) -> None:
    x = arr(3, 4, 5)
    idx = np.array([[2, 1], [0, 3]], np.int32)
    path, out = convert(tmp_path, {"x": x, "idx": idx}, lambda b, x, idx: b.gather_nd(x=x, indices=idx, name="y"),
                        opset="iOS17")
    same(out["y"], x[idx[:, 0], idx[:, 1]])
    assert kinds(path) == {"gatherND"}


def test_gather_batch_dims_is_refused(tmp_path: Path) -> None:
    x = arr(2, 3)
    idx = np.array([[0], [2]], np.int32)
    with pytest.raises(UnsupportedError, match="batch_dims"):
        convert(tmp_path, {"x": x, "idx": idx},
                lambda b, x, idx: b.gather(x=x, indices=idx, axis=1, batch_dims=1, name="y"), opset="iOS16")


# ---------------------------------------------------------------------------------------------
# scatters


def _scatter_axis1(data: np.ndarray, idx: np.ndarray, upd: np.ndarray, fn) -> np.ndarray:
    out = data.copy()
    for j, i in enumerate(idx):
        out[:, i] = fn(out[:, i], upd[:, j])
    return out


@pytest.mark.parametrize("mode, fn", [("update", lambda a, u: u), ("add", np.add), ("sub", np.subtract),
                                      ("mul", np.multiply), ("div", np.divide), ("max", np.maximum),
                                      ("min", np.minimum)])
def test_scatter_modes_with_a_negative_run_time_index(tmp_path: Path, mode: str, fn) -> None:
    data = arr(2, 4, 3)
    idx = np.array([3, -4, 2], np.int32) if mode == "update" else np.array([3, -4, 3], np.int32)
    upd = arr(2, 3, 3) + 2.0

    def body(b, data, idx, upd):
        return b.scatter(data=data, indices=idx, updates=upd, axis=1, mode=mode, name="y")

    path, out = convert(tmp_path, {"data": data, "idx": idx, "upd": upd}, body)
    np.testing.assert_allclose(out["y"], _scatter_axis1(data, np.where(idx < 0, idx + 4, idx), upd, fn), rtol=1e-6)
    k = layer_kinds(path)
    assert k["scatter"] == 1 and k["lessThan"] == 1


def test_integer_scatter_div_is_refused(tmp_path: Path) -> None:
    data = np.arange(6, dtype=np.int32).reshape(2, 3)
    with pytest.raises(UnsupportedError, match="truncates"):
        convert(tmp_path, {"data": data}, lambda b, data: b.scatter(
            data=data, indices=np.array([1], np.int32), updates=np.array([[2], [3]], np.int32), axis=1, mode="div",
            name="y"))


def test_scatter_along_axis_accumulates(tmp_path: Path) -> None:
    data = arr(3, 4)
    idx = np.array([[2, 0, 1, 1], [2, -3, 0, 1]], np.int32)
    upd = arr(2, 4)
    path, out = convert(tmp_path, {"data": data, "idx": idx, "upd": upd}, lambda b, data, idx, upd:
                        b.scatter_along_axis(data=data, indices=idx, updates=upd, axis=0, mode="add", name="y"))
    want = data.copy()
    np.add.at(want, (np.where(idx < 0, idx + 3, idx), np.broadcast_to(np.arange(4), idx.shape)), upd)
    np.testing.assert_allclose(out["y"], want, rtol=1e-6)
    assert kinds(path) == {"scatterAlongAxis"}


def test_scatter_nd_sub_with_negative_indices(tmp_path: Path) -> None:
    data = arr(3, 4, 2)
    idx = np.array([[2, -1], [-3, 1], [2, 3]], np.int32)
    upd = arr(3, 2)
    path, out = convert(tmp_path, {"data": data, "idx": idx, "upd": upd}, lambda b, data, idx, upd:
                        b.scatter_nd(data=data, indices=idx, updates=upd, mode="sub", name="y"), flexible={
                            "data": (3, 4, N)})
    want = data.copy()
    for (i, j), u in zip(np.where(idx < 0, idx + [3, 4], idx), upd):
        want[i, j] -= u
    np.testing.assert_allclose(out["y"], want, rtol=1e-6)
    k = layer_kinds(path)
    assert k["scatterND"] == 1 and k["lessThan"] == 1


# ---------------------------------------------------------------------------------------------
# one-hot, band part, non-zero, select


def test_one_hot_axis_values_and_out_of_range_indices(tmp_path: Path) -> None:
    idx = np.array([[0, 3, -1], [5, 1, 2]], np.int32)
    size = np.array([5], np.int32)

    def body(b, idx, size):
        return [b.one_hot(indices=idx, one_hot_vector_size=4, axis=1, on_value=np.float32(5), off_value=np.float32(-2),
                          name="const"),
                b.one_hot(indices=idx, one_hot_vector_size=b.squeeze(x=size), axis=-1, on_value=np.float32(1.5),
                          off_value=np.float32(0.25), name="run")]

    path, out = convert(tmp_path, {"idx": idx, "size": size}, body)
    hot = np.where(idx[..., None] == np.arange(4), 5.0, -2.0)  # -1 and 5 are outside [0, 4): all off
    same(out["const"], np.moveaxis(hot, -1, 1))
    same(out["run"], np.where(idx[..., None] == np.arange(5), 1.5, 0.25))
    assert layer_kinds(path)["oneHot"] == 2 and spec_version(path) == 5


def test_one_hot_under_an_ios13_target_compares_with_the_positions(tmp_path: Path) -> None:
    idx = np.array([[0, 3, -1], [5, 1, 2]], np.int32)

    def body(b, idx):
        first = b.gather(x=b.reshape(x=idx, shape=[6]), indices=np.int32(4), axis=0)
        return [b.one_hot(indices=idx, one_hot_vector_size=4, axis=1, on_value=np.float32(0.1),
                          off_value=np.float32(0.3), name="where"),
                b.one_hot(indices=idx, one_hot_vector_size=5, axis=0, on_value=np.float32(-7), name="times"),
                b.one_hot(indices=idx, one_hot_vector_size=6, name="plain"),
                b.one_hot(indices=first, one_hot_vector_size=3, name="scalar")]

    path, out = convert(tmp_path, {"idx": idx}, body, target="iOS13")
    same(out["where"], np.moveaxis(np.where(idx[..., None] == np.arange(4), 0.1, 0.3).astype(np.float32), -1, 1))
    same(out["times"], np.moveaxis(np.where(idx[..., None] == np.arange(5), -7.0, 0.0), -1, 0))
    same(out["plain"], (idx[..., None] == np.arange(6)).astype(np.int32))
    same(out["scalar"], np.eye(3, dtype=np.int32)[idx.flat[4]])
    k = layer_kinds(path)
    assert "oneHot" not in k and k["equal"] == 4 and k["whereBroadcastable"] == 1 and spec_version(path) == 4


def test_one_hot_int_values_beyond_fp32_exactness_are_refused(tmp_path: Path) -> None:
    idx = np.array([0, 1], np.int32)
    with pytest.raises(UnsupportedError, match="not exact in fp32"):
        convert(tmp_path, {"idx": idx}, lambda b, idx: b.one_hot(indices=idx, one_hot_vector_size=3,
                                                                 on_value=np.int32(2**24 + 3), off_value=np.int32(0),
                                                                 name="y"))


def _band(x: np.ndarray, lower: int, upper: int) -> np.ndarray:
    m = np.arange(x.shape[-2])[:, None]
    n = np.arange(x.shape[-1])[None, :]
    keep = ((lower < 0) | (m - n <= lower)) & ((upper < 0) | (n - m <= upper))
    return np.where(keep, x, 0)


def test_band_part_lower_and_upper(tmp_path: Path) -> None:
    x = arr(2, 4, 5)
    path, out = convert(tmp_path, {"x": x}, lambda b, x: [b.band_part(x=x, lower=1, upper=0, name="a"),
                                                         b.band_part(x=x, lower=-1, upper=2, name="c")])
    same(out["a"], _band(x, 1, 0))
    same(out["c"], _band(x, -1, 2))
    assert kinds(path) == {"matrixBandPart"}


def test_non_zero_and_select(tmp_path: Path) -> None:
    x = np.array([[0, 1.5, 0], [-2, 0, 3]], np.float32)
    c = np.array([[1.0], [-1.0]], np.float32)
    a, b_ = arr(2, 3), arr(3)

    def body(b, x, c, a, b_):
        return [b.non_zero(x=x, name="nz"), b.select(cond=b.greater(x=c, y=np.float32(0)), a=a, b=b_, name="sel")]

    path, out = convert(tmp_path, {"x": x, "c": c, "a": a, "b_": b_}, body)
    same(out["nz"], np.argwhere(x))
    same(out["sel"], np.where(c > 0, a, b_))  # cond [2, 1] broadcast against a [2, 3] and b [3]
    assert kinds(path) == {"whereNonZero", "whereBroadcastable", "greaterThan"}


# ---------------------------------------------------------------------------------------------
# sorting, arg-reductions, cumulative sums


def _stable_order(x: np.ndarray, axis: int, ascending: bool) -> np.ndarray:
    """MIL: ties keep index order in both directions."""
    return np.argsort(x if ascending else -x, axis=axis, kind="stable")


def test_topk_largest_and_smallest_along_an_axis(tmp_path: Path) -> None:
    x = np.array([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3], [5, 8, 9, 7, 9]], np.float32)

    def body(b, x):
        v1, i1 = b.topk(x=x, k=2, axis=1, name="top")
        v2, i2 = b.topk(x=x, k=2, axis=0, ascending=True, name="bottom")
        return [v1, i1, v2, i2]

    path, out = convert(tmp_path, {"x": x}, body)
    v1, i1, v2, i2 = out.values()
    o1 = _stable_order(x, 1, False)[:, :2]
    same(i1, o1)
    same(v1, np.take_along_axis(x, o1, axis=1))
    o2 = _stable_order(x, 0, True)[:2]
    same(i2, o2)
    same(v2, np.take_along_axis(x, o2, axis=0))
    assert layer_kinds(path)["topK"] == 2


@pytest.mark.parametrize("target, layer, version", [(None, "argSort", 5), ("iOS13", "topK", 4)])
def test_argsort_both_directions(tmp_path: Path, target: str | None, layer: str, version: int) -> None:
    x = np.array([[3, 5, 32, 4], [3, 77, 6, 2], [0.5, -1, 6, 8]], np.float32)
    path, out = convert(tmp_path, {"x": x}, lambda b, x: [b.argsort(x=x, axis=0, ascending=True, name="up"),
                                                         b.argsort(x=x, axis=-1, name="down")], target=target)
    same(out["up"], _stable_order(x, 0, True))
    same(out["down"], _stable_order(x, 1, False))
    assert kinds(path) == {layer} and spec_version(path) == version


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("target, layers", [(None, {"cumSum"}), ("iOS13", {"batchedMatmul", "transpose"})])
def test_cumsum_exclusive_and_reverse(tmp_path: Path, exclusive: bool, reverse: bool, target: str | None,
                                      layers: set[str]) -> None:
    x = arr(2, 4, 3)
    path, out = convert(tmp_path, {"x": x}, lambda b, x: b.cumsum(x=x, axis=1, exclusive=exclusive, reverse=reverse,
                                                                 name="y"), target=target)
    work = np.flip(x, 1) if reverse else x
    want = np.cumsum(work, axis=1)
    if exclusive:
        want = np.concatenate([np.zeros_like(want[:, :1]), want[:, :-1]], axis=1)
    if reverse:
        want = np.flip(want, 1)
    np.testing.assert_allclose(out["y"], want, rtol=1e-5, atol=1e-6)
    assert kinds(path) == layers


def test_cumsum_along_the_last_axis_under_an_ios13_target_is_one_matmul(tmp_path: Path) -> None:
    x = np.arange(10, dtype=np.int32).reshape(2, 5)
    path, out = convert(tmp_path, {"x": x}, lambda b, x: b.cumsum(x=x, axis=-1, name="y"), target="iOS13")
    same(out["y"], np.cumsum(x, axis=1))
    assert dict(layer_kinds(path)) == {"batchedMatmul": 1}


def test_argmax_argmin_keep_dims(tmp_path: Path) -> None:
    x = arr(3, 4, 5)
    path, out = convert(tmp_path, {"x": x}, lambda b, x: [
        *with_shape(b, b.reduce_argmax(x=x, axis=1, keep_dims=True, name="mx")),
        *with_shape(b, b.reduce_argmin(x=x, axis=-1, name="mn"))], flexible={"x": (N, 4, 5)})
    same_with_shape(out, "mx", np.argmax(x, axis=1)[:, None, :])
    same_with_shape(out, "mn", np.argmin(x, axis=2))
    assert kinds(path) == {"argMax", "argMin", "getShape"}


def _indices_read_by(path: Path, op_type: str, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The index tensors the model's ``op_type`` layers read at run time (exposed as extra outputs
    of the program the frontend read): our interpreter accepts negative indices itself, so only
    this shows whether the wrapping layers ran."""
    prog = converter.load(path)
    block = prog.main.block
    picked = [op.inputs["indices"] for op in block.ops if op.type == op_type]
    names = [v.name for v in picked]
    block.set_outputs(list(prog.main.outputs) + picked)
    out = converter.run(prog, feeds)
    return [out[n] for n in names]


def test_run_time_negative_indices_reach_gather_nd_and_scatters_non_negative(tmp_path: Path) -> None:
    x = arr(3, 4, 5)
    idx = np.array([[2, -1], [-3, 1], [0, 3]], np.int32)
    sidx = np.array([3, -4, -1], np.int32)
    upd = arr(3, 3, 5)

    def body(b, x, idx, sidx, upd):
        return [b.gather_nd(x=x, indices=idx, name="g"),
                b.scatter(data=x, indices=sidx, updates=upd, axis=1, mode="add", name="s")]

    feeds = {"x": x, "idx": idx, "sidx": sidx, "upd": upd}
    path, _ = convert(tmp_path, feeds, body, flexible={"x": (N, 4, 5)})
    (g_idx,) = _indices_read_by(path, "gather_nd", feeds)
    np.testing.assert_array_equal(g_idx, np.where(idx < 0, idx + [3, 4], idx))  # dim 0 is flexible: getShape
    (s_idx,) = _indices_read_by(path, "scatter", feeds)
    np.testing.assert_array_equal(s_idx, np.where(sidx < 0, sidx + 4, sidx))


def test_topk_of_the_whole_axis_and_without_indices(tmp_path: Path) -> None:
    x = np.array([[3, 1, 4, 1.5, 5], [9, 2, 6, 5, 3]], np.float32)

    def body(b, x):
        return list(b.topk(x=x, k=-1, axis=1, ascending=True, name="all"))

    path, out = convert(tmp_path, {"x": x}, body, opset="iOS17", flexible={"x": (N, 5)})
    v_all, i_all = out.values()
    same(i_all, _stable_order(x, 1, True))
    same(v_all, np.sort(x, axis=1))
    assert kinds(path) == {"topK"}

    path2, out2 = convert(tmp_path, {"x": x}, lambda b, x: b.topk(x=x, k=2, axis=0, return_indices=False, name="v"),
                          opset="iOS16")  # replaces the first model
    same(out2["v"], np.sort(x, axis=0)[::-1][:2])
    assert layer_kinds(path2)["topK"] == 1


def test_slice_update_of_leading_dims_keeps_flexible_trailing_dims(tmp_path: Path) -> None:
    x = arr(4, 3, 5)
    u = arr(2, 3, 5)
    path, out = convert(tmp_path, {"x": x, "u": u}, lambda b, x, u: b.slice_update(
        x=x, update=u, begin=[-1, 0, 0], end=[0, 0, 0], stride=[-2, 1, 1], end_mask=[True, True, True], name="y"),
        opset="iOS18", flexible={"x": (4, 3, N), "u": (2, 3, N)})
    want = x.copy()
    want[-1::-2] = u
    same(out["y"], want)
    x2, u2 = arr(4, 3, 2), arr(2, 3, 2)
    want2 = x2.copy()
    want2[-1::-2] = u2
    same(run_again(path, {"x": x2, "u": u2})["y"], want2)
    assert kinds(path) == {"scatterND", "loadConstantND"}


def test_rank_0_values_are_one_element_blobs(tmp_path: Path) -> None:
    """A rank-0 value is a [1] blob: a gather by a scalar index drops the axis, a scalar one-hot is
    a vector and stacked scalars a vector. Each result is joined with a flexible vector, so a result
    of the wrong rank cannot be concatenated (the frontend reshapes outputs to their declared shape,
    which would hide it)."""
    x, v = arr(3, 4), arr(5)
    i = np.array([2, 0, 1], np.int32)

    def body(b, x, i, v):
        first = b.gather(x=i, indices=np.int32(0), axis=0, name="first")
        col = b.gather(x=x, indices=np.int32(-2), axis=1, name="col")
        hot = b.one_hot(indices=first, one_hot_vector_size=4, name="hot")
        pair = b.stack(values=(first, b.gather(x=i, indices=np.int32(2), axis=0)), axis=0, name="pair")
        return [b.concat(values=(col, v), axis=0, name="col_v"),
                b.concat(values=(hot, pair, i), axis=0, name="hot_pair_i")]

    path, out = convert(tmp_path, {"x": x, "i": i, "v": v}, body, flexible={"x": (N, 4), "i": (N,), "v": (M,)})
    same(out["col_v"], np.concatenate([x[:, -2], v]))
    same(out["hot_pair_i"], np.concatenate([np.eye(4, dtype=np.int32)[2], [2, 1], i]))
    assert layer_kinds(path)["squeeze"] == 2  # after the column gather and the one-hot
