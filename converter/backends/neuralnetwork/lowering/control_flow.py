"""Control flow: cond -> branch, while_loop -> loop.

NeuralNetwork control-flow layers have no outputs: their nested networks write blobs of the
enclosing network by name, and ``copy`` is the layer that (over)writes an existing blob.

- cond: both arms copy their results into the same blobs (the cond's results), so the layers
  after the branch read one name whichever arm ran.
- while_loop: each loop variable lives in one blob (the while_loop's result) for the whole loop:
  copied from its initial value before the loop, read by the condition and body networks, and
  overwritten by ``copy`` layers at the end of the body. The copies form a parallel assignment: a
  body result that is another loop variable's blob (a swap) is first copied aside. The condition
  network writes the loop's ``conditionVar``. When the loop is a counted one (``i < N`` with
  ``i`` starting at a constant and stepped by a positive constant), ``maxLoopIterations`` is
  set to the trip count as well (the spec's joint condition: same iterations, and a bound the
  runtime sees).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ....errors import LoweringError
from ....ir.core import Block, Op, Value
from ..emitter import NetworkEmitter
from .registry import lowering


def lower_nested(e: NetworkEmitter, network: object, block: Block, bind: Mapping[Value, str]) -> NetworkEmitter:
    """The layers of ``block`` in the nested ``network`` (its inputs read from ``bind``); an op
    inside that cannot be lowered fails the enclosing op with every such op named."""
    from ..network import lower_block  # network imports this package

    child = e.child(network)
    for v, blob in bind.items():
        child.bind(v, blob)
    problems: list[str] = []
    lower_block(child, block, problems)
    if problems:
        raise LoweringError("inside it: " + "; ".join(problems))
    return child


def _written(network: object) -> set[str]:
    return {o for layer in network.layers for o in layer.output}  # type: ignore[attr-defined]


@lowering("cond", kind="decomposed", note="branch with ifBranch/elseBranch networks; each arm copies its "
                                          "results into the same blobs")
def _cond(e: NetworkEmitter, op: Op) -> None:
    pred = e.blob(op.inputs["pred"])
    outs = [e.define(v) for v in op.outputs]
    p = e.layer("branch", op.name, [pred], [])
    for network, block in ((p.ifBranch, op.blocks[0]), (p.elseBranch, op.blocks[1])):
        child = lower_nested(e, network, block, {})
        for v, out in zip(block.outputs, outs):
            child.layer("copy", f"{op.name}_{out}", [child.blob(v)], [out])


@lowering("while_loop", kind="decomposed", note="loop with conditionNetwork/bodyNetwork; loop variables in "
                                                "fixed blobs written by copy layers; maxLoopIterations for "
                                                "counted loops")
def _while_loop(e: NetworkEmitter, op: Op) -> None:
    cond_block, body_block = op.blocks
    init = op.inputs["loop_vars"]
    init = list(init) if isinstance(init, tuple) else [init]
    carries = [e.define(v) for v in op.outputs]
    for v, blob in zip(init, carries):
        e.layer("copy", f"{op.name}_{blob}_init", [e.blob(v)], [blob])
    p = e.layer("loop", op.name, [], [])
    trips = trip_count(e, op)
    if trips:
        p.maxLoopIterations = trips

    cond = lower_nested(e, p.conditionNetwork, cond_block, dict(zip(cond_block.inputs, carries)))
    flag = cond.blob(cond_block.outputs[0])
    if flag not in _written(p.conditionNetwork):  # the condition network must produce conditionVar
        blob = cond.fresh(f"{op.name}_cond")
        cond.layer("copy", f"{op.name}_cond", [flag], [blob])
        flag = blob
    p.conditionVar = flag

    body = lower_nested(e, p.bodyNetwork, body_block, dict(zip(body_block.inputs, carries)))
    moves = [(body.blob(v), blob) for v, blob in zip(body_block.outputs, carries)]
    moves = [(src, dst) for src, dst in moves if src != dst]
    targets = {dst for _, dst in moves}
    aside = {}
    for src, _ in moves:  # a source that this assignment overwrites: read it first
        if src in targets and src not in aside:
            aside[src] = body.fresh(f"{src}_prev")
            body.layer("copy", f"{op.name}_{src}_prev", [src], [aside[src]])
    for src, dst in moves:
        body.layer("copy", f"{op.name}_{dst}_next", [aside.get(src, src)], [dst])


def trip_count(e: NetworkEmitter, op: Op) -> int | None:
    """The iteration count of a loop whose condition is ``i < N`` (N constant) and whose body steps
    ``i`` by a positive constant from a constant start; None otherwise."""
    cond_block, body_block = op.blocks
    test = cond_block.outputs[0].producer
    if test is None or test.type != "less" or test.inputs.get("x") not in cond_block.inputs:
        return None
    k = cond_block.inputs.index(test.inputs["x"])
    limit = e.const(test.inputs.get("y"))
    init = op.inputs["loop_vars"]
    start = e.const(init[k] if isinstance(init, tuple) else init)
    step_op = body_block.outputs[k].producer
    if limit is None or start is None or step_op is None or step_op.type != "add":
        return None
    x, y = step_op.inputs.get("x"), step_op.inputs.get("y")
    stepped = body_block.inputs[k]
    step = e.const(y) if x is stepped else e.const(x) if y is stepped else None
    arrays = [np.asarray(a) for a in (limit, start, step) if a is not None]
    if step is None or any(a.size != 1 or a.dtype.kind not in "iu" for a in arrays):
        return None
    lim, st, inc = (int(a.reshape(())) for a in arrays)
    if inc <= 0:
        return None
    return max(0, math.ceil((lim - st) / inc))
