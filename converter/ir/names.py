"""Name scopes: hand out value names unique within one function.

A scope counts the live values carrying each name (several values may share a label: names are
only labels, made unique when a program is written) and the names it handed out that no value
carries yet (a builder names an op before the op joins a function). A name is free again once
both are gone, so removing an op lets a later op take its name.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator


class NameScope:
    """Names taken in one function; ``unique(base)`` returns ``base`` or ``base_N`` not taken."""

    def __init__(self, taken: Iterable[str] = ()) -> None:
        self._counts: dict[str, int] = {}
        self._reserved: set[str] = set()
        self.counters: dict[str, int] = {}
        for name in taken:
            self.claim(name)

    def __contains__(self, name: object) -> bool:
        return name in self._counts or name in self._reserved

    def unique(self, base: str) -> str:
        """A name not taken, reserved until a value carrying it joins the function."""
        if base not in self:
            self._reserved.add(base)
            return base
        n = self.counters.get(base, 0)
        while f"{base}_{n}" in self:
            n += 1
        self.counters[base] = n + 1
        name = f"{base}_{n}"
        self._reserved.add(name)
        return name

    def claim(self, name: str) -> None:
        """A value carrying ``name`` joined the function (its reservation, if any, is used up)."""
        self._counts[name] = self._counts.get(name, 0) + 1
        self._reserved.discard(name)

    def release(self, name: str) -> None:
        """A value carrying ``name`` left the function (or was renamed)."""
        n = self._counts.get(name)
        if n is None:
            self._reserved.discard(name)
        elif n <= 1:
            del self._counts[name]
        else:
            self._counts[name] = n - 1

    @property
    def taken(self) -> _TakenView:
        """Set-like view (``in``, ``add`` = claim, ``discard`` = release), for older callers."""
        return _TakenView(self)


class _TakenView:
    __slots__ = ("_scope",)

    def __init__(self, scope: NameScope) -> None:
        self._scope = scope

    def __contains__(self, name: object) -> bool:
        return name in self._scope

    def __iter__(self) -> Iterator[str]:
        yield from self._scope._counts
        yield from (n for n in self._scope._reserved if n not in self._scope._counts)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def add(self, name: str) -> None:
        self._scope.claim(name)

    def discard(self, name: str) -> None:
        self._scope.release(name)
