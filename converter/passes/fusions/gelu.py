"""gelu from its decompositions, exact (erf) and tanh approximation, each kept in its own mode.

Exact, ``0.5 x (1 + erf(x / sqrt(2)))``::

    %h = mul(x=%x, y=0.5)                           # or 0.5 applied last, or to (1 + erf)
    %s = real_div(x=%x, y=1.4142135)                # or mul(x=%x, y=0.70710677)
    %e = erf(x=%s)
    %a = add(x=%e, y=1.0)
    %y = mul(x=%h, y=%a)                  ->    %y = gelu(x=%x, mode="EXACT")

Tanh approximation, ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``::

    %c = pow(x=%x, y=3.0)                           # or mul(mul(x, x), x)
    %k = mul(x=%c, y=0.044715)
    %i = add(x=%x, y=%k)
    %t = tanh(x=mul(x=%i, y=0.7978846))
    %a = add(x=%t, y=1.0)
    %y = mul(x=mul(x=%x, y=0.5), y=%a)    ->    %y = gelu(x=%x, mode="TANH_APPROXIMATION")

The three places of the 0.5 are the arrangements exporters write: ``(0.5 x) (1 + f)`` (torch's
``0.5 * x * (1 + ...)``, coremltools' "pattern 2"), ``x (0.5 (1 + f))`` (coremltools' "pattern 1")
and ``(x (1 + f)) 0.5``; every mul and add matches in either operand order. A constant standing
for sqrt(2), 1/sqrt(2), sqrt(2/pi) must be that number rounded to its dtype (`_params.close_to`);
0.044715, 0.5 and 1 as written. One form is never turned into the other: they are different
functions (up to 1e-3 apart).

Not exact: gelu is computed in one rounding, the decomposition in five to eight, so results
differ by float rounding: a few ulps where gelu(x) is not small, and where 1 + erf (1 + tanh)
cancels (x below about -3) the decomposition's absolute error, about 1e-7 |x|, dominates; coremltools'
fuse_gelu_exact / fuse_gelu_tanh_approximation make the same trade.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ...ir.builder import Builder
from ..rewrite import Match, OpPattern, Rule, const, op, rule, var
from ._params import close_to

SQRT_2 = math.sqrt(2.0)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
TANH_CUBE = 0.044715


def _outer(inner: OpPattern) -> dict[str, OpPattern]:
    """``0.5 * x * inner`` (``inner`` = 1 + f(x)) in the three arrangements, by name suffix."""
    return {
        "half_x": op.mul(x=op.mul(x=var("x"), y=0.5), y=inner),
        "half_last": op.mul(x=op.mul(x=var("x"), y=inner), y=0.5),
        "half_inner": op.mul(x=var("x"), y=op.mul(x=inner, y=0.5)),
    }


def _erf_inner() -> OpPattern:
    scaled = op.any_of("real_div", "mul")("scale", x=var("x"), y=const("s"))
    return op.add(x=op.erf(x=scaled), y=1.0)


def _tanh_inner(cube: OpPattern) -> OpPattern:
    poly = op.add(x=var("x"), y=op.mul(x=cube, y=const("k")))
    return op.add(x=op.tanh(x=op.mul(x=poly, y=const("c"))), y=1.0)


def _cubes() -> dict[str, OpPattern]:
    return {"pow": op.pow(x=var("x"), y=3.0), "mul": op.mul(x=op.mul(x=var("x"), y=var("x")), y=var("x"))}


def _check_exact(m: Match) -> str | None:
    if m.op("scale").type == "real_div":
        why = close_to(m.value("s"), SQRT_2)
        return None if why is None else f"x is divided by a constant that is not sqrt(2): {why}"
    why = close_to(m.value("s"), 1.0 / SQRT_2)
    return None if why is None else f"x is multiplied by a constant that is not 1/sqrt(2): {why}"


def _check_tanh(m: Match) -> str | None:
    why = close_to(m.value("k"), TANH_CUBE)
    if why is not None:
        return f"the coefficient of x^3 is not 0.044715: {why}"
    why = close_to(m.value("c"), SQRT_2_OVER_PI)
    if why is not None:
        return f"tanh's argument is not scaled by sqrt(2/pi): {why}"
    return None


def _gelu(mode: str) -> Callable[[Builder, Match], object]:
    def replace(b: Builder, m: Match):
        return b.gelu(x=m["x"], mode=mode)

    return replace


def _make_rules() -> list[Rule]:
    rules: list[Rule] = []
    doc = __doc__ or ""
    for arrangement, pattern in _outer(_erf_inner()).items():
        rules.append(rule(pattern, check=_check_exact, name=f"gelu_exact_{arrangement}", exact=False)(_doc(_gelu("EXACT"), doc)))
    for cube_name, cube in _cubes().items():
        for arrangement, pattern in _outer(_tanh_inner(cube)).items():
            rules.append(rule(pattern, check=_check_tanh, name=f"gelu_tanh_{cube_name}_{arrangement}", exact=False)(
                _doc(_gelu("TANH_APPROXIMATION"), doc)))
    return rules


def _doc(f: Callable, doc: str) -> Callable:
    f.__doc__ = doc
    return f


#: exact: gelu_exact_{half_x,half_last,half_inner}; tanh: gelu_tanh_{pow,mul}_{half_x,half_last,half_inner}
RULES = _make_rules()
