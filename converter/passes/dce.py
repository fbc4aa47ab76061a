"""Dead code elimination: remove pure ops whose outputs are unused (nested blocks included).

Worklist over use-lists: removing an op can only make its inputs' producers dead, so each op is
looked at O(1 + its uses) times.
"""

from __future__ import annotations

from ..ir.core import Block, Op, Program
from .base import Pass, PassResult


def _removable(op: Op) -> bool:
    if op.opdef is None or any(v.uses for v in op.outputs):
        return False
    traits = op.opdef.traits
    return "pure" in traits or "constant" in traits or "constexpr" in traits


class DeadCodeElimination(Pass):
    def run(self, program: Program) -> PassResult:
        work: list[Op] = [op for op in program.walk() if _removable(op)]
        removed = 0
        while work:
            op = work.pop()
            if op.block is None or not _removable(op):
                continue
            producers = [v.producer for v in op.input_values() if v.producer is not None]
            block: Block = op.block
            block.remove_op(op)
            removed += 1
            work.extend(p for p in producers if p.block is not None and _removable(p))
        return PassResult(removed > 0)
