"""Gather / scatter, select, one_hot, non_zero, band_part and slice_update through the ONNX
backend under onnxruntime, against numpy written here (negative indices, scatter modes with
duplicate indices, out-of-range one_hot indices), and against our interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from .helpers import OPSET, only, program, run_both

X = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5) * 0.5 - 7.0


def _exact(prog, feeds, want) -> None:  # noqa: ANN001
    got, interp = run_both(prog, feeds)
    g = only(got)
    np.testing.assert_array_equal(g, np.asarray(want).astype(g.dtype))
    assert g.shape == np.asarray(want).shape
    np.testing.assert_array_equal(g, only(interp))


@pytest.mark.parametrize("opset", ["iOS15", "iOS17"])
def test_gather(opset: str) -> None:
    idx = np.array([[2, 0], [1, 3]], np.int32) if opset == "iOS17" else np.array([[-1, 0], [1, -4]], np.int32)
    prog = program({"x": X, "i": idx}, lambda b, x, i: b.gather(x=x, indices=i, axis=1), opset=opset)
    _exact(prog, {"x": X, "i": idx}, np.take(X, idx, axis=1))


def test_gather_with_batch_dims() -> None:
    idx = np.array([[1, 0, 1], [2, 2, 0], [0, 1, 3]], np.int32)
    prog = program({"x": X, "i": idx}, lambda b, x, i: b.gather(x=x, indices=i, axis=1, batch_dims=1), opset="iOS16")
    want = np.stack([X[k][idx[k]] for k in range(3)])
    _exact(prog, {"x": X, "i": idx}, want)


def test_gather_nd_and_along_axis() -> None:
    idx = np.array([[2, 1], [0, -1], [-3, 3]], np.int32)
    prog = program({"x": X, "i": idx}, lambda b, x, i: b.gather_nd(x=x, indices=i), opset="iOS15")
    _exact(prog, {"x": X, "i": idx}, np.stack([X[tuple(r)] for r in idx]))
    idx = np.array([[[1, -1, 0, 2, 3]], [[0, 0, 1, 1, -4]], [[3, 2, 1, 0, 0]]], np.int32)
    prog = program({"x": X, "i": idx}, lambda b, x, i: b.gather_along_axis(x=x, indices=i, axis=1), opset="iOS15")
    _exact(prog, {"x": X, "i": idx}, np.take_along_axis(X, np.where(idx < 0, idx + 4, idx), axis=1))


def _sequential(data: np.ndarray, positions: list[tuple], updates: list, mode: str) -> np.ndarray:
    """MIL's definition: the updates applied one after another in row-major order."""
    out = data.copy()
    for pos, u in zip(positions, updates):
        out[pos] = {"update": lambda a, b: b, "add": np.add, "sub": np.subtract, "mul": np.multiply,
                    "max": np.maximum, "min": np.minimum}[mode](out[pos], u)
    return out


# max and min reductions exist from opset 18 (test_scatter_div_is_refused_and_max_needs_opset_18)
MODES = ["update", "add", "sub", "mul"] + (["max", "min"] if OPSET >= 18 else [])


@pytest.mark.parametrize("mode", MODES)
def test_scatter_along_axis_1d_indices(mode: str) -> None:
    data = X.copy()
    idx = np.array([3, 1, 3], np.int32)  # a duplicate: updates accumulate (add/sub/mul/max/min)
    upd = (np.arange(3 * 3 * 5, dtype=np.float32).reshape(3, 3, 5) - 20) * 0.25
    prog = program({"d": data, "u": upd}, lambda b, d, u: b.scatter(data=d, indices=idx, updates=u, axis=1, mode=mode))
    positions, values = [], []
    for i, j, k in np.ndindex(upd.shape):
        positions.append((i, idx[j], k))
        values.append(upd[i, j, k])
    want = _sequential(data, positions, values, mode)
    if mode == "update":  # duplicates: ONNX leaves the order open; compare only where indices are unique
        got, _ = run_both(prog, {"d": data, "u": upd})
        np.testing.assert_array_equal(only(got)[:, [0, 1, 2]], want[:, [0, 1, 2]])
        return
    _exact(prog, {"d": data, "u": upd}, want)


@pytest.mark.parametrize("mode", MODES)
def test_scatter_along_axis_and_nd(mode: str) -> None:
    data = X.copy()
    idx = np.array([[[0, 2, 1, 0, 3]], [[1, 1, 2, 2, 0]], [[3, 0, 0, 1, 2]]], np.int32)
    upd = np.linspace(-3, 4, 15, dtype=np.float32).reshape(3, 1, 5)
    prog = program({"d": data, "u": upd},
                   lambda b, d, u: b.scatter_along_axis(data=d, indices=idx, updates=u, axis=1, mode=mode))
    positions = [(i, idx[i, 0, k], k) for i in range(3) for k in range(5)]
    _exact(prog, {"d": data, "u": upd}, _sequential(data, positions, upd.reshape(-1), mode))
    nd_idx = np.array([[0, 1], [2, 3], [1, 0]], np.int32)
    nd_upd = np.linspace(1, 2, 15, dtype=np.float32).reshape(3, 5)
    prog = program({"d": data, "u": nd_upd},
                   lambda b, d, u: b.scatter_nd(data=d, indices=nd_idx, updates=u, mode=mode))
    _exact(prog, {"d": data, "u": nd_upd}, _sequential(data, [tuple(r) for r in nd_idx], list(nd_upd), mode))


def test_scatter_div_is_refused_and_max_needs_opset_18() -> None:
    from converter.backends.onnx import program_to_onnx
    from converter.errors import UnsupportedError

    idx = np.array([0], np.int32)
    upd = np.ones((1, 4, 5), np.float32)
    prog = program({"d": X}, lambda b, d: b.scatter(data=d, indices=idx, updates=upd, axis=0, mode="div"))
    with pytest.raises(UnsupportedError, match="mode 'div'"):
        program_to_onnx(prog)
    prog = program({"d": X}, lambda b, d: b.scatter(data=d, indices=idx, updates=upd, axis=0, mode="max"))
    with pytest.raises(UnsupportedError, match="needs opset 18"):
        program_to_onnx(prog, opset=17)


def test_select_one_hot_non_zero_band_part() -> None:
    cond = X > 0
    y = -X
    _exact(program({"c": cond, "x": X, "y": y}, lambda b, c, x, y: b.select(cond=c, a=x, b=y)),
           {"c": cond, "x": X, "y": y}, np.where(cond, X, y))
    idx = np.array([[0, 3], [-1, 5], [2, -5]], np.int32)  # -1, 5 and -5 are out of range: all off_value
    prog = program({"i": idx}, lambda b, i: b.one_hot(indices=i, one_hot_vector_size=5, axis=1, on_value=2.5,
                                                      off_value=-1.0))
    want = np.full((3, 5, 2), -1.0, np.float32)
    for r in range(3):
        for c in range(2):
            if 0 <= idx[r, c] < 5:
                want[r, idx[r, c], c] = 2.5
    _exact(prog, {"i": idx}, want)
    z = np.array([[0.0, np.nan, -0.0], [3.0, 0.0, -1.0]], np.float32)
    _exact(program({"z": z}, lambda b, z: b.non_zero(x=z)), {"z": z}, np.argwhere(z != 0).astype(np.int32))
    m = np.arange(2 * 4 * 5, dtype=np.float32).reshape(2, 4, 5) + 1
    m[0, 3, 0] = np.nan  # outside the band: replaced by 0
    rows, cols = np.arange(4)[:, None], np.arange(5)[None, :]
    for lower, upper in ((1, 2), (-1, 0), (0, -1)):
        keep = ((lower < 0) | (rows - cols <= lower)) & ((upper < 0) | (cols - rows <= upper))
        _exact(program({"m": m}, lambda b, m, lo=lower, up=upper: b.band_part(x=m, lower=lo, upper=up)), {"m": m},
               np.where(keep, m, 0))


def test_slice_update() -> None:
    upd = np.arange(2 * 2 * 5, dtype=np.float32).reshape(2, 2, 5) + 100
    prog = program({"x": X, "u": upd},
                   lambda b, x, u: b.slice_update(x=x, update=u, begin=[0, -1, 0], end=[3, 0, 5], stride=[2, -2, 1]),
                   opset="iOS18")
    want = X.copy()
    want[0:3:2, -1:0:-2, 0:5] = upd
    _exact(prog, {"x": X, "u": upd}, want)


def test_gather_with_batch_dims_below_axis() -> None:
    """tf.gather(x, idx, axis=2, batch_dims=1): per batch b, np.take(x[b], idx[b], axis=1)."""
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    idx = np.array([[[3, 0], [1, 1], [2, 3]], [[0, 2], [3, 3], [1, 0]]], np.int32)  # [2, 3, 2]
    prog = program({"x": x, "i": idx}, lambda b, x, i: b.gather(x=x, indices=i, axis=2, batch_dims=1), opset="iOS16")
    want = np.stack([np.take(x[k], idx[k], axis=1) for k in range(2)])
    _exact(prog, {"x": x, "i": idx}, want)
