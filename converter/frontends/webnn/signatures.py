"""The WebNN builder-method table (ops.json), shared with recorder.mjs.

One table says which arguments each ``MLGraphBuilder`` method takes, in call order, and which keys
its options dictionary accepts; the Node recorder validates calls with it and the JSON reader
checks recorded files with it, so the two can never disagree about what a valid call is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

TABLE_PATH = Path(__file__).with_name("ops.json")

#: WebNN ``MLOperandDataType`` -> IR dtype name (WebNN has no bool: logical values are uint8).
WEBNN_TO_IR_DTYPE = {
    "float32": "fp32", "float16": "fp16", "int32": "int32", "uint32": "uint32", "int64": "int64",
    "uint64": "uint64", "int8": "int8", "uint8": "uint8",
}


@dataclass(frozen=True)
class Signature:
    """Positional parameters ``[(name, kind)]`` and option kinds ``{key: kind}`` of one method."""

    name: str
    args: tuple[tuple[str, Any], ...]
    options: dict[str, Any]


@cache
def signatures() -> dict[str, Signature]:
    """Every builder operation of the spec (not ``input``/``constant``, which the format holds apart)."""
    table = json.loads(TABLE_PATH.read_text())
    return {name: Signature(name, tuple((a, k) for a, k in rec["args"]), dict(rec["options"]))
            for name, rec in table["ops"].items()}


@cache
def data_types() -> tuple[str, ...]:
    return tuple(json.loads(TABLE_PATH.read_text())["dataTypes"])
