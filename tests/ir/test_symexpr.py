"""Symbolic dimension expressions: the canonical form obeys the ring laws, evaluates as Python's
integer arithmetic does (the oracle: each random expression is built alongside a Python function
computing the same thing with ``+ - * //``), keeps the floor/ceil-division identities, bounds
contain every value, and the text form parses back to the same expression."""

from __future__ import annotations

import operator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converter.ir.symexpr import FloorDiv, Symbol, SymExpr, ceildiv, exact_quotient, floordiv, iter_atoms
from converter.ir.text import parse_dim
from converter.ir.types import dims_compatible

A, B, C = Symbol("a", lower=0, upper=20), Symbol("b", lower=1, upper=9), Symbol("c", lower=2, upper=None)
NAMES = ("a", "b", "c")


def _leaf():
    return st.sampled_from([(A, lambda e: e["a"]), (B, lambda e: e["b"]), (C, lambda e: e["c"])]) | st.integers(
        -6, 6).map(lambda k: (k, lambda e, k=k: k))


def _extend(children):
    def combine(args):
        (x, fx), (y, fy), op, k = args
        if op == "+":
            return x + y, lambda e: fx(e) + fy(e)
        if op == "-":
            return x - y, lambda e: fx(e) - fy(e)
        if op == "*":
            return x * y, lambda e: fx(e) * fy(e)
        if op == "//":
            return floordiv(x, k), lambda e: fx(e) // k
        if op == "ceil":
            return ceildiv(x, k), lambda e: -(-fx(e) // k)
        return x % k, lambda e: fx(e) % k

    return st.tuples(children, children, st.sampled_from(["+", "-", "*", "//", "ceil", "%"]),
                     st.integers(1, 6)).map(combine)


EXPRS = st.recursive(_leaf(), _extend, max_leaves=8)
ENVS = st.fixed_dictionaries({n: st.integers(-40, 40) for n in NAMES})


def _ev(d, env):
    return d if isinstance(d, int) else d.evaluate(env)


@settings(max_examples=300, deadline=None)
@given(EXPRS, ENVS)
def test_evaluation_agrees_with_python_integer_arithmetic(pair, env):
    d, f = pair
    assert _ev(d, env) == f(env)


@settings(max_examples=200, deadline=None)
@given(EXPRS, EXPRS, EXPRS)
def test_ring_laws_hold_as_equalities_of_canonical_forms(x, y, z):
    x, y, z = x[0], y[0], z[0]
    assert x + y == y + x and hash(x + y) == hash(y + x)
    assert x * y == y * x
    assert (x + y) + z == x + (y + z)
    assert (x * y) * z == x * (y * z)
    assert x * (y + z) == x * y + x * z
    assert x - x == 0 and x + 0 == x and x * 1 == x and x * 0 == 0
    neg = -x
    assert -neg == x


@settings(max_examples=200, deadline=None)
@given(EXPRS, st.integers(1, 7), st.integers(1, 7), st.integers(-9, 9), ENVS)
def test_floor_and_ceil_division_identities(pair, j, k, r, env):
    """As equal forms for polynomials, as equal values always (forms of expressions that already
    hold divisions may differ: the canonical form is not complete there, see symexpr)."""
    x = pair[0]
    polynomial = not any(isinstance(a, FloorDiv) for a in iter_atoms(x))
    identities = [
        (floordiv(k * x + r, k), x + floordiv(r, k)),
        (floordiv(floordiv(x, j), k), floordiv(x, j * k)),
        (floordiv(floordiv(x, j) + r, k), floordiv(x + r * j, j * k)),
        (k * floordiv(x, k) + x % k, x),
        (floordiv(x, 1), x),
    ]
    for left, right in identities:
        assert _ev(left, env) == _ev(right, env)
        if polynomial:
            assert left == right and hash(left) == hash(right)
    assert _ev(ceildiv(x, k), env) == _ev(-floordiv(-x, k), env)  # Hermite: not always equal forms
    assert _ev(floordiv(x, k), env) == _ev(x, env) // k


def test_canonical_forms_of_common_shapes():
    s = Symbol("s0")
    assert s * 2 == s + s and hash(s * 2) == hash(s + s)
    assert (s + s) - s is s  # a lone symbol comes back as the Symbol itself
    assert s - s == 0 and isinstance(s - s, int)
    assert floordiv(2 * s + 4, 2) == s + 2
    assert floordiv(2 * s + 1, 4) == floordiv(s, 2)  # floor((2s + 1) / 4) = floor(s / 2)
    assert ceildiv(s, 2) == floordiv(s + 1, 2)
    assert floordiv(s - 1, 2) + 1 == floordiv(s + 1, 2)  # a conv output size, canonical either way
    assert isinstance(s * s, SymExpr) and str(s * s) == "s0^2"
    assert exact_quotient(6 * s * s, 3 * s) == 2 * s
    assert exact_quotient(6 * s + 1, 3) is None


@settings(max_examples=200, deadline=None)
@given(EXPRS)
def test_text_form_parses_back(pair):
    d = pair[0]
    if isinstance(d, int):
        return
    assert parse_dim(str(d), {"a": A, "b": B, "c": C}) == d


@settings(max_examples=200, deadline=None)
@given(EXPRS, st.data())
def test_bounds_contain_every_value(pair, data):
    d = pair[0]
    if isinstance(d, int):
        return
    lo, hi = d.bounds()
    env = {"a": data.draw(st.integers(0, 20)), "b": data.draw(st.integers(1, 9)), "c": data.draw(st.integers(2, 500))}
    v = d.evaluate(env)
    assert (lo is None or lo <= v) and (hi is None or v <= hi)


@settings(max_examples=100, deadline=None)
@given(EXPRS, ENVS)
def test_substituting_every_symbol_gives_the_value(pair, env):
    d = pair[0]
    if isinstance(d, int):
        return
    assert d.subs(env) == d.evaluate(env)
    partial = d.subs({"a": env["a"]})
    assert _ev(partial, env) == d.evaluate(env)


def test_errors_and_compatibility():
    s = Symbol("s")
    with pytest.raises(TypeError):
        floordiv(s, 0)
    with pytest.raises(TypeError):
        s * 1.5
    with pytest.raises(TypeError):
        operator.lt(s, 3)
    with pytest.raises(KeyError):
        (s + 1).evaluate({})
    assert not dims_compatible(s + 1, s) and dims_compatible(s + 1, Symbol("t")) and dims_compatible(s, 4)
    assert parse_dim("s -3") == s - 3 and parse_dim("(s + 1) ceildiv 2") == floordiv(s + 2, 2)
