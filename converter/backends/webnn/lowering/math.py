"""Hyperbolic functions from exp/log (WebNN has none); the inverse trigonometric functions have
no WebNN form."""

from __future__ import annotations

from ....ir.core import Op
from ..emitter import GraphEmitter, LoweringError, Operand
from ._common import out
from .registry import lowering, unsupported


def _float(e: GraphEmitter, op: Op) -> Operand:
    x = e.any(op.inputs["x"])
    if not x.dtype.startswith("float"):
        raise LoweringError(f"{op.type} of {x.dtype} tensors has no WebNN form")
    return x


def _same(e: GraphEmitter, method: str, *args: object, like: Operand, **options: object) -> Operand:
    return e.emit(method, *args, shape=like.shape, dtype=like.dtype, perm=like.perm, **options)


def _exp_pair(e: GraphEmitter, x: Operand) -> tuple[Operand, Operand]:
    return _same(e, "exp", x, like=x), _same(e, "exp", _same(e, "neg", x, like=x), like=x)


@lowering("sinh", kind="decomposed", note="(exp(x) - exp(-x)) / 2 (absolute error ~1e-7 near 0, where the "
                                          "difference cancels)")
def _sinh(e: GraphEmitter, op: Op) -> None:
    x = _float(e, op)
    a, b = _exp_pair(e, x)
    e.bind(out(op), _same(e, "linear", _same(e, "sub", a, b, like=x), like=x, alpha=0.5, beta=0.0))


@lowering("cosh", kind="decomposed", note="(exp(x) + exp(-x)) / 2")
def _cosh(e: GraphEmitter, op: Op) -> None:
    x = _float(e, op)
    a, b = _exp_pair(e, x)
    e.bind(out(op), _same(e, "linear", _same(e, "add", a, b, like=x), like=x, alpha=0.5, beta=0.0))


@lowering("atanh", kind="decomposed", note="log((1 + x) / (1 - x)) / 2 (absolute error ~1e-7 near 0)")
def _atanh(e: GraphEmitter, op: Op) -> None:
    x = _float(e, op)
    ratio = _same(e, "div", _same(e, "linear", x, like=x, alpha=1.0, beta=1.0),
                  _same(e, "linear", x, like=x, alpha=-1.0, beta=1.0), like=x)
    e.bind(out(op), _same(e, "linear", _same(e, "log", ratio, like=x), like=x, alpha=0.5, beta=0.0))


unsupported("WebNN has no inverse trigonometric function, and none has an exact form in its exp/log/sqrt "
            "(a polynomial approximation is not written)", "acos", "asin", "atan")
