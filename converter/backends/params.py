"""An op's parameters as the lowerings of every backend read them: the value known at conversion
time, or the signature's default (`converter.ir.opdef.param`), and one that the target format
needs at conversion time (`required_param`)."""

from __future__ import annotations

from typing import Any

from ..errors import LoweringError
from ..ir.core import Op
from ..ir.opdef import param

__all__ = ["param", "required_param"]


def required_param(op: Op, key: str, why: str = "") -> Any:
    """Like `param`, but a parameter given as a value known only at run time is a `LoweringError`
    (``why``: what in the target format needs it, e.g. " (a layer parameter)")."""
    v = param(op, key)
    if v is None and key in op.inputs:
        raise LoweringError(f"'{key}' must be known at conversion time{why}")
    return v
