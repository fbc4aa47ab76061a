"""Elementwise unary and binary math, comparisons and logic.

Where MIL and ONNX differ (each pinned by a value test in tests/onnx_backend):

- ``floor_div`` of integers floors (ONNX ``Div`` truncates toward zero): the truncated quotient
  minus one where the remainder is nonzero and its sign differs from the divisor's;
- ``mod`` takes the divisor's sign: ``Mod(fmod=0)`` for integers, and for floats the C remainder
  ``Mod(fmod=1)`` plus the divisor where the two signs differ (as numpy's ``mod``);
- ``real_div`` of integers is the real quotient truncated, which is ONNX's integer ``Div``;
- ``log``/``inverse``/``rsqrt`` add their ``epsilon`` first; ``exp2`` is ``Pow(2, x)`` (integers:
  computed in float32 and converted with MIL's saturating cast);
- ``clip`` with alpha > beta (iOS15 allows it) is ``Min(Max(x, alpha), beta)``, i.e. beta everywhere.
"""

from __future__ import annotations

import numpy as np

from ....ir.core import Op
from ..emitter import OnnxEmitter
from .cast import float_to_int
from .registry import lowering

# IR op -> ONNX op of one input
_UNARY = {"abs": "Abs", "acos": "Acos", "asin": "Asin", "atan": "Atan", "atanh": "Atanh", "ceil": "Ceil",
          "cos": "Cos", "cosh": "Cosh", "erf": "Erf", "exp": "Exp", "floor": "Floor", "round": "Round",
          "sign": "Sign", "sin": "Sin", "sinh": "Sinh", "sqrt": "Sqrt", "tan": "Tan", "tanh": "Tanh",
          "logical_not": "Not", "identity": "Identity"}


def _lower_unary(e: OnnxEmitter, op: Op) -> None:
    e.node(_UNARY[op.type], [e.input(op)], [e.out(op)])


for _t, _onnx in _UNARY.items():
    lowering(_t, note=_onnx if _onnx.lower() != _t.replace("_", "") else "")(_lower_unary)


@lowering("square", kind="decomposed", note="Mul(x, x)")
def _square(e: OnnxEmitter, op: Op) -> None:
    x = e.input(op)
    e.node("Mul", [x, x], [e.out(op)])


def _plus_epsilon(e: OnnxEmitter, op: Op) -> str:
    """x + epsilon (added even when 0: -0 + 0 is +0, as in MIL)."""
    eps = e.const_param(op, "epsilon")
    return e.node("Add", [e.input(op), e.scalar(np.asarray(eps).reshape(()), op.inputs["x"])])


@lowering("log", kind="decomposed", note="Log(x + epsilon)")
def _log(e: OnnxEmitter, op: Op) -> None:
    e.node("Log", [_plus_epsilon(e, op)], [e.out(op)])


@lowering("inverse", kind="decomposed", note="Reciprocal(x + epsilon)")
def _inverse(e: OnnxEmitter, op: Op) -> None:
    e.node("Reciprocal", [_plus_epsilon(e, op)], [e.out(op)])


@lowering("rsqrt", kind="decomposed", note="Reciprocal(Sqrt(x + epsilon))")
def _rsqrt(e: OnnxEmitter, op: Op) -> None:
    e.node("Reciprocal", [e.node("Sqrt", [_plus_epsilon(e, op)])], [e.out(op)])


@lowering("exp2", kind="decomposed", note="Pow(2, x); int32 x through float32 and MIL's saturating cast back")
def _exp2(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    dt = e.dtype(xv)
    if dt.is_float:
        e.node("Pow", [e.scalar(2.0, xv), e.input(op)], [e.out(op)])
        return
    real = e.node("Pow", [e.scalar(2.0, "fp32"), e.cast(e.input(op), "fp32")])
    float_to_int(e, real, dt, e.out(op))


@lowering("clip", note="Clip; Min(Max(x, alpha), beta) when alpha > beta")
def _clip(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    lo = np.asarray(e.const_param(op, "alpha")).reshape(())
    hi = np.asarray(e.const_param(op, "beta")).reshape(())
    lo_name, hi_name = e.scalar(lo, xv), e.scalar(hi, xv)
    if float(lo) > float(hi):
        e.node("Min", [e.node("Max", [e.input(op), lo_name]), hi_name], [e.out(op)])
        return
    e.node("Clip", [e.input(op), lo_name, hi_name], [e.out(op)])


@lowering("threshold", note="Max(x, alpha)")
def _threshold(e: OnnxEmitter, op: Op) -> None:
    alpha = np.asarray(e.const_param(op, "alpha")).reshape(())
    e.node("Max", [e.input(op), e.scalar(alpha, op.inputs["x"])], [e.out(op)])


# -- binary -------------------------------------------------------------------------------------------

_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "real_div": "Div", "maximum": "Max", "minimum": "Min",
           "pow": "Pow", "equal": "Equal", "not_equal": "Equal", "greater": "Greater",
           "greater_equal": "GreaterOrEqual", "less": "Less", "less_equal": "LessOrEqual",
           "logical_and": "And", "logical_or": "Or", "logical_xor": "Xor"}
_NOTES = {"real_div": "Div (integers: the truncated quotient, as MIL)", "not_equal": "Not(Equal(x, y))"}


def _lower_binary(e: OnnxEmitter, op: Op) -> None:
    x, y = e.input(op, "x"), e.input(op, "y")
    if op.type == "not_equal":
        e.node("Not", [e.node("Equal", [x, y])], [e.out(op)])
        return
    e.node(_BINARY[op.type], [x, y], [e.out(op)])


for _t, _onnx in _BINARY.items():
    lowering(_t, kind="decomposed" if _t == "not_equal" else "direct", note=_NOTES.get(_t, ""))(_lower_binary)


@lowering("floor_div", kind="decomposed", note="Floor(Div(x, y)); integers: the truncated Div corrected to the floor")
def _floor_div(e: OnnxEmitter, op: Op) -> None:
    x, y = e.input(op, "x"), e.input(op, "y")
    xv = op.inputs["x"]
    if e.dtype(xv).is_float:
        e.node("Floor", [e.node("Div", [x, y])], [e.out(op)])
        return
    q = e.node("Div", [x, y])  # truncated toward zero
    fix = _sign_mismatch(e, e.node("Sub", [x, e.node("Mul", [q, y])]), y, xv)
    e.node("Sub", [q, e.cast(fix, e.dtype(xv))], [e.out(op)])


@lowering("mod", kind="decomposed", note="integers: Mod(fmod=0); floats: Mod(fmod=1) plus y where the "
                                         "remainder's sign differs from y's (the divisor's sign, as MIL)")
def _mod(e: OnnxEmitter, op: Op) -> None:
    x, y = e.input(op, "x"), e.input(op, "y")
    xv = op.inputs["x"]
    if not e.dtype(xv).is_float:
        e.node("Mod", [x, y], [e.out(op)], fmod=0)
        return
    r = e.node("Mod", [x, y], fmod=1)
    fix = _sign_mismatch(e, r, y, xv)
    e.node("Where", [fix, e.node("Add", [r, y]), r], [e.out(op)])


def _sign_mismatch(e: OnnxEmitter, r: str, y: str, like) -> str:  # noqa: ANN001 - Value
    """``r != 0 and (r < 0) != (y < 0)``: a remainder whose sign is not the divisor's."""
    zero = e.scalar(0, like)
    nonzero = e.node("Not", [e.node("Equal", [r, zero])])
    differ = e.node("Xor", [e.node("Less", [r, zero]), e.node("Less", [y, zero])])
    return e.node("And", [nonzero, differ])

