"""Casts that do nothing, and chains of casts that are one cast.

``cast(cast(x, d1), d2)`` equals ``cast(x, d2)`` whenever the first cast keeps every value of x's
dtype d0 exactly (it is then injective and value-preserving, and MIL's cast rules depend only on
the value: truncation and saturation for float -> int, wrap-around for int -> int, round to
nearest for -> float, ``!= 0`` for -> bool). That holds for: bool -> anything; an integer dtype to
a wider one holding its range; an integer dtype to a float whose significand holds every value
(int8/uint8 -> fp16, 16-bit ints -> fp32); fp16 -> fp32 -> fp64 (NaN, infinities and -0.0
included). Every other first cast loses values (fp32 -> fp16 rounds, int32 -> fp32 rounds above
2^24, float -> int truncates, -> bool collapses), and the chain is kept: those are refused with
the lost values named.
"""

from __future__ import annotations

from ...ir.builder import Builder
from ...ir.types import DType, TensorType
from ..rewrite import Match, op, rule, var
from ._common import tensor_type

#: significand bits (with the implicit one) of the float dtypes cast can produce
_SIGNIFICAND = {"fp16": 11, "fp32": 24, "fp64": 53}


def lossless(src: DType, dst: DType) -> str | None:
    """None when every value of ``src`` is exactly a value of ``dst``, else what is lost."""
    if src == dst or src.kind == "bool":
        return None
    if dst.kind == "bool":
        return f"{src.name} -> bool keeps only != 0"
    if src.is_int and dst.is_int:
        lo, hi = src.value_range()
        dlo, dhi = dst.value_range()
        return None if dlo <= lo and hi <= dhi else f"{src.name} -> {dst.name} wraps values outside {dlo}..{dhi}"
    if src.is_int and dst.is_float:
        lo, hi = src.value_range()
        bits = _SIGNIFICAND.get(dst.name)
        if bits is not None and max(-lo, hi) <= 2 ** bits:
            return None
        return f"{src.name} -> {dst.name} rounds integers above 2^{bits}" if bits else f"{src.name} -> {dst.name}"
    if src.is_float and dst.is_float:
        sb, db = _SIGNIFICAND.get(src.name), _SIGNIFICAND.get(dst.name)
        if sb is not None and db is not None and sb <= db:
            return None
        return f"{src.name} -> {dst.name} rounds"
    if src.is_float and dst.is_int:
        return f"{src.name} -> {dst.name} truncates"
    return f"{src.name} -> {dst.name} is not known to be exact"


def _same_dtype(m: Match) -> str | None:
    x, out = tensor_type(m["x"]), m.root.outputs[0].type
    if x is None or not isinstance(out, TensorType):
        return "not a tensor"
    if x.dtype != out.dtype:
        return f"casts {x.dtype.name} to {out.dtype.name}"
    return None


@rule(op.cast(x=var("x")), check=_same_dtype)
def cast_same_dtype(b: Builder, m: Match):
    """A cast to the dtype its input already has.

        %y: tensor<fp32, [2]> = cast(x=%x: tensor<fp32, [2]>, dtype="fp32")    ->    %x"""
    return m["x"]


def _first_cast_exact(m: Match) -> str | None:
    x, mid = tensor_type(m["x"]), tensor_type(m["inner"])
    if x is None or mid is None:
        return "not a tensor"
    lost = lossless(x.dtype, mid.dtype)
    return None if lost is None else f"the first cast loses values ({lost})"


@rule(op.cast(x=op.cast("inner", x=var("x")).multi_use(), dtype=var("dtype")),
      check=_first_cast_exact)
def cast_chain(b: Builder, m: Match):
    """Two casts in a row whose first keeps every value: one cast from the source (none when the
    chain comes back to the source dtype). The inner cast stays while something else reads it.

        %t: tensor<fp32, [4]> = cast(x=%x: tensor<fp16, [4]>, dtype="fp32")
        %y: tensor<fp16, [4]> = cast(x=%t, dtype="fp16")      ->    %x
        %y: tensor<int32, [4]> = cast(x=%t, dtype="int32")    ->    %y = cast(x=%x, dtype="int32")"""
    x, out = tensor_type(m["x"]), tensor_type(m.root.outputs[0])
    if x is not None and out is not None and x.dtype == out.dtype:
        return m["x"]
    return b.cast(x=m["x"], dtype=m["dtype"])


RULES = [cast_same_dtype, cast_chain]
