"""Gather and scatter ops against onnxruntime and the WebNN vectors.

MIL's axis-``scatter`` (1-D indices) is ScatterElements with the indices broadcast along the
axis; MIL modes map onto ONNX reductions (``sub`` adds negated updates, exact in IEEE arithmetic;
``div`` multiplies by reciprocals, so it is compared with a tolerance). ``update`` with duplicate
indices, which ONNX leaves unspecified, and integer ``div`` are checked against the MIL doc's
sequential definition written out in the test.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from onnx import helper

from converter.errors import EvaluationError, TypeInferenceError
from tests.oracles import webnn_vectors
from tests.oracles.onnx_oracle import run_onnx, run_onnx_node

from .harness import Case, assert_close, build_program, run_op
from .oracle_util import DT_ID, assert_exact, i64, random_data, single_op_vectors

ORACLE = {
    "gather": "onnxruntime Gather (batch_dims: Transpose + GatherND(batch_dims) + Transpose) + WebNN gather vectors",
    "gather_along_axis": "onnxruntime GatherElements + WebNN gatherElements vectors",
    "gather_nd": "onnxruntime GatherND(batch_dims) + WebNN gatherND vectors",
    "scatter": "onnxruntime ScatterElements with indices expanded along the axis (reduction per mode)",
    "scatter_along_axis": "onnxruntime ScatterElements (reduction per mode) + WebNN scatterElements vectors",
    "scatter_nd": "onnxruntime ScatterND (reduction per mode) + WebNN scatterND vectors",
}

_MODES = ["update", "add", "sub", "mul", "div", "max", "min"]
_REDUCTION = {"update": "none", "add": "add", "sub": "add", "mul": "mul", "div": "mul", "max": "max", "min": "min"}
_ONNX_UPDATES = {"sub": "Neg", "div": "Reciprocal"}
# smaller magnitudes than the other oracle tests: integers in [-20, 20), floats standard normal times 4
_data = functools.partial(random_data, bound=20, scale=4.0)


def _nonzero(shape: tuple, dt: type, seed: int) -> np.ndarray:
    """Updates safe for div/mul: magnitudes in [1, 3] (int) or [0.5, 2] (float), random signs."""
    rng = np.random.default_rng(seed)
    sign = rng.choice([-1, 1], shape)
    if np.dtype(dt).kind in "iu":
        return (sign * rng.integers(1, 4, shape)).astype(dt)
    return (sign * rng.uniform(0.5, 2.0, shape)).astype(dt)


# ---------------------------------------------------------------------------------------------
# gathers


@pytest.mark.parametrize("dt", [np.float32, np.float16, np.int32], **DT_ID)
@pytest.mark.parametrize("shape,idx_shape,axis", [((5, 4), (3,), 0), ((2, 5, 3), (2, 4), 1), ((2, 3, 4), (), -1),
                                                  ((3, 4), (2, 0), 1), ((6,), (2, 3, 2), 0)], ids=str)
@pytest.mark.parametrize("opset", ["iOS15", "iOS16"])
def test_gather_negative_indices_vs_onnxruntime(shape, idx_shape, axis, dt, opset):
    x = _data(shape, dt)
    n = shape[axis]
    indices = np.random.default_rng(1).integers(-n, n, idx_shape).astype(np.int32)
    got = run_op("gather", {"x": x, "indices": indices}, {"axis": axis}, opset=opset)[0]
    want = run_onnx_node("Gather", {"x": x, "i": indices}, {"axis": axis})[0]
    assert_exact(got, want, f"gather axis {axis}")


@pytest.mark.parametrize("dt,idx_dt", [(np.int8, np.uint8), (np.uint8, np.int8), (np.int16, np.uint16),
                                       (np.uint16, np.int16), (np.float16, np.int32)], ids=str)
def test_gather_ios17_dtypes_vs_onnxruntime(dt, idx_dt):
    x = _data((4, 5), dt)
    indices = np.array([[4, 0], [2, 2]], idx_dt)
    got = run_op("gather", {"x": x, "indices": indices}, {"axis": 1, "validate_indices": True}, opset="iOS17")[0]
    want = run_onnx_node("Gather", {"x": x, "i": indices.astype(np.int64)}, {"axis": 1})[0]
    assert_exact(got, want, "gather iOS17")


def _onnx_batched_gather(x: np.ndarray, indices: np.ndarray, axis: int, b: int) -> np.ndarray:
    """tf.gather(batch_dims=b) as GatherND(batch_dims=b) on x with ``axis`` moved to dim b, then
    the x dims between the batch and the axis moved back in front of the index dims."""
    r, m = x.ndim, indices.ndim - b
    perm_x = list(range(b)) + [axis] + list(range(b, axis)) + list(range(axis + 1, r))
    mid = axis - b
    perm_y = list(range(b)) + list(range(b + m, b + m + mid)) + list(range(b, b + m)) + list(range(b + m + mid, r - 1 + m))
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=perm_x),
             helper.make_node("Unsqueeze", ["i", "last"], ["i1"]),
             helper.make_node("GatherND", ["xt", "i1"], ["y"], batch_dims=b),
             helper.make_node("Transpose", ["y"], ["out"], perm=perm_y)]
    return run_onnx(nodes, {"x": x, "i": indices.astype(np.int64)}, ["out"], {"last": i64([-1])})[0]


@pytest.mark.parametrize("shape,idx_shape,axis,batch_dims", [
    ((2, 5, 3), (2, 4), 1, 1), ((2, 3, 5, 4), (2, 3, 2), 3, 2), ((2, 3, 5, 4), (2, 6), 2, 1),
    ((3, 4), (3,), 1, 1), ((2, 3, 4), (2, 3, 2, 2), 2, -2)], ids=str)
@pytest.mark.parametrize("opset", ["iOS16", "iOS17"])
def test_gather_batch_dims_vs_onnxruntime(shape, idx_shape, axis, batch_dims, opset):
    x = _data(shape, np.float32)
    lo = 0 if opset == "iOS17" else -shape[axis]
    indices = np.random.default_rng(2).integers(lo, shape[axis], idx_shape).astype(np.int32)
    got = run_op("gather", {"x": x, "indices": indices}, {"axis": axis, "batch_dims": batch_dims}, opset=opset)[0]
    b = batch_dims % indices.ndim if batch_dims < 0 else batch_dims
    assert_exact(got, _onnx_batched_gather(x, indices, axis, b), f"gather batch_dims {batch_dims}")


def test_gather_vs_webnn_vectors():
    checked = 0
    for vec, args, opts, out in single_op_vectors("gather"):
        x, indices = vec.inputs[args["input"]], vec.inputs[args["indices"]]
        axis = opts.get("axis", 0)
        if ((indices < -x.shape[axis]) | (indices >= x.shape[axis])).any():
            continue  # WebNN clamps out-of-bound indices; MIL leaves them undefined
        got = run_op("gather", {"x": x, "indices": indices.astype(np.int32)}, {"axis": axis}, opset="iOS16")[0]
        webnn_vectors.assert_ulp(got, vec.expected[out], 0, what=vec.name)
        checked += 1
    assert checked > 30


@pytest.mark.parametrize("dt", [np.float32, np.float16, np.int32], **DT_ID)
@pytest.mark.parametrize("shape,idx_shape,axis", [((3, 4), (5, 4), 0), ((2, 3, 4), (2, 3, 6), -1),
                                                  ((2, 3, 4), (2, 1, 4), 1), ((5,), (0,), 0)], ids=str)
def test_gather_along_axis_vs_onnxruntime(shape, idx_shape, axis, dt):
    x = _data(shape, dt)
    n = shape[axis]
    indices = np.random.default_rng(3).integers(-n, n, idx_shape).astype(np.int32)
    got = run_op("gather_along_axis", {"x": x, "indices": indices}, {"axis": axis})[0]
    want = run_onnx_node("GatherElements", {"x": x, "i": indices}, {"axis": axis})[0]
    assert_exact(got, want, f"gather_along_axis axis {axis}")


def test_gather_along_axis_vs_webnn_vectors():
    checked = 0
    for vec, args, opts, out in single_op_vectors("gatherElements"):
        x, indices = vec.inputs[args["input"]], vec.inputs[args["indices"]]
        axis = opts.get("axis", 0)
        if x.dtype not in (np.float32, np.float16, np.int32):
            continue  # MIL gather_along_axis has no uint32 data
        if ((indices < -x.shape[axis]) | (indices >= x.shape[axis])).any():
            continue  # WebNN clamps out-of-bound indices; MIL leaves them undefined
        got = run_op("gather_along_axis", {"x": x, "indices": indices.astype(np.int32)}, {"axis": axis})[0]
        webnn_vectors.assert_ulp(got, vec.expected[out], 0, what=vec.name)
        checked += 1
    assert checked > 0


@pytest.mark.parametrize("dt", [np.float32, np.float16, np.int32], **DT_ID)
@pytest.mark.parametrize("shape,idx_shape,batch_dims,opset", [
    ((4, 5, 3), (6, 2), 0, "iOS15"), ((4, 5, 3), (2, 3, 3), 0, "iOS15"), ((4, 5), (3, 1), 0, "iOS15"),
    ((2, 5, 3), (2, 4, 1), 1, "iOS16"), ((2, 3, 5, 4), (2, 3, 2, 2), 2, "iOS16"), ((2, 5, 3), (2, 2), 1, "iOS17")],
    ids=str)
def test_gather_nd_vs_onnxruntime(shape, idx_shape, batch_dims, opset, dt):
    x = _data(shape, dt)
    k = idx_shape[-1]
    sizes = np.array(shape[batch_dims:batch_dims + k])
    rng = np.random.default_rng(4)
    lo = np.zeros_like(sizes) if opset == "iOS17" else -sizes
    indices = rng.integers(lo, sizes, idx_shape).astype(np.int32)
    params = {"batch_dims": batch_dims} if opset != "iOS15" else {}
    got = run_op("gather_nd", {"x": x, "indices": indices}, params, opset=opset)[0]
    want = run_onnx_node("GatherND", {"x": x, "i": indices.astype(np.int64)}, {"batch_dims": batch_dims})[0]
    assert_exact(got, want, f"gather_nd batch_dims {batch_dims}")


def test_gather_nd_vs_webnn_vectors():
    checked = 0
    for vec, args, _, out in single_op_vectors("gatherND"):
        x, indices = vec.inputs[args["input"]], vec.inputs[args["indices"]]
        sizes = np.array(x.shape[:indices.shape[-1]])
        if ((indices < -sizes) | (indices >= sizes)).any():
            continue  # WebNN clamps out-of-bound indices; MIL leaves them undefined
        got = run_op("gather_nd", {"x": x, "indices": indices.astype(np.int32)}, opset="iOS16")[0]
        webnn_vectors.assert_ulp(got, vec.expected[out], 0, what=vec.name)
        checked += 1
    assert checked > 0


@pytest.mark.parametrize("op,indices", [("gather", [[0, -1]]), ("gather_along_axis", [[0, -1, 1, 2]]),
                                        ("gather_nd", [[0, -1]])])
def test_ios17_negative_index_is_out_of_range(op, indices):
    """From iOS17 negative indices are out of bounds: evaluate refuses them (iOS16 wraps them)."""
    x = _data((3, 4), np.float32)
    indices = np.array(indices, np.int32)
    assert run_op(op, {"x": x, "indices": indices}, opset="iOS16")  # wraps
    with pytest.raises(EvaluationError, match="out of range"):
        run_op(op, {"x": x, "indices": indices}, opset="iOS17")


@pytest.mark.parametrize("op", ["gather", "gather_along_axis", "gather_nd", "scatter", "scatter_along_axis",
                                "scatter_nd"])
def test_validate_indices_rejects_constant_out_of_range(op):
    x = _data((3, 4), np.float32)
    indices = {"gather": np.array([3], np.int32), "gather_along_axis": np.array([[0, 3, 1, 1]], np.int32),
               "gather_nd": np.array([[0, 4]], np.int32), "scatter": np.array([3], np.int32),
               "scatter_along_axis": np.array([[0, 3, 1, 1]], np.int32), "scatter_nd": np.array([[3, 0]], np.int32)}[op]
    if op.startswith("gather"):
        inputs = {"x": x}
    else:
        upd_shape = {"scatter": (1, 4), "scatter_along_axis": (1, 4), "scatter_nd": (1,)}[op]
        inputs = {"data": x, "updates": np.ones(upd_shape, np.float32)}
    build_program(Case(op, inputs, {"indices": indices}, opset="iOS17"))  # not validated: compiles
    with pytest.raises(TypeInferenceError, match="validate_indices"):
        build_program(Case(op, inputs, {"indices": indices, "validate_indices": True}, opset="iOS17"))


# ---------------------------------------------------------------------------------------------
# scatters


def _onnx_scatter(onnx_op: str, data: np.ndarray, indices: np.ndarray, updates: np.ndarray, mode: str,
                  **attrs) -> np.ndarray:
    """onnxruntime, or the ONNX reference evaluator for fp16 reductions (onnxruntime has none)."""
    prep = _ONNX_UPDATES.get(mode, "Identity")
    nodes = [helper.make_node(prep, ["u"], ["u2"]),
             helper.make_node(onnx_op, ["d", "i", "u2"], ["out"], reduction=_REDUCTION[mode], **attrs)]
    engine = "reference" if data.dtype == np.float16 and mode != "update" else "ort"
    return run_onnx(nodes, {"d": data, "i": indices.astype(np.int64), "u": updates}, ["out"], engine=engine)[0]


def _close(got: np.ndarray, want: np.ndarray, mode: str, what: str) -> None:
    if mode == "div" and got.dtype.kind == "f":  # x / u against x * (1 / u)
        tol = 4e-3 if got.dtype == np.float16 else 1e-6
        assert_close(got, want, rtol=tol, atol=tol, what=what)
    else:
        assert_exact(got, want, what)


_FLOAT_DTYPES = [np.float32, np.float16]


def _mode_dtypes() -> list[tuple[str, type]]:
    """Every mode with fp32 and fp16; int32 for all but div (checked by the sequential rule)."""
    return [(m, dt) for m in _MODES for dt in (np.float32, np.float16, np.int32) if not (m == "div" and dt == np.int32)]


@pytest.mark.parametrize("mode,dt", _mode_dtypes(), ids=lambda v: v if isinstance(v, str) else np.dtype(v).name)
@pytest.mark.parametrize("shape,axis,indices", [((5, 3), 0, [4, 0, 2]), ((2, 4, 3), 1, [1, 1, -1, 0, 1]),
                                                ((2, 3, 4), -1, [0, 3]), ((3, 2), 0, [])], ids=str)
def test_scatter_vs_onnxruntime(shape, axis, indices, mode, dt):
    idx = np.array(indices, np.int32)
    if mode == "update":  # duplicates are unspecified in ONNX: see the sequential-rule test
        idx = np.array(list(dict.fromkeys(i % shape[axis] for i in indices)), np.int32)
    ax = axis % len(shape)
    upd_shape = shape[:ax] + idx.shape + shape[ax + 1:]
    data, updates = _data(shape, dt, 1), _nonzero(upd_shape, dt, 2)
    got = run_op("scatter", {"data": data, "indices": idx, "updates": updates}, {"axis": axis, "mode": mode})[0]
    bshape = [1] * len(shape)
    bshape[ax] = len(idx)
    full = np.broadcast_to(idx.reshape(bshape), upd_shape)
    want = _onnx_scatter("ScatterElements", data, full, updates, mode, axis=ax)
    _close(got, want, mode, f"scatter {mode}")


@pytest.mark.parametrize("mode,dt", _mode_dtypes(), ids=lambda v: v if isinstance(v, str) else np.dtype(v).name)
@pytest.mark.parametrize("shape,idx_shape,axis", [((4, 3), (6, 3), 0), ((2, 3, 5), (2, 3, 4), -1),
                                                  ((3, 4), (3, 2), 1)], ids=str)
def test_scatter_along_axis_vs_onnxruntime(shape, idx_shape, axis, mode, dt):
    ax = axis % len(shape)
    n = shape[ax]
    rng = np.random.default_rng(5)
    if mode == "update":  # distinct positions along the axis (duplicates: see the sequential-rule test)
        idx_shape = idx_shape[:ax] + (min(n, idx_shape[ax]),) + idx_shape[ax + 1:]
        idx = np.argsort(rng.random(idx_shape[:ax] + (n,) + idx_shape[ax + 1:]), axis=ax)
        idx = np.take(idx, range(idx_shape[ax]), axis=ax)
    else:
        idx = rng.integers(-n, n, idx_shape)
    idx = idx.astype(np.int32)
    data, updates = _data(shape, dt, 1), _nonzero(idx_shape, dt, 2)
    got = run_op("scatter_along_axis", {"data": data, "indices": idx, "updates": updates},
                 {"axis": axis, "mode": mode})[0]
    want = _onnx_scatter("ScatterElements", data, idx, updates, mode, axis=axis)
    _close(got, want, mode, f"scatter_along_axis {mode}")


@pytest.mark.parametrize("mode,dt", _mode_dtypes(), ids=lambda v: v if isinstance(v, str) else np.dtype(v).name)
@pytest.mark.parametrize("shape,indices", [((4, 3), [[1], [3], [1]]), ((2, 3, 4), [[0, 2], [1, -1], [0, 2]]),
                                           ((3, 4), [[[2, 3]], [[0, 0]]]), ((5,), [[-1], [0], [2], [-1]])], ids=str)
def test_scatter_nd_vs_onnxruntime(shape, indices, mode, dt):
    idx = np.array(indices, np.int32)
    if mode == "update":  # keep the first of each duplicate row (duplicates: see the sequential-rule test)
        flat = idx.reshape(-1, idx.shape[-1]) % np.array(shape[:idx.shape[-1]])
        _, first = np.unique(flat, axis=0, return_index=True)
        idx = flat[np.sort(first)].astype(np.int32)
    k = idx.shape[-1]
    data, updates = _data(shape, dt, 1), _nonzero(idx.shape[:-1] + shape[k:], dt, 2)
    got = run_op("scatter_nd", {"data": data, "indices": idx, "updates": updates}, {"mode": mode})[0]
    want = _onnx_scatter("ScatterND", data, idx, updates, mode)
    _close(got, want, mode, f"scatter_nd {mode}")


def _sequential(data: np.ndarray, writes: list[tuple[tuple, object]], mode: str) -> np.ndarray:
    """The MIL doc's definition: the updates are applied one after another, in order."""
    out = data.copy()
    for pos, u in writes:
        out[pos] = u if mode == "update" else int(int(out[pos]) / int(u))  # int div truncates toward 0
    return out


@pytest.mark.parametrize("op", ["scatter", "scatter_along_axis", "scatter_nd"])
@pytest.mark.parametrize("mode", ["update", "div"])
def test_scatter_duplicates_follow_the_sequential_rule(op, mode):
    """``update``: the last of duplicate writes wins; int32 ``div``: each quotient truncates."""
    data = np.array([[100, -75, 9], [64, 7, -128]], np.int32)
    if op == "scatter":  # axis 1, indices [2, 0, 2]
        idx = np.array([2, 0, 2], np.int32)
        upd = np.array([[3, -2, 4], [5, 2, -3]], np.int32)
        writes = [((r, idx[j]), upd[r, j]) for r in range(2) for j in range(3)]
        params = {"axis": 1}
    elif op == "scatter_along_axis":  # axis 0
        idx = np.array([[1, 0, 1], [1, 0, 1]], np.int32)
        upd = np.array([[3, -2, 4], [5, 2, -3]], np.int32)
        writes = [((idx[r, c], c), upd[r, c]) for r in range(2) for c in range(3)]
        params = {"axis": 0}
    else:
        idx = np.array([[1, 2], [0, 0], [1, 2], [1, 2]], np.int32)
        upd = np.array([3, -2, 4, -3], np.int32)
        writes = [(tuple(idx[j]), upd[j]) for j in range(4)]
        params = {}
    got = run_op(op, {"data": data, "indices": idx, "updates": upd}, {**params, "mode": mode})[0]
    assert_exact(got, _sequential(data, writes, mode), f"{op} {mode}")


def test_scatter_along_axis_vs_webnn_vectors():
    checked = 0
    for vec, args, opts, out in single_op_vectors("scatterElements"):
        data, idx, upd = (vec.inputs[args[k]] for k in ("input", "indices", "updates"))
        got = run_op("scatter_along_axis", {"data": data, "indices": idx.astype(np.int32), "updates": upd},
                     {"axis": opts.get("axis", 0), "mode": "update"})[0]
        webnn_vectors.assert_ulp(got, vec.expected[out], 0, what=vec.name)
        checked += 1
    assert checked > 0


def test_scatter_nd_vs_webnn_vectors():
    checked = 0
    for vec, args, _, out in single_op_vectors("scatterND"):
        data, idx, upd = (vec.inputs[args[k]] for k in ("input", "indices", "updates"))
        got = run_op("scatter_nd", {"data": data, "indices": idx.astype(np.int32), "updates": upd},
                     {"mode": "update"})[0]
        webnn_vectors.assert_ulp(got, vec.expected[out], 0, what=vec.name)
        checked += 1
    assert checked > 0


@pytest.mark.parametrize("op", ["scatter", "scatter_along_axis", "scatter_nd"])
def test_scatter_ios17_negative_index_is_out_of_range(op):
    data = _data((3, 4), np.float32)
    idx, upd = {"scatter": (np.array([-1], np.int32), np.ones((1, 4), np.float32)),
                "scatter_along_axis": (np.array([[-1, 0, 0, 0]], np.int32), np.ones((1, 4), np.float32)),
                "scatter_nd": (np.array([[-1, 0]], np.int32), np.ones((1,), np.float32))}[op]
    assert run_op(op, {"data": data, "indices": idx, "updates": upd}, opset="iOS16")  # wraps
    with pytest.raises(EvaluationError, match="out of range"):
        run_op(op, {"data": data, "indices": idx, "updates": upd}, opset="iOS17")
