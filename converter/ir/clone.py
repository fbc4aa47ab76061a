"""A structural copy of a Program: new ops, values and blocks; constants shared, not copied.

Passes change programs in place; a backend that must leave its input untouched (saving never
modifies the program) runs them on a clone. Constant arrays are treated as immutable everywhere
in the IR, so the clone shares them (memory-mapped weights stay mapped); types are immutable and
shared too. Linear in the program size, iterative over blocks (no recursion limit).
"""

from __future__ import annotations

from collections.abc import Callable

from .core import Block, Function, Op, Program, Value


def clone_program(prog: Program) -> tuple[Program, dict[Op, Op]]:
    """A copy of ``prog`` and the map from each of its ops to the op's copy."""
    out = Program()
    out.default_function = prog.default_function
    out.attributes = dict(prog.attributes)
    out.doc_string = prog.doc_string
    out.meta = dict(prog.meta)
    ops: dict[Op, Op] = {}
    for name, fn in prog.functions.items():
        new_fn = Function(fn.name, fn.opset)
        new_fn.attributes = dict(fn.attributes)
        new_fn.input_info = dict(fn.input_info)
        new_fn.output_info = dict(fn.output_info)
        new_fn.state_info = dict(fn.state_info)
        new_fn.meta = dict(fn.meta)
        _clone_block(fn.block, new_fn.block, ops)
        out.functions[name] = new_fn
    return out, ops


def _clone_block(src: Block, dst: Block, ops: dict[Op, Op]) -> None:
    values: dict[Value, Value] = {}
    copied: list[tuple[Op, Op]] = []
    # (source block, its copy) pairs whose ops still have to be copied; outputs are set once
    # every op of the block (and of its nested blocks) exists.
    pending: list[tuple[Block, Block]] = [(src, dst)]
    finished: list[tuple[Block, Block]] = []
    while pending:
        s, d = pending.pop()
        d.name = s.name
        d.attributes = dict(s.attributes)
        for v in s.inputs:
            values[v] = d.new_input(v.name, v.type)
        finished.append((s, d))
        for op in s.ops:
            new = Op(op.type, op.opdef, name=op.name, attributes=dict(op.attributes))
            ops[op] = new
            copied.append((op, new))
            new.create_outputs([v.type for v in op.outputs], [v.name for v in op.outputs])
            for v, nv in zip(op.outputs, new.outputs):
                values[v] = nv
            d.append(new)
            for b in op.blocks:
                nb = new.add_block(Block())
                pending.append((b, nb))
    # inputs refer to values defined earlier (or in enclosing blocks): bind them once all exist
    for op, new in copied:
        for key, arg in op.inputs.items():
            new.set_input(key, tuple(values[v] for v in arg) if isinstance(arg, tuple) else values[arg])
    for s, d in finished:
        d.set_outputs([values[v] for v in s.outputs])


def copy_ops(src: Block, dst: Block, values: dict[Value, Value] | None = None,
             rename: Callable[[str], str] | None = None) -> list[Value]:
    """Append copies of ``src``'s ops to ``dst`` (nested blocks copied with them) and return the
    values ``src``'s outputs become: what inlining a block is (a ``cond`` whose predicate is known).
    An input reads ``values[v]`` when ``v`` is mapped (``src``'s own inputs must be), else ``v``
    itself: a value of an enclosing scope, which must be visible where ``dst`` is. ``rename`` gives
    each copied op and value its name (default: the original's). Constants are shared, attributes
    copied (a random op keeps its stream key, so its draws are the same). Recursive only over the
    nesting depth of blocks (bounded by the readers, `limits.MAX_NESTING`)."""
    values = {} if values is None else values
    name = rename or (lambda n: n)
    for op in src.ops:
        new = Op(op.type, op.opdef, name=name(op.name), attributes=dict(op.attributes))
        for b in op.blocks:
            nb = new.add_block(Block(name=b.name))
            nb.attributes = dict(b.attributes)
            for v in b.inputs:
                values[v] = nb.new_input(name(v.name), v.type)
            nb.set_outputs(copy_ops(b, nb, values, rename))
        # an output named like its op keeps that pairing (the text form prints no separate op name)
        out_names = [new.name if v.name == op.name else name(v.name) for v in op.outputs]
        new.create_outputs([v.type for v in op.outputs], out_names)
        values.update(zip(op.outputs, new.outputs))
        for key, arg in op.inputs.items():
            new.set_input(key, tuple(values.get(v, v) for v in arg) if isinstance(arg, tuple) else values.get(arg, arg))
        dst.append(new)
    return [values.get(v, v) for v in src.outputs]
