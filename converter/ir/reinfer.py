"""Type re-inference: recompute every op's output types after input types changed.

Each op's ``infer()`` runs again in program order, nested blocks first (a ``cond`` types its
outputs from its blocks'), and the output types are replaced in place. A ``while_loop``'s blocks
are typed from its loop variables; where the body gives a loop variable another type than it got,
the block inputs take the merge of both (sizes that vary between iterations become fresh symbols)
and the blocks are typed once more. An op that no longer accepts its inputs raises the
`TypeInferenceError` of its ``infer()``, which names the op and its function.

Linear in the program size (each op is inferred once, loops' blocks at most twice).
"""

from __future__ import annotations

from ..errors import TypeInferenceError
from .core import Block, Function, Op, Program, Value
from .ops.control_flow import merge_types
from .symbols import type_symbols
from .types import DimExpr, TensorType, Type
from .verify import is_compile_time_const


def reinfer(where: Function | Program, *, keep_declared_sizes: bool = False) -> int:
    """Re-infer the output types of every op of a function (or of every function of a program)
    from its current input types; returns how many values changed type.

    ``keep_declared_sizes``: where inference gives a fresh symbol (a size it cannot know, e.g. a
    reshape to a shape computed at run time) but the value's current type has a static size or a
    size in terms of the function's input symbols, keep that one. This is right when input types
    were only narrowed (symbols fixed to sizes: `converter.passes.specialize`), since what held
    for every size still holds for the chosen one; not after arbitrary type changes, nor inside a
    loop whose variables change type between iterations (there nothing declared is kept).
    """
    functions = list(where.functions.values()) if isinstance(where, Program) else [where]
    changed = 0
    for fn in functions:
        changed += Retyper(fn, keep_declared_sizes=keep_declared_sizes).block(fn.block)
    return changed


class Retyper:
    """`reinfer` one op at a time, for a pass that changes inputs as it walks a function in
    program order (``retype(op)`` once the op's inputs have their final types)."""

    def __init__(self, fn: Function, *, keep_declared_sizes: bool = False) -> None:
        self.known = {s.name for v in fn.inputs for s in type_symbols(v.type)} if keep_declared_sizes else None
        self.const_memo: dict[Value, bool] = {}

    def block(self, block: Block) -> int:
        return sum(self.retype(op) for op in block.ops)

    def retype(self, op: Op) -> int:
        """Re-infer ``op``'s output types (and its blocks', first); how many values changed type."""
        changed = 0
        if op.type == "while_loop" and len(op.blocks) == 2:
            changed += self.loop(op)
        else:
            for b in op.blocks:
                changed += self.block(b)
        return changed + self.op(op)

    def op(self, op: Op) -> int:
        if op.opdef is None:
            raise TypeInferenceError("op has no definition", **op.location())
        types = op.opdef.infer_op(op, lambda v: is_compile_time_const(v, self.const_memo))
        if len(types) != len(op.outputs):
            raise TypeInferenceError(f"op has {len(op.outputs)} outputs, type inference now gives {len(types)}",
                                     **op.location())
        changed = 0
        for v, t in zip(op.outputs, types):
            if self.known is not None:
                t = _keep_declared(v.type, t, self.known)
            if t != v.type:
                v.type = t
                changed += 1
        return changed

    def loop(self, op: Op) -> int:
        """Type a while_loop's blocks from its loop variables (twice at most, see the module doc)."""
        cond, body = op.blocks
        arg = op.inputs.get("loop_vars", ())
        ins: list[Type] = [v.type for v in (arg if isinstance(arg, tuple) else (arg,))]
        changed = 0
        known = self.known
        for _ in range(2):
            for blk in (cond, body):
                for v, t in zip(blk.inputs, ins):
                    if v.type != t:
                        v.type = t
                        changed += 1
                changed += self.block(blk)
            outs = [v.type for v in body.outputs]
            if len(outs) != len(ins) or all(o == i for o, i in zip(outs, ins)):
                break
            ins = [i if o == i else (merge_types(i, o) or i) for i, o in zip(ins, outs)]
            # the blocks were typed for the first iteration only: what they declare does not hold
            # for the others, so the second typing keeps nothing of it
            self.known = None
        self.known = known
        return changed


def _fresh(d: object, known: set[str]) -> bool:
    return isinstance(d, DimExpr) and any(s.name not in known for s in d.symbols())


def _keep_declared(old: Type, new: Type, known: set[str]) -> Type:
    if not (isinstance(old, TensorType) and isinstance(new, TensorType)) or old.dtype != new.dtype:
        return new
    if new.shape is None:
        return old if old.shape is not None else new
    if old.shape is None or len(old.shape) != len(new.shape):
        return new
    dims = tuple(o if _fresh(n, known) and not _fresh(o, known) else n for o, n in zip(old.shape, new.shape))
    return TensorType(new.dtype, dims)
