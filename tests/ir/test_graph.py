"""The networkx view agrees with the program's use-lists."""

import networkx as nx
import numpy as np

from converter.ir.builder import new_program
from converter.ir.graph import is_topologically_sorted, to_networkx
from converter.ir.types import tensor


def _prog():
    def body(b, x):
        y = b.add(x=x, y=np.float32(1))
        z = b.mul(x=y, y=y)
        (w,) = b.cond(b.less(x=np.float32(0), y=np.float32(1)), lambda t: [t.sub(x=z, y=x)], lambda f: [y])
        return [w]

    return new_program({"x": tensor("fp32", [3])}, body)


def test_view_edges_follow_uses():
    prog = _prog()
    g = to_networkx(prog.main)
    ops = {op.name: op for op in prog.main.block.ops}
    assert nx.is_directed_acyclic_graph(g)
    # mul uses add twice (x and y): two parallel edges
    assert g.number_of_edges(ops["add"], ops["mul"]) == 2
    # the cond's nested block uses mul: the cond node stands for it
    assert g.has_edge(ops["mul"], ops["cond"])
    assert list(nx.topological_sort(g))[-1] is ops["cond"]
    assert is_topologically_sorted(prog.main.block)


def test_unsorted_block_is_detected():
    prog = _prog()
    block = prog.main.block
    block.ops = list(reversed(block.ops))
    assert not is_topologically_sorted(block)
