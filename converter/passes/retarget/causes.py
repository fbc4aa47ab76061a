"""Problems and notes grouped by cause: one line per distinct cause, with how many ops it concerns
and a few of their names (a model with 45 palettized weights gets one line, not 45)."""

from __future__ import annotations

from ...ir.core import Op

EXAMPLES = 3


def without_value_names(message: str, op: Op) -> str:
    """A message about ``op`` with the names of its input values taken out, so that ops failing for
    the same reason are grouped under one cause."""
    params = set(op.inputs) | (set(op.opdef.signature.inputs) if op.opdef is not None else set())
    for v in op.input_values():
        if v.name not in params:
            message = message.replace(f"'{v.name}'", "a value")
    return message


class Causes:
    """Distinct causes in the order first seen, each with a count and the first few op names."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[int, list[str]]] = {}

    def add(self, cause: str, op_name: str) -> None:
        count, names = self._seen.get(cause, (0, []))
        if len(names) < EXAMPLES:
            names.append(op_name)
        self._seen[cause] = (count + 1, names)

    def extend(self, other: Causes) -> None:
        for cause, (count, names) in other._seen.items():
            mine, kept = self._seen.get(cause, (0, []))
            self._seen[cause] = (mine + count, (kept + names)[:EXAMPLES])

    def __bool__(self) -> bool:
        return bool(self._seen)

    def __len__(self) -> int:
        return len(self._seen)

    def lines(self) -> list[str]:
        out = []
        for cause, (count, names) in self._seen.items():
            shown = ", ".join(f"'{n}'" for n in names) + (", ..." if count > len(names) else "")
            out.append(f"{cause} ({count} op{'s' if count != 1 else ''}: {shown})")
        return out
