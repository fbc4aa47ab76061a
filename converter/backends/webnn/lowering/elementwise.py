"""Elementwise unary and binary math, comparisons, logic, cast and select."""

from __future__ import annotations

from typing import Any

import numpy as np

from ....ir.core import Op
from ..emitter import GraphEmitter, LoweringError, Operand
from ._common import broadcast_shape, cast, common_layout, float_scalar, out
from .registry import lowering, unsupported

# IR op -> WebNN method taking one operand
_UNARY = {"abs": "abs", "ceil": "ceil", "cos": "cos", "erf": "erf", "exp": "exp", "floor": "floor",
          "round": "roundEven", "sign": "sign", "sin": "sin", "sqrt": "sqrt", "tan": "tan", "tanh": "tanh",
          "relu": "relu", "sigmoid": "sigmoid", "softsign": "softsign", "identity": "identity"}


def unary(e: GraphEmitter, op: Op, method: str, x_key: str = "x", **options: object) -> Operand:
    x = e.any(op.inputs[x_key])
    result = e.emit(method, x, shape=x.shape, dtype=e.dtype_of(out(op)), perm=x.perm, **options)
    e.bind(out(op), result)
    return result


def _lower_unary(e: GraphEmitter, op: Op) -> None:
    unary(e, op, _UNARY[op.type])


for _t in _UNARY:
    lowering(_t)(_lower_unary)


@lowering("logical_not")
def _logical_not(e: GraphEmitter, op: Op) -> None:
    unary(e, op, "logicalNot")


@lowering("square", kind="decomposed", note="mul(x, x)")
def _square(e: GraphEmitter, op: Op) -> None:
    x = e.any(op.inputs["x"])
    e.bind(out(op), e.emit("mul", x, x, shape=x.shape, dtype=x.dtype, perm=x.perm))


def _with_epsilon(e: GraphEmitter, op: Op) -> Operand:
    x = e.any(op.inputs["x"])
    eps = float_scalar(e.const_param(op, "epsilon"))  # added even when 0: -0 + 0 is +0, as in MIL
    return e.emit("add", x, e.scalar(eps, x.dtype), shape=x.shape, dtype=x.dtype, perm=x.perm)


@lowering("log", kind="decomposed", note="log(x + epsilon); a subnormal epsilon (the default) as log(epsilon) where "
                                        "x == 0")
def _log(e: GraphEmitter, op: Op) -> None:
    eps = float_scalar(e.const_param(op, "epsilon"))
    if 0.0 < eps < np.finfo(np.float32).tiny:  # MIL's default 1e-45: devices flush it to 0 (log(0) = -inf)
        x = e.any(op.inputs["x"])
        zero = e.emit("equal", x, e.scalar(0.0, x.dtype), shape=x.shape, dtype="uint8", perm=x.perm)
        log_eps = float(np.log(np.float64(np.float32(eps))))
        lg = e.emit("log", x, shape=x.shape, dtype=x.dtype, perm=x.perm)
        e.bind(out(op), e.emit("where", zero, e.scalar(log_eps, x.dtype), lg, shape=x.shape, dtype=x.dtype,
                               perm=x.perm))
        return
    y = _with_epsilon(e, op)
    e.bind(out(op), e.emit("log", y, shape=y.shape, dtype=y.dtype, perm=y.perm))


@lowering("inverse", kind="decomposed", note="reciprocal(x + epsilon)")
def _inverse(e: GraphEmitter, op: Op) -> None:
    y = _with_epsilon(e, op)
    e.bind(out(op), e.emit("reciprocal", y, shape=y.shape, dtype=y.dtype, perm=y.perm))


@lowering("rsqrt", kind="decomposed", note="reciprocal(sqrt(x + epsilon))")
def _rsqrt(e: GraphEmitter, op: Op) -> None:
    y = _with_epsilon(e, op)
    s = e.emit("sqrt", y, shape=y.shape, dtype=y.dtype, perm=y.perm)
    e.bind(out(op), e.emit("reciprocal", s, shape=s.shape, dtype=s.dtype, perm=s.perm))


@lowering("exp2", kind="decomposed", note="pow(2, x) for float x")
def _exp2(e: GraphEmitter, op: Op) -> None:
    x = e.any(op.inputs["x"])
    if not x.dtype.startswith("float"):
        raise LoweringError("exp2 of integers has no WebNN form (pow is float-only in Chromium)")
    e.bind(out(op), e.emit("pow", e.scalar(2.0, x.dtype), x, shape=x.shape, dtype=x.dtype, perm=x.perm))


@lowering("clip")
def _clip(e: GraphEmitter, op: Op) -> None:
    lo, hi = float_scalar(e.const_param(op, "alpha")), float_scalar(e.const_param(op, "beta"))
    if lo > hi:  # iOS15 allows it: min(max(x, lo), hi) is hi everywhere (NaN stays NaN)
        x = e.any(op.inputs["x"])
        m = e.emit("max", x, e.scalar(lo, x.dtype), shape=x.shape, dtype=x.dtype, perm=x.perm)
        e.bind(out(op), e.emit("min", m, e.scalar(hi, x.dtype), shape=x.shape, dtype=x.dtype, perm=x.perm))
        return
    unary(e, op, "clamp", minValue=lo, maxValue=hi)


@lowering("threshold", note="max(x, alpha)")
def _threshold(e: GraphEmitter, op: Op) -> None:
    x = e.any(op.inputs["x"])
    alpha = e.scalar(float_scalar(e.const_param(op, "alpha")), x.dtype)
    e.bind(out(op), e.emit("max", x, alpha, shape=x.shape, dtype=x.dtype, perm=x.perm))


# -- binary -------------------------------------------------------------------------------------------

_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "real_div": "div", "maximum": "max", "minimum": "min",
           "pow": "pow", "equal": "equal", "not_equal": "notEqual", "greater": "greater",
           "greater_equal": "greaterOrEqual", "less": "lesser", "less_equal": "lesserOrEqual",
           "logical_and": "logicalAnd", "logical_or": "logicalOr", "logical_xor": "logicalXor"}
_COMPARISONS = {"equal", "not_equal", "greater", "greater_equal", "less", "less_equal"}


def binary(e: GraphEmitter, op: Op, method: str) -> Operand:
    (a, b), perm = common_layout(e, [op.inputs["x"], op.inputs["y"]])
    if op.type in _COMPARISONS and a.dtype == "uint8":  # Chromium compares no uint8 (bool) operands
        a, b = cast(e, a, "int32"), cast(e, b, "int32")
    shape = broadcast_shape(a.shape, b.shape)
    result = e.emit(method, a, b, shape=shape, dtype=e.dtype_of(out(op)), perm=perm)
    e.bind(out(op), result)
    return result


def _lower_binary(e: GraphEmitter, op: Op) -> None:
    if op.type == "real_div" and not e.dtype_of(op.inputs["x"]).startswith("float"):
        raise LoweringError("integer real_div has no WebNN form")
    binary(e, op, _BINARY[op.type])


for _t in _BINARY:
    lowering(_t)(_lower_binary)


def _int_floor_div(e: GraphEmitter, a: Operand, b: Operand, shape: tuple[int, ...], perm) -> tuple[Operand, Operand]:  # noqa: ANN001
    """(floor(a / b), a - floor(a / b) * b) for int32: WebNN's integer div truncates toward zero,
    so a truncated quotient whose remainder is nonzero and of the other sign than b is one too big."""
    q = e.emit("div", a, b, shape=shape, dtype="int32", perm=perm)
    r = e.emit("sub", a, e.emit("mul", q, b, shape=shape, dtype="int32", perm=perm), shape=shape, dtype="int32",
               perm=perm)
    zero = e.scalar(0, "int32")
    inexact = e.emit("notEqual", r, zero, shape=shape, dtype="uint8", perm=perm)
    signs_differ = e.emit("logicalXor", e.emit("lesser", r, zero, shape=shape, dtype="uint8", perm=perm),
                          e.emit("lesser", b, zero, shape=b.shape, dtype="uint8", perm=perm),
                          shape=shape, dtype="uint8", perm=perm)
    fix = cast(e, e.emit("logicalAnd", inexact, signs_differ, shape=shape, dtype="uint8", perm=perm), "int32")
    floor = e.emit("sub", q, fix, shape=shape, dtype="int32", perm=perm)
    rem = e.emit("add", r, e.emit("mul", fix, b, shape=shape, dtype="int32", perm=perm), shape=shape, dtype="int32",
                 perm=perm)
    return floor, rem


def _float_floor_div(e: GraphEmitter, a: Operand, b: Operand, shape: tuple[int, ...], perm) -> Operand:  # noqa: ANN001
    q = e.emit("div", a, b, shape=shape, dtype=a.dtype, perm=perm)
    return e.emit("floor", q, shape=shape, dtype=a.dtype, perm=perm)


def _division_operands(e: GraphEmitter, op: Op) -> tuple[Operand, Operand, tuple[int, ...], Any]:
    (a, b), perm = common_layout(e, [op.inputs["x"], op.inputs["y"]])
    if a.dtype not in ("float32", "float16", "int32"):
        raise LoweringError(f"{op.type} of {a.dtype} has no WebNN form")
    return a, b, broadcast_shape(a.shape, b.shape), perm


@lowering("floor_div", kind="decomposed", note="floats: floor(div); int32: truncating div corrected to floor")
def _floor_div(e: GraphEmitter, op: Op) -> None:
    a, b, shape, perm = _division_operands(e, op)
    if a.dtype == "int32":
        e.bind(out(op), _int_floor_div(e, a, b, shape, perm)[0])
    else:
        e.bind(out(op), _float_floor_div(e, a, b, shape, perm))


@lowering("mod", kind="decomposed", note="x - floor(x / y) * y (the divisor's sign); int32 exact")
def _mod(e: GraphEmitter, op: Op) -> None:
    a, b, shape, perm = _division_operands(e, op)
    if a.dtype == "int32":
        e.bind(out(op), _int_floor_div(e, a, b, shape, perm)[1])
        return
    q = _float_floor_div(e, a, b, shape, perm)
    e.bind(out(op), e.emit("sub", a, e.emit("mul", q, b, shape=shape, dtype=a.dtype, perm=perm),
                           shape=shape, dtype=a.dtype, perm=perm))


@lowering("select", note="where (uint8 condition)")
def _select(e: GraphEmitter, op: Op) -> None:
    (c, a, b), perm = common_layout(e, [op.inputs["cond"], op.inputs["a"], op.inputs["b"]])
    c = cast(e, c, "uint8")
    if a.dtype == "uint8":  # where takes no uint8 values in Chromium: select in int32
        a, b = cast(e, a, "int32"), cast(e, b, "int32")
        r = e.emit("where", c, a, b, shape=broadcast_shape(c.shape, a.shape, b.shape), dtype="int32", perm=perm)
        e.bind(out(op), cast(e, r, "uint8"))
        return
    e.bind(out(op), e.emit("where", c, a, b, shape=broadcast_shape(c.shape, a.shape, b.shape),
                           dtype=e.dtype_of(out(op)), perm=perm))


@lowering("cast", note="cast (float -> int truncates toward zero in WebNN, as in MIL; NaN -> 0 by where(isNaN)); "
                       "to bool: notEqual(x, 0); to int16/uint16 (int32 in WebNN): saturated or wrapped")
def _cast(e: GraphEmitter, op: Op) -> None:
    x = e.any(op.inputs["x"])
    target = out(op).type.dtype.name  # type: ignore[union-attr]
    dtype = e.data_type(target)
    if target == "bool":  # nonzero -> 1
        zero = e.scalar(0, x.dtype)
        src = x if x.dtype != "uint8" else cast(e, x, "int32")
        if src is not x:
            zero = e.scalar(0, "int32")
        e.bind(out(op), e.emit("notEqual", src, zero, shape=x.shape, dtype="uint8", perm=x.perm))
        return
    if target in _RANGE16:
        e.bind(out(op), _to_16_bit(e, x, target))
        return
    if x.dtype == dtype:
        e.bind(out(op), e.emit("identity", x, shape=x.shape, dtype=dtype, perm=x.perm))
        return
    if x.dtype.startswith("float") and not dtype.startswith("float"):
        x = _nan_to_zero(e, x)
    e.bind(out(op), e.emit("cast", x, dtype, shape=x.shape, dtype=dtype, perm=x.perm))


_RANGE16 = {"int16": (-(2**15), 2**15 - 1), "uint16": (0, 2**16 - 1)}


def _nan_to_zero(e: GraphEmitter, x: Operand) -> Operand:
    """MIL casts NaN to integer 0 (Chromium gives the type's maximum)."""
    nan = e.emit("isNaN", x, shape=x.shape, dtype="uint8", perm=x.perm)
    return e.emit("where", nan, e.scalar(0.0, x.dtype), x, shape=x.shape, dtype=x.dtype, perm=x.perm)


def _to_16_bit(e: GraphEmitter, x: Operand, target: str) -> Operand:
    """MIL cast to int16/uint16, held as int32 here (WebNN has no 16-bit integers): floats saturate
    to the target's range (NaN -> 0), integers wrap as two's complement."""
    lo, hi = _RANGE16[target]
    if x.dtype.startswith("float"):
        clamped = e.emit("clamp", _nan_to_zero(e, x), shape=x.shape, dtype=x.dtype, perm=x.perm, minValue=float(lo),
                         maxValue=float(hi))
        return cast(e, clamped, "int32")
    i = cast(e, x, "int32")
    if lo:
        i = e.emit("add", i, e.scalar(-lo, "int32"), shape=x.shape, dtype="int32", perm=x.perm)
    wrapped = _int_floor_div(e, i, e.scalar(2**16, "int32"), x.shape, x.perm)[1]
    if lo:
        wrapped = e.emit("add", wrapped, e.scalar(lo, "int32"), shape=x.shape, dtype="int32", perm=x.perm)
    return wrapped


unsupported("random values: WebNN has no random number generator", "random_bernoulli", "random_categorical",
            "random_normal", "random_uniform")
unsupported("an output size that depends on the data: WebNN graphs are static", "non_zero", "non_maximum_suppression")
unsupported("WebNN has no sort", "argsort")
unsupported("state: WebNN graphs have no state", "read_state", "coreml_update_state")
