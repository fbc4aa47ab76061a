"""JavaScript literals for model-supplied data.

Every string that comes from a model (feature names, op names, labels, metadata) reaches the
generated JavaScript only through `js_string`: a JSON string literal with every non-ASCII
character escaped (so U+2028/U+2029, which end a line in older JavaScript, are harmless) and
``<``, ``>``, ``&`` escaped too (so ``</script>`` or ``<!--`` cannot end or comment out an inline
script either). Numbers keep every bit of their value; NaN and infinities are written as such.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

_HTML_SENSITIVE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"}


def js_string(text: str) -> str:
    """``text`` as a JavaScript string literal that is also safe inside an HTML script element."""
    out = json.dumps(str(text), ensure_ascii=True)
    for ch, esc in _HTML_SENSITIVE.items():
        out = out.replace(ch, esc)
    return out


def js_json(value: Any, *, one_line: bool = False) -> str:
    """``value`` as JSON, which is also a JavaScript literal safe inside an HTML script element
    (non-ASCII and ``<``, ``>``, ``&`` escaped; they occur only inside JSON strings). A mapping is
    written one entry per line (unless ``one_line``)."""
    if isinstance(value, Mapping) and value and not one_line:
        rows = [f" {_json_key(str(k))}: {js_json(v, one_line=True)}" for k, v in value.items()]
        return "{\n" + ",\n".join(rows) + "\n}"
    out = json.dumps(value, ensure_ascii=True)
    for ch, esc in _HTML_SENSITIVE.items():
        out = out.replace(ch, esc)
    return out


def _json_key(key: str) -> str:
    """An object-literal key: JSON, except ``__proto__``, which as a plain key would set the object's
    prototype instead of adding a property; as a computed key it is an ordinary property."""
    text = js_json(key, one_line=True)
    return f"[{text}]" if key == "__proto__" else text


def js_comment(text: str, limit: int = 120) -> str:
    """``text`` made safe for a ``//`` line comment: one line, ASCII, no comment terminators, at
    most ``limit`` characters (comments are for people; the exact name is in the string tables)."""
    safe = "".join(ch if 32 <= ord(ch) < 127 else "?" for ch in str(text))
    safe = safe.replace("*/", "*?").replace("<", "?").replace(">", "?")
    return safe if len(safe) <= limit else safe[: limit - 3] + "..."


def js_number(x: float | int) -> str:
    if isinstance(x, (bool, np.bool_)):
        return "true" if x else "false"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    f = float(x)
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    text = repr(f)
    return text[:-2] if text.endswith(".0") else text


class Raw(str):
    """Text inserted into JavaScript as it is (our own identifiers and expressions only)."""


def js_value(v: Any) -> str:
    """A JavaScript literal for a Python value: our identifiers (`Raw`) as they are, strings
    escaped, numbers exact, sequences as arrays and mappings as objects (keys escaped)."""
    if isinstance(v, Raw):
        return str(v)
    if hasattr(v, "js") and isinstance(v.js, str):  # an emitted operand
        return v.js
    if isinstance(v, str):
        return js_string(v)
    if isinstance(v, (bool, np.bool_, int, float, np.integer, np.floating)):
        return js_number(v)
    if isinstance(v, np.ndarray):
        return js_value(v.tolist())
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{_key(k)}: {js_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, Sequence):
        return "[" + ", ".join(js_value(x) for x in v) + "]"
    raise TypeError(f"no JavaScript literal for {type(v).__name__}")


def _key(k: str) -> str:
    if k == "__proto__":
        return f"[{js_string(k)}]"  # a computed key: an own property, not the prototype
    return k if k.isidentifier() and k.isascii() else js_string(k)
