"""avg_pool, max_pool and l2_pool against onnxruntime (AveragePool, MaxPool, LpPool p=2) and PyTorch."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import torch

from converter.ir.interpreter import run
from converter.ir.symexpr import ceildiv, evaluate
from converter.ir.types import Symbol, TensorType, dtype
from tests.oracles.onnx_oracle import run_onnx_node

from .harness import Case, assert_close, build_program, run_op

ORACLE = {
    "avg_pool": "onnxruntime AveragePool (count_include_pad, ceil_mode, auto_pad), PyTorch avg_poolNd",
    "max_pool": "onnxruntime MaxPool (ceil_mode, auto_pad), PyTorch max_poolNd (NaN propagation)",
    "l2_pool": "onnxruntime LpPool with p=2",
}

_ONNX_OP = {"avg_pool": "AveragePool", "max_pool": "MaxPool", "l2_pool": "LpPool"}
_AUTO_PAD = {"valid": "VALID", "same": "SAME_UPPER", "same_lower": "SAME_LOWER"}

# id, x shape, MIL params
_POOL = [
    ("2d-valid", (2, 3, 7, 6), {"kernel_sizes": [2, 3], "pad_type": "valid"}),
    ("2d-same-stride2-odd", (1, 2, 7, 8), {"kernel_sizes": [3, 2], "strides": [2, 2], "pad_type": "same"}),
    ("2d-same_lower", (1, 2, 6, 7), {"kernel_sizes": [2, 4], "strides": [1, 2], "pad_type": "same_lower"}),
    ("2d-custom-asymmetric", (1, 3, 6, 6), {"kernel_sizes": [3, 3], "strides": [2, 1], "pad_type": "custom",
                                            "pad": [2, 0, 1, 2]}),
    ("2d-ceil-padded", (1, 2, 8, 7), {"kernel_sizes": [3, 2], "strides": [2, 2], "pad_type": "custom",
                                      "pad": [1, 1, 0, 0], "ceil_mode": True}),
    ("1d-ceil", (2, 3, 8), {"kernel_sizes": [3], "strides": [2], "pad_type": "valid", "ceil_mode": True}),
    ("1d-same", (2, 3, 9), {"kernel_sizes": [4], "strides": [3], "pad_type": "same"}),
    ("3d", (1, 2, 4, 5, 6), {"kernel_sizes": [2, 3, 2], "strides": [2, 1, 2], "pad_type": "custom",
                             "pad": [0, 1, 1, 1, 1, 0]}),
]


def _cases():
    for op in _ONNX_OP:
        for case_id, shape, params in _POOL:
            if op == "l2_pool" and len(shape) > 4:
                continue  # l2_pool is 1-d and 2-d only
            for exclude in ((False, True) if op == "avg_pool" else (None,)):
                for dt in ("float32", "float16"):
                    yield pytest.param(op, shape, params, exclude, dt,
                                       id=f"{op}-{case_id}{'' if exclude is None else f'-exclude={exclude}'}-{dt}")


def _onnx_attrs(op: str, params: dict, exclude: bool | None, n: int) -> dict:
    attrs = {"kernel_shape": params["kernel_sizes"], "strides": params.get("strides", [1] * n),
             "ceil_mode": int(params.get("ceil_mode", False))}
    if params["pad_type"] == "custom":
        attrs["pads"] = params["pad"][0::2] + params["pad"][1::2]
    else:
        attrs["auto_pad"] = _AUTO_PAD[params["pad_type"]]
    if op == "avg_pool":
        attrs["count_include_pad"] = int(not exclude)
    if op == "l2_pool":
        attrs["p"] = 2
    return attrs


@pytest.mark.parametrize("op,shape,params,exclude,dt", list(_cases()))
def test_pool_vs_onnxruntime(op: str, shape: tuple, params: dict, exclude: bool | None, dt: str):
    rng = np.random.default_rng(zlib.crc32(f"{op}{shape}{dt}".encode()))
    x = rng.standard_normal(shape).astype(dt)
    full = dict(params, exclude_padding_from_average=exclude) if exclude is not None else params
    opset = "iOS16" if params["pad_type"] == "same_lower" else "iOS15"
    got = run_op(op, {"x": x}, full, opset=opset)[0]
    assert got.dtype == np.dtype(dt)
    want = run_onnx_node(_ONNX_OP[op], {"x": x.astype(np.float32)}, _onnx_attrs(op, params, exclude, x.ndim - 2))[0]
    tol = dict(rtol=2e-3, atol=2e-3) if dt == "float16" else dict(rtol=1e-5, atol=1e-6)
    assert_close(got, want.astype(dt), **tol, what=op)


_TORCH = {
    "max_pool": lambda x, k, s, p: torch.nn.functional.max_pool2d(x, k, s, p),
    "avg_pool": lambda x, k, s, p: torch.nn.functional.avg_pool2d(x, k, s, p, count_include_pad=True),
}


@pytest.mark.parametrize("op", sorted(_TORCH))
def test_pool_special_values_vs_torch(op: str):
    """NaN propagates through max and mean; +-inf win or dominate; -0.0 and huge values pass through."""
    x = np.array([[np.nan, 1, -np.inf, 2], [3, np.inf, 0.0, -0.0], [3e38, 3e38, -1, -2], [5, 6, -np.inf, -7]],
                 np.float32)[None, None]
    params = {"kernel_sizes": [2, 2], "strides": [1, 1], "pad_type": "custom", "pad": [1, 1, 1, 1]}
    got = run_op(op, {"x": x}, params)[0]
    want = _TORCH[op](torch.from_numpy(x), 2, 1, 1).numpy()
    assert_close(got, want, what=op)


def test_avg_pool_ceil_mode_divisor_vs_torch():
    """The ceil_mode overhang is not counted even when the explicit padding is."""
    x = np.arange(1, 31, dtype=np.float32).reshape(1, 1, 5, 6)
    params = {"kernel_sizes": [3, 3], "strides": [2, 2], "pad_type": "custom", "pad": [1, 1, 1, 1], "ceil_mode": True}
    for include in (True, False):
        got = run_op("avg_pool", {"x": x}, dict(params, exclude_padding_from_average=not include))[0]
        want = torch.nn.functional.avg_pool2d(torch.from_numpy(x), 3, 2, 1, ceil_mode=True, count_include_pad=include)
        assert_close(got, want.numpy(), what=f"count_include_pad={include}")


@pytest.mark.parametrize("op", ["max_pool", "avg_pool"])
def test_pool_ceil_mode_without_padding_keeps_the_documented_last_window(op: str):
    """MIL drops a last ceil_mode window that starts past the input only when there is padding
    (the documented condition); PyTorch always drops it. The windows both keep agree."""
    x = np.arange(1, 6, dtype=np.float32).reshape(1, 1, 5)
    got = run_op(op, {"x": x}, {"kernel_sizes": [1], "strides": [3], "pad_type": "valid", "ceil_mode": True})[0]
    assert got.shape == (1, 1, 3)  # floor((5 - 1 + 2) / 3) + 1
    fn = torch.nn.functional.max_pool1d if op == "max_pool" else torch.nn.functional.avg_pool1d
    want = fn(torch.from_numpy(x), 1, 3, ceil_mode=True).numpy()
    assert_close(got[..., :2], want)


def test_max_pool_3d_vs_torch():
    x = np.random.default_rng(3).standard_normal((2, 2, 5, 6, 7)).astype(np.float32)
    got = run_op("max_pool", {"x": x}, {"kernel_sizes": [2, 3, 3], "strides": [1, 2, 2], "pad_type": "custom",
                                       "pad": [1, 1, 1, 1, 0, 0]})[0]
    want = torch.nn.functional.max_pool3d(torch.from_numpy(x), (2, 3, 3), (1, 2, 2), (1, 1, 0))
    assert_close(got, want.numpy())


@pytest.mark.parametrize("op", sorted(_ONNX_OP))
def test_pool_symbolic_spatial_dims_vs_onnxruntime(op: str):
    """Stride 1 'same' keeps symbolic H/W, stride 2 gives ceil(H / 2) and ceil(W / 2), which evaluate
    to the sizes of ONNX's output; values match ONNX at run time."""
    x = np.random.default_rng(4).standard_normal((1, 2, 9, 7)).astype(np.float32)
    h, w = Symbol("H"), Symbol("W")
    for strides in ([1, 1], [2, 2]):
        params = {"kernel_sizes": [3, 2], "strides": strides, "pad_type": "same"}
        case = Case(op, {"x": x}, params, input_types={"x": TensorType(dtype("fp32"), (1, 2, h, w))})
        prog, feeds = build_program(case)
        shape = prog.main.outputs[0].type.shape
        if strides == [1, 1]:
            assert shape == (1, 2, h, w)
        else:
            assert shape[2:] == (ceildiv(h, 2), ceildiv(w, 2))
        got = list(run(prog, feeds).values())[0]
        attrs = _onnx_attrs(op, params, False if op == "avg_pool" else None, 2)
        want = run_onnx_node(_ONNX_OP[op], {"x": x}, attrs)[0]
        assert [evaluate(d, {"H": 9, "W": 7}) for d in shape] == list(want.shape)
        assert_close(got, want, rtol=1e-5, atol=1e-6, what=str(strides))
