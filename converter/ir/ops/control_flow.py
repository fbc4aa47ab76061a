"""Control flow and constants: const, _const_symbolic, cond, while_loop."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..opdef import EvalArgs, InferArgs, OpDef, register
from ..runtime import ListValue
from ..types import ListType, TensorType, Type, fresh_symbol, is_static_dim, type_of_array


def _declared_or_value_type(a: InferArgs) -> Type:
    val = a.op.attributes.get("val")
    if val is None:
        raise a.fail("const op has no 'val'")
    if a.op.outputs:
        return a.op.outputs[0].type  # the declared type carries dtypes numpy cannot (uint4, bf16)
    if isinstance(val, ListValue):
        return ListType(val.elem_type, len(val.items), dynamic_length=False)
    return type_of_array(np.asarray(val))


@register
class Const(OpDef):
    """A compile-time value, held in ``attributes['val']`` (numpy array, or ListValue)."""

    op_type = "const"
    traits = frozenset({"pure", "constant"})

    def infer(self, a: InferArgs) -> list[Type]:
        return [_declared_or_value_type(a)]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        return [a.op.attributes["val"]]


@register
class ConstSymbolic(Const):
    """coremltools' internal constant holding symbolic values; evaluates like const."""

    op_type = "_const_symbolic"


def merge_types(a: Type, b: Type) -> Type | None:
    """The most precise type describing both (differing dims become fresh symbols)."""
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        if a.dtype != b.dtype:
            return None
        if a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
            return TensorType(a.dtype, None)
        dims = []
        for x, y in zip(a.shape, b.shape):
            if x == y or (is_static_dim(x) and is_static_dim(y) and int(x) == int(y)):
                dims.append(x)
            else:
                dims.append(fresh_symbol())
        return TensorType(a.dtype, tuple(dims))
    if isinstance(a, ListType) and isinstance(b, ListType):
        elem = merge_types(a.elem, b.elem)
        if elem is None:
            return None
        return ListType(elem, a.length if a.length == b.length else None, a.dynamic_length or b.dynamic_length)
    return a if a == b else None


@register
class Cond(OpDef):
    """``if pred: blocks[0] else: blocks[1]``; both blocks return values of the same types."""

    op_type = "cond"
    traits = frozenset({"control_flow"})

    def infer(self, a: InferArgs) -> list[Type]:
        pred = a.tensor_type("pred")
        if pred.shape is not None and pred.shape not in ((), (1,)):
            raise a.fail(f"pred must be a bool scalar, got shape {list(pred.shape)}")
        blocks = a.op.blocks
        if len(blocks) != 2:
            raise a.fail(f"cond needs a true and a false block, got {len(blocks)} blocks")
        t_out, f_out = blocks[0].outputs, blocks[1].outputs
        if len(t_out) != len(f_out):
            raise a.fail(f"true block returns {len(t_out)} values, false block {len(f_out)}")
        out = []
        for i, (x, y) in enumerate(zip(t_out, f_out)):
            m = merge_types(x.type, y.type)
            if m is None:
                raise a.fail(f"output {i}: true block gives {x.type}, false block {y.type}")
            out.append(m)
        return out

    def evaluate(self, a: EvalArgs) -> list[Any]:
        pred = bool(np.asarray(a["pred"]).reshape(-1)[0])
        return a.run_block(a.op.blocks[0 if pred else 1], [])


@register
class WhileLoop(OpDef):
    """``while cond(vars): vars = body(vars)``; blocks[0] is cond, blocks[1] is body."""

    op_type = "while_loop"
    traits = frozenset({"control_flow"})

    def infer(self, a: InferArgs) -> list[Type]:
        loop_vars = a.types("loop_vars")
        blocks = a.op.blocks
        if len(blocks) != 2:
            raise a.fail(f"while_loop needs a cond and a body block, got {len(blocks)} blocks")
        cond, body = blocks
        for blk, what in ((cond, "cond"), (body, "body")):
            if len(blk.inputs) != len(loop_vars):
                raise a.fail(f"{what} block takes {len(blk.inputs)} inputs for {len(loop_vars)} loop vars")
        if len(cond.outputs) != 1:
            raise a.fail(f"cond block must return one bool, returns {len(cond.outputs)} values")
        ct = cond.outputs[0].type
        if not (isinstance(ct, TensorType) and ct.dtype.name == "bool"):
            raise a.fail(f"cond block must return a bool, returns {ct}")
        if len(body.outputs) != len(loop_vars):
            raise a.fail(f"body returns {len(body.outputs)} values for {len(loop_vars)} loop vars")
        out = []
        for i, (init, blk_in, res) in enumerate(zip(loop_vars, body.inputs, body.outputs)):
            m = merge_types(init, res.type)
            if m is None:
                raise a.fail(f"loop var {i}: initial {init}, body returns {res.type}")
            m2 = merge_types(m, blk_in.type)
            out.append(m2 if m2 is not None else m)
        return out

    def evaluate(self, a: EvalArgs) -> list[Any]:
        cond, body = a.op.blocks
        values = list(a["loop_vars"])
        while True:
            keep_going = a.run_block(cond, values)[0]
            if not bool(np.asarray(keep_going).reshape(-1)[0]):
                return values
            a.interpreter.count_loop_iteration()  # bounded: an untrusted model's loop may never end
            values = a.run_block(body, values)
