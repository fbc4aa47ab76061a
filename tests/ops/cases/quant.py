"""Registry cases: constexpr_* decompression (iOS16 packed, iOS18 unpacked sub-byte) and
quantize / dequantize (iOS17)."""

import numpy as np

from tests.ops.harness import Case

_rng = np.random.default_rng(3)


def pack_lsb_first(values: np.ndarray, nbits: int) -> np.ndarray:
    """Pack unsigned ``nbits`` fields LSB first into bytes (the iOS16 layout)."""
    bits = ((np.asarray(values).reshape(-1, 1) >> np.arange(nbits)) & 1).astype(np.uint8).reshape(-1)
    return np.packbits(bits, bitorder="little")


def _consts(op: str, **typed):
    """A build function making each parameter a const, ``(array, "dtype")`` for sub-byte dtypes."""
    def build(b):
        vals = {k: b.const(*v) if isinstance(v, tuple) else v for k, v in typed.items()}
        return list(b.add_op(op, vals).outputs)
    return build


_idx16 = _rng.integers(0, 16, (3, 4))
_mask = _rng.integers(0, 2, (4, 6)).astype(np.uint8)
_nnz = int(_mask.sum())

CASES = [
    Case("constexpr_affine_dequantize", params={
        "quantized_data": _rng.integers(0, 255, (2, 3)).astype(np.uint8),
        "zero_point": np.array([1, 128, 3], np.uint8), "scale": np.array([0.5, 0.25, 2.0], np.float32),
        "axis": np.int32(1)}, opset="iOS16", id="per_axis"),
    Case("constexpr_affine_dequantize", params={
        "quantized_data": _rng.integers(-128, 127, (4,)).astype(np.int8),
        "zero_point": np.float32(0.5), "scale": np.float16(0.1), "axis": np.int32(-1)}, opset="iOS16",
         id="fp32_zero_point"),
    Case("constexpr_cast", params={"source_val": _rng.standard_normal((2, 3)).astype(np.float16),
                                   "output_dtype": "fp32"}, opset="iOS16"),
    Case("constexpr_cast", params={"source_val": _rng.standard_normal((3,)).astype(np.float16),
                                   "output_dtype": "fp32"}, opset="iOS18", id="iOS18"),
    Case("constexpr_lut_to_dense", params={
        "indices": pack_lsb_first(_idx16, 4), "lut": np.arange(16, dtype=np.float32) * 0.5,
        "shape": np.array([3, 4], np.uint32)}, opset="iOS16", id="packed"),
    Case("constexpr_lut_to_dense", opset="iOS18", id="per_block", build=_consts(
        "constexpr_lut_to_dense", indices=(_rng.integers(0, 4, (6, 2)), "uint2"),
        lut=_rng.standard_normal((2, 1, 4, 1)).astype(np.float16))),
    Case("constexpr_lut_to_dense", opset="iOS18", id="vector", build=_consts(
        "constexpr_lut_to_dense", indices=(_rng.integers(0, 2, (2, 2, 2)), "uint1"),
        lut=np.arange(6, dtype=np.int8).reshape(1, 1, 1, 2, 3), vector_axis=np.int32(1))),
    Case("constexpr_sparse_to_dense", params={
        "nonzero_data": np.arange(1, 4, dtype=np.float32), "mask": pack_lsb_first(np.array([0, 1, 1, 0, 1]), 1),
        "shape": np.array([5], np.uint32)}, opset="iOS16", id="packed"),
    Case("constexpr_sparse_to_dense", opset="iOS18", id="int4", build=_consts(
        "constexpr_sparse_to_dense", nonzero_data=(_rng.integers(-8, 8, (_nnz,)), "int4"), mask=(_mask, "uint1"))),
    Case("constexpr_blockwise_shift_scale", opset="iOS18", id="int4_offset", build=_consts(
        "constexpr_blockwise_shift_scale", data=(_rng.integers(-8, 8, (4, 6)), "int4"),
        scale=_rng.random((2, 3)).astype(np.float32), offset=(_rng.integers(-8, 8, (2, 3)), "int4"))),
    Case("constexpr_blockwise_shift_scale", opset="iOS18", id="uint8", build=_consts(
        "constexpr_blockwise_shift_scale", data=_rng.integers(0, 255, (4, 6)).astype(np.uint8),
        scale=_rng.random((4, 1)).astype(np.float16))),
    Case("constexpr_lut_to_sparse", opset="iOS18", id="vector", build=_consts(
        "constexpr_lut_to_sparse", indices_mask=(_mask, "uint1"),
        indices_nonzero_data=(_rng.integers(0, 4, (_nnz,)), "uint2"),
        lut=_rng.standard_normal((1, 1, 4, 2)).astype(np.float32), vector_axis=np.int32(0))),
    Case("constexpr_sparse_blockwise_shift_scale", opset="iOS18", id="uint4", build=_consts(
        "constexpr_sparse_blockwise_shift_scale", data_mask=(_mask, "uint1"),
        nonzero_data=(_rng.integers(0, 16, (_nnz,)), "uint4"), scale=_rng.random((1, 6)).astype(np.float16),
        offset=_rng.random((1, 6)).astype(np.float16))),
    Case("quantize", {"input": _rng.standard_normal((2, 3)).astype(np.float32) * 10},
         {"scale": np.array([0.1, 0.2, 0.5], np.float32), "zero_point": np.array([0, 10, -3], np.int8),
          "axis": np.int32(1), "output_dtype": "int8"}, opset="iOS17"),
    Case("dequantize", {"input": _rng.integers(0, 255, (2, 3)).astype(np.uint8)},
         {"scale": np.float16(0.05), "zero_point": np.uint8(128)}, opset="iOS17"),
]
