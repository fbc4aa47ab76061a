"""Control flow and lists (converter/ir/ops/control_flow.py, lists.py).

- ``cond`` -> ``If``: each block a subgraph (outer values read by name, constants kept in the
  main graph), the block results through Identity.
- ``while_loop`` -> ``Loop`` with no trip count, started with cond = true. MIL tests the cond
  block before every body run; ONNX computes the next cond at the end of the body. The body
  graph therefore runs MIL's cond block on the current values, then ``If(c)``: MIL's body block,
  else the values unchanged; ``c`` is the loop's next cond. Each block is written once, and the
  body runs exactly as often as MIL's.
- lists (``make_list``/``list_*``): a list with a static element shape is a dense tensor
  ``[length, *elem_shape]``: unwritten elements are zeros, as MIL reads them. ``list_write`` /
  ``list_scatter`` are ``ScatterND`` (a dynamic-length list first ``Pad``-ded with zeros up to the
  largest index + 1), ``list_read``/``list_gather`` ``Gather``, ``list_length`` the first dim.
  Such a list is a plain tensor as a loop variable. (ONNX sequences have no write at an index and
  no zero default; MIL's out-of-range reads fail in onnxruntime's Gather too; a negative index
  counts from the end in ONNX where MIL refuses it; duplicate ``list_scatter`` indices: ONNX
  leaves the winner unspecified, MIL takes the last.)
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from ....errors import LoweringError
from ....ir.core import Block, Op, Value
from ....ir.types import ListType, TensorType, Type, is_static_dim
from ..emitter import OnnxEmitter, onnx_type
from .registry import UNSUPPORTED, lowering, select


def _dims(t: Type) -> list[int | None] | None:
    """The ONNX dims of an IR type inside a subgraph: static sizes kept, others left open; a list
    is its dense tensor ``[length, *elem]``."""
    if isinstance(t, ListType):
        elem = _dims(t.elem)
        return None if elem is None else [None] + elem
    if isinstance(t, TensorType):
        return None if t.shape is None else [int(d) if is_static_dim(d) else None for d in t.shape]
    raise LoweringError(f"a {t} cannot cross an ONNX subgraph boundary")


def _elem_type(t: Type) -> int:
    if isinstance(t, ListType):
        return _elem_type(t.elem)
    if isinstance(t, TensorType):
        return onnx_type(t.dtype)
    raise LoweringError(f"a {t} cannot cross an ONNX subgraph boundary")


def _info(name: str, t: Type) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, _elem_type(t), _dims(t))


def lower_block(sub: OnnxEmitter, block: Block, inputs: list[str] | None = None) -> list[str]:
    """Write ``block``'s ops into ``sub`` (its inputs bound to ``inputs``); the names of fresh
    Identity nodes holding its results (an ONNX graph output must be made in that graph)."""
    for v, name in zip(block.inputs, inputs or []):
        sub.bind(v, name)
    for op in block.ops:
        if op.type == "const":
            continue
        low = select(op.type, sub.opset)
        if low is None:
            raise LoweringError(f"{op.type} '{op.name}' in a nested block: {UNSUPPORTED.get(op.type, 'no ONNX lowering')}")
        saved, sub.comment = sub.comment, f"{op.type} {op.name}"
        try:
            low.fn(sub, op)
        except LoweringError as err:
            raise LoweringError(f"{op.type} '{op.name}' in a nested block: {err.message}") from None
        sub.comment = saved
    return [sub.node("Identity", [sub.name(v)]) for v in block.outputs]


def _graph(sub: OnnxEmitter, name: str, inputs: list[onnx.ValueInfoProto], outputs: list[str],
           types: list[Type]) -> onnx.GraphProto:
    return helper.make_graph(sub.nodes, name, inputs, [_info(n, t) for n, t in zip(outputs, types)],
                             initializer=sub.initializers)


@lowering("cond", kind="decomposed", note="If with the blocks as then/else subgraphs")
def _cond(e: OnnxEmitter, op: Op) -> None:
    types = [v.type for v in op.outputs]
    branches = []
    for block, what in zip(op.blocks, ("then", "else")):
        sub = e.subgraph()
        outs = lower_block(sub, block)
        branches.append(_graph(sub, e.fresh(f"{op.name}_{what}"), [], outs, types))
    pred = e.node("Reshape", [e.input(op, "pred"), e.int64s([])])
    e.node("If", [pred], [e.out(op, i) for i in range(len(op.outputs))], then_branch=branches[0],
           else_branch=branches[1])


@lowering("while_loop", kind="decomposed",
          note="Loop (no trip count) whose body runs the cond block, then If(cond): body block, else unchanged")
def _while_loop(e: OnnxEmitter, op: Op) -> None:
    cond_block, body_block = op.blocks
    init = [e.name(v) for v in op.inputs["loop_vars"]]
    types = [v.type for v in op.outputs]
    sub = e.subgraph()
    it, cond_in = sub.fresh("iteration"), sub.fresh("cond_in")
    carried = [sub.fresh("var") for _ in init]
    (c,) = lower_block(sub, cond_block, carried)
    c = sub.node("Reshape", [c, sub.int64s([])])
    then = sub.subgraph()
    then_outs = lower_block(then, body_block, carried)
    keep = sub.subgraph()
    keep_outs = [keep.node("Identity", [n]) for n in carried]
    new = sub.node("If", [c], len(carried), then_branch=_graph(then, sub.fresh(f"{op.name}_body"), [], then_outs, types),
                   else_branch=_graph(keep, sub.fresh(f"{op.name}_done"), [], keep_outs, types))
    new = [new] if isinstance(new, str) else new
    c_out = sub.node("Identity", [c])
    inputs = [helper.make_tensor_value_info(it, onnx.TensorProto.INT64, []),
              helper.make_tensor_value_info(cond_in, onnx.TensorProto.BOOL, [])]
    inputs += [_info(n, t) for n, t in zip(carried, types)]
    body = helper.make_graph(sub.nodes, e.fresh(f"{op.name}_loop"), inputs,
                             [helper.make_tensor_value_info(c_out, onnx.TensorProto.BOOL, [])]
                             + [_info(n, t) for n, t in zip(new, types)], initializer=sub.initializers)
    e.node("Loop", [None, e.constant(np.array(True))] + init, [e.out(op, i) for i in range(len(op.outputs))],
           body=body)


# -- lists as dense tensors ---------------------------------------------------------------------------


def _list_type(e: OnnxEmitter, v: Value) -> ListType:
    t = v.type
    if not isinstance(t, ListType) or not isinstance(t.elem, TensorType):
        raise LoweringError(f"'{v.name}' is a {t}, not a list of tensors")
    return t


def _elem_shape(t: ListType, what: str) -> list[int]:
    shape = t.elem.shape
    if shape is None or not all(is_static_dim(d) for d in shape):
        raise LoweringError(f"{what}: a list is written as a dense tensor and needs a static element shape, "
                            f"got {t.elem}")
    return [int(d) for d in shape]


@lowering("make_list", note="ConstantOfShape([init_length, *elem_shape], 0): the list as a dense tensor")
def _make_list(e: OnnxEmitter, op: Op) -> None:
    t = _list_type(e, op.outputs[0])
    elem = _elem_shape(t, "make_list")
    length = e.param(op, "init_length")
    if length is not None:
        shape = e.int64s([int(np.asarray(length))] + elem)
    else:
        n = e.node("Reshape", [e.cast(e.input(op, "init_length"), "int64"), e.int64s([1])])
        shape = e.node("Concat", [n, e.int64s(elem)], axis=0)
    zero = helper.make_tensor("value", onnx_type(t.elem.dtype), [1], [0])
    e.node("ConstantOfShape", [shape], [e.out(op)], value=zero)


@lowering("list_length", note="the first dim of the dense tensor, as int32")
def _list_length(e: OnnxEmitter, op: Op) -> None:
    n = e.node("Shape", [e.input(op, "ls")], start=0, end=1)
    e.node("Cast", [e.node("Reshape", [n, e.int64s([])])], [e.out(op)], to=onnx_type("int32"))


@lowering("list_read", note="Gather on axis 0")
def _list_read(e: OnnxEmitter, op: Op) -> None:
    idx = e.node("Reshape", [e.input(op, "index"), e.int64s([])])
    e.node("Gather", [e.input(op, "ls"), idx], [e.out(op)], axis=0)


@lowering("list_gather", note="Gather on axis 0")
def _list_gather(e: OnnxEmitter, op: Op) -> None:
    e.node("Gather", [e.input(op, "ls"), e.input(op, "indices")], [e.out(op)], axis=0)


def _grown(e: OnnxEmitter, op: Op, ls: str, top: str) -> str:
    """``ls`` padded with zero elements up to ``top + 1`` elements (a dynamic list written past
    its end); ``top`` an int64 [1]."""
    t = _list_type(e, op.inputs["ls"])
    if not t.dynamic_length:
        return ls
    rank = 1 + len(_elem_shape(t, op.type))
    n = e.node("Shape", [ls], start=0, end=1)
    need = e.node("Sub", [e.node("Max", [n, e.node("Add", [top, e.int64s([1])])]), n])
    pads = e.node("Concat", [e.int64s([0] * rank), need, e.int64s([0] * (rank - 1))], axis=0)
    return e.node("Pad", [ls, pads])


@lowering("list_write", kind="decomposed", note="ScatterND at the index (Pad first for a dynamic list)")
def _list_write(e: OnnxEmitter, op: Op) -> None:
    idx = e.node("Reshape", [e.cast(e.input(op, "index"), "int64"), e.int64s([1])])
    ls = _grown(e, op, e.input(op, "ls"), idx)
    value = e.node("Unsqueeze", [e.input(op, "value"), e.int64s([0])])
    e.node("ScatterND", [ls, e.node("Reshape", [idx, e.int64s([1, 1])]), value], [e.out(op)])


@lowering("list_scatter", kind="decomposed", note="ScatterND at the indices (Pad first for a dynamic list)")
def _list_scatter(e: OnnxEmitter, op: Op) -> None:
    idx = e.cast(e.input(op, "indices"), "int64")
    top = e.node("ReduceMax", [idx], keepdims=1)
    ls = _grown(e, op, e.input(op, "ls"), top)
    e.node("ScatterND", [ls, e.node("Unsqueeze", [idx, e.int64s([-1])]), e.input(op, "value")], [e.out(op)])
