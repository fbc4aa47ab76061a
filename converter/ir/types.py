"""IR types: dtypes, symbolic dimensions, tensor/list/tuple/dict/state types.

The dtype vocabulary is MIL's (names as in the MIL op signatures: ``fp32``, ``int32``, ``uint4`` ...).
Sub-byte and non-numpy dtypes (``uint1..uint6``, ``int4``, ``bf16``, ``fp8*``) are held in numpy
arrays of a wider *storage* dtype, one element per value; the IR type keeps the real dtype.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from .symexpr import DimExpr, Symbol, SymExpr, is_symbolic

__all__ = ["DimExpr", "SymExpr", "Symbol", "is_symbolic"]  # re-exported: types is where dims live


@dataclass(frozen=True)
class DType:
    """A scalar element type."""

    name: str
    kind: str  # "float", "int", "uint", "bool", "string"
    bits: int
    storage: np.dtype = field(compare=False, repr=False)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def is_numeric(self) -> bool:
        return self.kind in ("float", "int", "uint")

    @property
    def is_subbyte(self) -> bool:
        return self.bits < 8 and self.kind != "bool"

    @property
    def has_native_numpy(self) -> bool:
        """True when numpy stores this dtype exactly (not sub-byte, not bf16/fp8)."""
        return self.name not in _NON_NATIVE

    def value_range(self) -> tuple[int, int]:
        """Inclusive integer range of an int/uint dtype."""
        if self.kind == "uint":
            return 0, (1 << self.bits) - 1
        if self.kind == "int":
            return -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        raise TypeError(f"{self.name} is not an integer dtype")

    def __str__(self) -> str:
        return self.name


_NON_NATIVE = {"uint1", "uint2", "uint3", "uint4", "uint6", "int4", "bf16", "fp8e4m3fn", "fp8e5m2"}

_DTYPE_TABLE = [
    ("bool", "bool", 8, np.bool_),
    ("string", "string", 0, np.str_),
    ("fp16", "float", 16, np.float16),
    ("fp32", "float", 32, np.float32),
    ("fp64", "float", 64, np.float64),
    ("bf16", "float", 16, np.uint16),
    ("fp8e4m3fn", "float", 8, np.uint8),
    ("fp8e5m2", "float", 8, np.uint8),
    ("int4", "int", 4, np.int8),
    ("int8", "int", 8, np.int8),
    ("int16", "int", 16, np.int16),
    ("int32", "int", 32, np.int32),
    ("int64", "int", 64, np.int64),
    ("uint1", "uint", 1, np.uint8),
    ("uint2", "uint", 2, np.uint8),
    ("uint3", "uint", 3, np.uint8),
    ("uint4", "uint", 4, np.uint8),
    ("uint6", "uint", 6, np.uint8),
    ("uint8", "uint", 8, np.uint8),
    ("uint16", "uint", 16, np.uint16),
    ("uint32", "uint", 32, np.uint32),
    ("uint64", "uint", 64, np.uint64),
]

DTYPES: dict[str, DType] = {
    name: DType(name, kind, bits, np.dtype(storage)) for name, kind, bits, storage in _DTYPE_TABLE
}

bool_ = DTYPES["bool"]
string = DTYPES["string"]
fp16 = DTYPES["fp16"]
fp32 = DTYPES["fp32"]
fp64 = DTYPES["fp64"]
bf16 = DTYPES["bf16"]
int4 = DTYPES["int4"]
int8 = DTYPES["int8"]
int16 = DTYPES["int16"]
int32 = DTYPES["int32"]
int64 = DTYPES["int64"]
uint1 = DTYPES["uint1"]
uint2 = DTYPES["uint2"]
uint3 = DTYPES["uint3"]
uint4 = DTYPES["uint4"]
uint6 = DTYPES["uint6"]
uint8 = DTYPES["uint8"]
uint16 = DTYPES["uint16"]
uint32 = DTYPES["uint32"]
uint64 = DTYPES["uint64"]

_FROM_NUMPY = {
    np.dtype(np.bool_): bool_,
    np.dtype(np.float16): fp16,
    np.dtype(np.float32): fp32,
    np.dtype(np.float64): fp64,
    np.dtype(np.int8): int8,
    np.dtype(np.int16): int16,
    np.dtype(np.int32): int32,
    np.dtype(np.int64): int64,
    np.dtype(np.uint8): uint8,
    np.dtype(np.uint16): uint16,
    np.dtype(np.uint32): uint32,
    np.dtype(np.uint64): uint64,
}


def dtype(name_or_np: str | DType | np.dtype | type) -> DType:
    """Look up a DType by MIL name, numpy dtype or numpy scalar type."""
    if isinstance(name_or_np, DType):
        return name_or_np
    if isinstance(name_or_np, str) and name_or_np in DTYPES:
        return DTYPES[name_or_np]
    npd = np.dtype(name_or_np)
    if npd.kind in ("U", "S", "O"):
        return string
    try:
        return _FROM_NUMPY[npd]
    except KeyError:
        raise TypeError(f"no IR dtype for {name_or_np!r}") from None


def dtype_of_array(arr: np.ndarray) -> DType:
    return dtype(np.asarray(arr).dtype)


# ---------------------------------------------------------------------------------------------
# Symbolic dimensions


_symbol_counter = itertools.count()


def fresh_symbol(prefix: str = "_s") -> Symbol:
    """A symbol with a process-unique name (for data-dependent output sizes)."""
    return Symbol(f"{prefix}{next(_symbol_counter)}")


Dim = int | Symbol | SymExpr  # a static size, a symbol, or an expression of symbols (symexpr)
Shape = tuple  # tuple[Dim, ...]


def is_static_dim(d: Dim) -> bool:
    return isinstance(d, (int, np.integer))


def is_static_shape(shape: Shape | None) -> bool:
    return shape is not None and all(is_static_dim(d) for d in shape)


def num_elements(shape: Iterable[Dim]) -> int | None:
    n = 1
    for d in shape:
        if not is_static_dim(d):
            return None
        n *= int(d)
    return n


# ---------------------------------------------------------------------------------------------
# Value types


class Type:
    """Base of all value types; ``str()`` gives the IR text form (``tensor<fp32, [2, n]>``)."""

    def __str__(self) -> str:
        from .text import format_type

        return format_type(self)


@dataclass(frozen=True)
class TensorType(Type):
    """A tensor. ``shape`` is a tuple of dims (``()`` for a scalar) or None for unknown rank."""

    dtype: DType
    shape: tuple | None = ()

    def __post_init__(self) -> None:
        shape = self.shape
        if shape is None:
            return
        if type(shape) is tuple and all(type(d) is int and d >= 0 for d in shape):
            return  # the common case, already normalised
        shape = tuple(int(d) if is_static_dim(d) else d for d in shape)
        for d in shape:
            if isinstance(d, int) and d < 0:
                raise ValueError(f"negative dimension in shape {shape}")
            if not isinstance(d, (int, DimExpr)):
                raise TypeError(f"bad dimension {d!r} in shape")
        object.__setattr__(self, "shape", shape)

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def is_scalar(self) -> bool:
        return self.shape == ()

    @property
    def is_static(self) -> bool:
        return is_static_shape(self.shape)

    def with_shape(self, shape: tuple | None) -> TensorType:
        return TensorType(self.dtype, shape)

    def with_dtype(self, dt: DType) -> TensorType:
        return TensorType(dt, self.shape)

    def symbols(self) -> list[Symbol]:
        """The symbols its dims depend on (those inside expressions included), each once."""
        found: dict[str, Symbol] = {}
        for d in self.shape or ():
            if isinstance(d, DimExpr):
                for s in d.symbols():
                    found.setdefault(s.name, s)
        return list(found.values())


@dataclass(frozen=True)
class ListType(Type):
    """A list of tensors of one element type; ``length`` is an int, a Symbol, or None (unknown)."""

    elem: Type
    length: Dim | None = None
    dynamic_length: bool = field(default=True, compare=False)


@dataclass(frozen=True)
class TupleType(Type):
    types: tuple


@dataclass(frozen=True)
class DictType(Type):
    key: Type
    value: Type


@dataclass(frozen=True)
class StateType(Type):
    """A mutable state (iOS18): wraps the tensor type it holds."""

    wrapped: TensorType


def tensor(dt: str | DType, shape: Iterable[Dim] | None = ()) -> TensorType:
    return TensorType(dtype(dt), None if shape is None else tuple(shape))


def scalar(dt: str | DType) -> TensorType:
    return TensorType(dtype(dt), ())


def type_of_array(arr: np.ndarray, dt: DType | None = None) -> TensorType:
    arr = np.asarray(arr)
    return TensorType(dt or dtype_of_array(arr), tuple(int(d) for d in arr.shape))


def dims_compatible(a: Dim, b: Dim) -> bool:
    """Whether two dims can describe the same run-time size: a symbolic dim matches anything, except
    that two dims differing by a non-zero constant (``s + 1`` and ``s``) never can. (Bounds are not
    used: a fresh symbol's default lower bound of 1 does not hold for data-dependent sizes.)"""
    if isinstance(a, DimExpr) or isinstance(b, DimExpr):
        diff = a - b
        return diff == 0 if not isinstance(diff, DimExpr) else True
    return int(a) == int(b)


def types_compatible(declared: Type, inferred: Type) -> bool:
    """Whether a declared type is consistent with an inferred one (symbols match anything)."""
    if declared == inferred:  # equal types are consistent (the common case, and the cheapest test)
        return True
    if isinstance(declared, TensorType) and isinstance(inferred, TensorType):
        if declared.dtype != inferred.dtype:
            return False
        if declared.shape is None or inferred.shape is None:
            return True
        return len(declared.shape) == len(inferred.shape) and all(
            dims_compatible(a, b) for a, b in zip(declared.shape, inferred.shape)
        )
    if isinstance(declared, ListType) and isinstance(inferred, ListType):
        if declared.length is not None and inferred.length is not None:
            if not dims_compatible(declared.length, inferred.length):
                return False
        return types_compatible(declared.elem, inferred.elem)
    if isinstance(declared, TupleType) and isinstance(inferred, TupleType):
        return len(declared.types) == len(inferred.types) and all(
            types_compatible(a, b) for a, b in zip(declared.types, inferred.types)
        )
    if isinstance(declared, DictType) and isinstance(inferred, DictType):
        return types_compatible(declared.key, inferred.key) and types_compatible(
            declared.value, inferred.value
        )
    if isinstance(declared, StateType) and isinstance(inferred, StateType):
        return types_compatible(declared.wrapped, inferred.wrapped)
    return False
