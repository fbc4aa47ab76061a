"""Quantized NeuralNetwork weights -> IR values that keep the compression (iOS16 constexpr ops).

- lookup table, 1/2/4/6/8 bits: ``constexpr_lut_to_dense`` with the codes repacked LSB first;
  3/5/7 bits: the table is padded to the next size MIL has (lossless, codes unchanged);
- linear, 8 bits, integral zero point ``-bias/scale`` per channel: ``constexpr_affine_dequantize``;
- linear with one scale/bias for the whole tensor (any bit width): a lookup table of the
  ``2**bits`` values ``scale*q + bias`` (exact: the same fp32 products the dense form has);
- anything else (per-channel linear with a fractional zero point): stored dequantized, with a note.
When compression is not kept (option, or an opset before iOS16), weights are dequantized; so are
tensors under ``MIN_COMPRESSED_ELEMENTS`` (coremltools' own threshold): compressing a bias saves
nothing, and ops that need a bias's value at compile time (conv_transpose before iOS17) cannot
take a constexpr one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...ir.bitpack import pack_subbyte
from ...ir.core import Value
from ...ir.opdef import opset_index
from .weights import Weight

if TYPE_CHECKING:
    from .context import LayerContext

_LUT_BITS = (1, 2, 4, 6, 8)
MIN_COMPRESSED_ELEMENTS = 2048


def _lut_value(ctx: LayerContext, codes: np.ndarray, lut: np.ndarray, nbits: int, shape: tuple[int, ...],
               name: str) -> Value:
    bits = next(b for b in _LUT_BITS if b >= nbits)
    table = np.zeros(1 << bits, np.float32)
    table[: lut.size] = lut
    packed = pack_subbyte(codes.astype(np.uint8), bits) if bits < 8 else codes.astype(np.uint8)
    return ctx.b.add_op(
        "constexpr_lut_to_dense",
        {"indices": np.ascontiguousarray(packed, np.uint8), "lut": table,
         "shape": np.array(shape, np.uint32)},
        name=name,
    ).outputs[0]


def compressed_weight(ctx: LayerContext, w: Weight, name: str) -> Value:
    """The fp32 value of quantized weights ``w`` (see the module docstring)."""
    dense_fallback = not ctx.state.options.keep_compression or opset_index(ctx.b.opset) < opset_index("iOS16")
    small = w.codes is not None and w.codes.size < MIN_COMPRESSED_ELEMENTS
    if w.codes is None or dense_fallback or small or w.codes.dtype != np.uint8:
        return ctx.b.const(w.decompressed(), "fp32", name=name)
    shape = w.shape
    if w.lut is not None:
        return _lut_value(ctx, w.codes, w.lut, w.nbits, shape, name)
    assert w.scale is not None and w.bias is not None
    if w.scale.size == 1:
        lut = (np.arange(1 << w.nbits, dtype=np.float32) * w.scale[0] + w.bias[0]).astype(np.float32)
        return _lut_value(ctx, w.codes, lut, w.nbits, shape, name)
    with np.errstate(divide="ignore", invalid="ignore"):
        zero = -w.bias / w.scale
    if w.nbits == 8 and np.all(np.isfinite(zero)) and np.all(zero == np.round(zero)) \
            and np.all((zero >= 0) & (zero <= 255)) and len(shape) > w.axis:
        return ctx.b.add_op(
            "constexpr_affine_dequantize",
            {"quantized_data": w.codes.reshape(shape), "zero_point": np.round(zero).astype(np.uint8),
             "scale": w.scale.astype(np.float32), "axis": np.int32(w.axis)},
            name=name,
        ).outputs[0]
    ctx.note(f"layer '{ctx.name}': per-channel linear quantization with fractional zero points has no "
             f"iOS16 constexpr form; its weights are stored dequantized")
    return ctx.b.const(w.decompressed(), "fp32", name=name)
