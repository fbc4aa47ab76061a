"""MIL protobuf <-> IR codec for types and values, shared by the MIL frontend and backend.

Immediate tensor encodings follow what Core ML reads (observed in coremltools' serializer):
bool -> bools; int64/uint64 -> longInts; fp16, int4, int8, uint1..uint8, uint32 -> bytes (sub-byte
values packed LSB first); int16/uint16/int32 -> ints; fp32 -> floats; fp64 -> doubles; string ->
strings. The reader also accepts the generic fields for any dtype (older producers).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np

from ..ir.bitpack import pack_subbyte, unpack_subbyte
from ..ir.runtime import ListValue
from ..ir.types import (
    DTYPES,
    DictType,
    DimExpr,
    DType,
    ListType,
    StateType,
    Symbol,
    TensorType,
    TupleType,
    Type,
)
from ..limits import MAX_DIMENSION, MAX_RANK, shape_problem
from .proto import MIL_pb2

# MIL DataType enum <-> IR dtype names
_PROTO_DTYPE = {
    MIL_pb2.BOOL: "bool",
    MIL_pb2.STRING: "string",
    MIL_pb2.FLOAT8E4M3FN: "fp8e4m3fn",
    MIL_pb2.FLOAT8E5M2: "fp8e5m2",
    MIL_pb2.FLOAT16: "fp16",
    MIL_pb2.FLOAT32: "fp32",
    MIL_pb2.FLOAT64: "fp64",
    MIL_pb2.BFLOAT16: "bf16",
    MIL_pb2.INT8: "int8",
    MIL_pb2.INT16: "int16",
    MIL_pb2.INT32: "int32",
    MIL_pb2.INT64: "int64",
    MIL_pb2.INT4: "int4",
    MIL_pb2.UINT8: "uint8",
    MIL_pb2.UINT16: "uint16",
    MIL_pb2.UINT32: "uint32",
    MIL_pb2.UINT64: "uint64",
    MIL_pb2.UINT4: "uint4",
    MIL_pb2.UINT2: "uint2",
    MIL_pb2.UINT1: "uint1",
    MIL_pb2.UINT6: "uint6",
    MIL_pb2.UINT3: "uint3",
}
_DTYPE_PROTO = {v: k for k, v in _PROTO_DTYPE.items()}

BYTES_ENCODED = {"fp16", "int4", "int8", "uint1", "uint2", "uint3", "uint4", "uint6", "uint8", "uint32",
                 "bf16", "fp8e4m3fn", "fp8e5m2"}
INTS_ENCODED = {"int16", "uint16", "int32"}
LONGS_ENCODED = {"int64", "uint64"}


class CodecError(Exception):
    """Raised inside the codec; callers turn it into a located FormatError."""


def dtype_from_proto(code: int) -> DType:
    name = _PROTO_DTYPE.get(code)
    if name is None:
        raise CodecError(f"unknown MIL data type code {code}")
    return DTYPES[name]


def dtype_to_proto(dt: DType) -> int:
    return _DTYPE_PROTO[dt.name]


# ---------------------------------------------------------------------------------------------
# Types


def type_from_proto(vt: MIL_pb2.ValueType, new_symbol: Callable[[], Symbol]) -> Type:
    """ValueType -> IR type; unknown dims become symbols from ``new_symbol``."""
    which = vt.WhichOneof("type")
    if which == "tensorType":
        tt = vt.tensorType
        dt = dtype_from_proto(tt.dataType)
        if tt.rank < 0:
            return TensorType(dt, None)
        if len(tt.dimensions) != tt.rank:
            raise CodecError(f"tensor type declares rank {tt.rank} but lists {len(tt.dimensions)} dimensions")
        if tt.rank > MAX_RANK:
            raise CodecError(f"tensor type of rank {tt.rank}: more than the {MAX_RANK} supported")
        dims: list[Any] = []
        for d in tt.dimensions:
            kind = d.WhichOneof("dimension")
            if kind == "constant":
                if d.constant.size > MAX_DIMENSION:
                    raise CodecError(f"tensor dimension {d.constant.size} is larger than {MAX_DIMENSION}")
                dims.append(int(d.constant.size))
            elif kind == "unknown":
                if d.unknown.variadic:
                    return TensorType(dt, None)
                dims.append(new_symbol())
            else:
                raise CodecError("tensor dimension is neither constant nor unknown")
        return TensorType(dt, tuple(dims))
    if which == "listType":
        lt = vt.listType
        elem = type_from_proto(lt.type, new_symbol)
        length: Any = None
        kind = lt.length.WhichOneof("dimension")
        if kind == "constant":
            if lt.length.constant.size > MAX_DIMENSION:
                raise CodecError(f"list length {lt.length.constant.size} is larger than {MAX_DIMENSION}")
            length = int(lt.length.constant.size)
        return ListType(elem, length)
    if which == "tupleType":
        return TupleType(tuple(type_from_proto(t, new_symbol) for t in vt.tupleType.types))
    if which == "dictionaryType":
        return DictType(type_from_proto(vt.dictionaryType.keyType, new_symbol),
                        type_from_proto(vt.dictionaryType.valueType, new_symbol))
    if which == "stateType":
        wrapped = type_from_proto(vt.stateType.wrappedType, new_symbol)
        if not isinstance(wrapped, TensorType):
            raise CodecError("state type must wrap a tensor type")
        return StateType(wrapped)
    raise CodecError("value type is empty")


def _has_symbols(t: Type) -> bool:
    if isinstance(t, TensorType):
        return t.shape is not None and not all(type(d) is int for d in t.shape)
    if isinstance(t, ListType):
        return not isinstance(t.length, (int, type(None))) or _has_symbols(t.elem)
    if isinstance(t, TupleType):
        return any(_has_symbols(x) for x in t.types)
    if isinstance(t, DictType):
        return _has_symbols(t.key) or _has_symbols(t.value)
    if isinstance(t, StateType):
        return _has_symbols(t.wrapped)
    return True


class TypeDecoder:
    """`type_from_proto` memoized by the ValueType's serialized bytes.

    A program's thousands of values share a few dozen types, and serializing a small message is
    far cheaper than decoding it field by field. Types are immutable, so values share them. A type
    with unknown dims is decoded every time: each of its unknown dims is a fresh symbol.
    """

    __slots__ = ("new_symbol", "_memo")

    def __init__(self, new_symbol: Callable[[], Symbol]) -> None:
        self.new_symbol = new_symbol
        self._memo: dict[bytes, Type] = {}

    def __call__(self, vt: MIL_pb2.ValueType) -> Type:
        key = vt.SerializeToString()
        t = self._memo.get(key)
        if t is None:
            t = type_from_proto(vt, self.new_symbol)
            if not _has_symbols(t):
                self._memo[key] = t
        return t


def type_to_proto(t: Type, out: MIL_pb2.ValueType | None = None) -> MIL_pb2.ValueType:
    """The ValueType of ``t`` (written into ``out``, an empty message, when given). A program's
    values share a few types: each is encoded once and then merged in from its bytes."""
    vt = out if out is not None else MIL_pb2.ValueType()
    try:
        data = _encoded_type(t)
    except TypeError:  # pragma: no cover - an unhashable type: encoded field by field
        return _build_type(t, vt)
    vt.MergeFromString(data)
    return vt


@lru_cache(maxsize=4096)
def _encoded_type(t: Type) -> bytes:
    return _build_type(t, MIL_pb2.ValueType()).SerializeToString()


def _build_type(t: Type, vt: MIL_pb2.ValueType) -> MIL_pb2.ValueType:
    if isinstance(t, TensorType):
        tt = vt.tensorType
        tt.dataType = dtype_to_proto(t.dtype)
        if t.shape is None:
            tt.rank = -1
        else:
            tt.rank = len(t.shape)
            for d in t.shape:
                dim = tt.dimensions.add()
                if isinstance(d, DimExpr):  # MIL dims are sizes or unknown: expressions too are unknown
                    dim.unknown.variadic = False
                else:
                    dim.constant.size = int(d)
        if tt.rank == 0:
            tt.ClearField("rank")  # scalars: Core ML writes no rank field
    elif isinstance(t, ListType):
        _build_type(t.elem, vt.listType.type)
        if isinstance(t.length, int):
            vt.listType.length.constant.size = t.length
        else:
            vt.listType.length.unknown.variadic = False
    elif isinstance(t, TupleType):
        vt.tupleType.SetInParent()
        for x in t.types:
            _build_type(x, vt.tupleType.types.add())
    elif isinstance(t, DictType):
        _build_type(t.key, vt.dictionaryType.keyType)
        _build_type(t.value, vt.dictionaryType.valueType)
    elif isinstance(t, StateType):
        _build_type(t.wrapped, vt.stateType.wrappedType)
    else:
        raise CodecError(f"cannot encode type {t}")
    return vt


# ---------------------------------------------------------------------------------------------
# Packed sub-byte data (immediate bytes and blobs share the layout: LSB first; see blob.py)


def unpack_bits(data: bytes | np.ndarray, dt: DType, count: int) -> np.ndarray:
    raw = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data.view(np.uint8)
    try:
        return unpack_subbyte(raw, dt.bits, count, dt.kind == "int")
    except ValueError as e:
        raise CodecError(f"{dt.name} data: {e}") from None


def pack_bits(values: np.ndarray, dt: DType) -> bytes:
    v = np.asarray(values).reshape(-1).astype(dt.storage)
    return pack_subbyte(v, dt.bits).tobytes()


# ---------------------------------------------------------------------------------------------
# Values


@lru_cache(maxsize=4096)
def static_size(t: TensorType) -> tuple[tuple[int, ...], int] | str:
    """(shape, element count) of a static tensor type whose size is within the limits, else why
    not ("non-static", or the limit it breaks). Remembered per type: every weight asks."""
    if t.shape is None or any(isinstance(d, DimExpr) for d in t.shape):
        return "non-static"
    shape = tuple(int(d) for d in t.shape)
    why = shape_problem(shape)
    return why if why else (shape, math.prod(shape))


def tensor_from_immediate(tv: MIL_pb2.TensorValue, t: TensorType) -> np.ndarray:
    """Decode an immediate TensorValue of declared type ``t`` (shape must be static)."""
    dt = t.dtype
    size = static_size(t)
    if size == "non-static":
        raise CodecError(f"immediate value has a non-static type {t}")
    if isinstance(size, str):
        raise CodecError(f"immediate value of type {t}: {size}")
    shape, count = size
    which = tv.WhichOneof("value")
    if which is None:
        if count != 0:
            raise CodecError(f"empty immediate value for a {t} tensor of {count} elements")
        return np.zeros(shape, dtype=np.str_ if dt.name == "string" else dt.storage)
    if which == "bytes":
        data = tv.bytes.values
        if dt.name == "string":
            raise CodecError("bytes data for a string tensor (strings are stored as strings)")
        if dt.is_subbyte:
            arr = unpack_bits(data, dt, count)
        else:
            itemsize = dt.storage.itemsize
            if len(data) != count * itemsize:
                raise CodecError(f"{len(data)} bytes for {count} {dt.name} values")
            arr = np.frombuffer(data, dtype=dt.storage).copy()
    elif which == "strings":
        if dt.name != "string":
            raise CodecError(f"string data for a {dt.name} tensor")
        arr = np.array(list(tv.strings.values), dtype=np.str_)
    else:
        field = getattr(tv, which).values
        if dt.name == "string":
            raise CodecError(f"{which} data for a string tensor")
        if which == "bools" and dt.name != "bool":
            raise CodecError(f"bool data for a {dt.name} tensor")
        _check_representable(field, which, dt)
        arr = np.array(list(field), dtype=dt.storage if dt.has_native_numpy else np.int64)
        if not dt.has_native_numpy:
            arr = arr.astype(dt.storage)
    if arr.size != count:
        raise CodecError(f"{arr.size} values for a tensor of shape {list(shape)}")
    return arr.reshape(shape)


def _check_representable(values: Any, field: str, dt: DType) -> None:
    """The generic fields (floats, doubles, ints, longInts) are read for any numeric dtype, but an
    integer or bool tensor only takes values it holds exactly (integral, in range): anything else
    means the data and the declared type disagree, and casting would silently change the values."""
    if dt.is_float or field == "bools" or dt.name == "uint64":
        return
    data = np.asarray(values, dtype=np.float64 if field in ("floats", "doubles") else np.int64)
    if data.size == 0:
        return
    if data.dtype.kind == "f" and not np.all(np.isfinite(data) & (data == np.round(data))):
        bad = data[~(np.isfinite(data) & (data == np.round(data)))][0].item()
        raise CodecError(f"{field} value {bad} does not fit the declared dtype {dt.name}: not an integer")
    lo, hi = (0, 1) if dt.name == "bool" else dt.value_range()
    if data.min() < lo or data.max() > hi:
        bad = (data.min() if data.min() < lo else data.max()).item()
        raise CodecError(f"{field} value {bad} does not fit the declared dtype {dt.name}: outside [{lo}, {hi}]")


def tensor_to_immediate(arr: np.ndarray, t: TensorType, tv: MIL_pb2.TensorValue) -> None:
    dt = t.dtype
    flat = np.asarray(arr).reshape(-1)
    name = dt.name
    if name == "string":
        tv.strings.values.extend(str(x) for x in flat)
        if flat.size == 0:
            tv.strings.SetInParent()
    elif name == "bool":
        tv.bools.values.extend(bool(x) for x in flat)
        if flat.size == 0:
            tv.bools.SetInParent()
    elif name in BYTES_ENCODED:
        tv.bytes.values = pack_bits(flat, dt) if dt.is_subbyte else np.ascontiguousarray(flat, dt.storage).tobytes()
    elif name in INTS_ENCODED:
        tv.ints.values.extend(int(x) for x in flat)
        if flat.size == 0:
            tv.ints.SetInParent()
    elif name in LONGS_ENCODED:
        tv.longInts.values.extend(int(x) for x in flat)
        if flat.size == 0:
            tv.longInts.SetInParent()
    elif name == "fp32":
        tv.floats.values.extend(flat.astype(np.float32).tolist())
        if flat.size == 0:
            tv.floats.SetInParent()
    elif name == "fp64":
        tv.doubles.values.extend(flat.astype(np.float64).tolist())
        if flat.size == 0:
            tv.doubles.SetInParent()
    else:
        raise CodecError(f"cannot encode {name} as an immediate value")


def string_to_proto(s: str, out: MIL_pb2.Value) -> bool:
    """Encode ``s`` as a string scalar into ``out`` (an empty Value), as `value_to_proto` encodes
    ``np.array(s)``, without numpy (every op's name attribute); False, leaving ``out`` untouched,
    for a string numpy would change (it drops trailing NULs)."""
    if s.endswith("\x00"):
        return False
    out.type.tensorType.dataType = MIL_pb2.STRING
    out.immediateValue.tensor.strings.values.append(s)
    return True


BlobLoader = Callable[[str, int, TensorType], np.ndarray]


def value_from_proto(v: MIL_pb2.Value, load_blob: BlobLoader | None, new_symbol: Callable[[], Symbol],
                     decode_type: Callable[[MIL_pb2.ValueType], Type] | None = None) -> tuple[Any, Type]:
    """Decode a Value -> (numpy array | ListValue | tuple | dict, its IR type). ``decode_type``
    (e.g. a `TypeDecoder`) decodes the value types, else `type_from_proto` with ``new_symbol``."""
    t = decode_type(v.type) if decode_type is not None else type_from_proto(v.type, new_symbol)
    which = v.WhichOneof("value")
    if which == "blobFileValue":
        if not isinstance(t, TensorType):
            raise CodecError("a blob file value must have a tensor type")
        if load_blob is None:
            raise CodecError("value refers to a weight file, but the model has no weights directory")
        return load_blob(v.blobFileValue.fileName, int(v.blobFileValue.offset), t), t
    if which != "immediateValue":
        raise CodecError("value has neither an immediate nor a blob file value")
    iv = v.immediateValue
    kind = iv.WhichOneof("value")
    if kind == "tensor":
        if not isinstance(t, TensorType):
            raise CodecError(f"tensor data for a value of type {t}")
        return tensor_from_immediate(iv.tensor, t), t
    if kind == "list":
        if not isinstance(t, ListType):
            raise CodecError(f"list data for a value of type {t}")
        items = [value_from_proto(x, load_blob, new_symbol, decode_type)[0] for x in iv.list.values]
        return ListValue(t.elem, items, dynamic_length=False), ListType(t.elem, len(items), False)
    if kind == "tuple":
        items = [value_from_proto(x, load_blob, new_symbol, decode_type) for x in iv.tuple.values]
        return tuple(x for x, _ in items), TupleType(tuple(tt for _, tt in items))
    if kind == "dictionary":
        d = {}
        for kv in iv.dictionary.values:
            k, _ = value_from_proto(kv.key, load_blob, new_symbol, decode_type)
            if not (isinstance(k, np.ndarray) and k.size == 1):
                shown = f"a tensor of shape {list(k.shape)}" if isinstance(k, np.ndarray) else type(k).__name__
                raise CodecError(f"a dictionary key must be a single value, got {shown}")
            val, _ = value_from_proto(kv.value, load_blob, new_symbol, decode_type)
            d[k.item()] = val
        return d, t
    raise CodecError("immediate value is empty")


def value_to_proto(val: Any, t: Type, out: MIL_pb2.Value,
                   store_blob: Callable[[np.ndarray, TensorType], tuple[str, int]] | None = None) -> None:
    """Encode ``val`` of type ``t`` into ``out`` (``store_blob`` decides on and writes blobs)."""
    type_to_proto(t, out.type)
    if isinstance(t, TensorType):
        arr = np.asarray(val)
        if store_blob is not None:
            placed = store_blob(arr, t)
            if placed is not None:
                out.blobFileValue.fileName, out.blobFileValue.offset = placed
                return
        tensor_to_immediate(arr, t, out.immediateValue.tensor)
    elif isinstance(t, ListType) and isinstance(val, ListValue):
        out.immediateValue.list.SetInParent()
        for item in val.items:
            item_t = TensorType(t.elem.dtype, np.shape(item)) if isinstance(t.elem, TensorType) else t.elem
            value_to_proto(item, item_t, out.immediateValue.list.values.add(), store_blob)
    elif isinstance(t, TupleType):
        out.immediateValue.tuple.SetInParent()
        for item, it in zip(val, t.types):
            value_to_proto(item, it, out.immediateValue.tuple.values.add(), store_blob)
    elif isinstance(t, DictType):
        out.immediateValue.dictionary.SetInParent()
        for k, item in val.items():
            kv = out.immediateValue.dictionary.values.add()
            value_to_proto(np.asarray(k), TensorType(t.key.dtype, ()), kv.key)  # type: ignore[union-attr]
            value_to_proto(item, t.value, kv.value, store_blob)
    else:
        raise CodecError(f"cannot encode a value of type {t}")


def value_type(val: Any) -> Type:
    """The IR type of a decoded value (numpy array, ListValue, tuple or dict), for re-encoding."""
    if isinstance(val, ListValue):
        return ListType(val.elem_type, len(val.items), dynamic_length=False)
    if isinstance(val, tuple):
        return TupleType(tuple(value_type(x) for x in val))
    if isinstance(val, dict):
        if not val:
            raise CodecError("cannot encode an empty dictionary (its key type is unknown)")
        k, v = next(iter(val.items()))
        return DictType(value_type(np.asarray(k)), value_type(v))
    arr = np.asarray(val)
    if arr.dtype.kind in ("U", "S", "O"):
        return TensorType(DTYPES["string"], arr.shape)
    from ..ir.types import type_of_array

    return type_of_array(arr)
