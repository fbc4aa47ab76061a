"""Model state (iOS18): read_state, and the IR op coreml_update_state that writes it.

A state is a mutable tensor living across predictions; at run time it is a ``StateCell``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..opdef import EvalArgs, InferArgs, InputSpec, OpDef, register
from ..types import StateType, TensorType, Type, types_compatible

STATEFUL = frozenset({"stateful"})
_STATE_DTYPES = ("fp16", "fp32", "int8", "int16", "int32", "uint8", "uint16", "bool")


def _wrapped(a: InferArgs, name: str) -> TensorType:
    t = a.type(name)
    if not isinstance(t, StateType):
        raise a.fail(f"'{name}' must be a state, got {t}")
    return t.wrapped


@register
class ReadState(OpDef):
    """A copy of the tensor a state holds now."""

    op_type = "read_state"
    traits = STATEFUL

    def infer(self, a: InferArgs) -> list[Type]:
        return [_wrapped(a, "input")]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        return [np.array(a["input"].value, copy=True)]


@register
class CoremlUpdateState(OpDef):
    """Write ``value`` into ``state`` and return ``value``.

    Not an op of the MIL opsets: coremltools' ``coreml`` dialect op of the same name. Files store a
    state update as ``write_state`` followed by ``read_state``; the MIL frontend and backend map
    between that pair and this op, which keeps the update one SSA value in the IR.
    """

    op_type = "coreml_update_state"
    traits = STATEFUL
    ir_only = True
    ir_since = "iOS18"
    ir_inputs = (
        InputSpec("state", "state", optional=False, const=False),
        InputSpec("value", "tensor", optional=False, const=False, types=_STATE_DTYPES),
    )

    def infer(self, a: InferArgs) -> list[Type]:
        wrapped, value = _wrapped(a, "state"), a.tensor_type("value")
        if not types_compatible(wrapped, value):
            raise a.fail(f"value of type {value} does not fit state of {wrapped}")
        return [value]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        value = a["value"]
        a["state"].value = np.array(value, copy=True)
        return [value]
