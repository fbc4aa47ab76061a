"""Dead code elimination: remove what no output and no side effect needs, nested blocks included.

Liveness is marked from the roots (function outputs; ops with effects: every op without the
``pure`` trait except ``cond``, whose liveness is that of its parts; and every ``while_loop``,
see below) backwards, so besides unused pure ops it removes

- dead loop-carried variables of a ``while_loop``: variable ``i`` is live only if its final
  output is used, or a live op of the cond or body block reads it (the cond's result is live
  whenever the loop is; a variable read by another live variable's update is live). A dead
  variable goes with its initial value's use, its cond and body block inputs, its body result
  and the ops only that result needed;
- unused outputs of a ``cond`` (dropped from both branches' results, with what only they needed);
- a ``cond`` none of whose outputs is used and which holds no op with effects.

A ``while_loop`` is never removed whole, even when none of its outputs is used: whether and when
it ends is observable (a model's endless loop must still hit the interpreter's iteration bound
rather than vanish), so it keeps the variables its condition reads and what they need. A live
``cond``/``while_loop`` keeps at least one output / loop variable (its first) when none is live
(a loop whose condition reads no variable, a cond holding an op with effects): MIL has no empty
``loop_vars``.

Linear: each value, op and loop variable is marked at most once (a worklist, no recursion); the
sweep visits each block once (recursing only as deep as blocks nest), removing dead ops in O(1)
each (reverse order, so an op's users are gone before it) and shrinking the live control-flow
ops' signatures in O(their arity). Uses held by ops no longer in the program (a removal
elsewhere that did not release them; the verifier refuses such programs) are released, not
taken for uses.
"""

from __future__ import annotations

from ..ir.core import Block, Op, Program, Value
from .base import Pass, PassResult

_LOOP = "while_loop"
_COND = "cond"


def _kind(op: Op) -> str | None:
    """``while_loop`` or ``cond`` when ``op`` is one with its two blocks (else None: then it is
    treated like any op, all its inputs and block results needed when it is)."""
    if op.type in (_LOOP, _COND) and len(op.blocks) == 2:
        return op.type
    return None


def _has_effects(op: Op) -> bool:
    """An op that must run even if its outputs are unused (unknown ops included; every loop: its
    termination is observable)."""
    kind = _kind(op)
    if kind == _LOOP:
        return True
    if kind == _COND:
        return False  # live through its outputs or through the effects of the ops it holds
    return op.opdef is None or "pure" not in op.opdef.traits


class _Liveness:
    """Marks of what must stay: values, ops, and (loop op, variable index) pairs."""

    def __init__(self) -> None:
        self.values: set[Value] = set()
        self.ops: set[Op] = set()
        self.loop_vars: set[tuple[Op, int]] = set()
        self.control: list[Op] = []  # live cond/while_loop ops, in marking order
        self._checked = 0  # how many of them `keep_one_part` has looked at
        self._work: list[Value | Op | tuple[Op, int]] = []

    def value(self, v: Value) -> None:
        if v not in self.values:
            self.values.add(v)
            self._work.append(v)

    def op(self, op: Op) -> None:
        if op not in self.ops:
            self.ops.add(op)
            self._work.append(op)

    def loop_var(self, loop: Op, i: int) -> None:
        if (loop, i) not in self.loop_vars:
            self.loop_vars.add((loop, i))
            self._work.append((loop, i))

    def propagate(self) -> None:
        work = self._work
        while work:
            item = work.pop()
            if isinstance(item, Value):
                self._value_needed(item)
            elif isinstance(item, Op):
                self._op_needed(item)
            else:
                loop, i = item
                self.op(loop)
                self.value(loop.inputs["loop_vars"][i])
                self.value(loop.blocks[1].outputs[i])

    def _value_needed(self, v: Value) -> None:
        producer = v.producer
        if producer is not None:
            self.op(producer)
            kind = _kind(producer)
            if kind == _LOOP:
                self.loop_var(producer, v.index)
            elif kind == _COND:
                for b in producer.blocks:
                    self.value(b.outputs[v.index])
            elif producer.blocks:  # an op with blocks this pass does not know: all of them
                for b in producer.blocks:
                    for out in b.outputs:
                        self.value(out)
            return
        parent = v.owner.parent_op if v.owner is not None else None
        if parent is not None and _kind(parent) == _LOOP:
            self.loop_var(parent, v.index)  # a cond or body block input: the variable is read

    def _op_needed(self, op: Op) -> None:
        kind = _kind(op)
        if kind == _LOOP:
            self.control.append(op)
            for v in op.blocks[0].outputs:  # how many times the body runs
                self.value(v)
        elif kind == _COND:
            self.control.append(op)
            self.value(op.inputs["pred"])
        else:
            for v in op.input_values():
                self.value(v)
        enclosing = op.block.parent_op if op.block is not None else None
        if enclosing is not None:
            self.op(enclosing)  # an op with effects nested in a block makes its holder run

    def keep_one_part(self) -> bool:
        """Give each live control-flow op not yet looked at that has no live variable/output its
        first one (see the module docstring); True if anything new was marked. Each op is looked
        at once, after the marks have settled: later marks only add parts."""
        marked = False
        while self._checked < len(self.control):
            op = self.control[self._checked]
            self._checked += 1
            if op.type == _LOOP:
                n = len(op.blocks[1].inputs)
                if n and not any((op, i) in self.loop_vars for i in range(n)):
                    self.loop_var(op, 0)
                    marked = True
            elif op.outputs and not any(v in self.values for v in op.outputs):
                self.value(op.outputs[0])
                marked = True
        return marked


def _mark(program: Program) -> _Liveness:
    live = _Liveness()
    for fn in program.functions.values():
        for v in fn.outputs:
            live.value(v)
    for op in program.walk():
        if _has_effects(op):
            live.op(op)
    live.propagate()
    while live.keep_one_part():  # each live control-flow op is looked at once in all
        live.propagate()
    return live


def _kept_parts(op: Op, kind: str, live: _Liveness) -> list[int]:
    """The positions of ``op``'s live loop variables (``while_loop``) or outputs (``cond``)."""
    if kind == _LOOP:
        return [i for i in range(len(op.outputs)) if (op, i) in live.loop_vars]
    return [i for i, v in enumerate(op.outputs) if v in live.values]


def _sweep_block(block: Block, live: _Liveness, counts: dict[str, int]) -> None:
    """Remove the dead ops of ``block`` and shrink its live control-flow ops, in reverse order (an
    op's users in this block, and in the blocks of later ops, are dealt with before it). A live
    control-flow op first stops returning its dead results from its blocks (so the ops computing
    them lose their last use), then its blocks are swept, then its signature shrinks."""
    for op in reversed(block.ops):
        if op not in live.ops:
            counts["removed"] += sum(1 for _ in op.walk())
            for v in op.outputs:
                _release_stale_uses(v)
            block.remove_op(op)
            continue
        kind = _kind(op)
        keep = _kept_parts(op, kind, live) if kind is not None else None
        if keep is not None and len(keep) < len(op.outputs):
            results = op.blocks[1:] if kind == _LOOP else op.blocks  # (a loop's cond returns its flag)
            for b in results:
                b.set_outputs([b.outputs[i] for i in keep])
        for b in op.blocks:
            _sweep_block(b, live, counts)
        if keep is not None and len(keep) < len(op.outputs):
            counts["loop_vars" if kind == _LOOP else "cond_outputs"] += len(op.outputs) - len(keep)
            _drop_signature(op, kind, set(keep))


def _release_stale_uses(v: Value) -> None:
    """Drop the uses of ``v`` held by ops that are no longer in a block (O(uses); a dead value
    normally has none left when this runs)."""
    for u in [u for u in v.uses if isinstance(u.user, Op) and u.user.block is None]:
        v.uses.discard(u)


def _keep_only(values: list[Value], keep: set[int]) -> list[Value]:
    """``values`` at the positions ``keep``, renumbered; the others must be unused by now."""
    for i, v in enumerate(values):
        if i not in keep:
            _release_stale_uses(v)
        if i not in keep and v.uses:
            raise AssertionError(f"dead value '{v.name}' is still used")
    kept = [v for i, v in enumerate(values) if i in keep]
    for i, v in enumerate(kept):
        v.index = i
    return kept


def _drop_signature(op: Op, kind: str, keep: set[int]) -> None:
    """Drop the dead positions from ``op``'s outputs and, for a loop, its initial values and its
    blocks' inputs (its blocks' results were dropped before the sweep)."""
    if kind == _LOOP:
        init = op.inputs["loop_vars"]
        op.set_input("loop_vars", tuple(v for i, v in enumerate(init) if i in keep))
        for b in op.blocks:
            b.inputs = _keep_only(b.inputs, keep)
    op.outputs = _keep_only(op.outputs, keep)


class DeadCodeElimination(Pass):
    name = "dead_code"

    def run(self, program: Program) -> PassResult:
        live = _mark(program)
        counts = {"removed": 0, "loop_vars": 0, "cond_outputs": 0}
        for fn in program.functions.values():
            _sweep_block(fn.block, live, counts)
        if counts["loop_vars"] or counts["cond_outputs"]:
            for fn in program.functions.values():
                fn.invalidate_names()  # dropped block inputs and outputs free their names
        stats = {k: n for k, n in counts.items() if n}
        return PassResult(bool(stats), stats)
