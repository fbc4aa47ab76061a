"""Weight compression and quantization: the constexpr_* decompression ops (iOS16, iOS18) and the
run-time quantize / dequantize (iOS17).

The constexpr_* ops take only constants and describe a constant the runtime materialises when
it loads the model; their trait "constexpr" makes them compile-time constants for the verifier,
and a constant folder must leave them alone (the compressed form is what they are for).

Sub-byte dtypes (uint1..uint6, int4) are held unpacked in the IR, one element per value. The iOS16
ops instead take *packed* uint8 bit fields (LUT indices, sparsity masks): per their MIL text,
elements are laid out row-major and packed from the least significant bit of byte 0 upwards; an
element that does not fit in the rest of a byte continues in the low bits of the next byte.

Dequantization computes ``scale * (data - offset)`` in fp32 and rounds to the output dtype once
(coremltools' value inference does the same).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..bitpack import unpack_subbyte
from ..opdef import EvalArgs, InferArgs, OpDef, register
from ..shapes import ShapeError, dim_op, normalize_axis
from ..types import DTYPES, DType, TensorType, Type, is_static_dim, uint1
from ._util import to_dtype

CONSTEXPR = frozenset({"pure", "constexpr"})
_LUT_SIZES_IOS16 = (2, 4, 16, 64, 256)


def _axis_param(p: np.ndarray, rank: int, axis: int) -> np.ndarray:
    """A scalar or a vector along ``axis``, shaped to broadcast against a rank-``rank`` tensor."""
    p = np.asarray(p, np.float32)
    if p.ndim == 0:
        return p
    shape = [1] * rank
    shape[axis] = p.size
    return p.reshape(shape)


def _expand_blocks(p: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Repeat each element of a per-block parameter over its block so it has ``shape``."""
    p = np.asarray(p, np.float32)
    for axis, (n, m) in enumerate(zip(shape, p.shape)):
        if n != m:
            p = np.repeat(p, n // m, axis=axis)
    return p


def shift_scale(data: np.ndarray, scale: np.ndarray, offset: np.ndarray | None) -> np.ndarray:
    """``scale * (data - offset)`` with block-wise scale/offset (fp32 result)."""
    out = np.asarray(data, np.float32)
    if offset is not None:
        out = out - _expand_blocks(offset, out.shape)
    return out * _expand_blocks(scale, out.shape)


def lut_lookup(indices: np.ndarray, lut: np.ndarray, vector_axis: int | None) -> np.ndarray:
    """iOS18 palettization: ``lut[..block.., index, :]`` per element, vectors laid along vector_axis.

    ``lut`` is ``[*blocks, NUM_PALETTES, VECTOR_SIZE]``: the first ``rank(indices)`` dims split the
    tensor into equal blocks, each with its own table.
    """
    k = indices.ndim
    grids = np.indices(indices.shape, sparse=True)
    sel = tuple(g // (indices.shape[i] // lut.shape[i]) for i, g in enumerate(grids))
    vectors = lut[sel + (indices.astype(np.intp),)]  # indices.shape + (VECTOR_SIZE,)
    vs = lut.shape[-1]
    if vs == 1:
        return vectors[..., 0]
    axis = normalize_axis(vector_axis, k)
    shape = list(indices.shape)
    shape[axis] *= vs
    return np.moveaxis(vectors, -1, axis + 1).reshape(shape)


def scatter_mask(mask: np.ndarray, values: np.ndarray, dt: DType) -> np.ndarray:
    """Dense tensor of ``mask``'s shape: ``values`` in row-major order where mask is set, else 0."""
    out = np.zeros(np.shape(mask), dt.storage)
    out[np.asarray(mask) != 0] = values
    return out


# ---------------------------------------------------------------------------------------------
# Shared checks


def _shape_param(a: InferArgs, name: str) -> tuple | None:
    """The iOS16 ``shape`` parameter as dims (fresh symbols if only its length is known)."""
    v = a.value(name)
    if v is not None:
        return tuple(int(d) for d in np.asarray(v).reshape(-1))
    t = a.tensor_type(name)
    if t.shape is None or len(t.shape) != 1 or not is_static_dim(t.shape[0]):
        return None
    return tuple(a.new_symbol() for _ in range(int(t.shape[0])))


def _require_rank(a: InferArgs, name: str, ranks: tuple[int, ...]) -> None:
    r = a.rank(name)
    if r is not None and r not in ranks:
        raise a.fail(f"'{name}' must have rank {' or '.join(map(str, ranks))}, got shape {list(a.tensor_type(name).shape)}")


def _axis_params_fit(a: InferArgs, data: str, names: tuple[str, ...], axis: Any) -> None:
    """Scale / zero point: scalars, or vectors as long as ``data`` along ``axis``."""
    shape = a.tensor_type(data).shape
    ax = None
    if shape is not None and axis is not None:
        try:
            ax = normalize_axis(int(np.asarray(axis)), len(shape))
        except ShapeError as e:
            raise a.fail(str(e)) from None
    for name in names:
        if not a.has(name):
            continue
        _require_rank(a, name, (0, 1))
        p = a.tensor_type(name).shape
        if p is None or len(p) == 0 or ax is None:
            continue
        if is_static_dim(p[0]) and is_static_dim(shape[ax]) and int(p[0]) != int(shape[ax]):
            raise a.fail(f"'{name}' has {p[0]} values but '{data}' has {shape[ax]} along axis {ax}")


def _check_divides(a: InferArgs, name: str, small: tuple, big: tuple, what: str) -> None:
    """Each dim of a per-block parameter divides the corresponding dim of what it covers."""
    for i, (n, m) in enumerate(zip(big, small)):
        if is_static_dim(n) and is_static_dim(m) and (int(m) == 0 or int(n) % int(m)):
            raise a.fail(f"'{name}' dim {i} ({m}) does not divide the {what} dim ({n})")


def _check_blocks(a: InferArgs, data_shape: tuple | None) -> None:
    """Block-wise scale/offset: the data's rank, dims dividing the data's; offset shaped as scale."""
    scale = a.tensor_type("scale").shape
    if a.has("offset"):
        off = a.tensor_type("offset").shape
        if off is not None and scale is not None and (
            len(off) != len(scale) or any(is_static_dim(x) and is_static_dim(y) and int(x) != int(y)
                                          for x, y in zip(off, scale))):
            raise a.fail(f"'offset' shape {list(off)} differs from 'scale' shape {list(scale)}")
    if scale is None or data_shape is None:
        return
    if len(scale) != len(data_shape):
        raise a.fail(f"'scale' has rank {len(scale)}, the data rank {len(data_shape)}")
    _check_divides(a, "scale", scale, data_shape, "data")


def _check_offset_dtype(a: InferArgs, data_dtype: DType) -> None:
    off = a.type("offset")
    if isinstance(off, TensorType) and not off.dtype.is_float and off.dtype != data_dtype:
        raise a.fail(f"an integer offset must have the data's dtype {data_dtype}, got {off.dtype}")


def _check_count(a: InferArgs, set_entries: int, data: str) -> None:
    """The mask sets as many entries as ``data`` stores values."""
    n = a.tensor_type(data).shape
    if n is not None and is_static_dim(n[0]) and set_entries != int(n[0]):
        raise a.fail(f"the mask sets {set_entries} entries but '{data}' holds {n[0]} values")


def _check_popcount(a: InferArgs, mask: str, data: str) -> None:
    m = a.value(mask)
    if m is not None:
        _check_count(a, int(np.count_nonzero(np.asarray(m))), data)


def _static_product(shape: tuple) -> int | None:
    return int(np.prod([int(d) for d in shape])) if all(is_static_dim(d) for d in shape) else None


def _lut_output_shape(a: InferArgs, layout: str, indices: str) -> tuple | None:
    """iOS18 LUT checks; the dense shape: ``layout``'s shape with vector_axis scaled by VECTOR_SIZE.

    ``layout`` has the dense (per-index) shape, ``indices`` the ``uint<n>`` index dtype.
    """
    idx, table = a.tensor_type(layout), a.tensor_type("lut")
    if idx.shape is None or table.shape is None:
        return None
    k = len(idx.shape)
    if k < 1:
        raise a.fail(f"'{layout}' must have rank >= 1")
    if len(table.shape) != k + 2:
        raise a.fail(f"'lut' must have rank {k + 2} ([*blocks, NUM_PALETTES, VECTOR_SIZE]), got {len(table.shape)}")
    _check_divides(a, "lut", table.shape[:k], idx.shape, f"'{layout}'")
    palettes, vs = table.shape[-2:]
    bits = a.tensor_type(indices).dtype.bits
    if is_static_dim(palettes) and int(palettes) != 1 << bits:
        raise a.fail(f"'lut' has {palettes} palettes; uint{bits} indices need {1 << bits}")
    shape = list(idx.shape)
    axis = a.value("vector_axis")
    if axis is None:
        if not is_static_dim(vs) or int(vs) != 1:
            raise a.fail("vector_axis is required when the lut's VECTOR_SIZE is not 1")
        return tuple(shape)
    try:
        ax = normalize_axis(int(np.asarray(axis)), k, what="vector_axis")
    except ShapeError as e:
        raise a.fail(str(e)) from None
    if not (is_static_dim(vs) and int(vs) == 1):
        shape[ax] = shape[ax] * vs  # an expression when either is symbolic
    return tuple(shape)


def _vector_axis(a: EvalArgs) -> int | None:
    v = a.value("vector_axis")
    return None if v is None else int(np.asarray(v))


# ---------------------------------------------------------------------------------------------
# constexpr ops


@register
class ConstexprAffineDequantize(OpDef):
    """iOS16 ``scale * (quantized_data - zero_point)``; scale/zero point scalar or per-``axis``."""

    op_type = "constexpr_affine_dequantize"
    traits = CONSTEXPR

    def infer(self, a: InferArgs) -> list[Type]:
        _axis_params_fit(a, "quantized_data", ("scale", "zero_point"), a.value("axis"))
        return [TensorType(a.tensor_type("scale").dtype, a.tensor_type("quantized_data").shape)]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        data = np.asarray(a["quantized_data"], np.float32)
        axis = normalize_axis(int(np.asarray(a["axis"])), data.ndim)
        out = (data - _axis_param(a["zero_point"], data.ndim, axis)) * _axis_param(a["scale"], data.ndim, axis)
        return [to_dtype(out, a.out_types[0].dtype)]


@register
class ConstexprCast(OpDef):
    """fp16 constant widened to ``output_dtype`` (MIL allows only fp32)."""

    op_type = "constexpr_cast"
    traits = CONSTEXPR

    def infer(self, a: InferArgs) -> list[Type]:
        out = str(np.asarray(a.value("output_dtype")))
        if out != "fp32":
            raise a.fail(f"output_dtype must be 'fp32', got '{out}'")
        return [TensorType(DTYPES["fp32"], a.tensor_type("source_val").shape)]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        return [np.asarray(a["source_val"]).astype(np.float32)]


@register
class ConstexprLutToDense(OpDef):
    """Palettized constant: each index replaced by its LUT entry.

    iOS16: ``indices`` packed uint8 bit fields (n_bits = log2(lut size)), flat ``lut``, ``shape``.
    iOS18: unpacked ``uint<n>`` indices of the output's shape, per-block LUTs and vector entries
    (see ``lut_lookup``).
    """

    op_type = "constexpr_lut_to_dense"
    traits = CONSTEXPR

    def infer(self, a: InferArgs) -> list[Type]:
        dt = a.tensor_type("lut").dtype
        if self.signature.since == "iOS18":
            return [TensorType(dt, _lut_output_shape(a, "indices", "indices"))]
        _require_rank(a, "indices", (1,))
        _require_rank(a, "lut", (1,))
        shape = _shape_param(a, "shape")
        lut, idx = a.tensor_type("lut").shape, a.tensor_type("indices").shape
        if lut is not None and is_static_dim(lut[0]):
            if int(lut[0]) not in _LUT_SIZES_IOS16:
                raise a.fail(f"lut must have one of {_LUT_SIZES_IOS16} entries, got {lut[0]}")
            nbits = int(lut[0]).bit_length() - 1
            count = None if shape is None else _static_product(shape)
            if count is not None and idx is not None and is_static_dim(idx[0]) and int(idx[0]) != -(-nbits * count // 8):
                raise a.fail(f"{count} indices of {nbits} bits need {-(-nbits * count // 8)} bytes, got {idx[0]}")
        return [TensorType(dt, shape)]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        lut = np.asarray(a["lut"])
        if self.signature.since == "iOS18":
            return [lut_lookup(np.asarray(a["indices"]), lut, _vector_axis(a))]
        shape = tuple(int(d) for d in np.asarray(a["shape"]).reshape(-1))
        nbits = lut.size.bit_length() - 1
        return [lut[unpack_subbyte(np.asarray(a["indices"], np.uint8), nbits, int(np.prod(shape)))].reshape(shape)]


@register
class ConstexprSparseToDense(OpDef):
    """Unstructured sparsity: ``nonzero_data`` scattered (row-major) where the mask is set, else 0.

    iOS16: the mask is packed uint8 bits plus a ``shape``; iOS18: an unpacked uint1 mask whose
    shape is the output's.
    """

    op_type = "constexpr_sparse_to_dense"
    traits = CONSTEXPR

    def infer(self, a: InferArgs) -> list[Type]:
        dt = a.tensor_type("nonzero_data").dtype
        _require_rank(a, "nonzero_data", (1,))
        if self.signature.since == "iOS18":
            _check_popcount(a, "mask", "nonzero_data")
            return [TensorType(dt, a.tensor_type("mask").shape)]
        _require_rank(a, "mask", (1,))
        shape = _shape_param(a, "shape")
        count = None if shape is None else _static_product(shape)
        mask = a.value("mask")
        if count is not None and mask is not None:
            if np.size(mask) != -(-count // 8):
                raise a.fail(f"a mask of {count} bits takes {-(-count // 8)} bytes, got {np.size(mask)}")
            bits = np.unpackbits(np.asarray(mask, np.uint8), bitorder="little")
            if bits[count:].any():
                raise a.fail("the mask's padding bits must be 0")
            _check_count(a, int(bits[:count].sum()), "nonzero_data")
        return [TensorType(dt, shape)]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        dt = a.out_types[0].dtype
        if self.signature.since == "iOS18":
            return [scatter_mask(a["mask"], a["nonzero_data"], dt)]
        shape = tuple(int(d) for d in np.asarray(a["shape"]).reshape(-1))
        mask = unpack_subbyte(np.asarray(a["mask"], np.uint8), 1, int(np.prod(shape))).reshape(shape)
        return [scatter_mask(mask, a["nonzero_data"], dt)]


@register
class ConstexprBlockwiseShiftScale(OpDef):
    """iOS18 ``scale * (data - offset)`` with per-block scale/offset of the data's rank.

    Block size per axis is ``data.shape[i] / scale.shape[i]``.
    """

    op_type = "constexpr_blockwise_shift_scale"
    traits = CONSTEXPR

    def infer(self, a: InferArgs) -> list[Type]:
        data = a.tensor_type("data")
        if data.shape is not None and len(data.shape) < 1:
            raise a.fail("'data' must have rank >= 1")
        _check_blocks(a, data.shape)
        _check_offset_dtype(a, data.dtype)
        return [TensorType(a.tensor_type("scale").dtype, data.shape)]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        return [to_dtype(shift_scale(a["data"], a["scale"], a.value("offset")), a.out_types[0].dtype)]


@register
class ConstexprLutToSparse(OpDef):
    """iOS18 palettization of sparse data: returns (mask, looked-up nonzero values).

    For vector LUTs the mask is repeated ``VECTOR_SIZE`` times along ``vector_axis`` and every
    index becomes ``VECTOR_SIZE`` values, listed in the dense tensor's row-major order.
    """

    op_type = "constexpr_lut_to_sparse"
    traits = CONSTEXPR

    def infer(self, a: InferArgs) -> list[Type]:
        _require_rank(a, "indices_nonzero_data", (1,))
        _check_popcount(a, "indices_mask", "indices_nonzero_data")
        mask_shape = _lut_output_shape(a, "indices_mask", "indices_nonzero_data")
        lut = a.tensor_type("lut")
        n = a.tensor_type("indices_nonzero_data").shape
        if n is None or lut.shape is None:
            count = a.new_symbol()
        elif is_static_dim(lut.shape[-1]) and int(lut.shape[-1]) == 1:
            count = n[0]
        else:
            count = dim_op(operator.mul, n[0], lut.shape[-1])
        return [TensorType(uint1, mask_shape), TensorType(lut.dtype, (count,))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        mask, lut = np.asarray(a["indices_mask"]), np.asarray(a["lut"])
        indices = scatter_mask(mask, a["indices_nonzero_data"], DTYPES["uint8"])
        dense = lut_lookup(indices, lut, _vector_axis(a))
        if lut.shape[-1] > 1:
            mask = np.repeat(mask, lut.shape[-1], axis=_vector_axis(a))
        return [mask.astype(np.uint8), dense[mask != 0]]


@register
class ConstexprSparseBlockwiseShiftScale(OpDef):
    """iOS18 block-wise ``scale * (data - offset)`` of sparse data: returns (mask, nonzero values).

    Each stored value is dequantized with the scale/offset of its position in the dense layout.
    """

    op_type = "constexpr_sparse_blockwise_shift_scale"
    traits = CONSTEXPR

    def infer(self, a: InferArgs) -> list[Type]:
        _require_rank(a, "nonzero_data", (1,))
        _check_popcount(a, "data_mask", "nonzero_data")
        mask = a.tensor_type("data_mask")
        _check_blocks(a, mask.shape)
        _check_offset_dtype(a, a.tensor_type("nonzero_data").dtype)
        return [mask, TensorType(a.tensor_type("scale").dtype, a.tensor_type("nonzero_data").shape)]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        mask = np.asarray(a["data_mask"])
        dense = scatter_mask(mask, a["nonzero_data"], DTYPES["fp32"])
        out = shift_scale(dense, a["scale"], a.value("offset"))[mask != 0]
        return [mask, to_dtype(out, a.out_types[1].dtype)]


# ---------------------------------------------------------------------------------------------
# run-time quantization (iOS17)


def _check_quant_params(a: InferArgs) -> None:
    """coremltools' rule: scalar scale/zero point without axis, or vectors along a given axis."""
    scale_rank = a.rank("scale")
    axis = a.value("axis")
    if scale_rank == 0:
        if a.has("axis"):
            raise a.fail("axis must not be given when scale is a scalar")
        if a.rank("zero_point") not in (None, 0):
            raise a.fail("zero_point must be a scalar when scale is a scalar")
    elif scale_rank == 1:
        if axis is None:
            raise a.fail("axis is required when scale is a vector")
        if a.rank("zero_point") not in (None, 1):
            raise a.fail("zero_point must be a vector when scale is a vector")
    _require_rank(a, "scale", (0, 1))
    _axis_params_fit(a, "input", ("scale", "zero_point"), axis)


def _quant_axis(a: EvalArgs, rank: int) -> int:
    axis = a.value("axis")
    return 0 if axis is None else normalize_axis(int(np.asarray(axis)), rank)


@register
class Quantize(OpDef):
    """``clip(round_half_even(input / scale) + zero_point)`` to int8/uint8, computed in fp32.

    NaN, which MIL leaves undefined, quantizes to the zero point (the code of 0.0).
    """

    op_type = "quantize"

    def infer(self, a: InferArgs) -> list[Type]:
        name = str(np.asarray(a.value("output_dtype")))
        if name not in ("uint8", "int8"):
            raise a.fail(f"output_dtype must be 'uint8' or 'int8', got '{name}'")
        out = DTYPES[name]
        if a.has("zero_point") and a.tensor_type("zero_point").dtype != out:
            raise a.fail(f"zero_point dtype {a.tensor_type('zero_point').dtype} differs from output_dtype {name}")
        scale = a.value("scale")
        if scale is not None and np.any(np.asarray(scale) == 0):
            raise a.fail("scale must not be 0")
        _check_quant_params(a)
        return [TensorType(out, a.tensor_type("input").shape)]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = np.asarray(a["input"], np.float32)
        axis = _quant_axis(a, x.ndim)
        zp = a.value("zero_point")
        zp = np.float32(0) if zp is None else _axis_param(zp, x.ndim, axis)
        with np.errstate(invalid="ignore", over="ignore"):
            q = np.rint(x / _axis_param(a["scale"], x.ndim, axis)) + zp
        q = np.where(np.isnan(q), zp, q)
        lo, hi = a.out_types[0].dtype.value_range()
        return [np.clip(q, lo, hi).astype(a.out_types[0].dtype.storage)]


@register
class Dequantize(OpDef):
    """``scale * (input - zero_point)`` from int8/uint8 to the scale's dtype, computed in fp32."""

    op_type = "dequantize"

    def infer(self, a: InferArgs) -> list[Type]:
        _check_quant_params(a)
        return [TensorType(a.tensor_type("scale").dtype, a.tensor_type("input").shape)]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x = np.asarray(a["input"], np.float32)
        axis = _quant_axis(a, x.ndim)
        zp = a.value("zero_point")
        if zp is not None:
            x = x - _axis_param(zp, x.ndim, axis)
        return [to_dtype(x * _axis_param(a["scale"], x.ndim, axis), a.out_types[0].dtype)]
