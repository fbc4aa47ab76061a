"""Symbol bookkeeping: collect the symbols of a program and rename them deterministically.

Frontends create fresh symbols for unknown dimensions; their process-wide counter makes names
depend on history. ``canonicalize_symbols`` renames every symbol that is not pinned (a flexible
input dimension keeps its name) to ``s0, s1, ...`` in order of first appearance, so loading the same
model twice gives the same program text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from .core import Program, Value
from .types import DictType, DimExpr, ListType, StateType, Symbol, TensorType, TupleType, Type


def map_dim(d: Any, fn: Callable[[Symbol], Any]) -> Any:
    """``d`` with every symbol ``s`` (inside expressions too) replaced by ``fn(s)`` (a symbol, an
    int or an expression); the result is canonical again."""
    if isinstance(d, Symbol):
        return fn(d)
    if isinstance(d, DimExpr):
        return d.subs(fn)
    return d


def map_type(t: Type, fn: Callable[[Symbol], Any]) -> Type:
    """``t`` with every symbol replaced by ``fn(symbol)`` (see `map_dim`)."""
    if isinstance(t, TensorType):
        if t.shape is None or all(type(d) is int for d in t.shape):
            return t  # no symbols: the type itself (types are immutable; most values share a few)
        return TensorType(t.dtype, tuple(map_dim(d, fn) for d in t.shape))
    if isinstance(t, ListType):
        return ListType(map_type(t.elem, fn), map_dim(t.length, fn), t.dynamic_length)
    if isinstance(t, TupleType):
        return TupleType(tuple(map_type(x, fn) for x in t.types))
    if isinstance(t, DictType):
        return DictType(map_type(t.key, fn), map_type(t.value, fn))
    if isinstance(t, StateType):
        wrapped = map_type(t.wrapped, fn)
        assert isinstance(wrapped, TensorType)
        return StateType(wrapped)
    return t


def type_symbols(t: Type) -> Iterator[Symbol]:
    found: list[Symbol] = []
    map_type(t, lambda s: found.append(s) or s)
    return iter(found)


def program_values(prog: Program) -> Iterator[Value]:
    """Every value of the program in definition order."""
    for fn in prog.functions.values():
        yield from fn.values()


def canonicalize_symbols(prog: Program, keep: set[str] | None = None, prefix: str = "s") -> None:
    """Rename unpinned symbols to ``{prefix}0, {prefix}1, ...`` in order of first appearance."""
    keep = set(keep or ())
    taken = set(keep)
    mapping: dict[str, Symbol] = {}
    counter = 0

    def rename(s: Symbol) -> Symbol:
        nonlocal counter
        if s.name in keep:
            return s
        got = mapping.get(s.name)
        if got is None:
            while f"{prefix}{counter}" in taken:
                counter += 1
            got = Symbol(f"{prefix}{counter}", s.lower, s.upper, s.choices)
            taken.add(got.name)
            mapping[s.name] = got
        return got

    for v in program_values(prog):
        v.type = map_type(v.type, rename)
