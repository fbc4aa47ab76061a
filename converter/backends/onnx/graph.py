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
from onnx import helper

from ...errors import LoweringError, UnsupportedError
from ...ir.core import Function, Op, Value
from .emitter import OnnxEmitter, Unavailable, value_info
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
    for v in fn.inputs:
        try:
            doc = _doc(fn.input_info.get(v.name))
            inputs.append(state_input_info(v, doc) if is_state(v) else value_info(v.name, v, doc))
        except LoweringError as err:
            problems.append(f"input '{v.name}': {err.message}")
        e.bind(v, v.name)

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
        try:
            info = e.output_infos.get(v) or value_info(v.name, v, _doc(fn.output_info.get(v.name)))
            held = e.name(v)
        except Unavailable:
            continue
        except LoweringError as err:
            problems.append(f"output '{v.name}': {err.message}")
            continue
        if held != v.name or v.is_block_input:
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


def _lowerings(op_type: str) -> list:
    from .lowering import LOWERINGS

    return LOWERINGS.get(op_type, [])


def _doc(info) -> str:  # noqa: ANN001 - FeatureInfo | None
    return info.short_description if info is not None and info.short_description else ""


__all__ = ["lower_function"]
