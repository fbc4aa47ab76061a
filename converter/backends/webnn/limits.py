"""What the WebNN implementation we target accepts, per builder method and operand.

The table is Chromium 153's ``context.opSupportLimits()`` (LiteRT/XNNPACK on CPU), shipped with the
package as data (``chromium153_limits.json``, a copy of ``../shared/reference``'s measurement). It is
narrower than the spec in places (rank <= 5 for most elementwise ops, float-only clamp/matmul/gemm,
int32-only scatter indices, no uint8 comparisons): the emitter checks every call it writes against
it, so a graph that the browser would refuse at ``build()`` is refused at conversion time instead,
with the op's name. Refusals found by running graphs, which the table does not show, are in
`KNOWN_REFUSALS` and checked by the lowerings that could produce them.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

LIMITS_FILE = Path(__file__).with_name("chromium153_limits.json")

#: positional operand names of builder methods (the limits table names operands this way);
#: methods not listed take one operand, ``input``.
POSITIONAL: dict[str, tuple[str, ...]] = {
    **{m: ("a", "b") for m in ("add", "sub", "mul", "div", "max", "min", "pow", "equal", "notEqual", "greater",
                                "greaterOrEqual", "lesser", "lesserOrEqual", "logicalAnd", "logicalOr", "logicalXor",
                                "matmul", "gemm")},
    "where": ("condition", "trueValue", "falseValue"),
    "conv2d": ("input", "filter"),
    "convTranspose2d": ("input", "filter"),
    "prelu": ("input", "slope"),
    "gather": ("input", "indices"),
    "gatherElements": ("input", "indices"),
    "gatherND": ("input", "indices"),
    "scatterElements": ("input", "indices", "updates"),
    "scatterND": ("input", "indices", "updates"),
    "batchNormalization": ("input", "mean", "variance"),
    "concat": ("inputs",),
    "lstm": ("input", "weight", "recurrentWeight"),
    "gru": ("input", "weight", "recurrentWeight"),
    "lstmCell": ("input", "weight", "recurrentWeight", "hiddenState", "cellState"),
    "gruCell": ("input", "weight", "recurrentWeight", "hiddenState"),
    "quantizeLinear": ("input", "scale", "zeroPoint"),
    "dequantizeLinear": ("input", "scale", "zeroPoint"),
}


@lru_cache(maxsize=1)
def limits() -> dict[str, Any]:
    return json.loads(LIMITS_FILE.read_text())


def check_operand(method: str, operand: str, data_type: str, rank: int) -> str | None:
    """Why ``method`` refuses a ``data_type`` operand of ``rank`` as ``operand``, or None."""
    entry = limits().get(method)
    if not isinstance(entry, dict):
        return f"WebNN has no builder method '{method}'"
    spec = entry.get(operand)
    if spec is None:
        return None  # an option the table does not describe
    if data_type not in spec["dataTypes"]:
        return (f"{method}: {operand} of data type {data_type} is not supported "
                f"(supported: {', '.join(spec['dataTypes'])})")
    lo, hi = spec["rankRange"]["min"], spec["rankRange"]["max"]
    if not lo <= rank <= hi:
        return f"{method}: {operand} of rank {rank} is not supported (rank {lo}..{hi})"
    return None


def max_tensor_bytes() -> int:
    return int(limits().get("maxTensorByteLength", 2**31 - 1))
