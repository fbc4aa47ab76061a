"""Arithmetic identities: neutral constants, division by a constant as a multiplication, bool
values round-tripped through numbers, and a linear_activation absorbing the add/mul after it.

Every rule is exact (bit-identical results) under the conditions its check states; where the
general rewrite would round differently, the check refuses and says so:
- ``x / c -> x * (1/c)`` only where every ``1/c`` is exact (c a power of two). coremltools'
  ``divide_to_multiply`` does it for every float constant, which changes the last bit of about a
  third of the results for ``c = 3`` (x / 3 is rounded once, x * fl(1/3) rounds 1/3 first); it
  saves no op, so we keep the division.
- ``linear_activation(alpha, beta)`` then ``+ c`` or ``* k`` only where the linear_activation's
  own result is exact (alpha = +-1 and beta = 0: it is +-x) or the factor is -1 (negation commutes
  with rounding); in general ``alpha*x + beta`` is rounded before the add and a merged op would
  round once. Exact up to the sign of a zero result (``-x + 0.0`` is ``+0.0`` for ``x = 0``, the
  merged op may give ``-0.0``), like ``add_zero``; infinities, NaNs and overflow agree
  (tests/passes/test_canonicalize_arithmetic.py runs both forms on such values).
"""

from __future__ import annotations

import numpy as np

from ...ir.builder import Builder
from ...ir.core import Op, Value
from ...ir.types import type_of_array
from ..rewrite import Match, const, op, rule, var
from ._common import float_dtype, splat, tensor_type


@rule(op.add(x=var("x"), y=0))
def add_zero(b: Builder, m: Match):
    """``x + 0 -> x`` (either operand order; a zero of any shape whose broadcast leaves x's type).

        %z = const() [val=0.0]
        %y = add(x=%x, y=%z)          ->    uses of %y read %x
    Exact except for the sign of a zero: ``-0.0 + 0.0`` is ``+0.0``."""
    return m["x"]


def _not_negative_zero(m: Match) -> str | None:
    z = np.asarray(m.value("z"))
    if z.dtype.kind == "f" and bool(np.signbit(z).any()):
        return "x - (-0.0) turns -0.0 into +0.0"
    return None


@rule(op.sub(x=var("x"), y=const("z", equals=0)), check=_not_negative_zero)
def sub_zero(b: Builder, m: Match):
    """``x - 0 -> x`` (a zero of any shape whose broadcast leaves x's type). Exact, the sign of a
    zero included (``-0.0 - 0.0`` is ``-0.0``); a ``-0.0`` subtrahend is refused.

        %y = sub(x=%x, y=0.0)          ->    uses of %y read %x"""
    return m["x"]


@rule(op.mul(x=var("x"), y=1))
def mul_one(b: Builder, m: Match):
    """``x * 1 -> x`` (either operand order; a one of any shape whose broadcast leaves x's type).

        %one = const() [val=1.0]
        %y = mul(x=%one, y=%x)        ->    uses of %y read %x"""
    return m["x"]


@rule(op.real_div(x=var("x"), y=1))
def div_one(b: Builder, m: Match):
    """``x / 1 -> x`` (a one of any shape whose broadcast leaves x's type; int32 too: the quotient
    is x, which truncation keeps).

        %y = real_div(x=%x, y=1.0)     ->    uses of %y read %x"""
    return m["x"]


def exact_reciprocal(c: np.ndarray) -> np.ndarray | str:
    """``1 / c`` in c's dtype when it is exact for every element, else why not."""
    wide = c.astype(np.float64)
    if not np.all(np.isfinite(wide)) or np.any(wide == 0):
        return "the divisor has zeros, infinities or NaNs"
    with np.errstate(all="ignore"):
        r = (1.0 / wide).astype(c.dtype)
    exact = np.isfinite(r) & (r.astype(np.float64) * wide == 1.0)
    if not np.all(exact):
        bad = float(wide.reshape(-1)[~exact.reshape(-1)][0])
        return (f"1/{bad!r} is not exact in {type_of_array(c).dtype.name}: x * (1/c) would round differently from x / c "
                "(only powers of two have exact reciprocals)")
    return r


def _reciprocal_exact(m: Match) -> str | None:
    if not float_dtype(m["x"]):
        return "integer division truncates"
    r = exact_reciprocal(np.asarray(m.value("c")))
    return r if isinstance(r, str) else None


@rule(op.real_div(x=var("x"), y=const("c")), check=_reciprocal_exact)
def div_to_mul(b: Builder, m: Match):
    """Division by a float constant whose reciprocal is exact (powers of two): a multiplication.
    Both round the same real number ``x * 2^-k`` once, so results are bit-identical (subnormals,
    zeros, infinities and NaNs included). See the module docstring for why other constants are
    refused although coremltools rewrites them.

        %y = real_div(x=%x, y=[4.0, -0.5])    ->    %y = mul(x=%x, y=[0.25, -2.0])"""
    c = np.asarray(m.value("c"))
    r = exact_reciprocal(c)
    assert not isinstance(r, str)
    return b.mul(x=m["x"], y=b.const(r, dt=tensor_type(m["c"]).dtype))


# -- bool values through numbers -----------------------------------------------------------------

#: ops that move elements without changing them, seen through when tracing a 0/1 value
SHAPE_OPS = ("reshape", "squeeze", "expand_dims", "transpose")
BOOL_TRACE_DEPTH = 4


def bool_source(v: Value) -> tuple[Value, list[Op]] | None:
    """(b, the shape ops from b's cast to ``v``, innermost first) when ``v`` is a bool ``b`` cast to a
    number, seen through at most `BOOL_TRACE_DEPTH` shape-only ops; None otherwise."""
    chain: list[Op] = []
    for _ in range(BOOL_TRACE_DEPTH + 1):
        p = v.producer
        if p is None:
            return None
        if p.type == "cast":
            x = p.inputs["x"]
            t = tensor_type(x)
            return (x, chain[::-1]) if t is not None and t.dtype.kind == "bool" else None
        if p.type not in SHAPE_OPS:
            return None
        chain.append(p)
        v = p.inputs["x"]
    return None


def _is_bool_cast(m: Match) -> str | None:
    return None if bool_source(m["x"]) is not None else f"'{m['x'].name}' is not a cast of a bool"


@rule(op.abs(x=var("x")), check=_is_bool_cast)
def abs_of_bool_cast(b: Builder, m: Match):
    """``abs`` of a bool cast to a number (0 or 1, maybe reshaped) is that number.

        %c: tensor<fp32, [1]> = cast(x=%b: tensor<bool, [1]>, dtype="fp32")
        %y = abs(x=%c)                  ->    uses of %y read %c"""
    return m["x"]


def _threshold_recovers_bool(m: Match) -> str | None:
    t = splat(m.value("t"))
    if t is None or not (0 <= float(t) < 1):
        return f"the threshold {np.asarray(m.value('t')).tolist()} is not one value in [0, 1)"
    found = bool_source(m["x"])
    if found is None:
        return f"'{m['x'].name}' is not a cast of a bool"
    for o in found[1]:
        if len(o.outputs[0].uses) != 1:
            return f"{o.type} '{o.name}' is read elsewhere: rebuilding it on the bool would copy it"
    return None


@rule(op.greater(x=var("x"), y=const("t")), check=_threshold_recovers_bool)
def greater_of_bool_cast(b: Builder, m: Match):
    """``cast(b, number) > t`` with ``0 <= t < 1`` is ``b`` (1 > t and not 0 > t); shape-only ops
    between the cast and the compare are rebuilt on ``b`` (a NeuralNetwork loop condition:
    ``greater(abs(reshape(cast(b, fp32), [])), 1e-6)`` -> ``reshape(b, [])`` with abs_of_bool_cast).

        %c: tensor<fp32, [1]> = cast(x=%b: tensor<bool, [1]>, dtype="fp32")
        %s: tensor<fp32, []> = reshape(x=%c, shape=[])
        %y: tensor<bool, []> = greater(x=%s, y=1e-06)    ->    %y = reshape(x=%b, shape=[])"""
    found = bool_source(m["x"])
    assert found is not None
    v, chain = found
    for o in chain:
        inputs = dict(o.inputs)
        inputs["x"] = v
        v = b.add_op(o.type, inputs).outputs[0]
    return v


# -- linear_activation absorbing what follows ------------------------------------------------


def _param(m: Match, name: str) -> float | None:
    s = splat(m.value(name))
    return None if s is None else float(s)


def _negation_or_identity(m: Match) -> bool:
    return _param(m, "alpha") in (1.0, -1.0) and _param(m, "beta") == 0.0


def _la_absorbs(m: Match) -> str | None:
    if _param(m, "c") is None:
        return f"'{m['c'].name}' is not one value"
    if m.root.type == "mul" and _param(m, "c") == -1.0:
        return None
    if not _negation_or_identity(m):
        return (f"linear_activation(alpha={_param(m, 'alpha')}, beta={_param(m, 'beta')}) rounds alpha*x + beta "
                f"before the {m.root.type}: one op would round once (exact only for alpha = +-1, beta = 0)")
    return None


_LA = op.linear_activation("la", x=var("x"), alpha=const("alpha"), beta=const("beta"))


def reads_a_linear_activation(o: Op) -> bool:
    """A quick filter on the roots (every add/sub/mul) before the full pattern."""
    v = o.inputs.get("x")
    w = o.inputs.get("y")
    return any(isinstance(u, Value) and u.producer is not None and u.producer.type == "linear_activation"
               for u in (v, w))


@rule(op.any_of("add", "sub")(x=_LA, y=const("c")).where(reads_a_linear_activation), check=_la_absorbs)
def linear_activation_add(b: Builder, m: Match):
    """``linear_activation(x, alpha=+-1, beta=0) + c`` (or ``- c``) is one linear_activation with
    ``beta = c`` (``-c``): ``+-x`` is exact, so both round ``+-x + c`` once.

        %n = linear_activation(x=%x, alpha=-1.0, beta=0.0)
        %y = add(x=%n, y=[1.0])          ->    %y = linear_activation(x=%x, alpha=-1.0, beta=1.0)"""
    c = _param(m, "c")
    beta = c if m.root.type == "add" else -c
    dt = tensor_type(m["beta"]).dtype
    return b.linear_activation(x=m["x"], alpha=m["alpha"], beta=b.const(np.asarray(beta, dt.storage), dt=dt))


@rule(op.mul(x=_LA, y=const("c")).where(reads_a_linear_activation), check=_la_absorbs)
def linear_activation_mul(b: Builder, m: Match):
    """``linear_activation(x, alpha, beta) * k`` is one linear_activation with ``alpha*k, beta*k``
    where that is exact: alpha = +-1 and beta = 0 (both round ``+-k*x`` once), or k = -1
    (negation commutes with rounding).

        %n = linear_activation(x=%x, alpha=1.5, beta=0.25)
        %y = mul(x=%n, y=-1.0)           ->    %y = linear_activation(x=%x, alpha=-1.5, beta=-0.25)"""
    k = _param(m, "c")
    dt = tensor_type(m["alpha"]).dtype
    alpha, beta = (_param(m, "alpha") * k, _param(m, "beta") * k)
    return b.linear_activation(x=m["x"], alpha=b.const(np.asarray(alpha, dt.storage), dt=dt),
                               beta=b.const(np.asarray(beta, dt.storage), dt=dt))


RULES = [add_zero, sub_zero, mul_one, div_one, div_to_mul, abs_of_bool_cast, greater_of_bool_cast,
         linear_activation_add, linear_activation_mul]
