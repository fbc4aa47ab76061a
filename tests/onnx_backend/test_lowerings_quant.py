"""Compressed weights and quantize / dequantize through the ONNX backend, run by onnxruntime.

Oracles: the MIL formulas written here (``scale * (q - zero_point)`` per tensor / axis / block,
``lut[index]`` with LSB-first packed indices, row-major sparse scatter, ``clip(round_half_even(x /
scale) + zp)``) and our interpreter on the same program. Each weight is added to a run-time input
so the compressed constant feeds a real node, and the ONNX form chosen (DequantizeLinear / Gather
/ a materialized initializer) is pinned.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

from converter.backends.onnx import program_to_onnx
from converter.ir.bitpack import pack_subbyte

from .helpers import assert_close, only, op_types, program, run_both

RNG = np.random.default_rng(5)


def _add_input(shape: tuple[int, ...], weight_fn, opset: str = "iOS18"):  # noqa: ANN001, ANN202
    x = RNG.standard_normal(shape).astype(np.float32)
    return program({"x": x}, lambda b, x: b.add(x=x, y=weight_fn(b)), opset=opset), x


def _check(prog, x: np.ndarray, want: np.ndarray, opset: int = 21) -> None:  # noqa: ANN001
    got, interp = run_both(prog, {"x": x}, opset=opset)
    assert_close(only(got), x + want, 1e-6)
    assert_close(only(got), only(interp), 1e-6)


@pytest.mark.parametrize("per_axis", [False, True])
@pytest.mark.parametrize("qdt", ["uint8", "int8"])
def test_affine_dequantize(per_axis: bool, qdt: str) -> None:
    q = RNG.integers(0 if qdt == "uint8" else -128, 128, (3, 4)).astype(qdt)
    if per_axis:
        scale, zp = np.array([0.5, 0.25, -1.5], np.float32), np.array([3, 0, 7], qdt)
        want = (q.astype(np.float32) - zp[:, None]) * scale[:, None]
    else:
        scale, zp = np.float32(0.375), np.asarray(5, qdt)
        want = (q.astype(np.float32) - 5) * 0.375
    prog, x = _add_input((3, 4), lambda b: b.constexpr_affine_dequantize(
        quantized_data=q, scale=scale, zero_point=zp, axis=np.int32(-2 if per_axis else 0)), opset="iOS16")
    _check(prog, x, want)
    assert "DequantizeLinear" in op_types(prog)


def test_affine_dequantize_vector_scale_scalar_zero_point_fp16() -> None:
    q = RNG.integers(0, 256, (2, 5)).astype(np.uint8)
    scale = np.array([0.01, 0.02, 0.03, 0.04, 0.05], np.float16)
    x = RNG.standard_normal((2, 5)).astype(np.float16)
    prog = program({"x": x}, lambda b, x: [b.relu(x=x), b.constexpr_affine_dequantize(
        quantized_data=q, scale=scale, zero_point=np.uint8(128), axis=np.int32(1))], opset="iOS16")
    got, interp = run_both(prog, {"x": x})
    want = ((q.astype(np.float32) - 128) * scale.astype(np.float32)).astype(np.float16)  # rounded once
    (w,) = (v for k, v in got.items() if "relu" not in k)
    np.testing.assert_array_equal(w, want)
    for k in interp:
        np.testing.assert_array_equal(got[k], interp[k])


@pytest.mark.parametrize("layout", ["tensor", "axis", "blocked", "two_axes"])
def test_blockwise_shift_scale_int8(layout: str) -> None:
    data = RNG.integers(-128, 128, (4, 6)).astype(np.int8)
    scale = {"tensor": np.float32([[0.3]]), "axis": np.float32([[0.1], [0.2], [-0.3], [0.4]]),
             "blocked": np.float32([[0.1, 0.7, -0.2]]), "two_axes": np.float32([[0.1, 0.2, 0.3], [0.5, 0.6, 0.7]])
             }[layout]
    offset = np.full(scale.shape, 3, np.int8) + np.arange(scale.size, dtype=np.int8).reshape(scale.shape)
    prog, x = _add_input((4, 6), lambda b: b.constexpr_blockwise_shift_scale(data=data, scale=scale, offset=offset))
    rep = (4 // scale.shape[0], 6 // scale.shape[1])
    want = (data.astype(np.float32) - np.kron(offset, np.ones(rep))) * np.kron(scale, np.ones(rep))
    _check(prog, x, want)
    assert ("DequantizeLinear" in op_types(prog)) == (layout != "two_axes")


def test_blockwise_shift_scale_below_opset_21_is_materialized() -> None:
    data = RNG.integers(-8, 8, (4, 6)).astype(np.int8)
    scale = np.float32([[0.1, 0.7, -0.2]])
    prog, x = _add_input((4, 6), lambda b: b.constexpr_blockwise_shift_scale(data=data, scale=scale))
    _check(prog, x, data * np.kron(scale, np.ones((4, 2))), opset=19)
    assert op_types(prog, opset=19) == ["Add"]


def test_blockwise_shift_scale_int4_stays_int4() -> None:
    data = RNG.integers(-8, 8, (2, 8)).astype(np.int8)
    scale = np.float32([[0.5, 0.25], [1.5, -0.125]])  # blocks of 4 along axis 1, one scale row per data row

    def weight(b):  # noqa: ANN001, ANN202
        return b.constexpr_blockwise_shift_scale(data=b.const(data, "int4"), scale=scale)

    prog, x = _add_input((2, 8), weight)
    _check(prog, x, data * np.kron(scale, np.ones((1, 4))))
    assert TensorProto.INT4 in [t.data_type for t in program_to_onnx(prog).graph.initializer]


def test_blockwise_shift_scale_int4_per_axis_below_opset_21_is_materialized() -> None:
    """INT4 DequantizeLinear exists from opset 21 only."""
    data = RNG.integers(-8, 8, (3, 4)).astype(np.int8)
    scale = np.float32([[0.5], [0.25], [-1.5]])
    prog, x = _add_input((3, 4), lambda b: b.constexpr_blockwise_shift_scale(data=b.const(data, "int4"), scale=scale))
    _check(prog, x, data * scale, opset=17)
    assert TensorProto.INT4 not in [t.data_type for t in program_to_onnx(prog, opset=17).graph.initializer]
    assert "DequantizeLinear" in op_types(prog, opset=21)


@pytest.mark.parametrize("nbits", [2, 4, 8])
def test_lut_to_dense_ios16_is_a_gather(nbits: int) -> None:
    lut = (RNG.standard_normal(1 << nbits) * 3).astype(np.float32)
    codes = RNG.integers(0, 1 << nbits, (3, 5)).astype(np.uint8)
    prog, x = _add_input((3, 5), lambda b: b.constexpr_lut_to_dense(
        indices=pack_subbyte(codes.reshape(-1), nbits), lut=lut, shape=np.array([3, 5], np.uint32)), opset="iOS16")
    _check(prog, x, lut[codes])
    assert "Gather" in op_types(prog)


def test_lut_to_dense_ios18_scalar_table_and_vector_table() -> None:
    lut = RNG.standard_normal((1, 1, 16, 1)).astype(np.float32)
    codes = RNG.integers(0, 16, (4, 6))
    prog, x = _add_input((4, 6), lambda b: b.constexpr_lut_to_dense(indices=b.const(codes, "uint4"), lut=lut))
    _check(prog, x, lut[0, 0, codes, 0])
    assert "Gather" in op_types(prog)
    # per-block tables of vectors (2 blocks on axis 0, vectors of 2 along axis 1): materialized
    vlut = RNG.standard_normal((2, 1, 4, 2)).astype(np.float32)
    vcodes = RNG.integers(0, 4, (4, 3))
    want = np.concatenate([vlut[0, 0][vcodes[:2]].reshape(2, 6), vlut[1, 0][vcodes[2:]].reshape(2, 6)])
    prog, x = _add_input((4, 6), lambda b: b.constexpr_lut_to_dense(indices=b.const(vcodes, "uint2"), lut=vlut,
                                                                     vector_axis=np.int32(1)))
    _check(prog, x, want)
    assert op_types(prog) == ["Add"]


def test_sparse_to_dense_is_materialized() -> None:
    mask = RNG.integers(0, 2, (3, 4)).astype(np.uint8)
    values = RNG.standard_normal(int(mask.sum())).astype(np.float32)
    want = np.zeros((3, 4), np.float32)
    want[mask != 0] = values
    prog, x = _add_input((3, 4), lambda b: b.constexpr_sparse_to_dense(
        nonzero_data=values, mask=pack_subbyte(mask.reshape(-1), 1), shape=np.array([3, 4], np.uint32)),
        opset="iOS16")
    _check(prog, x, want)
    # iOS18: a uint1 mask out of constexpr_lut_to_sparse, read only by constexpr_sparse_to_dense
    lut = np.float32([1.5, -2.0, 0.25, 4.0]).reshape(1, 1, 4, 1)
    nz = RNG.integers(0, 4, int(mask.sum()))

    def weight(b):  # noqa: ANN001, ANN202
        m, v = b.constexpr_lut_to_sparse(indices_mask=b.const(mask, "uint1"), indices_nonzero_data=b.const(nz, "uint2"),
                                         lut=lut)
        return b.constexpr_sparse_to_dense(nonzero_data=v, mask=m)

    want = np.zeros((3, 4), np.float32)
    want[mask != 0] = lut.reshape(-1)[nz]
    prog, x = _add_input((3, 4), weight)
    _check(prog, x, want)


def test_constexpr_cast_keeps_fp16_storage() -> None:
    w = RNG.standard_normal((2, 3)).astype(np.float16)
    prog, x = _add_input((2, 3), lambda b: b.constexpr_cast(source_val=w, output_dtype="fp32"), opset="iOS16")
    _check(prog, x, w.astype(np.float32))
    assert "Cast" in op_types(prog)


X = np.array([[-3.3, -0.2, 0.7, 2.6], [10.1, -12.4, 1.9, 0.06], [40.2, -40.3, 3.3, -7.7]], np.float32)


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_quantize_dequantize_per_tensor(dtype: str) -> None:
    zp, scale = (np.int8(-3) if dtype == "int8" else np.uint8(100)), np.float32(0.25)

    def body(b, x):  # noqa: ANN001, ANN202
        q = b.quantize(input=x, scale=scale, zero_point=zp, output_dtype=dtype, name="q")
        return [q, b.dequantize(input=q, scale=np.float32(0.5), zero_point=zp, name="dq")]

    prog = program({"x": X}, body, opset="iOS17")
    got, interp = run_both(prog, {"x": X})
    lo, hi = (-128, 127) if dtype == "int8" else (0, 255)
    q = np.clip(np.rint(X / 0.25) + float(zp), lo, hi)
    assert q.min() == lo and q.max() == hi
    np.testing.assert_array_equal(got["q"], q.astype(dtype))
    assert_close(got["dq"], (q - float(zp)) * 0.5)
    for k in interp:
        np.testing.assert_array_equal(got[k], interp[k])


def test_quantize_ties_to_even_nan_to_zero_point_and_per_axis() -> None:
    x = np.array([[0.5, 1.5, 2.5, -0.5], [np.nan, np.inf, -np.inf, 3.5], [7.0, -7.0, 0.0, 1.0]], np.float32)
    scale = np.array([1.0, 1.0, 2.0], np.float32)
    zp = np.array([1, -2, 0], np.int8)

    def body(b, x):  # noqa: ANN001, ANN202
        q = b.quantize(input=x, scale=scale, zero_point=zp, axis=np.int32(0), output_dtype="int8", name="q")
        return [q, b.dequantize(input=q, scale=np.float16([0.3, 1.5, -0.7, 2.0]), zero_point=np.int8([3, 0, -1, 5]),
                                axis=np.int32(-1), name="dq")]

    prog = program({"x": x}, body, opset="iOS17")
    got, interp = run_both(prog, {"x": x})
    want_q = np.array([[1, 3, 3, 1], [-2, 127, -128, 2], [4, -4, 0, 0]], np.int8)  # round half to even
    np.testing.assert_array_equal(got["q"], want_q)
    assert got["dq"].dtype == np.float16
    want = ((want_q - np.int8([3, 0, -1, 5]).astype(np.float32)) * np.float16([0.3, 1.5, -0.7, 2.0]).astype(np.float32))
    np.testing.assert_array_equal(got["dq"], want.astype(np.float16))
    for k in interp:
        np.testing.assert_array_equal(got[k], interp[k])
