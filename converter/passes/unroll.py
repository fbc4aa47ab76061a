"""Flatten control flow whose course is known at conversion time, for targets without it (WebNN).

- ``while_loop`` whose condition is known at conversion time in every iteration (a counter
  against a constant or a static size: torch's GRU/LSTM loops, TensorFlow's TensorArray loops,
  NeuralNetwork loop layers with a constant iteration count): unrolled. Each iteration's
  condition is computed by compile-time evaluation (`consteval.compile_time_value`) on the
  values the previous iterations left; the body is then copied with the loop variables
  substituted. Copied ops whose inputs are all constants are folded as they are made, so a
  counter stays a constant from one iteration to the next. A condition that depends on values
  computed at run time refuses the loop (naming the variables it reads); so does a body that
  draws random values or touches a state (unrolling would change what it does).
- ``cond`` with a constant predicate: its taken block, inlined. Otherwise (``select_branches``)
  when neither branch has effects (no state, no random draw, nothing impure): both branches
  inlined and ``select(pred, then, else)`` per output, computed the same bit for bit. Branches
  giving outputs of different shapes (the shape would depend on the predicate) refuse it.
- Lists (``make_list``, ``list_read``, ``list_write``, ``list_scatter``, ``list_gather``,
  ``list_length``) with indices known at conversion time (constant, or made constant by
  unrolling): a list is then a Python tuple of IR values while the pass runs, and its reads
  and gathers become those values (``slice_by_index`` rows of a scattered tensor, ``stack``
  of gathered elements, zeros for elements never written, when their shape is static).

The size of what unrolling makes is bounded (``max_ops``, default `limits.MAX_UNROLLED_OPS`, and
`limits.DEFAULT_MAX_LOOP_ITERATIONS` iterations), so a long loop is refused, not expanded into an
enormous graph. What the pass cannot flatten is left in place with the reason in `refused`
(``strict``: raised as one `UnsupportedError` listing every such op).

Linear in the size of the result: each copied op is typed once (its own ``infer()``, with the
iteration's concrete input types, so sizes that were symbolic in the loop become static).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConverterError, UnsupportedError
from ..ir.builder import Builder
from ..ir.consteval import compile_time_value, evaluate_op, evaluation_refusal
from ..ir.core import Block, Function, Op, Program, Value
from ..ir.reinfer import Retyper
from ..ir.types import ListType, TensorType, is_static_shape
from ..ir.verify import is_compile_time_const
from ..limits import DEFAULT_MAX_LOOP_ITERATIONS, MAX_UNROLLED_OPS
from .base import Pass, PassResult
from .edits import replace_value

LIST_OPS = frozenset({"make_list", "list_read", "list_write", "list_gather", "list_scatter", "list_length"})
#: results of copied ops folded as they are made: loop counters and the sizes computed from them
FOLD_MAX_BYTES = 1 << 12


@dataclass(frozen=True)
class ListState:
    """A list while the pass runs: its element type and the value at each index (None: never
    written). Lists are values: a write makes a new state."""

    elem: TensorType
    items: tuple[Value | None, ...]
    dynamic: bool


Item = Value | ListState


class Refused(Exception):
    """``op`` cannot be flattened; ``reason`` says why."""

    def __init__(self, op: Op, reason: str) -> None:
        super().__init__(reason)
        self.op = op
        self.reason = reason

    def message(self, top: Op) -> str:
        if self.op is top:
            return self.reason
        return f"in {self.op.type} '{self.op.name}': {self.reason}"


class _TooLarge(Refused):
    """The size bound was reached (reported on the innermost loop being unrolled)."""

    def __init__(self, op: Op, reason: str, *, placed: bool = False) -> None:
        super().__init__(op, reason)
        self.placed = placed


class _Scope:
    """What values of a block being copied stand for (nested blocks chain to their parent)."""

    def __init__(self, parent: _Scope | None = None) -> None:
        self.parent = parent
        self.values: dict[Value, Item] = {}

    def get(self, v: Value) -> Item:
        s: _Scope | None = self
        while s is not None:
            found = s.values.get(v)
            if found is not None:
                return found
            s = s.parent
        return v


class UnrollControlFlow(Pass):
    """See the module docstring. ``select_branches``: turn a ``cond`` with a run-time predicate
    into both branches and ``select``; ``strict``: raise what cannot be flattened."""

    name = "unroll_control_flow"

    def __init__(self, *, max_ops: int = MAX_UNROLLED_OPS, max_iterations: int = DEFAULT_MAX_LOOP_ITERATIONS,
                 select_branches: bool = True, strict: bool = False) -> None:
        self.max_ops = max_ops
        self.max_iterations = max_iterations
        self.select_branches = select_branches
        self.strict = strict
        self.refused: dict[Op, str] = {}

    def run(self, program: Program) -> PassResult:
        self.refused = {}
        stats = {"loops": 0, "iterations": 0, "conds": 0, "lists": 0, "ops": 0}
        modified = False
        for fn in program.functions.values():
            flat = _Flattener(fn, self, stats)
            modified |= flat.run()
            self.refused.update(flat.refused)
        if self.strict and self.refused:
            raise UnsupportedError(f"{len(self.refused)} op(s) cannot be flattened:\n  " + "\n  ".join(
                f"{op.type} '{op.name}': {why}" for op, why in self.refused.items()))
        return PassResult(modified, {k: v for k, v in stats.items() if v})


class _Flattener:
    """Flattens one function's top block: new ops go right before the top-level op being
    expanded (``anchor``), which then goes away."""

    def __init__(self, fn: Function, options: UnrollControlFlow, stats: dict[str, int]) -> None:
        self.fn = fn
        self.block = fn.block
        self.opts = options
        self.stats = stats
        self.names = fn.names
        self.b = Builder(self.block, names=self.names)
        self.top = _Scope()
        self.consts: dict[Value, Value] = {}  # a const of a copied block -> its one copy
        self.refused: dict[Op, str] = {}
        self.made = 0
        self.const_memo: dict[Value, bool] = {}

    def run(self) -> bool:
        expanded: list[Op] = []
        retyper = Retyper(self.fn, keep_declared_sizes=True)
        for op in list(self.block.ops):
            if expanded:  # values it reads may have been replaced by more precisely typed ones
                retyper.retype(op)
            if not (op.blocks or op.type in LIST_OPS):
                continue
            if op.type == "cond" and not self.opts.select_branches and compile_time_value(op.inputs["pred"]) is None:
                continue
            self.b.insert_before = op
            before = op.prev_op
            try:
                results = self.expand(op, self.top)
            except Refused as r:
                self.refused[op] = r.message(op)
                self._drop_made(before, op)
                continue
            for old, new in zip(op.outputs, results):
                if isinstance(new, ListState):
                    self.top.values[old] = new
                elif replace_value(old, new) is not None:  # a function output that is an input
                    replace_value(old, self.b.identity(x=new, name=old.name))
            expanded.append(op)
        if not expanded:
            return False
        for op in reversed(expanded):  # users first
            users = [u.user for v in op.outputs for u in v.uses]
            if users:
                user = users[0]
                self.refused[op] = f"its list is read by {getattr(user, 'type', 'an output')} " \
                                   f"'{getattr(user, 'name', '')}', which could not be converted"
                continue
            self.block.remove_op(op)
        return True

    def _drop_made(self, before: Op | None, anchor: Op) -> None:
        """Remove what an expansion that was then refused had made (between ``before`` and ``anchor``)."""
        made = []
        cur = before.next_op if before is not None else self.block.first_op
        while cur is not None and cur is not anchor:
            made.append(cur)
            cur = cur.next_op
        for op in reversed(made):
            self.block.remove_op(op, force=True)
        self.consts = {k: v for k, v in self.consts.items() if v.producer is not None and v.producer.block is not None}

    # -- copying -----------------------------------------------------------------------------------

    def expand(self, op: Op, scope: _Scope) -> list[Item]:
        if op.type == "while_loop":
            return self.unroll(op, scope)
        if op.type == "cond":
            return self.cond(op, scope)
        if op.type in LIST_OPS:
            self.stats["lists"] += 1
            return self.list_op(op, scope)
        raise Refused(op, f"{op.type} holds blocks this pass does not know")

    def inline(self, block: Block, args: list[Item], parent: _Scope) -> list[Item]:
        """Copy ``block``'s ops before the anchor with its inputs standing for ``args``; its outputs."""
        scope = _Scope(parent)
        scope.values.update(zip(block.inputs, args))
        for op in block.ops:
            if op.blocks or op.type in LIST_OPS:
                results = self.expand(op, scope)
            else:
                results = self.copy(op, scope)
            scope.values.update(zip(op.outputs, results))
        return [scope.get(v) for v in block.outputs]

    def tensor(self, v: Value, scope: _Scope, user: Op) -> Value:
        x = scope.get(v)
        if isinstance(x, ListState):
            raise Refused(user, f"it reads the list '{v.name}' as a tensor")
        return x

    def copy(self, op: Op, scope: _Scope) -> list[Value]:
        """A copy of a plain op reading the values its inputs stand for, typed from them (and
        folded when they are all constants)."""
        traits = op.opdef.traits if op.opdef is not None else frozenset()
        if "random" in traits or "stateful" in traits:
            what = "draws random values" if "random" in traits else "reads or writes a state"
            raise Refused(op, f"{op.type} {what}: copying it would change what the program does")
        if "constant" in traits:
            known = self.consts.get(op.outputs[0])
            if known is None:
                known = self.consts[op.outputs[0]] = self._insert_copy(op, {}, [v.type for v in op.outputs])[0]
            return [known]
        inputs: dict[str, Any] = {}
        for key, arg in op.inputs.items():
            inputs[key] = tuple(self.tensor(v, scope, op) for v in arg) if isinstance(arg, tuple) \
                else self.tensor(arg, scope, op)
        return self._fold(self._insert_copy(op, inputs, None))

    def _insert_copy(self, op: Op, inputs: dict[str, Any], types: list[Any] | None) -> list[Value]:
        new = Op(op.type, op.opdef, name=self.names.unique(op.name), attributes=dict(op.attributes))
        for key, arg in inputs.items():
            new.set_input(key, arg)
        self.block.insert_before(self.b.insert_before, new)
        if types is None:
            try:
                types = op.opdef.infer_op(new, lambda v: is_compile_time_const(v, self.const_memo))
            except ConverterError as e:
                self.block.remove_op(new, force=True)
                raise Refused(op, f"its copy does not type: {e}") from None
        names = [new.name if v.name == op.name else self.names.unique(v.name) for v in op.outputs]
        new.create_outputs(types, names)
        self._count(op)
        return new.outputs

    def _count(self, op: Op, n: int = 1) -> None:
        self.made += n
        self.stats["ops"] += n
        if self.made > self.opts.max_ops:
            raise _TooLarge(op, f"flattening makes more than {self.opts.max_ops} ops "
                              "(converter.limits.MAX_UNROLLED_OPS): the graph would be too large")

    def _fold(self, outs: list[Value]) -> list[Value]:
        new = outs[0].producer if outs else None
        if new is None or not all(v.is_const for v in new.input_values()):
            return outs
        if evaluation_refusal(new, expand_constexpr=True) is not None:
            return outs
        for v in outs:
            t = v.type
            if not (isinstance(t, TensorType) and is_static_shape(t.shape)):
                return outs
            if int(np.prod(t.shape, dtype=np.int64)) * np.dtype(t.dtype.storage).itemsize > FOLD_MAX_BYTES:
                return outs
        try:
            vals = evaluate_op(new, {x: x.const_val for x in new.input_values()}, max_tensor_bytes=FOLD_MAX_BYTES)
        except ConverterError:
            return outs
        consts = [self.b.const(val, v.type.dtype, name=v.name) for v, val in zip(outs, vals)]  # type: ignore[union-attr]
        self.block.remove_op(new)
        return consts

    # -- while_loop ------------------------------------------------------------------------------

    def unroll(self, op: Op, scope: _Scope) -> list[Item]:
        arg = op.inputs.get("loop_vars", ())
        state: list[Item] = [scope.get(v) for v in (arg if isinstance(arg, tuple) else (arg,))]
        for v in (inner for blk in op.blocks for inner in blk.walk()):
            traits = v.opdef.traits if v.opdef is not None else frozenset()
            if "random" in traits or "stateful" in traits:
                what = "draws random values" if "random" in traits else "reads or writes a state"
                raise Refused(op, f"it {what} ({v.type} '{v.name}'): unrolling would change what it does")
        self.stats["loops"] += 1
        try:
            return self._iterate(op, state, scope)
        except _TooLarge as big:
            if big.placed:
                raise
            raise _TooLarge(op, big.reason, placed=True) from None

    def _iterate(self, op: Op, state: list[Item], scope: _Scope) -> list[Item]:
        cond, body = op.blocks
        arg = op.inputs.get("loop_vars", ())
        inits = arg if isinstance(arg, tuple) else (arg,)
        for iteration in range(self.opts.max_iterations + 1):
            (go,) = self.inline(cond, state, scope)
            known = None if isinstance(go, ListState) else compile_time_value(go)
            if known is None:
                raise Refused(op, self._why_unknown(cond, state, inits))
            if not bool(np.asarray(known).reshape(-1)[0]):
                self.stats["iterations"] += iteration
                return state
            if iteration == self.opts.max_iterations:
                break
            state = self.inline(body, state, scope)
        raise Refused(op, f"it runs more than {self.opts.max_iterations} iterations "
                          "(converter.limits.DEFAULT_MAX_LOOP_ITERATIONS): too many to unroll")

    @staticmethod
    def _why_unknown(cond: Block, state: list[Item], inits: tuple[Value, ...]) -> str:
        """Which loop variables (or outer values) the condition reads that are not constants."""
        read: list[int] = []
        outer: list[Value] = []
        seen: set[Value] = set()
        todo = list(cond.outputs)
        while todo:
            v = todo.pop()
            if v in seen:
                continue
            seen.add(v)
            if v.owner is cond and v.producer is None:
                read.append(v.index)
            elif v.producer is not None and v.producer.block is cond:
                todo.extend(v.producer.input_values())
            elif compile_time_value(v) is None:
                outer.append(v)
        runtime = [i for i in sorted(read) if not isinstance(state[i], ListState)
                   and compile_time_value(state[i]) is None]  # type: ignore[arg-type]
        what = [f"loop variable {i} ('{inits[i].name}')" for i in runtime] + [f"'{v.name}'" for v in outer]
        reads = f"it reads {', '.join(what)}, computed at run time" if what else "it is computed at run time"
        return (f"its condition is not known at conversion time ({reads}): the number of iterations depends "
                "on the data, and WebNN graphs have no loops")

    # -- cond ------------------------------------------------------------------------------------

    def cond(self, op: Op, scope: _Scope) -> list[Item]:
        pred = self.tensor(op.inputs["pred"], scope, op)
        known = compile_time_value(pred)
        if known is not None:
            self.stats["conds"] += 1
            return self.inline(op.blocks[0 if bool(np.asarray(known).reshape(-1)[0]) else 1], [], scope)
        if not self.opts.select_branches:
            raise Refused(op, "its predicate is computed at run time")
        for which, blk in zip(("then", "else"), op.blocks):
            for inner in blk.walk():
                traits = inner.opdef.traits if inner.opdef is not None else frozenset()
                if "random" in traits or "stateful" in traits or not ({"pure", "control_flow"} & traits):
                    raise Refused(op, f"its predicate is computed at run time and its {which} branch has effects "
                                      f"({inner.type} '{inner.name}'), so it cannot run both branches and select")
        for i, v in enumerate(op.outputs):
            if not isinstance(v.type, TensorType):
                raise Refused(op, f"its predicate is computed at run time and output {i} is a {v.type}")
        then = self.inline(op.blocks[0], [], scope)
        other = self.inline(op.blocks[1], [], scope)
        if isinstance(pred.type, TensorType) and pred.type.rank != 0:
            pred = self.b.reshape(x=pred, shape=np.zeros(0, np.int32), name=f"{op.name}_pred")
            self._count(op)
        results: list[Item] = []
        for i, (t, f) in enumerate(zip(then, other)):
            assert isinstance(t, Value) and isinstance(f, Value)
            ts, fs = t.type.shape, f.type.shape  # type: ignore[union-attr]
            if not (is_static_shape(ts) and is_static_shape(fs)) or tuple(ts) != tuple(fs):
                raise Refused(op, f"its predicate is computed at run time and its branches give output {i} different "
                                  f"or unknown shapes ({t.type} and {f.type})")
            results.append(t if t is f else self.b.select(cond=pred, a=t, b=f, name=op.outputs[i].name))
            self._count(op)
        self.stats["conds"] += 1
        return results

    # -- lists -----------------------------------------------------------------------------------

    def _known_ints(self, op: Op, key: str, scope: _Scope) -> np.ndarray:
        v = self.tensor(op.inputs[key], scope, op)
        known = compile_time_value(v)
        if known is None:
            raise Refused(op, f"its {key} '{v.name}' is computed at run time (a list is converted only when its "
                              "indices are known at conversion time)")
        return np.asarray(known).astype(np.int64)

    def _list(self, op: Op, scope: _Scope) -> ListState:
        ls = scope.get(op.inputs["ls"])
        if not isinstance(ls, ListState):
            raise Refused(op, f"its list '{op.inputs['ls'].name}' is not known at conversion time")
        return ls

    def _read(self, op: Op, ls: ListState, i: int) -> Value:
        if not 0 <= i < len(ls.items):
            raise Refused(op, f"index {i} is out of range for a list of length {len(ls.items)}")
        item = ls.items[i]
        if item is not None:
            return item
        if not is_static_shape(ls.elem.shape):
            raise Refused(op, f"list element {i} is read before it is written and its shape {ls.elem} is not static")
        self._count(op)
        return self.b.const(np.zeros(tuple(int(d) for d in ls.elem.shape), ls.elem.dtype.storage), ls.elem.dtype,
                            name=f"{op.name}_unwritten")

    @staticmethod
    def _written(op: Op, ls: ListState, writes: list[tuple[int, Value]]) -> ListState:
        items = list(ls.items)
        for i, v in writes:
            if i < 0:
                raise Refused(op, f"list index {i} is negative")
            if i >= len(items):
                if not ls.dynamic:
                    raise Refused(op, f"index {i} is past the end of a fixed-length list of length {len(items)}")
                items.extend([None] * (i + 1 - len(items)))
            items[i] = v
        return ListState(ls.elem, tuple(items), ls.dynamic)

    def list_op(self, op: Op, scope: _Scope) -> list[Item]:
        t = op.type
        if t == "make_list":
            lt = op.outputs[0].type
            assert isinstance(lt, ListType) and isinstance(lt.elem, TensorType)
            n = int(self._known_ints(op, "init_length", scope).reshape(-1)[0])
            dynamic = bool(np.asarray(compile_time_value(op.inputs["dynamic_length"])).reshape(-1)[0]) \
                if "dynamic_length" in op.inputs else False
            return [ListState(lt.elem, (None,) * n, dynamic)]
        ls = self._list(op, scope)
        if t == "list_length":
            self._count(op)
            return [self.b.const(np.array(len(ls.items), np.int32), "int32", name=op.outputs[0].name)]
        if t == "list_read":
            return [self._read(op, ls, int(self._known_ints(op, "index", scope).reshape(-1)[0]))]
        if t == "list_write":
            i = int(self._known_ints(op, "index", scope).reshape(-1)[0])
            return [self._written(op, ls, [(i, self.tensor(op.inputs["value"], scope, op))])]
        if t == "list_gather":
            items = [self._read(op, ls, int(i)) for i in self._known_ints(op, "indices", scope).reshape(-1)]
            if not items:
                raise Refused(op, "it gathers no element (a tensor with a zero size)")
            self._count(op)
            return [self.b.stack(values=tuple(items), axis=0, name=op.outputs[0].name)]
        if t == "list_scatter":
            idx = self._known_ints(op, "indices", scope).reshape(-1)
            value = self.tensor(op.inputs["value"], scope, op)
            vt = value.type
            if not (isinstance(vt, TensorType) and is_static_shape(vt.shape) and vt.rank and vt.shape[0] == len(idx)):
                raise Refused(op, f"its value {vt} has no static shape with one row per index ({len(idx)})")
            rank = vt.rank
            rows = []
            for k in range(len(idx)):
                rows.append(self.b.slice_by_index(
                    x=value, begin=np.array([k] + [0] * (rank - 1), np.int32),
                    end=np.array([k + 1] + [0] * (rank - 1), np.int32),
                    end_mask=np.array([False] + [True] * (rank - 1)),
                    squeeze_mask=np.array([True] + [False] * (rank - 1)), name=f"{op.name}_row{k}"))
                self._count(op)
            return [self._written(op, ls, [(int(i), r) for i, r in zip(idx, rows)])]
        raise Refused(op, f"{t} is not a list op this pass knows")


__all__ = ["LIST_OPS", "ListState", "UnrollControlFlow"]
