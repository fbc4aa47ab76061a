"""quantize / dequantize (iOS17) as float layers, checked against the formulas of the MIL ops
written here: dequantize ``(x - zero_point) * scale``, quantize
``clip(round(x / scale) + zero_point, lo, hi)`` (inputs avoid exact .5 ties: the round layer's tie
rule is unspecified)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from .helpers import assert_close, layer_kinds, program, run_nn

X = np.array([[-3.3, -0.2, 0.7, 2.6], [10.1, -12.4, 1.9, 0.06], [40.2, -40.3, 3.3, -7.7]], np.float32)


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_quantize_dequantize_per_tensor(tmp_path: Path, dtype: str) -> None:
    zp, scale = (np.int8(-3) if dtype == "int8" else np.uint8(100)), np.float32(0.25)

    def body(b, x):
        q = b.quantize(input=x, scale=scale, zero_point=zp, output_dtype=dtype, name="q")
        return [b.dequantize(input=q, scale=np.float32(0.5), zero_point=zp, name="dq")]

    path = tmp_path / "m.mlmodel"
    (got,) = run_nn(program({"x": X}, body, opset="iOS17"), {"x": X}, path).values()
    lo, hi = (-128, 127) if dtype == "int8" else (0, 255)
    q = np.clip(np.rint(X / 0.25) + float(zp), lo, hi)  # clips on both sides for these values
    assert q.min() == lo and q.max() == hi
    assert_close(got, (q - float(zp)) * 0.5)
    assert layer_kinds(path) == {"divideBroadcastable": 1, "loadConstantND": 1, "round": 1, "add": 2, "clip": 1,
                                 "multiply": 1}


def test_quantize_dequantize_per_axis(tmp_path: Path) -> None:
    scale = np.array([0.5, 0.125, 2.0], np.float32)
    zp = np.array([1, -2, 0], np.int8)
    dq_scale = np.array([0.3, 1.5, -0.7, 2.0], np.float32)
    dq_zp = np.array([3, 0, -1, 5], np.int8)

    def body(b, x):
        q = b.quantize(input=x, scale=scale, zero_point=zp, axis=np.int32(0), output_dtype="int8", name="q")
        return [b.dequantize(input=q, scale=dq_scale, zero_point=dq_zp, axis=np.int32(-1), name="dq")]

    (got,) = run_nn(program({"x": X}, body, opset="iOS17"), {"x": X}, tmp_path / "m.mlmodel").values()
    q = np.clip(np.rint(X / scale[:, None]) + zp[:, None], -128, 127)
    assert_close(got, (q - dq_zp) * dq_scale)


def test_dequantize_without_zero_point_is_one_layer(tmp_path: Path) -> None:
    def body(b, x):
        q = b.quantize(input=x, scale=np.float32(0.1), output_dtype="uint8", name="q")
        return [b.dequantize(input=q, scale=np.float32(0.1), name="dq")]

    x = np.abs(X)
    path = tmp_path / "m.mlmodel"
    (got,) = run_nn(program({"x": x}, body, opset="iOS17"), {"x": x}, path).values()
    assert_close(got, np.clip(np.rint(x / np.float32(0.1)), 0, 255) * np.float32(0.1))
    assert layer_kinds(path)["multiply"] == 1 and "add" not in layer_kinds(path)
