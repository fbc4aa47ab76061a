"""Reductions, arg-reductions, cumsum, topk and argsort against onnxruntime, torch and the WebNN vectors.

Where the oracles part ways with MIL's (coremltools') choices, the test uses the one that agrees
and says why: onnxruntime's ReduceMax/Min and ArgMax/Min skip NaN and its int32 sums saturate,
while MIL (numpy) propagates NaN and wraps; torch does both like MIL, so NaN and overflow cases
use torch.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from tests.oracles import webnn_vectors
from tests.oracles.onnx_oracle import run_onnx_node

from .harness import assert_close, run_op
from .oracle_util import single_op_vectors

_ONNX_REDUCE = {
    "reduce_sum": "ReduceSum",
    "reduce_prod": "ReduceProd",
    "reduce_mean": "ReduceMean",
    "reduce_max": "ReduceMax",
    "reduce_min": "ReduceMin",
    "reduce_l1_norm": "ReduceL1",
    "reduce_l2_norm": "ReduceL2",
    "reduce_sum_square": "ReduceSumSquare",
    "reduce_log_sum": "ReduceLogSum",
    "reduce_log_sum_exp": "ReduceLogSumExp",
}

ORACLE = {
    **{op: f"onnxruntime {onnx} (opset 18 axes input) + WebNN vectors; torch for NaN/int32 overflow"
       for op, onnx in _ONNX_REDUCE.items()},
    "reduce_argmax": "onnxruntime ArgMax (select_last_index=0); torch for NaN",
    "reduce_argmin": "onnxruntime ArgMin (select_last_index=0); torch for NaN",
    "cumsum": "onnxruntime CumSum + WebNN cumulativeSum vectors",
    "topk": "onnxruntime TopK (stable ties)",
    "argsort": "onnxruntime TopK with k = axis size",
}

_SHAPE = (2, 3, 4)
# (axes, keep_dims): None = all axes, () = no axis (elementwise part only)
_AXES = [(None, False), (None, True), ((1,), False), ((0, -1), True), ((-2, 0), False), ((), False)]


def _axes_id(axes: tuple | None, keep: bool) -> str:
    text = "all" if axes is None else ("none" if not axes else "_".join(map(str, axes)))
    return f"axes={text}{'-keep' if keep else ''}"


def _reduce_input(op: str, dt: str, rng: np.random.Generator) -> np.ndarray:
    if dt == "int32":
        if op == "reduce_log_sum":
            return rng.integers(1, 5, _SHAPE).astype(np.int32)
        return rng.integers(-2 if op == "reduce_prod" else -9, 3 if op == "reduce_prod" else 9, _SHAPE).astype(np.int32)
    x = rng.standard_normal(_SHAPE) * 3
    if op == "reduce_log_sum":
        x = np.abs(x) + 0.1
    elif op == "reduce_prod":
        x = rng.uniform(0.5, 1.5, _SHAPE) * rng.choice([-1, 1], _SHAPE)
    return x.astype(np.float32)


def _onnx_reduce(op: str, x: np.ndarray, axes: tuple | None, keep: bool, engine: str = "ort") -> np.ndarray:
    attrs = {"keepdims": int(keep)}
    inputs = {"x": x}
    if axes is not None:
        inputs["axes"] = np.array(axes, np.int64)
        attrs["noop_with_empty_axes"] = 1  # ONNX otherwise reads [] as "all axes"
    return run_onnx_node(_ONNX_REDUCE[op], inputs, attrs, engine=engine)[0]


def _mil_params(axes: tuple | None, keep: bool) -> dict:
    params: dict = {"keep_dims": keep}
    if axes is not None:
        params["axes"] = np.array(axes, np.int32)
    return params


@pytest.mark.parametrize(
    "op,dt,axes,keep",
    [(op, dt, axes, keep) for op in _ONNX_REDUCE for dt in ("float32", "float16", "int32") for axes, keep in _AXES],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_reduce_vs_onnxruntime(op: str, dt: str, axes: tuple | None, keep: bool, request):
    rng = np.random.default_rng(abs(hash(request.node.name)) % 2**32)
    x = _reduce_input(op, dt, rng)
    if dt == "float16":
        x = x.astype(np.float16)
    got = run_op(op, {"x": x}, _mil_params(axes, keep))[0]
    if dt == "float16":
        # fp16 accumulates in fp32 and rounds once: the fp32 oracle result rounded to fp16.
        want = _onnx_reduce(op, x.astype(np.float32), axes, keep).astype(np.float16)
        assert_close(got, want, rtol=1e-3, atol=1e-3, what=f"{op} fp16 {_axes_id(axes, keep)}")
    else:
        if op == "reduce_log_sum_exp" and dt == "int32" and axes != ():
            want = _torch_int32_log_sum_exp(x, axes, keep)
        else:
            want = _onnx_reduce(op, x, axes, keep)
        assert_close(got, want, rtol=2e-6, atol=1e-6, what=f"{op} {dt} {_axes_id(axes, keep)}")


def _torch_int32_log_sum_exp(x: np.ndarray, axes: tuple | None, keep: bool) -> np.ndarray:
    """int32 log_sum_exp truncated toward zero from the real value (coremltools' value inference).

    onnxruntime adds the integer maximum to a truncated log term instead, which differs by one
    whenever the result is negative and not an integer.
    """
    dims = tuple(range(x.ndim)) if axes is None else axes
    return torch.logsumexp(torch.from_numpy(x).double(), dim=dims, keepdim=keep).trunc().to(torch.int32).numpy()


_SPECIAL_ROWS = np.array([
    [1.0, np.nan, 3.0, -2.0],
    [np.inf, 1.0, 2.0, 0.5],
    [-np.inf, 1.0, 2.0, 0.5],
    [np.inf, -np.inf, 1.0, 2.0],
    [-0.0, -0.0, -0.0, -0.0],
    [-np.inf, -np.inf, -np.inf, -np.inf],
    [3.0e38, 3.0e38, 1.0, -1.0],
], np.float32)


@pytest.mark.parametrize("op", sorted(set(_ONNX_REDUCE) - {"reduce_max", "reduce_min", "reduce_log_sum"}))
def test_reduce_special_values_vs_onnxruntime(op: str):
    got = run_op(op, {"x": _SPECIAL_ROWS}, {"axes": [1]})[0]
    want = _onnx_reduce(op, _SPECIAL_ROWS, (1,), False)
    assert_close(got, want, what=op)
    assert np.signbit(got[4]) == np.signbit(want[4]), f"{op}: sign of the reduction of -0.0s"


def test_reduce_log_sum_special_values_vs_onnxruntime():
    x = np.abs(_SPECIAL_ROWS)
    x[0, 1] = np.nan
    x[5] = 0.0  # log(0) = -inf
    got = run_op("reduce_log_sum", {"x": x}, {"axes": [1]})[0]
    assert_close(got, _onnx_reduce("reduce_log_sum", x, (1,), False), what="reduce_log_sum")


@pytest.mark.filterwarnings("ignore:Mean of empty slice:RuntimeWarning")  # onnx.reference's np.mean
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("op,dt", [(op, dt) for op in _ONNX_REDUCE for dt in ("float32", "int32")
                                   if not (op == "reduce_mean" and dt == "int32")])
def test_reduce_empty_set_vs_onnx(op: str, dt: str):
    # Reducing a size-0 axis gives ONNX's identities; the mean of nothing is NaN (onnx.reference;
    # onnxruntime returns 0 there, and an int32 NaN has no value, so that case is not checked).
    x = np.zeros((2, 0, 3), dt)
    got = run_op(op, {"x": x}, {"axes": [1]})[0]
    want = _onnx_reduce(op, x, (1,), False, engine="reference" if op == "reduce_mean" else "ort")
    assert_close(got, want, what=f"{op} {dt} over an empty axis")


@pytest.mark.parametrize("op,torch_fn", [("reduce_max", torch.amax), ("reduce_min", torch.amin)])
def test_reduce_max_min_special_values_vs_torch(op: str, torch_fn):
    # onnxruntime's ReduceMax/Min skip NaN; MIL (numpy, coremltools) and torch propagate it.
    got = run_op(op, {"x": _SPECIAL_ROWS}, {"axes": [-1]})[0]
    want = torch_fn(torch.from_numpy(_SPECIAL_ROWS), dim=-1).numpy()
    assert_close(got, want, what=op)


_TORCH_INT32 = {
    "reduce_sum": lambda t: torch.sum(t, dim=1, dtype=torch.int32),
    "reduce_prod": lambda t: torch.prod(t, dim=1, dtype=torch.int32),
    "reduce_sum_square": lambda t: torch.sum(t * t, dim=1, dtype=torch.int32),
    "reduce_l1_norm": lambda t: torch.sum(torch.abs(t), dim=1, dtype=torch.int32),
}


@pytest.mark.parametrize("op", sorted(_TORCH_INT32))
def test_reduce_int32_overflow_wraps_vs_torch(op: str):
    # onnxruntime saturates int32 sums; numpy, coremltools and torch wrap modulo 2**32.
    x = np.array([[2**30, 2**30, 2**30, 7], [-(2**31), -1, 3, 2**16 + 1], [46341, 46341, -5, 65537]], np.int32)
    got = run_op(op, {"x": x}, {"axes": [1]})[0]
    want = _TORCH_INT32[op](torch.from_numpy(x)).numpy()
    assert_close(got, want, what=op)


# ---------------------------------------------------------------------------------------------
# reduce_argmax / reduce_argmin

_ARG_ONNX = {"reduce_argmax": "ArgMax", "reduce_argmin": "ArgMin"}


@pytest.mark.parametrize(
    "op,dt,axis,keep,opset",
    [(op, dt, axis, keep, "iOS15") for op in _ARG_ONNX for dt in ("float32", "float16", "int32")
     for axis, keep in ((-1, False), (0, True), (1, False), (-2, True))]
    + [(op, "float32", 1, False, "iOS17") for op in _ARG_ONNX],
    ids=lambda v: v if isinstance(v, str) else str(v),
)
def test_arg_reduce_vs_onnxruntime(op: str, dt: str, axis: int, keep: bool, opset: str):
    rng = np.random.default_rng(7)
    x = rng.integers(-3, 4, (3, 4, 5)).astype(dt)  # few distinct values: many ties
    params: dict = {"axis": axis, "keep_dims": keep}
    if opset == "iOS17":
        params["output_dtype"] = "uint16"
    got = run_op(op, {"x": x}, params, opset=opset)[0]
    want = run_onnx_node(_ARG_ONNX[op], {"x": x}, {"axis": axis, "keepdims": int(keep), "select_last_index": 0})[0]
    assert got.dtype == (np.uint16 if opset == "iOS17" else np.int32)
    assert_close(got, want.astype(got.dtype), what=f"{op} {dt} axis={axis}")


@pytest.mark.parametrize("op,torch_fn", [("reduce_argmax", torch.argmax), ("reduce_argmin", torch.argmin)])
def test_arg_reduce_nan_vs_torch(op: str, torch_fn):
    # onnxruntime ignores NaN here; numpy, coremltools and torch take the first NaN as the extreme.
    got = run_op(op, {"x": _SPECIAL_ROWS}, {"axis": 1})[0]
    assert_close(got, torch_fn(torch.from_numpy(_SPECIAL_ROWS), dim=1).numpy().astype(np.int32), what=op)


# ---------------------------------------------------------------------------------------------
# cumsum


@pytest.mark.parametrize(
    "dt,axis,exclusive,reverse",
    list(itertools.product(("float32", "float16", "int32"), (0, 2, -1), (False, True), (False, True))),
    ids=lambda v: v if isinstance(v, str) else str(v),
)
def test_cumsum_vs_onnxruntime(dt: str, axis: int, exclusive: bool, reverse: bool):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((3, 4, 5)) * 10).astype(dt) if dt != "int32" else rng.integers(-50, 50, (3, 4, 5)).astype(dt)
    got = run_op("cumsum", {"x": x}, {"axis": axis, "exclusive": exclusive, "reverse": reverse})[0]
    feed = x.astype(np.float32) if dt == "float16" else x  # fp32 accumulation, rounded once
    want = run_onnx_node("CumSum", {"x": feed, "axis": np.array(axis, np.int32)},
                         {"exclusive": int(exclusive), "reverse": int(reverse)})[0].astype(x.dtype)
    tol = dict(rtol=1e-3, atol=1e-2) if dt == "float16" else dict(rtol=1e-6, atol=1e-5)
    assert_close(got, want, **tol, what=f"cumsum {dt} axis={axis}")


def test_cumsum_int32_overflow_wraps_vs_onnxruntime():
    x = np.array([2**31 - 1, 1, 2**31 - 1, 5], np.int32)
    got = run_op("cumsum", {"x": x})[0]
    assert_close(got, run_onnx_node("CumSum", {"x": x, "axis": np.array(0, np.int32)})[0], what="cumsum wrap")


def test_cumsum_vs_webnn_vectors():
    checked = 0
    for vec, args, options, output in single_op_vectors("cumulativeSum"):
        x = vec.inputs[args["input"]]
        axis = args["axis"]
        got = run_op("cumsum", {"x": x}, {"axis": axis, "exclusive": options.get("exclusive", False),
                                           "reverse": options.get("reversed", False)})[0]
        budget = x.shape[axis] - 1 if x.dtype == np.float32 else 0
        webnn_vectors.assert_ulp(got, vec.expected[output], budget, what=vec.name)
        checked += 1
    assert checked == 4


# ---------------------------------------------------------------------------------------------
# topk / argsort


def _onnx_topk(x: np.ndarray, k: int, axis: int, ascending: bool) -> tuple[np.ndarray, np.ndarray]:
    feed = x.astype(np.int32) if x.dtype == np.uint16 else x  # onnxruntime has no uint16 TopK
    values, idx = run_onnx_node("TopK", {"x": feed, "k": np.array([k], np.int64)},
                                {"axis": axis, "largest": int(not ascending), "sorted": 1}, n_outputs=2)
    return values.astype(x.dtype), idx


_TOPK_CASES = [
    ("iOS15", "float32", 3, -1, False), ("iOS15", "float32", 2, 0, True), ("iOS15", "float16", 4, 1, False),
    ("iOS15", "int32", 5, -1, True), ("iOS16", "float32", 1, 1, False), ("iOS16", "int32", 3, -2, False),
    ("iOS17", "int8", 2, -1, False), ("iOS17", "uint8", 3, 1, True), ("iOS17", "int16", -1, -1, False),
    ("iOS17", "uint16", 2, 0, False), ("iOS17", "float16", -1, 1, True),
]


@pytest.mark.parametrize("opset,dt,k,axis,ascending", _TOPK_CASES, ids=lambda v: str(v))
def test_topk_vs_onnxruntime(opset: str, dt: str, k: int, axis: int, ascending: bool):
    rng = np.random.default_rng(11)
    lo = 0 if dt.startswith("uint") else -4
    x = rng.integers(lo, lo + 8, (3, 4, 6)).astype(dt)  # ties everywhere
    if dt.startswith("float"):
        x[0, 0, :3] = [-0.0, 0.0, -0.0]  # -0.0 and 0.0 tie
    params: dict = {"k": k, "axis": axis, "ascending": ascending}
    if opset == "iOS17":
        params["output_indices_dtype"] = "uint16" if dt == "int8" else "int32"
    values, idx = run_op("topk", {"x": x}, params, opset=opset)
    want_values, want_idx = _onnx_topk(x, x.shape[axis] if k == -1 else k, axis, ascending)
    assert_close(values, want_values, what="topk values")
    assert idx.dtype == (np.uint16 if params.get("output_indices_dtype") == "uint16" else np.int32)
    assert_close(idx, want_idx.astype(idx.dtype), what="topk indices")


def test_topk_values_only_vs_onnxruntime():
    x = np.random.default_rng(5).standard_normal((4, 7)).astype(np.float32)
    (values,) = run_op("topk", {"x": x}, {"k": 3, "return_indices": False}, opset="iOS16")
    assert_close(values, _onnx_topk(x, 3, -1, False)[0], what="topk values only")


@pytest.mark.parametrize(
    "dt,axis,ascending",
    list(itertools.product(("float32", "float16", "int32"), (0, -1), (False, True))),
    ids=lambda v: str(v),
)
def test_argsort_vs_onnxruntime(dt: str, axis: int, ascending: bool):
    rng = np.random.default_rng(13)
    x = rng.integers(-3, 3, (5, 9)).astype(dt)
    if dt != "int32":
        x[1, :4] = [-0.0, 0.0, np.inf, -np.inf]
    got = run_op("argsort", {"x": x}, {"axis": axis, "ascending": ascending})[0]
    want = _onnx_topk(x, x.shape[axis], axis, ascending)[1]
    assert_close(got, want.astype(np.int32), what=f"argsort {dt}")


# ---------------------------------------------------------------------------------------------
# WebNN conformance vectors

_WEBNN_REDUCE = {
    "reduceL1": "reduce_l1_norm", "reduceL2": "reduce_l2_norm", "reduceLogSum": "reduce_log_sum",
    "reduceLogSumExp": "reduce_log_sum_exp", "reduceMax": "reduce_max", "reduceMean": "reduce_mean",
    "reduceMin": "reduce_min", "reduceProduct": "reduce_prod", "reduceSum": "reduce_sum",
    "reduceSumSquare": "reduce_sum_square",
}
# ULP budget as a function of N, the number of reduced elements (the README's table).
_WEBNN_ULP = {
    "reduceL1": lambda n: n, "reduceProduct": lambda n: n, "reduceSum": lambda n: n,
    "reduceL2": lambda n: 2 * n + 1, "reduceMean": lambda n: n + 2, "reduceLogSum": lambda n: n + 18,
    "reduceLogSumExp": lambda n: 2 * n + 18, "reduceSumSquare": lambda n: 2 * n,
    "reduceMax": lambda n: 0, "reduceMin": lambda n: 0,
}


@pytest.mark.parametrize("webnn_op", sorted(_WEBNN_REDUCE))
def test_reduce_vs_webnn_vectors(webnn_op: str):
    op = _WEBNN_REDUCE[webnn_op]
    checked = 0
    for vec, args, options, output in single_op_vectors(webnn_op):
        x = vec.inputs[args["input"]]
        if x.dtype not in (np.float32, np.float16, np.int32):
            continue  # MIL reductions take fp16, fp32, int32 only
        axes = options.get("axes")
        got = run_op(op, {"x": x}, _mil_params(None if axes is None else tuple(axes),
                                                 options.get("keepDimensions", False)))[0]
        n = int(np.prod([x.shape[a] for a in (range(x.ndim) if axes is None else axes)]))
        webnn_vectors.assert_ulp(got, vec.expected[output], _WEBNN_ULP[webnn_op](n), what=vec.name)
        checked += 1
    assert checked > 0


# ---------------------------------------------------------------------------------------------
# type inference rejects what MIL rejects

_X = np.zeros((2, 3, 6), np.float32)
_INVALID = [
    ("reduce_sum", {"axes": [3]}, "iOS15", "out of range"),
    ("reduce_mean", {"axes": [1, -2]}, "iOS15", "repeat"),
    ("reduce_argmax", {"axis": -4}, "iOS15", "out of range"),
    ("reduce_argmin", {"output_dtype": "int64"}, "iOS17", "int32, uint16"),
    ("cumsum", {"axis": 3}, "iOS15", "out of range"),
    ("topk", {"k": 7}, "iOS15", "larger than the axis size"),
    ("topk", {"k": -1}, "iOS16", "k must be >= 0"),
    ("topk", {"return_indices": False, "output_indices_dtype": "int32"}, "iOS17", "only be set when return_indices"),
    ("argsort", {"axis": 5}, "iOS15", "out of range"),
]


@pytest.mark.parametrize("op,params,opset,match", _INVALID, ids=lambda v: v if isinstance(v, str) else None)
def test_invalid_parameters_are_rejected(op: str, params: dict, opset: str, match: str):
    from converter.errors import TypeInferenceError

    with pytest.raises(TypeInferenceError, match=match):
        run_op(op, {"x": _X}, params, opset=opset)


def test_arg_reduce_of_scalar_is_rejected():
    from converter.errors import TypeInferenceError

    with pytest.raises(TypeInferenceError, match="rank >= 1"):
        run_op("reduce_argmax", {"x": np.float32(1.0)})
