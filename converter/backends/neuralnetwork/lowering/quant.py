"""Run-time quantization (iOS17): quantize and dequantize as float arithmetic.

NeuralNetwork blobs hold fp32, integer IR values included (as integral floats), so:

- ``dequantize`` = ``(x - zero_point) * scale``: ``add`` (alpha = -zero_point; left out for a zero
  zero point) and ``multiply`` (alpha = scale) for per-tensor parameters;
  ``addBroadcastable`` / ``multiplyBroadcastable`` with constants shaped along ``axis`` otherwise.
- ``quantize`` = ``clip(round(x / scale) + zero_point, lo, hi)`` with [lo, hi] the int8 / uint8
  range: ``divideBroadcastable`` (a true division, as the IR op; multiplying by 1/scale can round a
  value to the other side of a .5), ``round``, ``add``/``addBroadcastable``, ``clip``. Where results
  can differ: the IR rounds halves to even and quantizes NaN to the zero point; the proto does not
  say how the ``round`` layer breaks ties, and ``clip`` of NaN is unspecified.

Compile-time weight compression (constexpr_* ops) is expanded before lowering (see the backend's
prepare step), so those ops never reach this table; the compressed form of the weights of the
layers that take quantized WeightParams is recorded first and written instead (end of module).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ....errors import LoweringError
from ....ir.bitpack import unpack_subbyte
from ....ir.consteval import compile_time_value
from ....ir.core import Op, Value
from ....ir.types import TensorType
from ..emitter import NetworkEmitter, op_input, rank
from .registry import lowering

_RANGES = {"int8": (-128.0, 127.0), "uint8": (0.0, 255.0)}


def _along_axis(e: NetworkEmitter, op: Op, key: str, x: Value) -> np.ndarray | None:
    """Parameter ``key`` as fp32, shaped to broadcast along ``axis`` of ``x`` (a scalar stays 0-d)."""
    v = op_input(op, key)
    if v is None:
        return None
    arr = np.asarray(e.const_array(v, f"'{key}'"), np.float32)
    if arr.ndim == 0:
        return arr
    r = rank(x)
    axis = int(np.asarray(e.const_param(op, "axis")).reshape(()))
    axis = axis + r if axis < 0 else axis
    return arr.reshape((-1,) + (1,) * (r - 1 - axis))


def _binary(e: NetworkEmitter, op: Op, kind: str, blob: str, param: np.ndarray, tag: str, out: str | None) -> str:
    """``blob`` op ``param``: a scalar as the layer's ``alpha`` (add / multiply), else a broadcastable
    layer over a constant; the result into ``out`` (or a fresh blob)."""
    dst = out or e.fresh(f"{op.name}_{tag}")
    if param.ndim == 0 and kind in ("add", "multiply"):
        e.layer(kind, f"{op.name}_{tag}", [blob], [dst]).alpha = float(param)
    else:
        const = e.load_constant(None, param, f"{op.name}_{tag}_const")
        e.layer(f"{kind}Broadcastable", f"{op.name}_{tag}", [blob, const], [dst])
    return dst


@lowering("dequantize", kind="decomposed", note="(x - zero_point) * scale with add/multiply layers")
def _dequantize(e: NetworkEmitter, op: Op) -> None:
    x = op.inputs["input"]
    scale, zp = _along_axis(e, op, "scale", x), _along_axis(e, op, "zero_point", x)
    assert scale is not None  # required
    blob = e.blob(x)
    if zp is not None and np.any(zp):
        blob = _binary(e, op, "add", blob, -zp, "shifted", None)
    _binary(e, op, "multiply", blob, scale, "scaled", e.define(op.outputs[0]))


@lowering("quantize", kind="decomposed", note="clip(round(x / scale) + zero_point) with divideBroadcastable, "
                                              "round, add, clip; the round layer's tie rule is unspecified "
                                              "(the IR rounds halves to even)")
def _quantize(e: NetworkEmitter, op: Op) -> None:
    x = op.inputs["input"]
    scale, zp = _along_axis(e, op, "scale", x), _along_axis(e, op, "zero_point", x)
    assert scale is not None
    dtype = str(np.asarray(e.const_param(op, "output_dtype")).reshape(()))
    if dtype not in _RANGES:
        raise LoweringError(f"output_dtype '{dtype}' is not int8 or uint8")
    lo, hi = _RANGES[dtype]
    divided = _binary(e, op, "divide", e.blob(x), scale, "divided", None)
    rounded = e.fresh(f"{op.name}_rounded")
    e.layer("round", f"{op.name}_round", [divided], [rounded])
    if zp is not None and np.any(zp):
        rounded = _binary(e, op, "add", rounded, zp, "shifted", None)
    p = e.layer("clip", op.name, [rounded], [e.define(op.outputs[0])])
    p.minVal, p.maxVal = lo, hi


# ---------------------------------------------------------------------------------------------
# Compressed weights: iOS16 constexpr_affine_dequantize / constexpr_lut_to_dense feeding a layer's
# weights become a quantized WeightParams (rawValue + QuantizationParams) instead of fp32 values.
#
# The backend's prepare step expands every constexpr op into a constant (the layers need dense
# values everywhere else). Before that, `annotate_compressed` records the compressed form of each
# weight input listed in COMPRESSIBLE on the op reading it (op.attributes[COMPRESSED][key]); a
# lowering writing that input's WeightParams calls `write_weights`, which writes the recorded form
# when there is one and the dense constant otherwise.

COMPRESSED = "nn_compressed_weights"

#: (op type, input) -> the axis of output channels a per-channel linear quantization may run along
#: (None: per-tensor quantization only, the recurrent layers' case)
COMPRESSIBLE: dict[tuple[str, str], int | None] = {
    ("conv", "weight"): 0, ("linear", "weight"): 0, ("gather", "x"): 0,  # gather: axis 0 of the transpose
    **{(op, key): None for op in ("rnn", "gru", "lstm")
       for key in ("weight_ih", "weight_hh", "weight_ih_back", "weight_hh_back")},
}
#: inputs whose layer stores the TRANSPOSE of the 2-D input (embeddingND: a gather's [V, E] table as
#: [E, V]): their recorded form is that of the transpose (per-channel along its axis 0, the input's
#: axis 1), found on a constexpr giving the input, or under a ``transpose(perm=[1, 0])`` of one
TRANSPOSED: frozenset[tuple[str, str]] = frozenset({("gather", "x")})


@dataclass(frozen=True)
class QuantizedWeights:
    """n-bit codes (unpacked, in the dense tensor's row-major order) with a linear map
    ``w = scale[c] * q + bias[c]`` (per tensor or per output channel ``c`` on axis 0) or a table."""

    nbits: int
    codes: np.ndarray  # uint8, shape of the dense tensor
    scale: np.ndarray | None = None
    bias: np.ndarray | None = None
    lut: np.ndarray | None = None

    def rows(self, start: int, stop: int) -> QuantizedWeights:
        """The rows ``start:stop`` (axis 0) of the tensor, e.g. one gate block."""
        per_row = self.scale is not None and self.scale.size > 1
        return QuantizedWeights(self.nbits, self.codes[start:stop],
                                self.scale[start:stop] if per_row else self.scale,  # type: ignore[index]
                                self.bias[start:stop] if per_row else self.bias, self.lut)  # type: ignore[index]

    def transposed(self) -> QuantizedWeights:
        """The form of the 2-D tensor's transpose, whose per-channel parameters (if any) ran along the
        tensor's axis 1: they run along axis 0 of the transpose, as the codes' rows."""
        return QuantizedWeights(self.nbits, np.ascontiguousarray(self.codes.T), self.scale, self.bias, self.lut)

    def dense(self) -> np.ndarray:
        if self.lut is not None:
            return self.lut[self.codes]
        shape = (-1,) + (1,) * (self.codes.ndim - 1)
        return self.codes * self.scale.reshape(shape) + self.bias.reshape(shape)  # type: ignore[union-attr]

    def write(self, wp: Any) -> None:
        wp.rawValue = pack_msb_first(self.codes.reshape(-1), self.nbits).tobytes()
        q = wp.quantization
        q.numberOfBits = self.nbits
        if self.lut is not None:
            q.lookupTableQuantization.floatValue.extend(float(x) for x in self.lut)
        else:
            q.linearQuantization.scale.extend(float(x) for x in self.scale)  # type: ignore[union-attr]
            q.linearQuantization.bias.extend(float(x) for x in self.bias)  # type: ignore[union-attr]


def pack_msb_first(codes: np.ndarray, nbits: int) -> np.ndarray:
    """``nbits``-bit codes packed most significant bit first (the NeuralNetwork layout)."""
    v = np.ascontiguousarray(codes, np.uint8)
    if nbits == 8:
        return v
    planes = np.empty((v.size, nbits), np.uint8)
    for k in range(nbits):
        np.bitwise_and(np.right_shift(v, nbits - 1 - k), 1, out=planes[:, k])
    return np.packbits(planes.reshape(-1))


def quantized_form(op: Op, out_axis: int | None) -> QuantizedWeights | None:
    """The NeuralNetwork form of the fp32 tensor a constant iOS16 ``constexpr_affine_dequantize``
    (8-bit; per tensor or per ``out_axis`` channel) or ``constexpr_lut_to_dense`` (1, 2, 4, 6 or 8
    bits) computes; None for any other op or form."""
    if op.outputs[0].type.dtype.name != "fp32":  # type: ignore[union-attr]
        return None  # an fp16 result is rounded after the lookup: the layer would not round
    vals = {k: compile_time_value(v) for k, v in op.inputs.items() if isinstance(v, Value)}
    if any(v is None for v in vals.values()):
        return None
    if op.type == "constexpr_affine_dequantize":
        data = np.asarray(vals["quantized_data"])
        scale = np.asarray(vals["scale"], np.float32).reshape(-1)
        zp = np.asarray(vals["zero_point"], np.float32).reshape(-1)
        axis = int(np.asarray(vals["axis"])) % max(data.ndim, 1)
        if max(scale.size, zp.size) > 1 and (out_axis is None or axis != out_axis):
            return None
        n = max(scale.size, zp.size)
        scale, zp = np.broadcast_to(scale, (n,)), np.broadcast_to(zp, (n,))
        shift = 128 if data.dtype == np.int8 else 0  # NeuralNetwork codes are unsigned
        codes = (data.astype(np.int16) + shift).astype(np.uint8)
        return QuantizedWeights(8, codes, scale.astype(np.float32), (-scale * (zp + shift)).astype(np.float32))
    if op.type == "constexpr_lut_to_dense" and "shape" in vals:
        lut = np.asarray(vals["lut"], np.float32).reshape(-1)
        nbits = lut.size.bit_length() - 1
        if lut.size != 1 << nbits or nbits not in (1, 2, 4, 6, 8):
            return None
        shape = tuple(int(d) for d in np.asarray(vals["shape"]).reshape(-1))
        codes = unpack_subbyte(np.asarray(vals["indices"], np.uint8), nbits, int(np.prod(shape))).reshape(shape)
        return QuantizedWeights(nbits, codes, lut=lut)
    return None


def _transpose_2d_source(v: Value) -> Value | None:
    """``x`` when ``v`` is ``transpose(x, perm=[1, 0])``."""
    p = v.producer
    if p is None or p.type != "transpose" or not isinstance(p.inputs.get("x"), Value):
        return None
    perm = compile_time_value(p.inputs["perm"]) if isinstance(p.inputs.get("perm"), Value) else None
    return p.inputs["x"] if perm is not None and np.asarray(perm).tolist() == [1, 0] else None  # type: ignore[return-value]


def _transposed_form(v: Value) -> QuantizedWeights | None:
    """The compressed form of ``v``'s transpose (see TRANSPOSED)."""
    src = _transpose_2d_source(v)
    if src is not None:
        return quantized_form(src.producer, 0) if src.producer is not None else None
    if v.producer is None or not isinstance(v.type, TensorType) or v.type.shape is None or len(v.type.shape) != 2:
        return None
    form = quantized_form(v.producer, 1)
    return form.transposed() if form is not None else None


def annotate_compressed(ops: Iterable[Op]) -> None:
    """Record on each op the compressed form of its COMPRESSIBLE weight inputs (see above)."""
    for op in ops:
        for key, v in op.inputs.items():
            slot = (op.type, key)
            if slot not in COMPRESSIBLE or not isinstance(v, Value) or v.producer is None:
                continue
            form = _transposed_form(v) if slot in TRANSPOSED else quantized_form(v.producer, COMPRESSIBLE[slot])
            if form is not None:
                op.attributes.setdefault(COMPRESSED, {})[key] = form


def compressed(op: Op, key: str) -> QuantizedWeights | None:
    """The compressed form recorded for ``op``'s input ``key``, if any and if it still holds the
    input's values (a rewrite after the recording, such as a scale folded into the weight, leaves
    a stale record: then None, and the dense values are written). For a TRANSPOSED input, the form
    of the input's transpose."""
    form = (op.attributes.get(COMPRESSED) or {}).get(key)
    v = op.inputs.get(key)
    current = compile_time_value(v) if form is not None and isinstance(v, Value) else None
    if current is None:
        return None
    want = np.asarray(current, np.float32)
    if (op.type, key) in TRANSPOSED:
        if want.ndim != 2:
            return None
        want = want.T
    got = form.dense()
    if got.shape != want.shape:
        return None
    tol = 1e-5 * max(1.0, float(np.max(np.abs(want), initial=0.0)))  # the two formulas round differently
    return form if float(np.max(np.abs(got - want), initial=0.0)) <= tol else None


# -- fp16 weights ----------------------------------------------------------------------------------
# A program may hold a weight as an fp16 constant cast to fp32 (how the NeuralNetwork frontend reads
# float16Value weights, and an fp16 ML program's casts): `prepare_program` folds the cast, so before
# that `annotate_fp16` records which weight inputs came from fp16, and the layer writes them as
# float16Value again (`recorded_fp16`) while their values are still exactly fp16 (a fusion that
# changed them, such as a folded batch norm, leaves fp32 values: those stay fp32).

FP16_WEIGHTS = "nn_fp16_weights"
_FP16_SLOTS = frozenset({("conv", "weight"), ("conv_transpose", "weight"), ("linear", "weight"), ("gather", "x")})


def annotate_fp16(ops: Iterable[Op]) -> None:
    for op in ops:
        for key, v in op.inputs.items():
            if (op.type, key) not in _FP16_SLOTS or not isinstance(v, Value) or v.producer is None:
                continue
            if (op.type, key) in TRANSPOSED:  # the NN frontend's embedding table: transpose(cast(fp16))
                v = _transpose_2d_source(v) or v
            cast = v.producer
            if cast is None:
                continue
            src = cast.inputs.get("x") if cast.type == "cast" else None
            if isinstance(src, Value) and isinstance(src.type, TensorType) and src.type.dtype.name == "fp16" \
                    and compile_time_value(src) is not None:
                op.attributes.setdefault(FP16_WEIGHTS, set()).add(key)


def _exact_fp16(a: np.ndarray) -> bool:
    return bool(np.array_equal(a.astype(np.float16).astype(a.dtype), a, equal_nan=True))


def recorded_fp16(op: Op, key: str, weight: np.ndarray, bias: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray | None]:
    """``weight`` (and its layer's ``bias``) as fp16 when the program held the weight in fp16 and the
    values are still exactly fp16 (the bias too: a layer's weights share one precision)."""
    if key not in op.attributes.get(FP16_WEIGHTS, ()) or weight.dtype != np.float32 or not _exact_fp16(weight):
        return weight, bias
    if bias is not None and bias.dtype != np.float16:
        if not _exact_fp16(np.asarray(bias, np.float32)):
            return weight, bias
        bias = np.asarray(bias, np.float32).astype(np.float16)
    return weight.astype(np.float16), bias
