"""A checked WebNN `Graph` -> an IR `Program` (one function, ``main``).

Graph inputs and outputs keep their names exactly. Constants become ``const`` ops holding the
graph's arrays (views of the weights file); 64-bit and unsigned 32-bit integer constants are
narrowed to int32 after a range check (see `context`). Each operator is mapped by the table in
`registry`; an IR type error inside a mapping is reported as a FormatError on that operator,
since the recorder/reader accepted shapes the op cannot take.
"""

from __future__ import annotations

import numpy as np

from ...errors import ConverterError, FormatError, UnsupportedError
from ...ir.builder import Builder
from ...ir.core import FeatureInfo, Function, Program
from ...ir.types import TensorType, dtype
from . import ops_elementwise, ops_nn, ops_recurrent, ops_tensor  # noqa: F401  (fill the table)
from .context import IR_DTYPE, Ctx
from .graph import Graph, Operator
from .registry import MAPPINGS

#: The opset of the program: iOS17 has the widest dtype support of the ops used here.
OPSET = "iOS17"
_INT32 = np.iinfo(np.int32)


def _narrow(arr: np.ndarray, wdt: str, graph: Graph, oid: str) -> np.ndarray:
    """A constant as the IR dtype holding ``wdt`` (int64/uint32/uint64 -> int32, range-checked)."""
    want = dtype(IR_DTYPE[wdt]).storage
    if arr.dtype == want:
        return arr
    if arr.size and (arr.min() < _INT32.min or arr.max() > _INT32.max):
        raise UnsupportedError(f"constant '{oid}' ({wdt}) holds values outside the int32 range, which Core ML "
                               "programs cannot hold", file=graph.path)
    return arr.astype(want)


def _check_recorded(ctx: Ctx, op: Operator, wdts: list[str]) -> None:
    """The recorder's spec shapes and types must be what the IR mapping produced: a mismatch is a
    file that lies about its operands (or a bug on one side), never silently a different model."""
    if op.descriptors is None:
        return
    for oid, wdt, desc in zip(op.outputs, wdts, op.descriptors):
        got = ctx.shape(oid)
        if desc.data_type != wdt or got != desc.shape:
            raise FormatError(f"output '{oid}' is recorded as {desc.data_type} {list(desc.shape)} but the "
                              f"operation gives {wdt} {list(got)}", file=ctx.graph.path, op=op.where,
                              op_type=op.method)


def graph_to_program(graph: Graph) -> Program:
    prog = Program()
    fn = Function("main", OPSET)
    prog.add_function(fn)
    ctx = Ctx(Builder(fn.block), graph)
    for inp in graph.inputs:
        v = fn.block.new_input(inp.name, TensorType(dtype(IR_DTYPE[inp.desc.data_type]), inp.desc.shape))
        ctx.values[inp.id], ctx.dtypes[inp.id] = v, inp.desc.data_type
        fn.input_info[inp.name] = FeatureInfo(inp.name, extra={"webnn_data_type": inp.desc.data_type})
    for oid, (desc, arr) in graph.constants.items():
        ctx.values[oid] = ctx.b.const(_narrow(arr, desc.data_type, graph, oid), name=oid)
        ctx.dtypes[oid] = desc.data_type
    for op in graph.operators:
        ctx.op = op
        mapping = MAPPINGS.get(op.method)
        if mapping is None:
            raise UnsupportedError(f"WebNN operation '{op.method}' is not mapped to the IR", file=graph.path,
                                   op=op.where, op_type=op.method)
        try:
            wdts = mapping.out(ctx, op)
            results = mapping.fn(ctx, op)
            if len(results) != len(op.outputs):
                raise FormatError(f"the operation gives {len(results)} outputs, the file lists {len(op.outputs)}",
                                  file=graph.path, op=op.where, op_type=op.method)
            for oid, wdt, v in zip(op.outputs, wdts, results):
                ctx.values[oid], ctx.dtypes[oid] = ctx.fit(v, wdt), wdt
            _check_recorded(ctx, op, wdts)
        except ConverterError as e:
            if isinstance(e, (FormatError, UnsupportedError)):
                raise e.with_location(file=graph.path, op=op.where, op_type=op.method) from None
            raise FormatError(f"invalid operation: {e.message}", file=graph.path, op=op.where,
                              op_type=op.method) from None
        except (IndexError, KeyError, ValueError, TypeError, ZeroDivisionError, OverflowError) as e:
            # arguments the reader cannot check without shapes (an axis beyond the rank, a filter
            # of the wrong rank, ...): the recorder refuses them; a hand-written file may hold them
            raise FormatError(f"invalid arguments for the operand shapes ({type(e).__name__}: {e})",
                              file=graph.path, op=op.where, op_type=op.method) from None
    _name_outputs(ctx, fn, graph)
    return prog


def _name_outputs(ctx: Ctx, fn: Function, graph: Graph) -> None:
    """Give the output values the graph's output names exactly; an internal value that happens to
    carry one of those names (a constant named by its operand id) is renamed out of the way, so
    the final unique-naming of a writer never renames an output."""
    wanted = set(graph.outputs)
    chosen = []
    for oid in graph.outputs.values():
        v = ctx.values[oid]
        if v.producer is None or v in chosen or v.producer.type == "const":
            v = ctx.b.identity(x=v)  # an output needs an op of its own to carry its name
        chosen.append(v)
    for v in list(fn.values()):
        if v.name in wanted and v not in chosen:
            v.name = fn.names.unique(f"{v.name}_internal")
    for (name, oid), v in zip(graph.outputs.items(), chosen):
        v.name = name
        fn.output_info[name] = FeatureInfo(name, extra={"webnn_data_type": ctx.dtypes[oid]})
    fn.block.set_outputs(chosen)
