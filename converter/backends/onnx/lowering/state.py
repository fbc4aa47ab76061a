"""Model state (iOS18 ``read_state`` / ``coreml_update_state``) as an input + output pair.

ONNX graphs have no state. A state input ``S`` of the function becomes the graph input ``S`` (the
tensor the state holds when the prediction starts, its wrapped type) and the graph output
``S_out`` (what it holds at the end: the last value written, else ``S`` unchanged) -- the
past/present convention of ONNX decoder models. The caller carries ``S_out`` into the next run's
``S`` (`state_output_name`). A function that already has a value named ``S_out`` is refused (the
name is the interface).

In the graph the state's current value is simply the ONNX name the state value is bound to:
``coreml_update_state`` rebinds it to the written value, ``read_state`` reads it. A write inside a
cond / while_loop block would need the state threaded through the subgraph's outputs: refused.
"""

from __future__ import annotations

import onnx
from onnx import helper

from ....errors import LoweringError
from ....ir.core import Function, Op, Value
from ....ir.types import StateType
from ..emitter import OnnxEmitter, dim_proto, onnx_type
from .registry import lowering


def is_state(v: Value) -> bool:
    return isinstance(v.type, StateType)


def state_input_info(v: Value, doc: str = "") -> onnx.ValueInfoProto:
    """The graph input holding state ``v``'s value when a prediction starts."""
    t = v.type.wrapped
    shape = None if t.shape is None else [dim_proto(d) for d in t.shape]
    return helper.make_tensor_value_info(v.name, onnx_type(t.dtype), shape,
                                         doc_string=doc or f"state '{v.name}' at the start of the prediction")


def state_output_name(state: str) -> str:
    """The graph output holding state ``state``'s value at the end of a prediction."""
    return f"{state}_out"


def state_outputs(e: OnnxEmitter, fn: Function) -> list[onnx.ValueInfoProto]:
    """One graph output per state input: its value at the end (``<name>_out``)."""
    infos = []
    for v in fn.inputs:
        if not is_state(v):
            continue
        name = state_output_name(v.name)
        if name in e._taken:
            raise LoweringError(f"state '{v.name}' is written to the output '{name}', which is already a value "
                                "name of the function")
        e._taken.add(name)
        e.node("Identity", [e.name(v)], [name])
        t = v.type.wrapped
        shape = None if t.shape is None else [dim_proto(d) for d in t.shape]
        infos.append(helper.make_tensor_value_info(name, onnx_type(t.dtype), shape,
                                                   doc_string=f"state '{v.name}' at the end of the prediction "
                                                              f"(feed it as '{v.name}' next time)"))
    return infos


def _state(op: Op, key: str) -> Value:
    v = op.inputs.get(key)
    if not isinstance(v, Value) or not is_state(v):
        raise LoweringError(f"'{key}' must be a state")
    return v


@lowering("read_state", note="Identity of the state's current value (a state is a graph input + output pair)")
def _read_state(e: OnnxEmitter, op: Op) -> None:
    e.node("Identity", [e.name(_state(op, "input"))], [e.out(op)])


@lowering("coreml_update_state", note="the written value becomes the state's current value (graph output S_out)")
def _update_state(e: OnnxEmitter, op: Op) -> None:
    state = _state(op, "state")
    if e.parent is not None:
        raise LoweringError(f"state '{state.name}' is written inside a control-flow block; ONNX subgraphs "
                            "would have to return it (not written)")
    e.node("Identity", [e.input(op, "value")], [e.out(op)])
    e.bind(state, e.out(op))
