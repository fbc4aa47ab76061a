"""Value oracles for the normalize family's layers that onnxmltools cannot check (issue 7: every
(kind, subtype) pair compared against an oracle we did not write, with parameters that differ).

- the N-D reductions reduceL1 ... reduceLogSumExp: onnxruntime on a one-node ONNX graph of the
  same reduction (ReduceL1 ... ReduceLogSumExp, opset 21: ``axes`` an input, ``keepdims`` an
  attribute, no axes = every axis). The spec's words: "axes: dimensions along which to perform
  reduction; keepDims: if True, keep the reduced dimensions (value will be 1), otherwise, reduced
  dimensions are squeezed; reduceAll: ignore the "axes" parameter, perform reduction along all
  axes"; "Negative indexing is supported". A reduction to a scalar is [1] in Core ML (tensors of
  rank >= 1) and () in ONNX: the oracle's scalar is compared as [1].
- reduce ARGMAX (legacy): onnxruntime's ArgMax (first index of the maximum; the inputs here have
  no ties, on which the spec says nothing). onnxmltools' own ONNX for it is invalid (an ``axes``
  attribute on ArgMax, which onnxruntime rejects): shown below.
- reduce LOGSUM (legacy): the spec gives no formula; coremltools' builder says "epsilon: number
  that is added to the input when 'logsum' function is applied" and coremltools' device tests of
  the layer (test_numpy_nn_layers.py, get_numpy_predictions_reduce, run against Core ML) expect
  ``np.sum(np.log(X + epsilon), axis)``: that formula, with a non-default epsilon. (onnxmltools
  maps LOGSUM to ONNX ReduceLogSum, log(sum(x)): tests/nn/test_normalize.py shows it.)
- l2normalize with a non-default epsilon: the spec's formula, x_i / sqrt(sum(x_i^2) + epsilon),
  "the square root of the sum of squares of all elements of input", leading axes before -3 being
  batch. (onnxmltools' ONNX has no epsilon and normalizes over C only.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.nn_models.coverage import oracle_checks
from tests.oracles.onnx_oracle import run_onnx_node

from .common import builder, compare_with_oracle, convert_and_run, onnx_oracle

RNG = np.random.default_rng(11)
SHAPE = (2, 3, 4, 5)  # distinct sizes: reducing the wrong axis changes the shape
SIGNED = (RNG.uniform(0.5, 1.5, SHAPE) * RNG.choice([-1.0, 1.0], SHAPE)).astype(np.float32)
POSITIVE = RNG.uniform(0.5, 1.5, SHAPE).astype(np.float32)

# (axes, keepDims, reduceAll): one axis; negative and unsorted multiple axes, squeezed and kept;
# every axis listed (a scalar without reduceAll); reduceAll, kept and squeezed (axes then ignored)
REDUCE_CASES = [
    ((1,), True, False),
    ((-1, 1), False, False),
    ((3, 0, -2), True, False),
    ((0, 1, 2, 3), False, False),
    ((), True, True),
    ((0,), False, True),
]

# Core ML kind -> (coremltools builder method, ONNX op, input, rtol)
ND_REDUCTIONS = {
    "reduceL1": ("add_reduce_l1", "ReduceL1", SIGNED, 1e-5),
    "reduceL2": ("add_reduce_l2", "ReduceL2", SIGNED, 1e-5),
    "reduceMax": ("add_reduce_max", "ReduceMax", SIGNED, 1e-6),
    "reduceMin": ("add_reduce_min", "ReduceMin", SIGNED, 1e-6),
    "reduceSum": ("add_reduce_sum", "ReduceSum", SIGNED, 1e-5),
    "reduceProd": ("add_reduce_prod", "ReduceProd", SIGNED, 1e-4),  # 120 factors: rounding order
    "reduceMean": ("add_reduce_mean", "ReduceMean", SIGNED, 1e-5),
    "reduceLogSum": ("add_reduce_logsum", "ReduceLogSum", POSITIVE, 1e-5),
    "reduceSumSquare": ("add_reduce_sumsquare", "ReduceSumSquare", SIGNED, 1e-5),
    "reduceLogSumExp": ("add_reduce_logsumexp", "ReduceLogSumExp", SIGNED, 1e-5),
}


def _onnx_reduce(op: str, x: np.ndarray, axes: tuple[int, ...], keep: bool, reduce_all: bool) -> np.ndarray:
    """onnxruntime's ``op`` over ``axes`` (every axis when ``reduce_all``); a scalar as [1]."""
    inits = {} if reduce_all else {"axes": np.array(axes, np.int64)}
    (out,) = run_onnx_node(op, {"x": x}, {"keepdims": int(keep)}, initializers=inits)
    return out.reshape(1) if out.ndim == 0 else out


def _check_nd_reduction(kind: str, tmp: Path) -> None:
    method, onnx_op, x, rtol = ND_REDUCTIONS[kind]
    for axes, keep, reduce_all in REDUCE_CASES:
        b = builder({"x": SHAPE}, nd=True)
        getattr(b, method)("r", "x", "y", axes=list(axes) or None, keepdims=keep, reduce_all=reduce_all)
        layer = getattr(b.spec.neuralNetwork.layers[-1], kind)
        assert list(layer.axes) == list(axes) and layer.keepDims == keep and layer.reduceAll == reduce_all
        outs, _ = convert_and_run(b.spec, {"x": x}, tmp)
        want = _onnx_reduce(onnx_op, x, axes, keep, reduce_all)
        compare_with_oracle(outs["y"], want, oracle="onnxruntime", rtol=rtol, atol=1e-6,
                            err_msg=f"{kind} axes={axes} keepDims={keep} reduceAll={reduce_all}")


@oracle_checks("reduceL1")
def test_reduce_l1_matches_onnxruntime(tmp_path: Path) -> None:
    _check_nd_reduction("reduceL1", tmp_path)


@oracle_checks("reduceL2")
def test_reduce_l2_matches_onnxruntime(tmp_path: Path) -> None:
    _check_nd_reduction("reduceL2", tmp_path)


@oracle_checks("reduceMax")
def test_reduce_max_matches_onnxruntime(tmp_path: Path) -> None:
    _check_nd_reduction("reduceMax", tmp_path)


@oracle_checks("reduceMin")
def test_reduce_min_matches_onnxruntime(tmp_path: Path) -> None:
    _check_nd_reduction("reduceMin", tmp_path)


@oracle_checks("reduceSum")
def test_reduce_sum_matches_onnxruntime(tmp_path: Path) -> None:
    _check_nd_reduction("reduceSum", tmp_path)


@oracle_checks("reduceProd")
def test_reduce_prod_matches_onnxruntime(tmp_path: Path) -> None:
    _check_nd_reduction("reduceProd", tmp_path)


@oracle_checks("reduceMean")
def test_reduce_mean_matches_onnxruntime(tmp_path: Path) -> None:
    _check_nd_reduction("reduceMean", tmp_path)


@oracle_checks("reduceLogSum")
def test_reduce_log_sum_matches_onnxruntime(tmp_path: Path) -> None:
    """log(sum(x)) over the axes (coremltools' device test of the layer expects the same:
    ``np.log(np.sum(x, axis=axes, keepdims=keep_dims))``)."""
    _check_nd_reduction("reduceLogSum", tmp_path)


@oracle_checks("reduceSumSquare")
def test_reduce_sum_square_matches_onnxruntime(tmp_path: Path) -> None:
    _check_nd_reduction("reduceSumSquare", tmp_path)


@oracle_checks("reduceLogSumExp")
def test_reduce_log_sum_exp_matches_onnxruntime(tmp_path: Path) -> None:
    _check_nd_reduction("reduceLogSumExp", tmp_path)


# -- legacy reduce: ARGMAX and LOGSUM --------------------------------------------------------------

_LEGACY_AXIS = {"CHW": (-3, -2, -1), "HW": (-2, -1), "C": (-3,), "H": (-2,), "W": (-1,)}


@oracle_checks("reduce.mode=ARGMAX", "reduce.axis=C", "reduce.axis=H", "reduce.axis=W")
def test_reduce_argmax_matches_onnxruntime(tmp_path: Path) -> None:
    """ARGMAX over C, H and W, in a rank-5 network ([C, H, W]) and in N-D networks of rank 3 to 5:
    the index of the maximum (as a float), reduced axis kept as 1, against onnxruntime's ArgMax."""
    for shape, nd in (((3, 4, 5), False), ((3, 4, 5), True), (SHAPE, True), ((2,) + SHAPE, True)):
        x = RNG.permutation(int(np.prod(shape))).reshape(shape).astype(np.float32)  # no ties
        for axis in ("C", "H", "W"):
            b = builder({"x": shape}, nd=nd)
            b.add_reduce("r", "x", "y", axis=axis, mode="argmax")
            outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
            (want,) = run_onnx_node("ArgMax", {"x": x}, {"axis": _LEGACY_AXIS[axis][0], "keepdims": 1})
            assert np.asarray(outs["y"]).dtype == np.float32
            compare_with_oracle(outs["y"], want.astype(np.float32), oracle="onnxruntime", rtol=0, atol=0,
                                err_msg=f"{shape} nd={nd} axis {axis}")


def test_onnxmltools_argmax_is_not_valid_onnx(tmp_path: Path) -> None:
    """Why ARGMAX is checked against a graph built here: onnxmltools writes ArgMax with an ``axes``
    attribute (ONNX's ArgMax has ``axis``), which onnxruntime refuses to load."""
    b = builder({"x": (3, 4, 5)})
    b.add_reduce("r", "x", "y", axis="C", mode="argmax")
    with pytest.raises(Exception, match="axes"):
        onnx_oracle(b.spec, {"x": np.zeros((3, 4, 5), np.float32)})


@oracle_checks("reduce.mode=LOGSUM", "reduce.axis=CHW", "reduce.axis=HW", "reduce.axis=C", "reduce.axis=H",
               "reduce.axis=W")
@pytest.mark.parametrize("eps", [0.25, 0.05])
def test_reduce_logsum_coremltools_device_formula(eps: float, tmp_path: Path) -> None:
    """LOGSUM = sum(log(x + epsilon)) over the axis (coremltools' device-test reference, module
    docstring), for every axis, rank-5 and N-D networks; epsilon non-default and large enough to
    move every result (x in [0.5, 1.5])."""
    for shape, nd in (((3, 4, 5), False), (SHAPE, True)):
        x = RNG.uniform(0.5, 1.5, shape).astype(np.float32)
        for axis, axes in _LEGACY_AXIS.items():
            b = builder({"x": shape}, nd=nd)
            b.add_reduce("r", "x", "y", axis=axis, mode="logsum", epsilon=eps)
            outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
            want = np.sum(np.log(x.astype(np.float64) + np.float32(eps)), axis=axes, keepdims=True)
            compare_with_oracle(outs["y"], want, oracle="spec formula", rtol=1e-5, atol=1e-5,
                                err_msg=f"{shape} axis {axis}")


# -- l2normalize -----------------------------------------------------------------------------------


@oracle_checks("l2normalize")
@pytest.mark.parametrize("eps", [0.01, 0.3])
@pytest.mark.parametrize("shape,nd", [((3, 4, 5), False), ((3, 2, 2), True), ((2, 3, 2, 2), True),
                                      ((2, 2, 3, 2, 2), True)], ids=str)
def test_l2normalize_spec_formula(shape: tuple[int, ...], nd: bool, eps: float, tmp_path: Path) -> None:
    """The spec: x_i / sqrt(sum x_i^2 + epsilon), the sum over the last three axes (C, H, W) of
    each batch item. Inputs small enough (sum of squares ~ 0.01) that epsilon moves the result."""
    x = (RNG.standard_normal(shape) * 0.03).astype(np.float32)
    b = builder({"x": shape}, nd=nd)
    b.add_l2_normalize("l2", "x", "y", epsilon=eps)
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64**2).sum(axis=(-3, -2, -1), keepdims=True) + np.float32(eps))
    compare_with_oracle(outs["y"], want, oracle="spec formula", rtol=1e-5, atol=1e-7)

