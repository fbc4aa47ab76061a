"""A rewrite rule: a pattern, a check that gives a reason to refuse, and a replacement."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...ir.core import Value
from .pattern import OpPattern

if TYPE_CHECKING:
    from ...ir.builder import Builder
    from .match import Match

Replacement = Callable[["Builder", "Match"], "Value | Sequence[Value]"]
Check = Callable[["Match"], "str | None"]


class Refuse(Exception):  # noqa: N818 - it is not an error: a replacement declining to fire
    """Raised by a replacement that finds it cannot proceed: nothing it built is kept, and the
    match counts as a near miss with this reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, eq=False)
class Rule:
    """``pattern`` (rooted at an op pattern), ``check(m) -> reason or None``, and
    ``replace(b, m) -> value(s)`` for the root's outputs, built with ``b`` (a Builder inserting
    before the root). ``doc``: the IR before and after. ``exact``: the rewrite keeps results bit
    for bit (False for fusions that change float rounding; tests then compare with a tolerance)."""

    name: str
    pattern: OpPattern
    replace: Replacement
    check: Check | None = None
    doc: str = ""
    #: False for a fusion that changes float rounding (its docstring says how); outputs of an exact
    #: rule's rewrite are bit-identical
    exact: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.pattern, OpPattern):
            raise TypeError(f"rule {self.name}: the root of a pattern must be an op pattern, got {self.pattern!r}")

    @property
    def root_types(self) -> tuple[str, ...]:
        return self.pattern.types

    def __repr__(self) -> str:
        return f"<rule {self.name}: {self.pattern!r}>"


def rule(pattern: OpPattern, *, check: Check | None = None, name: str | None = None,
         exact: bool = True) -> Callable[[Replacement], Rule]:
    """Decorator: the decorated function is the replacement, its name the rule's name and its
    docstring the rule's documentation (the IR before and after). ``exact=False``: the rewrite
    changes float rounding (a fusion), so its results are equal only within rounding."""

    def make(replace: Replacement) -> Rule:
        return Rule(name or replace.__name__, pattern, replace, check, (replace.__doc__ or "").strip(), exact)

    return make
