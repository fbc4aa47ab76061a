"""Dead code elimination: remove pure ops whose outputs are unused (nested blocks included).

Worklist over use-lists: removing an op can only make its inputs' producers dead, so each op is
looked at O(1 + its uses) times; each touched block's op list is rebuilt once at the end, so the
pass stays linear in the program size.
"""

from __future__ import annotations

from ..ir.core import Block, Op, Program
from .base import Pass, PassResult
from .edits import set_block_ops


def _removable(op: Op) -> bool:
    return op.opdef is not None and "pure" in op.opdef.traits and not any(v.uses for v in op.outputs)


class DeadCodeElimination(Pass):
    name = "dead_code"

    def run(self, program: Program) -> PassResult:
        dead: set[Op] = set()
        work: list[Op] = [op for op in program.walk() if _removable(op)]
        while work:
            op = work.pop()
            if op in dead or not _removable(op):
                continue
            dead.add(op)
            producers = [v.producer for v in op.input_values() if v.producer is not None]
            op.drop_all_inputs()
            for b in op.blocks:
                b.drop_all()
            work.extend(p for p in producers if p not in dead and _removable(p))
        touched: set[Block] = {op.block for op in dead if op.block is not None}
        for block in touched:
            set_block_ops(block, [op for op in block.ops if op not in dead])
        for op in dead:
            op.block = None
        return PassResult(bool(dead), {"removed": len(dead)} if dead else {})
