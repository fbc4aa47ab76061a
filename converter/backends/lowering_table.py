"""What the backends' lowering tables share: the ``converter ops --json`` entry of an op type from a
table of lowerings (anything with ``kind`` and ``note``) and a table of reasons for the op types a
backend has no form for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def lowering_entry(lowerings: Mapping[str, Any], unsupported: Mapping[str, str], op_type: str,
                   missing: str) -> dict[str, str]:
    """``direct``/``decomposed`` (with the lowering's note), else ``unsupported`` with the reason
    (``missing`` when the table gives none)."""
    low = lowerings.get(op_type)
    if low is None:
        return {"status": "unsupported", "reason": unsupported.get(op_type, missing)}
    entry = {"status": low.kind}
    if low.note:
        entry["note"] = low.note
    return entry
