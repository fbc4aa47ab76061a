"""Lower one IR function to an ONNX GraphProto, op by op in program order.

Every op is tried, so one conversion reports every op that has no ONNX form (one
`UnsupportedError` naming each op and why), not only the first. Graph inputs and outputs keep the
function's feature names and types (symbolic dims as ``dim_param``); an output that is not
produced under its own name (a graph input, a constant, an alias) gets an Identity node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import onnx
from onnx import TensorProto, helper

from ...errors import LoweringError, UnsupportedError
from ...ir.core import Function, Op, Value
from ...ir.types import TensorType
from .emitter import OnnxEmitter, Unavailable, onnx_type, value_info
from .lowering import UNSUPPORTED, load_all, select
from .lowering.state import is_state, state_input_info, state_outputs


def lower_function(fn: Function, opset: int, *, source: str | None = None, refused: Mapping[Op, str] | None = None,
                   options: Mapping[str, Any] | None = None) -> tuple[onnx.GraphProto, dict[str, int]]:
    """The graph of ``fn`` and the extra operator-set domains it uses. ``refused``: ops an earlier
    step could not handle, with why (reported as they are); ``options``: conversion options the
    lowerings read (`OnnxEmitter.options`)."""
    load_all()
    refused = refused or {}
    e = OnnxEmitter(fn, opset)
    e.options.update(options or {})
    problems: list[str] = []
    inputs = []
    restore = bool(e.options.get("restore_types"))
    for v in fn.inputs:
        restored = restored_type(v, fn.input_info.get(v.name)) if restore else None
        try:
            doc = _doc(fn.input_info.get(v.name))
            inputs.append(state_input_info(v, doc) if is_state(v) else value_info(v.name, v, doc, restored))
        except LoweringError as err:
            problems.append(f"input '{v.name}': {err.message}")
        if restored is None:
            e.bind(v, v.name)
        else:  # the ONNX input type the model had, cast to the held one
            e.bind(v, e.node("Cast", [v.name], [e.fresh(v.name)], to=onnx_type(v.type.dtype)))
    restored_outputs = {}
    for v in fn.outputs if restore else ():
        restored = restored_type(v, fn.output_info.get(v.name))
        if restored is not None and not v.is_block_input and v not in restored_outputs:
            restored_outputs[v] = restored
            e.out_names[v] = e.fresh(v.name)

    failed: set[Value] = set()
    for op in fn.block.ops:
        if op.type == "const":
            continue
        e.comment = f"{op.type} {op.name}"
        try:
            if op in refused:
                raise LoweringError(refused[op])
            low = select(op.type, opset)
            if low is None:
                reason = UNSUPPORTED.get(op.type, "no ONNX lowering")
                if any(o.min_opset > opset for o in _lowerings(op.type)):
                    reason = f"needs opset {min(o.min_opset for o in _lowerings(op.type))} (writing opset {opset})"
                raise LoweringError(reason)
            low.fn(e, op)
        except Unavailable:
            failed.update(op.outputs)  # an input whose producer was already reported
        except LoweringError as err:
            failed.update(op.outputs)
            problems.append(f"{op.type} '{op.name}': {err.message}")
    e.comment = ""

    outputs = []
    if not failed:
        try:
            outputs += state_outputs(e, fn)  # a state's value at the end (lowering/state.py)
        except LoweringError as err:
            problems.append(err.message)
    for v in fn.outputs:
        if v in failed:
            continue
        restored = restored_outputs.get(v)
        try:
            held = e.name(v)
            if held == v.name:  # not made by a lowering under the name set aside (a constant)
                restored = None
            info = e.output_infos.get(v) or value_info(v.name, v, _doc(fn.output_info.get(v.name)), restored)
        except Unavailable:
            continue
        except LoweringError as err:
            problems.append(f"output '{v.name}': {err.message}")
            continue
        if restored is not None:
            e.node("Cast", [held], [v.name], to=restored)
        elif held != v.name or v.is_block_input:
            if v.is_block_input:
                problems.append(f"output '{v.name}' is the input of the same name; ONNX names one value once")
                continue
            e.node("Identity", [held], [v.name])
        outputs.append(info)
    if problems:
        count = f"{len(problems)} ops have" if len(problems) > 1 else "1 op has"
        raise UnsupportedError(f"{count} no ONNX (opset {opset}) form: " + "; ".join(problems), file=source)
    graph = helper.make_graph(e.nodes, fn.name, inputs, outputs, initializer=e.initializers)
    return graph, dict(e.domains)


#: ONNX element types that a model read by the ONNX frontend had at its interface and that the IR
#: holds in another dtype (converter/frontends/onnx/context.py), restored by a Cast at the graph's
#: edge; float8 and 4-bit types are not (their casts need newer opsets), nor rank-0 inputs
RESTORED_TYPES = frozenset({"bool", "int8", "uint8", "int16", "uint16", "int64", "uint32", "uint64", "double",
                            "bfloat16"})


def restored_type(v: Value, info: Any) -> int | None:
    """The ONNX element type to declare feature ``v`` with, when the frontend recorded one that
    differs from the dtype the IR holds it in (``info.extra["onnx_elem_type"]``), else None."""
    name = info.extra.get("onnx_elem_type") if info is not None and info.extra else None
    if name not in RESTORED_TYPES or not isinstance(v.type, TensorType):
        return None
    elem_type = TensorProto.DataType.Value(name.upper())
    return None if elem_type == onnx_type(v.type.dtype) else elem_type


def _lowerings(op_type: str) -> list:
    from .lowering import LOWERINGS

    return LOWERINGS.get(op_type, [])


def _doc(info) -> str:  # noqa: ANN001 - FeatureInfo | None
    return info.short_description if info is not None and info.short_description else ""


__all__ = ["lower_function"]
