"""What a re-targeting rule works with: compile-time values, new ops typed for the target opset,
replacements, notes and refusals.

Edits are batched: new ops are recorded against the op they go before and every touched block's
op list is rebuilt once at the end (``Block.insert_before`` is linear per call), so a pass over a
program with thousands of rewritten weights stays linear. A rule's edits are transactional: when
it refuses, the ops it already made are dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import ConverterError
from ...ir.core import Block, Op, Program, Value
from ...ir.interpreter import Interpreter
from ...ir.opdef import get_opdef, opset_index
from ...ir.types import DType, dtype, type_of_array
from ...ir.verify import is_compile_time_const
from .causes import Causes


class Refusal(Exception):
    """A rule cannot express an op in the target opset; ``cause`` names why, without the op's name
    (ops refused for the same cause are reported together)."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


def is_constexpr(op: Op | None) -> bool:
    return op is not None and op.opdef is not None and "constexpr" in op.opdef.traits


class Context:
    def __init__(self, program: Program, target: str) -> None:
        self.program = program
        self.target = target
        self.notes = Causes()
        self._interpreter = Interpreter(program)
        self._const_memo: dict[Value, bool] = {}
        self._before: dict[Op, list[Op]] = {}
        self._removed: set[Op] = set()
        self._pending: list[tuple[Op, Op]] = []  # (anchor, op) for ops made by the rule running now
        self._orphan_candidates: list[Op] = []
        self._undo: list[tuple[Op, str, Any]] = []  # input bindings changed by the rule running now
        self._pending_notes: list[tuple[str, str]] = []

    # -- the target ------------------------------------------------------------------------------

    @property
    def target_index(self) -> int:
        return opset_index(self.target)

    def chains_constexpr(self) -> bool:
        """Whether the target lets a constexpr op read another constexpr op's result (iOS18)."""
        return self.target_index >= opset_index("iOS18")

    # -- values ----------------------------------------------------------------------------------

    def is_const(self, v: Value) -> bool:
        return is_compile_time_const(v, self._const_memo)

    def value(self, v: Value) -> Any:
        """The compile-time value of ``v``: a const's value, or what its constexpr producers compute.

        Not memoised: a computed (dense) weight is dropped as soon as the rule that asked is done
        with it, so peak memory stays at one dense weight rather than all of them.
        """
        if v.is_const:
            return v.const_val
        op = v.producer
        if not is_constexpr(op):
            raise Refusal(f"'{v.name}' is not a compile-time constant")
        assert op is not None
        env = {x: self.value(x) for x in op.input_values()}
        self._interpreter.run_op(op, env)
        return env[v]

    # -- making ops ------------------------------------------------------------------------------

    def const(self, anchor: Op, val: Any, dt: str | DType | None, name: str) -> Value:
        """A const op (before ``anchor``) holding ``val`` as dtype ``dt`` (default: the array's)."""
        d = dtype(dt) if dt is not None else None
        arr = np.asarray(val) if d is None else np.asarray(val, d.storage)
        op = Op("const", get_opdef("const", self.target), name=name, attributes={"val": arr})
        op.create_outputs([type_of_array(arr, d)], [name])
        self._insert(anchor, op)
        return op.outputs[0]

    def op(self, anchor: Op, op_type: str, inputs: dict[str, Value | tuple | None], name: str,
           output_names: Sequence[str] | None = None, attributes: dict[str, Any] | None = None) -> Op:
        """A new ``op_type`` op of the target opset before ``anchor``, its outputs typed by inference."""
        opdef = get_opdef(op_type, self.target)
        op = Op(op_type, opdef, name=name, attributes=attributes)
        for key, arg in inputs.items():
            if arg is not None:
                op.set_input(key, arg)
        self._insert(anchor, op)
        try:
            types = opdef.infer_op(op, self.is_const)
        except ConverterError as e:
            raise Refusal(f"the {self.target} form does not type-check ({e.message})") from None
        names = list(output_names) if output_names is not None else (
            [name] if len(types) == 1 else [f"{name}_{i}" for i in range(len(types))])
        op.create_outputs(types, names)
        return op

    def _insert(self, anchor: Op, op: Op) -> None:
        self._before.setdefault(anchor, []).append(op)
        self._pending.append((anchor, op))

    # -- changing ops ----------------------------------------------------------------------------

    def replace(self, old: Op, new_values: Sequence[Value]) -> None:
        """Every use of ``old``'s outputs reads ``new_values`` instead; ``old`` is removed."""
        for v, new in zip(old.outputs, new_values, strict=True):
            v.replace_all_uses_with(new)
        self._remove(old)

    def set_input(self, op: Op, key: str, arg: Value | tuple | None) -> None:
        """Rebind (or with None, remove) an input of an existing op, undone if the rule refuses."""
        old = op.inputs.get(key)
        self._undo.append((op, key, old))
        op.set_input(key, arg)
        for v in old if isinstance(old, tuple) else (old,) if old is not None else ():
            if v.producer is not None:
                self._orphan_candidates.append(v.producer)

    def repoint(self, op: Op) -> None:
        """``op`` stays as it is, now defined by the target opset's version of its type."""
        op.opdef = get_opdef(op.type, self.target)
        rank = {name: i for i, name in enumerate(op.opdef.signature.inputs)}
        op.inputs = {k: op.inputs[k] for k in sorted(op.inputs, key=lambda k: rank.get(k, len(rank)))}

    def note(self, cause: str, op: Op) -> None:
        self._pending_notes.append((cause, op.name))

    def decompress(self, op: Op, cause: str) -> None:
        """Leave a constexpr op the target cannot express: the MIL writer stores the dense weight
        it computes. Said in a note (never silently)."""
        self.note(f"{op.type}: {cause}: stored decompressed", op)

    # -- transactions ----------------------------------------------------------------------------

    def begin(self) -> None:
        self._pending = []
        self._undo = []
        self._pending_notes = []

    def commit(self) -> None:
        for cause, name in self._pending_notes:
            self.notes.add(cause, name)
        self.begin()

    def rollback(self) -> None:
        """Drop the ops made since ``begin`` (the rule that made them refused)."""
        for op, key, old in reversed(self._undo):
            op.set_input(key, old)
        for anchor, op in self._pending:
            op.drop_all_inputs()
            self._before[anchor].remove(op)
            if not self._before[anchor]:
                del self._before[anchor]
        self.begin()

    # -- applying --------------------------------------------------------------------------------

    def _remove(self, op: Op) -> None:
        self._removed.add(op)
        self._orphan_candidates.extend(v.producer for v in op.input_values() if v.producer is not None)
        op.drop_all_inputs()

    def apply(self) -> bool:
        """Rebuild each touched block once; drop producers left without uses by removals. Returns
        whether anything changed."""
        self._remove_orphans()
        touched: dict[Block, None] = {}
        for anchor in self._before:
            if anchor.block is not None:
                touched[anchor.block] = None
        for op in self._removed:
            if op.block is not None:
                touched[op.block] = None
        for block in touched:
            ops: list[Op] = []
            for op in block.ops:
                for new in self._before.get(op, ()):
                    if new not in self._removed:
                        new.block = block
                        ops.append(new)
                if op not in self._removed:
                    ops.append(op)
            block.ops = ops
        for op in self._removed:
            op.block = None
        changed = bool(touched)
        self._before.clear()
        self._removed.clear()
        return changed

    def _remove_orphans(self) -> None:
        """Producers (pure ops) whose every use was a removed op's input go too, transitively."""
        work = self._orphan_candidates
        while work:
            op = work.pop()
            if op in self._removed or op.opdef is None or "pure" not in op.opdef.traits:
                continue
            if not any(v.uses for v in op.outputs):
                self._remove(op)
