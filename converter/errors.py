"""Exceptions raised by the converter.

Every error says *where* (file, function, op or layer, field) and *what*, on one line. Callers can
catch ``ConverterError`` for everything the converter reports on purpose; anything else is a bug.

Names in messages come from model files, which may be hostile: an error renders them through
`printable`, so that no name can move the cursor, retitle or reprogram a terminal, or split one
error over several lines.
"""

from __future__ import annotations

import re
from typing import Any

# Characters that act on a terminal or a line-based reader rather than show: C0 controls, DEL and C1
# controls (ESC, BEL, CSI, OSC, newlines, ...), the Unicode line and paragraph separators, and the
# bidirectional-text controls that reorder what is shown (the "Trojan Source" characters); also lone
# surrogates, which stand for undecodable bytes in file names and cannot be printed at all.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    return _SHORT_ESCAPES.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")


def printable(text: object) -> str:
    """``text`` with every control character written as an escape (``\\x1b``, ``\\n``, ...): safe to
    print to a terminal or a report line, and still readable. Other characters are kept."""
    return _UNPRINTABLE.sub(_escape, str(text))


class ConverterError(Exception):
    """Base class: a message plus the location it refers to."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        function: str | None = None,
        op: str | None = None,
        op_type: str | None = None,
        field: str | None = None,
        offset: int | None = None,
        details: Any = None,
    ) -> None:
        self.message = message
        self.file = None if file is None else str(file)
        self.function = function
        self.op = op
        self.op_type = op_type
        self.field = field
        self.offset = offset
        self.details = details
        super().__init__(self._render())

    def where(self) -> str:
        parts = []
        if self.file:
            parts.append(f"file '{self.file}'")
        if self.function:
            parts.append(f"function '{self.function}'")
        if self.op:
            kind = f" ({self.op_type})" if self.op_type else ""
            parts.append(f"op '{self.op}'{kind}")
        elif self.op_type:
            parts.append(f"op type '{self.op_type}'")
        if self.field:
            parts.append(f"field '{self.field}'")
        if self.offset is not None:
            parts.append(f"offset {self.offset}")
        return ", ".join(parts)

    def _render(self) -> str:
        where = self.where()
        return printable(f"{where}: {self.message}" if where else self.message)

    def with_location(self, **where: Any) -> ConverterError:
        """Fill in location fields that are still unknown (inner code rarely knows the file)."""
        for key, value in where.items():
            if value is not None and getattr(self, key, None) is None:
                setattr(self, key, value if key != "file" else str(value))
        self.args = (self._render(),)
        return self


class FormatError(ConverterError):
    """The input file is malformed: bad bytes, bad offsets, inconsistent declarations."""


class UnsupportedError(ConverterError):
    """The input is valid but cannot be converted (unknown model type, op missing from a target)."""


class VerifyError(ConverterError):
    """The IR breaks an invariant (SSA, scoping, types)."""


class TypeInferenceError(VerifyError):
    """An op's inputs do not fit what the op accepts."""


class EvaluationError(ConverterError):
    """The interpreter failed while running an op."""


class PassError(ConverterError):
    """A pass failed."""


class LoweringError(ConverterError):
    """A backend could not lower an op."""


class ParseError(ConverterError):
    """The IR text form could not be parsed."""

    def __init__(self, message: str, *, line: int | None = None, column: int | None = None, **kw: Any):
        self.line = line
        self.column = column
        if line is not None:
            message = f"line {line}, column {column}: {message}"
        super().__init__(message, **kw)


class InputWarning(UserWarning):
    """An input that runs but is probably not what the user meant (e.g. float pixels for an image)."""


class RuntimeFallbackWarning(UserWarning):
    """The runtime asked for cannot run a model, so the reference interpreter runs it (the message says why)."""


class ConversionWarning(UserWarning):
    """Something the user should know about a conversion that still succeeded (e.g. a renamed feature)."""
