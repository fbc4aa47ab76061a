"""Batched program edits for passes: insert ops before an anchor, remove ops, rewire values.

Use-lists are updated at once (so matching sees the edited graph immediately), but each block's op
order is rebuilt once, in `Edits.apply`, instead of one list insertion or removal per edit: a pass
that makes k edits in a block of n ops costs O(n + k), not O(n * k), whatever the IR's list
operations cost. Until `apply`, new ops are attached to their block (``op.block``) but not yet in
``block.ops``, and removed ops are detached (``op.block is None``): nothing between the edit and
`apply` may rely on ``block.ops``. The order is taken from a snapshot of the block made at its
first edit, so removed ops keep their place as anchors whatever the IR's op list does with them.

`replace_value` is the one place that decides how a value is replaced while keeping the names of a
function's outputs (the model's interface).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..ir.core import Block, Op, Value


def function_output_uses(v: Value) -> int:
    """How many times ``v`` is an output of a function (the top block of a function)."""
    return sum(1 for u in v.uses if isinstance(u.user, Block) and u.user.function is not None)


def replace_refusal(old: Value, new: Value) -> str | None:
    """Why `replace_value` would refuse to replace ``old`` by ``new`` (None if it would not)."""
    if new is old or not function_output_uses(old):
        return None
    if new.producer is None:
        return f"'{old.name}' is a function output and '{new.name}' is an input: the output would be renamed"
    if function_output_uses(new):
        return f"'{old.name}' and '{new.name}' are both function outputs: one would be renamed"
    return None


def replace_value(old: Value, new: Value) -> str | None:
    """Rewire every use of ``old`` to ``new``, or say why not (nothing is changed then).

    A function output keeps its name: when ``old`` is one and ``new`` is an op's result that is
    not itself a function output, ``new`` (and its op, when it has one output named like it)
    takes ``old``'s name; when ``new`` is an input, or already a function output, the replacement
    is refused (the model's interface would change)."""
    if new is old:
        return None
    reason = replace_refusal(old, new)
    if reason is not None:
        return reason
    if function_output_uses(old):
        producer = new.producer
        assert producer is not None
        if len(producer.outputs) == 1 and producer.name == new.name:
            producer.name = old.name
        new.name = old.name
    old.replace_all_uses_with(new)
    return None


class Edits:
    """Pending op-order edits of a program's blocks (see the module docstring)."""

    def __init__(self, *, lazy_uses: bool = False) -> None:
        """``lazy_uses``: a removed op's uses of its inputs are released in `apply` (each value's
        use-list filtered once) instead of one list removal per use, which is O(uses) each on a
        value read by thousands of ops. Only for passes that never read use-lists between their
        edits and `apply` (cse); a rewrite driver needs them exact at once."""
        self._before: dict[Op, list[Op]] = {}  # anchor -> ops inserted just before it, in order
        self.removed: set[Op] = set()
        # each touched block's op order as it was before the first edit (removed anchors included)
        self._order: dict[Block, list[Op]] = {}
        self._lazy = lazy_uses
        self._stale: dict[Value, None] = {}  # values whose use-lists still name removed ops

    def insert_before(self, anchor: Op, ops: Iterable[Op]) -> None:
        """Put ``ops`` (in order) just before ``anchor`` in ``anchor``'s block. ``anchor`` may itself
        be a pending insertion, or be removed later: the ops then stand where it stood."""
        block = anchor.block
        assert block is not None, f"anchor '{anchor.name}' is not in a block"
        ops = list(ops)
        if not ops:
            return
        self._touch(block)
        for op in ops:
            op.block = block
        self._before.setdefault(anchor, []).extend(ops)

    def remove(self, op: Op) -> None:
        """Detach ``op`` (its outputs must be unused): its input uses are released now, and every op
        nested in its blocks is removed with it."""
        if op in self.removed:
            return
        block = op.block
        if block is not None:
            self._touch(block)
        for v in op.outputs:
            if v.uses:
                raise ValueError(f"cannot remove op '{op.name}': output '{v.name}' is still used")
        if self._lazy and not op.blocks:
            for v in op.input_values():
                self._stale[v] = None
            op.inputs = {}
        else:
            op.drop_all_inputs()
        for b in op.blocks:
            inner_ops = list(b.walk())
            b.drop_all()  # first: it walks the block's op list, which skips detached ops
            for inner in inner_ops:
                self.removed.add(inner)
                inner.block = None
        self.removed.add(op)
        op.block = None

    def _touch(self, block: Block) -> None:
        """Record ``block``'s op order before its first edit (O(ops), once per block)."""
        if block not in self._order:
            self._order[block] = list(block.ops)

    def exact_uses(self, v: Value) -> Value:
        """``v`` with its use-list exact (a lazy removal's stale uses of it dropped now)."""
        if v in self._stale:
            _drop_removed_uses(v, self.removed)
            del self._stale[v]
        return v

    def is_removed(self, op: Op) -> bool:
        return op in self.removed

    def __bool__(self) -> bool:
        return bool(self._order)

    def apply(self) -> None:
        """Rebuild the op list of every touched block once (insertions expanded in place, removed
        ops dropped), and the use-lists a lazy removal left stale. Iterative: chains of insertions
        before insertions have no depth limit."""
        for v in self._stale:
            _drop_removed_uses(v, self.removed)
        self._stale.clear()
        for block, before_edits in self._order.items():
            if block.parent_op is not None and block.parent_op in self.removed:
                continue
            order: list[Op] = []
            stack: list[tuple[Op, bool]] = []
            for op in reversed(before_edits):
                stack.append((op, False))
            while stack:
                op, expanded = stack.pop()
                if expanded:
                    if op not in self.removed:
                        order.append(op)
                    continue
                stack.append((op, True))
                for inserted in reversed(self._before.get(op, ())):
                    stack.append((inserted, False))
            set_block_ops(block, order)
        self._before.clear()
        self._order.clear()
        self.removed.clear()


def _drop_removed_uses(v: Value, removed: set[Op]) -> None:
    """Drop from ``v``'s use-list the uses of removed ops, in one pass over it."""
    for u in [u for u in v.uses if u.user in removed]:
        v.uses.discard(u)


def set_block_ops(block: Block, ops: list[Op]) -> None:
    """Replace ``block``'s op sequence with ``ops`` (already in a valid order). The one place that
    writes ``Block.ops`` wholesale for passes: if the IR's op storage changes, only this changes."""
    block.ops = ops
    for op in ops:
        op.block = block
