"""The pattern language: what a rewrite rule matches, written like the builder calls it replaces.

    op.add(x=var("x"), y=const("c"))          # add whose y is a constant; x anything
    op.reshape(x=op.reshape("inner", x=var("x")), shape=const("shape"))
    op.cast(x=var("x"), dtype="fp32")          # a literal: that input is a constant equal to it
    op.conv("conv", x=var("x"), weight=const("w"), bias=optional(const("b")))
    op.any_of("conv", "conv_transpose")(x=var("x"), weight=const("w"))

Elements (the first positional argument of each is an optional capture name):

- ``op.TYPE(name, **inputs)`` / ``op.any_of(*types)(name, **inputs)``: a value produced by an op
  of that type (output 0; ``.output(i)`` for another). Inputs not mentioned are unconstrained.
  Methods: ``.output(i)``, ``.where(pred_on_op)``, ``.multi_use()`` (see below).
- ``var(name)``: any value. ``var(name, where=pred_on_value)`` constrains it.
- ``const(name, equals=..., where=pred_on_array)``: a value produced by a ``const`` op; its array is
  ``m.value(name)``. A scalar ``equals`` matches every element (a splat), a list the whole array.
- a literal (``0``, ``1.0``, ``"fp32"``, ``[1, -1]``, ``True``): ``const(equals=literal)``; an
  absent optional input matches when the op's default equals the literal.
- ``optional(p)``: the input may be absent (names inside ``p`` are then None) or match ``p``.
- ``ABSENT``: the input must not be bound.
- a list holding patterns: a tuple input (``concat(values=[var("a"), var("b")])``) of exactly that
  length (a list of plain numbers is a literal: ``strides=[1, 1]``).

A name used twice means the same value (or op). Ops of commutative types (``add``, ``mul``,
``maximum``, ... : the ``commutative`` trait of their definition) match with ``x`` and ``y`` in
either order. Every op matched below the root must have all its uses inside the match, so a
rewrite never duplicates work, unless it is marked ``.multi_use()``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...ir.opdef import registered_op_types


class Pattern:
    """Base of the pattern elements."""

    name: str | None = None

    def names(self) -> list[str]:
        """Every capture name in this pattern (for ``optional``: bound to None when absent)."""
        return [self.name] if self.name else []


class Var(Pattern):
    def __init__(self, name: str | None = None, where: Callable[[Any], bool] | None = None) -> None:
        self.name = name
        self.predicate = where

    def __repr__(self) -> str:
        return f"var({self.name!r})" if self.name else "var()"


class Const(Pattern):
    def __init__(self, name: str | None = None, *, equals: Any = None,
                 where: Callable[[np.ndarray], bool] | None = None) -> None:
        self.name = name
        self.equals = equals
        self.predicate = where

    def __repr__(self) -> str:
        if self.equals is not None and self.name is None:
            return f"const(equals={self.equals!r})"
        return f"const({self.name!r})" if self.name else "const()"


class OptionalInput(Pattern):
    def __init__(self, pattern: Pattern | Any) -> None:
        self.pattern = as_pattern(pattern)
        self.name = None

    def names(self) -> list[str]:
        return self.pattern.names()

    def __repr__(self) -> str:
        return f"optional({self.pattern!r})"


class _Absent(Pattern):
    def __repr__(self) -> str:
        return "ABSENT"


class TuplePattern(Pattern):
    def __init__(self, items: Sequence[Any]) -> None:
        self.items = [as_pattern(p) for p in items]
        self.name = None

    def names(self) -> list[str]:
        return [n for p in self.items for n in p.names()]

    def __repr__(self) -> str:
        return f"[{', '.join(repr(p) for p in self.items)}]"


class OpPattern(Pattern):
    """A value produced by an op of one of ``types`` (see the module docstring)."""

    def __init__(self, types: tuple[str, ...], name: str | None, inputs: dict[str, Any]) -> None:
        self.types = types
        self.name = name
        self.inputs: dict[str, Pattern] = {k: as_pattern(v) for k, v in inputs.items()}
        self.output_index = 0
        self.predicate: Callable[[Any], bool] | None = None
        self.allow_outside_uses = False

    def output(self, index: int) -> OpPattern:
        """Match output ``index`` of the op (default 0)."""
        self.output_index = index
        return self

    def where(self, predicate: Callable[[Any], bool]) -> OpPattern:
        """Also require ``predicate(op)``."""
        self.predicate = predicate
        return self

    def multi_use(self) -> OpPattern:
        """Allow this (non-root) op's results to have uses outside the match: the op is then kept
        for them, and the rewrite may compute part of its work twice."""
        self.allow_outside_uses = True
        return self

    def names(self) -> list[str]:
        own = [self.name] if self.name else []
        return own + [n for p in self.inputs.values() for n in p.names()]

    @property
    def type_text(self) -> str:
        return "/".join(self.types)

    def __repr__(self) -> str:
        args = ([repr(self.name)] if self.name else []) + [f"{k}={v!r}" for k, v in self.inputs.items()]
        return f"op.{self.type_text}({', '.join(args)})"


class Literal(Const):
    """A literal written in an op pattern: a constant equal to it (or an absent input whose default is)."""

    def __init__(self, value: Any) -> None:
        super().__init__(None, equals=value)

    def __repr__(self) -> str:
        return repr(self.equals)


ABSENT: Pattern = _Absent()


def var(name: str | None = None, *, where: Callable[[Any], bool] | None = None) -> Var:
    """Any value (``where``: a predicate on the `Value`)."""
    return Var(name, where)


def const(name: str | None = None, *, equals: Any = None, where: Callable[[np.ndarray], bool] | None = None) -> Const:
    """A value produced by a ``const`` op (``equals``: a literal it must equal; ``where``: a
    predicate on its array)."""
    return Const(name, equals=equals, where=where)


def optional(pattern: Pattern | Any) -> OptionalInput:
    """An input that may be absent, or else matches ``pattern``."""
    return OptionalInput(pattern)


def as_pattern(p: Any) -> Pattern:
    if isinstance(p, Pattern):
        return p
    if isinstance(p, list) and any(isinstance(x, Pattern) for x in p):
        return TuplePattern(p)
    if p is None:
        raise TypeError("None is not a pattern: use ABSENT for an input that must be absent, optional(...) for one "
                        "that may be")
    return Literal(p)


class _OpNamespace:
    """``op.TYPE(name=None, **inputs)`` builds an `OpPattern`; unknown op types are an error."""

    _known: frozenset[str] | None = None

    def _check(self, op_type: str) -> None:
        if _OpNamespace._known is None:
            _OpNamespace._known = frozenset(registered_op_types())
        if op_type not in _OpNamespace._known:
            raise AttributeError(f"unknown op type '{op_type}' in a pattern")

    def any_of(self, *types: str) -> Callable[..., OpPattern]:
        """A pattern matching an op of any of ``types``."""
        for t in types:
            self._check(t)

        def make(name: str | None = None, **inputs: Any) -> OpPattern:
            return OpPattern(tuple(types), name, inputs)

        return make

    def __getattr__(self, op_type: str) -> Callable[..., OpPattern]:
        if op_type.startswith("_"):
            raise AttributeError(op_type)
        return self.any_of(op_type)


op = _OpNamespace()
