"""NeuralNetwork WeightParams -> arrays, keeping storage dtype and compression where we can.

Encodings (one per WeightParams): ``floatValue`` (fp32), ``float16Value`` (fp16 bytes, kept as fp16),
``rawValue`` without quantization (fp32 bytes), ``rawValue`` with ``quantization`` (n-bit codes,
packed most-significant bit first, 1 <= n <= 8) and ``int8RawValue`` (int8 codes). Quantization is
linear (``w = scale[c] * q + bias[c]``, per output channel or per tensor) or a lookup table
(``w = lut[q]``). ``Weight`` describes the decoded data; the context turns it into IR values (a
const, or a constexpr_* op when the target can hold the compressed form). Large ``floatValue`` /
``float16Value`` weights of a model file are views of the mapped file, not copies (the reader
leaves them out of the parsed message: formats/protowire.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...formats.proto import NeuralNetwork_pb2
from ...formats.protowire import payload_indices

# WeightParams field numbers of the encodings a reader may leave in the mapped file (model_file.py)
_EXTERNAL_KINDS = {1: "floatValue", 2: "float16Value"}


class WeightError(Exception):
    """A WeightParams that does not hold what the layer declares (the caller adds the location)."""


@dataclass
class Weight:
    """Decoded weights: ``dense`` values, or ``codes`` plus how to decode them."""

    shape: tuple[int, ...]
    dense: np.ndarray | None = None  # fp32 or fp16, already in ``shape``
    codes: np.ndarray | None = None  # uint8 (or int8 for int8RawValue), one code per weight
    nbits: int = 8
    lut: np.ndarray | None = None  # fp32 lookup table of 2**nbits entries
    scale: np.ndarray | None = None  # fp32, length 1 or the channel count
    bias: np.ndarray | None = None
    axis: int = 0  # channel axis of linear quantization

    @property
    def is_quantized(self) -> bool:
        return self.codes is not None

    def decompressed(self, dtype: type = np.float32) -> np.ndarray:
        """The weights as a dense, writable array of ``dtype`` (fp32 by default)."""
        if self.dense is not None:
            return self.dense.astype(dtype, copy=not self.dense.flags.writeable)
        assert self.codes is not None
        if self.lut is not None:
            return self.lut[self.codes.astype(np.int64)].reshape(self.shape).astype(dtype)
        assert self.scale is not None and self.bias is not None
        q = self.codes.reshape(self.shape).astype(np.float32)
        bshape = [1] * len(self.shape)
        if self.scale.size > 1:
            bshape[self.axis] = self.scale.size
        w = q * self.scale.reshape(bshape) + self.bias.reshape(bshape)
        return w.astype(dtype)


def unpack_msb_first(data: bytes, nbits: int, count: int) -> np.ndarray:
    """``count`` n-bit codes packed most significant bit first (Core ML's NeuralNetwork layout)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    if nbits == 8:
        return raw[:count]
    bits = np.unpackbits(raw)  # MSB first per byte
    if bits.size < count * nbits:
        raise WeightError(f"{len(data)} bytes hold {bits.size // nbits} {nbits}-bit codes, {count} needed")
    groups = bits[: count * nbits].reshape(count, nbits).astype(np.uint8)
    weights = (1 << np.arange(nbits - 1, -1, -1)).astype(np.uint8)
    return (groups * weights).sum(axis=1).astype(np.uint8)


def _external(wp: NeuralNetwork_pb2.WeightParams, payloads: Sequence[tuple[int, memoryview]]) -> dict[str, memoryview]:
    """{encoding: bytes} of the values the reader left in the mapped file (views, not copies)."""
    out = {}
    for i in payload_indices(wp):
        if i >= len(payloads) or payloads[i][0] not in _EXTERNAL_KINDS:
            raise WeightError(f"refers to weight payload {i}, which the model file does not hold")
        out[_EXTERNAL_KINDS[payloads[i][0]]] = payloads[i][1]
    return out


def _encoding(wp: NeuralNetwork_pb2.WeightParams, external: dict[str, memoryview]) -> str | None:
    """The one encoding ``wp`` holds its values in (None when it holds none)."""
    kinds = [k for k, present in (("floatValue", len(wp.floatValue) > 0), ("float16Value", len(wp.float16Value) > 0),
                                  ("rawValue", len(wp.rawValue) > 0), ("int8RawValue", len(wp.int8RawValue) > 0))
             if present or k in external]
    if len(kinds) > 1:
        raise WeightError(f"weights are set in several encodings at once: {', '.join(kinds)}")
    return kinds[0] if kinds else None


def encoding(wp: NeuralNetwork_pb2.WeightParams, payloads: Sequence[tuple[int, memoryview]] = ()) -> str | None:
    """The field ``wp`` holds its values in (``floatValue``, ``float16Value``, ``rawValue`` or
    ``int8RawValue``), payloads left in the model file included; None when it holds none.
    Raises WeightError when several are set."""
    return _encoding(wp, _external(wp, payloads))


def value_count(wp: NeuralNetwork_pb2.WeightParams, payloads: Sequence[tuple[int, memoryview]] = ()) -> int:
    """How many weights ``wp`` holds, payloads left in the model file included (0 when none).

    Exact for every encoding but n-bit codes packed below 8 bits, whose last byte may end in
    padding: for those it is the most codes the bytes hold (``holds`` tells whether a given count
    fits). Raises WeightError when ``wp`` is inconsistent in a way that hides the count (several
    encodings, a marker of a payload the file lacks, an odd byte count)."""
    external = _external(wp, payloads)
    kind = _encoding(wp, external)
    if kind is None:
        return 0
    if kind in external:
        data = external[kind]
        size = 4 if kind == "floatValue" else 2
        if len(data) % size:
            raise WeightError(f"{kind} of {len(data)} bytes is not a whole number of values")
        return len(data) // size
    if kind == "floatValue":
        return len(wp.floatValue)
    if kind == "float16Value":
        if len(wp.float16Value) % 2:
            raise WeightError(f"float16Value has an odd number of bytes ({len(wp.float16Value)})")
        return len(wp.float16Value) // 2
    if kind == "int8RawValue":
        return len(wp.int8RawValue)
    nbits = _code_bits(wp)
    if nbits is None:  # fp32 bytes
        if len(wp.rawValue) % 4:
            raise WeightError(f"rawValue of {len(wp.rawValue)} bytes is not a whole number of fp32 values")
        return len(wp.rawValue) // 4
    return len(wp.rawValue) * 8 // nbits


def holds(wp: NeuralNetwork_pb2.WeightParams, count: int, payloads: Sequence[tuple[int, memoryview]] = ()) -> bool:
    """Whether ``wp`` holds exactly ``count`` weights (n-bit codes: in ``ceil(count * n / 8)`` bytes)."""
    nbits = _code_bits(wp) if encoding(wp, payloads) == "rawValue" else None
    if nbits is not None and nbits < 8:
        return len(wp.rawValue) == (count * nbits + 7) // 8
    return value_count(wp, payloads) == count


def _code_bits(wp: NeuralNetwork_pb2.WeightParams) -> int | None:
    """The bits per code of quantized weights (None for unquantized ones)."""
    if not wp.HasField("quantization"):
        return None
    nbits = int(wp.quantization.numberOfBits) or 8
    if not 1 <= nbits <= 8:
        raise WeightError(f"numberOfBits {nbits} is outside 1..8")
    return nbits


def decode(wp: NeuralNetwork_pb2.WeightParams, shape: tuple[int, ...], *, axis: int = 0,
           payloads: Sequence[tuple[int, memoryview]] = ()) -> Weight:
    """Decode ``wp`` holding ``prod(shape)`` weights; raises WeightError on any inconsistency.
    ``payloads``: the model file's weights kept out of the parsed message (``ModelFile.payloads``)."""
    shape = tuple(int(s) for s in shape)
    count = int(np.prod(shape)) if shape else 1
    q = wp.quantization if wp.HasField("quantization") else None
    external = _external(wp, payloads)
    kind = _encoding(wp, external)
    if kind is None:
        if count == 0:
            return Weight(shape, dense=np.zeros(shape, np.float32))
        raise WeightError(f"no weight values ({count} expected)")
    if kind == "floatValue":
        arr = (np.frombuffer(external[kind], dtype="<f4") if kind in external
               else np.asarray(wp.floatValue, dtype=np.float32))
        return Weight(shape, dense=_sized(arr, count, kind).reshape(shape))
    if kind == "float16Value":
        data = external[kind] if kind in external else wp.float16Value
        if len(data) % 2:
            raise WeightError(f"float16Value has an odd number of bytes ({len(data)})")
        arr = np.frombuffer(data, dtype="<f2")
        return Weight(shape, dense=_sized(arr, count, kind).reshape(shape))
    if kind == "rawValue" and q is None:
        if len(wp.rawValue) % 4:
            raise WeightError(f"rawValue of {len(wp.rawValue)} bytes is not a whole number of fp32 values")
        arr = np.frombuffer(wp.rawValue, dtype=np.float32)
        return Weight(shape, dense=_sized(arr, count, kind).reshape(shape))
    if q is None:
        raise WeightError("int8RawValue without quantization parameters")
    nbits = int(q.numberOfBits) or 8
    if not 1 <= nbits <= 8:
        raise WeightError(f"numberOfBits {nbits} is outside 1..8")
    if kind == "int8RawValue":
        if nbits != 8:
            raise WeightError(f"int8RawValue with numberOfBits {nbits}")
        codes = np.frombuffer(wp.int8RawValue, dtype=np.int8)
    else:
        need = (count * nbits + 7) // 8
        if len(wp.rawValue) < need:
            raise WeightError(f"rawValue has {len(wp.rawValue)} bytes, {need} needed for {count} {nbits}-bit codes")
        codes = unpack_msb_first(wp.rawValue, nbits, count)
    codes = _sized(codes, count, kind)
    which = q.WhichOneof("QuantizationType")
    if which == "lookupTableQuantization":
        lut = np.asarray(q.lookupTableQuantization.floatValue, dtype=np.float32)
        if lut.size != 1 << nbits:
            raise WeightError(f"lookup table has {lut.size} entries, {1 << nbits} expected for {nbits} bits")
        if kind == "int8RawValue":
            raise WeightError("a lookup table needs unsigned codes (rawValue), not int8RawValue")
        return Weight(shape, codes=codes, nbits=nbits, lut=lut)
    if which == "linearQuantization":
        scale = np.asarray(q.linearQuantization.scale, dtype=np.float32)
        bias = np.asarray(q.linearQuantization.bias, dtype=np.float32)
        if bias.size == 0:
            bias = np.zeros_like(scale)
        channels = shape[axis] if shape else 1
        for name, vec in (("scale", scale), ("bias", bias)):
            if vec.size not in (1, channels):
                raise WeightError(f"linear quantization {name} has {vec.size} values, expected 1 or {channels}")
        if scale.size != bias.size and 1 not in (scale.size, bias.size):
            raise WeightError("linear quantization scale and bias differ in length")
        n = max(scale.size, bias.size)
        return Weight(shape, codes=codes, nbits=nbits, scale=np.broadcast_to(scale, (n,)).copy(),
                      bias=np.broadcast_to(bias, (n,)).copy(), axis=axis)
    raise WeightError("quantized weights without linear or lookup-table parameters")


def _sized(arr: np.ndarray, count: int, kind: str) -> np.ndarray:
    if arr.size != count:
        raise WeightError(f"{kind} holds {arr.size} values, the layer declares {count}")
    return arr


def has_weights(wp: NeuralNetwork_pb2.WeightParams) -> bool:
    return bool(len(wp.floatValue) or len(wp.float16Value) or len(wp.rawValue) or len(wp.int8RawValue)
                or payload_indices(wp))


def iter_weight_params(msg: Any) -> Iterator[Any]:
    """Every WeightParams message under ``msg`` in field order, nested networks (branch, loop,
    pipeline stages) included. Matches by message name, so it walks any protobuf module's classes."""
    for fd, value in msg.ListFields():
        if fd.message_type is None:
            continue
        if fd.message_type.GetOptions().map_entry:
            value = list(value.values()) if fd.message_type.fields_by_name["value"].message_type else []
        for item in value if fd.is_repeated else [value]:
            if fd.message_type.name == "WeightParams":
                yield item
            else:
                yield from iter_weight_params(item)
