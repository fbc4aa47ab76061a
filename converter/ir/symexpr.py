"""Symbolic dimensions: symbols and integer expressions over them, in a canonical form.

A symbolic dim is a `Symbol` (a size known at run time only) or a `SymExpr`: a polynomial with
integer coefficients whose atoms are symbols and floor-divisions ``(e floordiv k)`` of an
expression by a positive integer constant. Ceil-division is ``floordiv(e + k - 1, k)``. That is
enough for what shape inference derives from sizes: sums and differences (concat, pad, slicing),
products (reshape, tile, flatten, pixel shuffle), and strided windows (conv and pool outputs,
``(n + pads - dilated_kernel) floordiv stride + 1``).

Canonical form (so that equal expressions compare and hash equal: ``s*2 == s+s``):

- a polynomial is a map monomial -> non-zero coefficient; a monomial is a sorted tuple of
  (atom, power); constants are the empty monomial. Arithmetic results are rebuilt in this form,
  so the ring laws of + and * hold as identities.
- ``floordiv(e, k)`` pulls out what divides: with ``e = k*Q + R`` (each coefficient of ``R`` in
  ``[1, k-1]``, its constant in ``[0, k-1]``) it is ``Q + floordiv(R, k)``; then
  ``floordiv(R, k)`` is 0 when ``R`` is a constant, divides ``R`` and ``k`` by the gcd of ``k``
  and ``R``'s coefficients (``floor((g*x + c)/(g*m)) = floor((x + floor(c/g))/m)``), and merges
  a nested division (``floor((P + floor(a/j))/k) = floor((j*P + a)/(j*k))``).
- a result that is a constant is a plain ``int``; a single symbol with coefficient 1 is that
  `Symbol`. So static dims stay ints and a symbol passed through stays the same object.

Equal canonical forms always mean equal values. The converse holds for polynomials (no
division) and for the division rules above, but not for every identity between different
divisions: Hermite's ``a floordiv 2 + (a + 1) floordiv 2 = a`` is not applied, so ``ceildiv(a, 2)``
(``(a + 1) floordiv 2``) and ``-((-a) floordiv 2)`` (``a - a floordiv 2``) compare unequal. (No
finite rewrite system decides all of these; shape inference builds each size one way, so in
practice equal sizes get equal forms.)

Expressions evaluate given symbol values (``evaluate``), substitute symbols (``subs``), give
bounds from their symbols' bounds (``bounds``) and print in the IR text form (``2*s0 + 1``,
``(s0 + 1) floordiv 2``; `converter.ir.text` parses it back).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

Monomial = tuple  # tuple[tuple[Atom, int], ...], atoms sorted by _atom_key
Poly = dict  # dict[Monomial, int]

_INF = math.inf


class DimExpr:
    """Base of symbolic dims: integer arithmetic with ints and other symbolic dims.

    ``+ - *`` with ints and dims, ``//`` and ``%`` by a positive int, ``ceildiv(k)``. No order
    comparisons (``<`` on a symbol is a TypeError): use ``bounds()``. Equality is structural
    on the canonical form.
    """

    __slots__ = ()
    __array_ufunc__ = None  # numpy scalars defer to the reflected operators below

    def poly(self) -> Poly:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- arithmetic ------------------------------------------------------------------------------

    def __add__(self, other: Any) -> Any:
        p = _as_poly(other)
        return NotImplemented if p is None else from_poly(_add(self.poly(), p))

    __radd__ = __add__

    def __sub__(self, other: Any) -> Any:
        p = _as_poly(other)
        return NotImplemented if p is None else from_poly(_add(self.poly(), _scale(p, -1)))

    def __rsub__(self, other: Any) -> Any:
        p = _as_poly(other)
        return NotImplemented if p is None else from_poly(_add(p, _scale(self.poly(), -1)))

    def __neg__(self) -> Any:
        return from_poly(_scale(self.poly(), -1))

    def __pos__(self) -> Any:
        return self

    def __mul__(self, other: Any) -> Any:
        p = _as_poly(other)
        return NotImplemented if p is None else from_poly(_mul(self.poly(), p))

    __rmul__ = __mul__

    def __floordiv__(self, k: Any) -> Any:
        kk = _positive_int(k)
        return NotImplemented if kk is None else from_poly(_floordiv(self.poly(), kk))

    def __mod__(self, k: Any) -> Any:
        kk = _positive_int(k)
        if kk is None:
            return NotImplemented
        return from_poly(_add(self.poly(), _scale(_floordiv(self.poly(), kk), -kk)))

    def ceildiv(self, k: int) -> Any:
        return ceildiv(self, k)

    # -- queries ---------------------------------------------------------------------------------

    def evaluate(self, env: Mapping[str, int]) -> int:
        """The value given a size for each symbol (by name); KeyError for a symbol not given."""
        return _eval_poly(self.poly(), env)

    def subs(self, mapping: Mapping[str, Any] | Callable[[Symbol], Any]) -> Any:
        """This dim with symbols replaced (by name, or by a function of the symbol); symbols not
        mapped stay. The result is canonical again (an int when every symbol got a size)."""
        fn = mapping if callable(mapping) else (lambda s: mapping.get(s.name, s))  # type: ignore[union-attr]
        return _subs_poly(self.poly(), fn)

    def symbols(self) -> tuple[Symbol, ...]:
        """The symbols it depends on, in canonical order, each once."""
        found: dict[str, Symbol] = {}
        _collect_symbols(self.poly(), found)
        return tuple(found.values())

    def bounds(self) -> tuple[int | None, int | None]:
        """(lowest, highest) possible value from the symbols' bounds; None where unbounded."""
        lo, hi = _poly_interval(self.poly())
        return (None if lo == -_INF else int(lo), None if hi == _INF else int(hi))

    @property
    def is_symbol(self) -> bool:
        return False


@dataclass(frozen=True, eq=True)
class Symbol(DimExpr):
    """A dimension whose size is unknown until run time.

    Identity is the name. ``lower``/``upper`` are bounds from flexible-shape ranges (upper None =
    unbounded); ``choices`` lists the allowed sizes of an enumerated shape dimension.
    """

    name: str
    lower: int = field(default=1, compare=False)
    upper: int | None = field(default=None, compare=False)
    choices: tuple[int, ...] | None = field(default=None, compare=False)

    __array_ufunc__ = None

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Symbol({self.name!r})"

    def poly(self) -> Poly:
        return {((self, 1),): 1}

    @property
    def is_symbol(self) -> bool:
        return True

    def interval(self) -> tuple[float, float]:
        if self.choices:
            return min(self.choices), max(self.choices)
        return self.lower, (_INF if self.upper is None else self.upper)


class SymExpr(DimExpr):
    """A canonical non-trivial expression (never a constant or a lone symbol: those are `int`
    and `Symbol`). Build expressions with arithmetic on symbols, not with this constructor."""

    __slots__ = ("terms", "_hash", "_key")

    def __init__(self, terms: tuple) -> None:
        self.terms = terms  # ((monomial, coefficient), ...) sorted by monomial key
        self._hash = hash(terms)
        self._key: tuple | None = None

    def poly(self) -> Poly:
        return dict(self.terms)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if isinstance(other, SymExpr):
            return self._hash == other._hash and self.terms == other.terms
        return False

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return self._hash

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("terms", "_hash") and hasattr(self, name):
            raise AttributeError("SymExpr is immutable")
        object.__setattr__(self, name, value)

    def __str__(self) -> str:
        return format_poly(self.poly())

    def __repr__(self) -> str:
        return f"SymExpr({str(self)!r})"

    def sort_key(self) -> tuple:
        if self._key is None:
            self._key = _poly_key(self.poly())
        return self._key


class FloorDiv:
    """Atom ``(num floordiv k)``: ``num`` a canonical polynomial that ``k`` does not divide."""

    __slots__ = ("num", "k", "_hash", "_key")

    def __init__(self, num: Poly, k: int) -> None:
        self.num = tuple(sorted(num.items(), key=lambda t: _mono_key(t[0])))
        self.k = k
        self._hash = hash((self.num, k))
        self._key = (1, k, _poly_key(dict(self.num)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FloorDiv) and self._hash == other._hash and self.k == other.k \
            and self.num == other.num

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"FloorDiv({format_poly(dict(self.num))!r}, {self.k})"


Atom = Symbol | FloorDiv
Dim = int | Symbol | SymExpr


# ---------------------------------------------------------------------------------------------
# Public helpers


def is_symbolic(d: Any) -> bool:
    return isinstance(d, DimExpr)


def from_poly(p: Poly) -> Any:
    """The canonical dim for a polynomial: an int, a Symbol, or a SymExpr."""
    p = {m: c for m, c in p.items() if c}
    if not p:
        return 0
    if len(p) == 1:
        ((m, c),) = p.items()
        if m == ():
            return int(c)
        if c == 1 and len(m) == 1 and m[0][1] == 1 and isinstance(m[0][0], Symbol):
            return m[0][0]
    return SymExpr(tuple(sorted(p.items(), key=lambda t: _mono_key(t[0]))))


def as_poly(d: Any) -> Poly:
    p = _as_poly(d)
    if p is None:
        raise TypeError(f"not a dimension: {d!r}")
    return p


def floordiv(d: Any, k: int) -> Any:
    """``floor(d / k)`` for a dim and a positive integer."""
    kk = _positive_int(k)
    if kk is None:
        raise TypeError(f"floor division of a dimension needs a positive integer, got {k!r}")
    return from_poly(_floordiv(as_poly(d), kk))


def ceildiv(d: Any, k: int) -> Any:
    """``ceil(d / k)`` for a dim and a positive integer."""
    kk = _positive_int(k)
    if kk is None:
        raise TypeError(f"ceil division of a dimension needs a positive integer, got {k!r}")
    return from_poly(_floordiv(_add(as_poly(d), {(): kk - 1}), kk))


def evaluate(d: Any, env: Mapping[str, int]) -> int:
    return d.evaluate(env) if isinstance(d, DimExpr) else int(d)


def subs(d: Any, mapping: Mapping[str, Any] | Callable[[Symbol], Any]) -> Any:
    return d.subs(mapping) if isinstance(d, DimExpr) else d


def bounds(d: Any) -> tuple[int | None, int | None]:
    if isinstance(d, DimExpr):
        return d.bounds()
    return int(d), int(d)


def dim_symbols(d: Any) -> tuple[Symbol, ...]:
    return d.symbols() if isinstance(d, DimExpr) else ()


def exact_quotient(num: Any, den: Any) -> Any | None:
    """``num / den`` when ``den`` divides ``num`` as polynomials over the atoms (each term of
    ``num`` divisible by the single term ``den``), else None."""
    pn, pd = as_poly(num), as_poly(den)
    if len(pd) != 1:
        return None
    ((dm, dc),) = pd.items()
    if dc == 0:
        return None
    dpow = dict(dm)
    out: Poly = {}
    for m, c in pn.items():
        if c % dc:
            return None
        mp = dict(m)
        for a, e in dpow.items():
            if mp.get(a, 0) < e:
                return None
            mp[a] -= e
            if mp[a] == 0:
                del mp[a]
        out[_mono(mp)] = c // dc
    return from_poly(out)


# ---------------------------------------------------------------------------------------------
# Polynomial arithmetic


def _positive_int(k: Any) -> int | None:
    if isinstance(k, bool):
        return None
    try:
        kk = operator.index(k)
    except TypeError:
        return None
    return kk if kk > 0 else None


def _as_poly(d: Any) -> Poly | None:
    if isinstance(d, DimExpr):
        return d.poly()
    if isinstance(d, bool):
        return None
    try:
        n = operator.index(d)
    except TypeError:
        return None
    return {(): n} if n else {}


def _add(a: Poly, b: Poly) -> Poly:
    out = dict(a)
    for m, c in b.items():
        s = out.get(m, 0) + c
        if s:
            out[m] = s
        else:
            out.pop(m, None)
    return out


def _scale(a: Poly, k: int) -> Poly:
    return {m: c * k for m, c in a.items()} if k else {}


def _mono(powers: dict) -> Monomial:
    return tuple(sorted(powers.items(), key=lambda t: _atom_key(t[0])))


def _mono_mul(a: Monomial, b: Monomial) -> Monomial:
    if not a:
        return b
    if not b:
        return a
    powers = dict(a)
    for atom, e in b:
        powers[atom] = powers.get(atom, 0) + e
    return _mono(powers)


def _mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            m = _mono_mul(ma, mb)
            s = out.get(m, 0) + ca * cb
            if s:
                out[m] = s
            else:
                out.pop(m, None)
    return out


def _floordiv(p: Poly, k: int) -> Poly:
    """floor(p / k) in canonical form (see the module docstring)."""
    if k == 1:
        return dict(p)
    quotient: Poly = {}
    rest: Poly = {}
    for m, c in p.items():
        q, r = divmod(c, k)
        if q:
            quotient[m] = q
        if r:
            rest[m] = r
    const = rest.pop((), 0)
    if not rest:  # floor(const / k) with 0 <= const < k
        return quotient
    g = math.gcd(k, *rest.values())
    if g > 1:
        rest = {m: c // g for m, c in rest.items()}
        const //= g
        k //= g
        if k == 1:
            return _add(quotient, _add(rest, {(): const} if const else {}))
    inner = [m for m, c in rest.items() if c == 1 and len(m) == 1 and m[0][1] == 1 and isinstance(m[0][0], FloorDiv)]
    if len(inner) == 1:  # floor((P + floor(A/j))/k) = floor((j*P + A)/(j*k)) for integer-valued P
        atom = inner[0][0][0]
        others = {m: c for m, c in rest.items() if m != inner[0]}
        if const:
            others[()] = const
        num = _add(_scale(others, atom.k), dict(atom.num))
        return _add(quotient, _floordiv(num, atom.k * k))
    if const:
        rest[()] = const
    return _add(quotient, {((FloorDiv(rest, k), 1),): 1})


def _atom_key(a: Any) -> tuple:
    return (0, a.name) if isinstance(a, Symbol) else a._key


def _mono_key(m: Monomial) -> tuple:
    return tuple((_atom_key(a), e) for a, e in m)


def _poly_key(p: Poly) -> tuple:
    return tuple(sorted((_mono_key(m), c) for m, c in p.items()))


def _eval_poly(p: Poly, env: Mapping[str, int]) -> int:
    total = 0
    for m, c in p.items():
        v = c
        for a, e in m:
            if isinstance(a, Symbol):
                x = env[a.name]
            else:
                x = _eval_poly(dict(a.num), env) // a.k
            v *= int(x) ** e
        total += v
    return total


def _subs_poly(p: Poly, fn: Callable[[Symbol], Any]) -> Any:
    total: Any = 0
    for m, c in p.items():
        v: Any = c
        for a, e in m:
            x = fn(a) if isinstance(a, Symbol) else floordiv(_subs_poly(dict(a.num), fn), a.k)
            for _ in range(e):
                v = v * x
        total = total + v
    return total


def _collect_symbols(p: Poly, found: dict[str, Symbol]) -> None:
    for m in p:
        for a, _ in m:
            if isinstance(a, Symbol):
                found.setdefault(a.name, a)
            else:
                _collect_symbols(dict(a.num), found)


# -- bounds (interval arithmetic, infinities as floats) ---------------------------------------


def _imul(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    def m(x: float, y: float) -> float:
        return 0 if x == 0 or y == 0 else x * y

    prods = [m(a[0], b[0]), m(a[0], b[1]), m(a[1], b[0]), m(a[1], b[1])]
    return min(prods), max(prods)


def _atom_interval(a: Any) -> tuple[float, float]:
    if isinstance(a, Symbol):
        return a.interval()
    lo, hi = _poly_interval(dict(a.num))
    return (lo if lo == -_INF else lo // a.k), (hi if hi == _INF else hi // a.k)


def _poly_interval(p: Poly) -> tuple[float, float]:
    lo: float = 0
    hi: float = 0
    for m, c in p.items():
        iv: tuple[float, float] = (1, 1)
        for a, e in m:
            ai = _atom_interval(a)
            for _ in range(e):
                iv = _imul(iv, ai)
        iv = _imul(iv, (c, c))
        lo += iv[0]
        hi += iv[1]
    return lo, hi


# -- printing ----------------------------------------------------------------------------------


def _fmt_atom(a: Any, alone: bool) -> str:
    if isinstance(a, Symbol):
        return a.name
    num = dict(a.num)
    inner = format_poly(num)
    if not (len(num) == 1 and isinstance(from_poly(num), Symbol)):
        inner = f"({inner})"
    text = f"{inner} floordiv {a.k}"
    return text if alone else f"({text})"


def _fmt_mono(m: Monomial, alone: bool) -> str:
    alone = alone and len(m) == 1 and m[0][1] == 1
    return "*".join(_fmt_atom(a, alone) + (f"^{e}" if e > 1 else "") for a, e in m)


def format_poly(p: Poly) -> str:
    """Text form: non-constant terms in canonical order, then the constant."""
    items = sorted(((m, c) for m, c in p.items() if m), key=lambda t: _mono_key(t[0]))
    const = p.get((), 0)
    parts: list[str] = []
    for i, (m, c) in enumerate(items):
        mag = abs(c)
        body = _fmt_mono(m, alone=mag == 1 and (c > 0 or i > 0))
        term = body if mag == 1 else f"{mag}*{body}"
        if i == 0:
            parts.append(term if c > 0 else f"-{term}")
        else:
            parts.append(f"{'+' if c > 0 else '-'} {term}")
    if const or not parts:
        if parts:
            parts.append(f"{'+' if const > 0 else '-'} {abs(const)}")
        else:
            parts.append(str(const))
    return " ".join(parts)


def format_dim(d: Any) -> str:
    if isinstance(d, DimExpr):
        return str(d)
    return str(int(d))


def iter_atoms(d: Any) -> Iterator[Any]:
    """Every atom (symbols and floor-divisions, nested ones included) of a dim."""
    if not isinstance(d, DimExpr):
        return
    stack = [d.poly()]
    while stack:
        p = stack.pop()
        for m in p:
            for a, _ in m:
                yield a
                if isinstance(a, FloorDiv):
                    stack.append(dict(a.num))
