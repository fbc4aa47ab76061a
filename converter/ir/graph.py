"""A networkx view of a block's dataflow, for graph algorithms (reachability, cycles, layouts).

The view is a snapshot: nodes are the block's ops (node key = the Op object), edges go from a
producer to each consumer, labelled with the value and the consumer's input name. Values produced
outside the block (function/block inputs, outer-scope values used by nested blocks) are left out;
an op with nested blocks stands for everything inside it.
"""

from __future__ import annotations

from collections.abc import Iterator

import networkx as nx

from .core import Block, Function, Op, Use, Value


def _top_level_uses(block: Block, op: Op) -> Iterator[tuple[Value, Use, Op]]:
    """Each use of ``op``'s outputs, with the op of ``block`` that contains the using op."""
    for v in op.outputs:
        for use in v.uses:
            user = use.user
            while isinstance(user, Op) and user.block is not block and user.block is not None \
                    and user.block.parent_op is not None:
                user = user.block.parent_op
            if isinstance(user, Op) and user.block is block:
                yield v, use, user


def to_networkx(where: Block | Function) -> nx.MultiDiGraph:
    """Ops as nodes (attributes: type, name, position), one edge per (value, use)."""
    block = where.block if isinstance(where, Function) else where
    g = nx.MultiDiGraph()
    for i, op in enumerate(block.ops):
        g.add_node(op, type=op.type, name=op.name, position=i)
    for op in block.ops:
        for value, use, user in _top_level_uses(block, op):
            g.add_edge(op, user, value=value.name, input=use.key)
    return g


def is_topologically_sorted(block: Block) -> bool:
    pos = {op: i for i, op in enumerate(block.ops)}
    return all(pos[user] > pos[op] for op in block.ops for _, _, user in _top_level_uses(block, op))
