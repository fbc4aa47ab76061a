"""Control flow: cond -> branch, while_loop -> loop.

NeuralNetwork control-flow layers have no outputs: their nested networks write blobs of the
enclosing network by name, and ``copy`` is the layer that (over)writes an existing blob.

- cond: both arms write their results into the same blobs (the cond's results), so the layers
  after the branch read one name whichever arm ran: the layer computing a result writes it there
  when nothing else in the arm reads it, else a ``copy`` does. The branch layer tests its condition as
  ``|c| > 1e-6`` (the threshold coremltools' builder documents), so a bool predicate is read as
  1.0 / 0.0, and a predicate that is that very test of a one-element float (how our frontend reads
  a branch) is replaced by the value tested, its ops absorbed.
- while_loop: each loop variable lives in one blob (the while_loop's result) for the whole loop:
  copied from its initial value before the loop, read by the condition and body networks, and
  overwritten by ``copy`` layers at the end of the body. The copies form a parallel assignment: a
  body result that is another loop variable's blob (a swap) is first copied aside. The condition
  network writes the loop's ``conditionVar``. When the loop is a counted one (its condition is
  ``i < N`` with ``i`` starting at a constant and stepped by a positive constant),
  ``maxLoopIterations`` is the trip count: with the condition network as well (the spec's joint
  condition: same iterations, and a bound the runtime sees), or, when nothing else reads ``i``,
  instead of it and of ``i`` (the spec's plain for loop: what our frontend makes of one).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ....errors import LoweringError
from ....ir.consteval import compile_time_value
from ....ir.core import Block, Op, Value
from ....ir.types import TensorType, is_static_dim
from ..emitter import NetworkEmitter
from .registry import lowering


def lower_nested(e: NetworkEmitter, network: object, block: Block, bind: Mapping[Value, str],
                 skip: frozenset[Op] = frozenset()) -> NetworkEmitter:
    """The layers of ``block`` (but ``skip``) in the nested ``network`` (its inputs read from
    ``bind``); an op inside that cannot be lowered fails the enclosing op with every such op named."""
    from ..network import lower_block  # network imports this package

    child = e.child(network)
    for v, blob in bind.items():
        child.bind(v, blob)
    problems: list[str] = []
    lower_block(child, block, problems, skip)
    if problems:
        raise LoweringError("inside it: " + "; ".join(problems))
    return child


def _written(network: object) -> set[str]:
    return {o for layer in network.layers for o in layer.output}  # type: ignore[attr-defined]


PRED_EPS = 1e-6  # a branch takes its if branch when the condition's magnitude exceeds this


def magnitude_test(pred: Value) -> tuple[Value, list[Op]] | None:
    """When ``pred`` is ``|reshape(c, [])| > 1e-6`` for a one-element float ``c`` (how our frontend
    reads a branch's condition): ``c``, and the ops computing the test (those read only by it)."""
    p = pred.producer
    if p is None or p.type != "greater" or not isinstance(p.inputs.get("x"), Value):
        return None
    eps = compile_time_value(p.inputs["y"]) if isinstance(p.inputs.get("y"), Value) else None
    if eps is None or np.asarray(eps).size != 1 or float(np.asarray(eps).reshape(())) != np.float32(PRED_EPS):
        return None
    mag = p.inputs["x"].producer
    if mag is None or mag.type != "abs":
        return None
    chain = [p, mag]
    c = mag.inputs["x"]
    flat = c.producer
    if flat is not None and flat.type == "reshape":
        chain.append(flat)
        c = flat.inputs["x"]
    t = c.type
    if not (isinstance(t, TensorType) and t.dtype.is_float and t.shape is not None
            and all(is_static_dim(d) for d in t.shape) and int(np.prod([int(d) for d in t.shape])) == 1):
        return None
    owned = []  # the chain's ops from the cond back, while each result is read only by the next
    for o in chain:
        if len(o.outputs[0].uses) != 1:
            break
        owned.append(o)
    return c, owned


def _absorbs_cond(op: Op) -> list[Op]:
    found = magnitude_test(op.inputs["pred"])
    return found[1] if found is not None else []


@lowering("cond", kind="decomposed", absorbs=_absorbs_cond,
          note="branch with ifBranch/elseBranch networks; each arm copies its results into the same blobs")
def _cond(e: NetworkEmitter, op: Op) -> None:
    found = magnitude_test(op.inputs["pred"])
    pred = e.blob(found[0] if found is not None else op.inputs["pred"])
    outs = [e.define(v) for v in op.outputs]
    p = e.layer("branch", op.name, [pred], [])
    for network, block in ((p.ifBranch, op.blocks[0]), (p.elseBranch, op.blocks[1])):
        child = lower_nested(e, network, block, {})
        for v, out in zip(block.outputs, outs):
            if not _retarget(network, child, v, block, out):
                child.layer("copy", f"{op.name}_{out}", [child.blob(v)], [out])


def _retarget(network: Any, child: NetworkEmitter, v: Value, block: Block, out: str) -> bool:
    """Make the arm's layer computing ``v`` write ``out`` itself (no copy), when ``v`` is computed in
    the arm and read by nothing but the block's output."""
    if len(v.uses) != 1 or v.producer is None or v.producer.block is not block:
        return False
    blob = child.blob(v)  # a constant of the arm: its loadConstantND, here
    writers = [layer for layer in network.layers if blob in layer.output]
    if len(writers) != 1 or blob in _reads(network) or _writes(network).count(blob) != 1:
        return False  # (a loop's variable is written in its body too)
    outputs = writers[0].output
    outputs[list(outputs).index(blob)] = out
    child.bind(v, out)
    return True


def _writes(network: Any) -> list[str]:
    """Every blob the layers of ``network`` (nested networks included) write, once per writer."""
    out: list[str] = []
    for layer in network.layers:
        out.extend(layer.output)
        kind = layer.WhichOneof("layer")
        if kind == "branch":
            out += _writes(layer.branch.ifBranch) + _writes(layer.branch.elseBranch)
        elif kind == "loop":
            out += _writes(layer.loop.conditionNetwork) + _writes(layer.loop.bodyNetwork)
    return out


def _reads(network: Any) -> set[str]:
    """Every blob the layers of ``network`` (nested networks included) read."""
    out: set[str] = set()
    for layer in network.layers:
        out.update(layer.input)
        kind = layer.WhichOneof("layer")
        if kind == "branch":
            out |= _reads(layer.branch.ifBranch) | _reads(layer.branch.elseBranch)
        elif kind == "loop":
            out |= _reads(layer.loop.conditionNetwork) | _reads(layer.loop.bodyNetwork)
            out.add(layer.loop.conditionVar)
    return out


@lowering("while_loop", kind="decomposed", note="loop with conditionNetwork/bodyNetwork; loop variables in "
                                                "fixed blobs written by copy layers; maxLoopIterations for "
                                                "counted loops")
def _while_loop(e: NetworkEmitter, op: Op) -> None:
    cond_block, body_block = op.blocks
    init = op.inputs["loop_vars"]
    init = list(init) if isinstance(init, tuple) else [init]
    counted = _counter(e, op)
    dropped = counted.index if counted is not None and counted.only_counts else None
    carries = [e.define(v) if i != dropped else "" for i, v in enumerate(op.outputs)]
    for i, (v, blob) in enumerate(zip(init, carries)):
        if i != dropped:
            e.layer("copy", f"{op.name}_{blob}_init", [e.blob(v)], [blob])
    p = e.layer("loop", op.name, [], [])
    if counted is not None:
        p.maxLoopIterations = counted.trips

    if dropped is None:  # a condition network (with the trip count too when known: the joint condition)
        cond = lower_nested(e, p.conditionNetwork, cond_block, dict(zip(cond_block.inputs, carries)))
        flag = cond.blob(cond_block.outputs[0])
        if flag not in _written(p.conditionNetwork):  # the condition network must produce conditionVar
            blob = cond.fresh(f"{op.name}_cond")
            cond.layer("copy", f"{op.name}_cond", [flag], [blob])
            flag = blob
        p.conditionVar = flag

    skip = frozenset([counted.step]) if dropped is not None and counted is not None else frozenset()
    bind = {v: blob for i, (v, blob) in enumerate(zip(body_block.inputs, carries)) if i != dropped}
    body = lower_nested(e, p.bodyNetwork, body_block, bind, skip)
    moves = [(body.blob(v), blob) for i, (v, blob) in enumerate(zip(body_block.outputs, carries)) if i != dropped]
    moves = [(src, dst) for src, dst in moves if src != dst]
    targets = {dst for _, dst in moves}
    aside = {}
    for src, _ in moves:  # a source that this assignment overwrites: read it first
        if src in targets and src not in aside:
            aside[src] = body.fresh(f"{src}_prev")
            body.layer("copy", f"{op.name}_{src}_prev", [src], [aside[src]])
    for src, dst in moves:
        body.layer("copy", f"{op.name}_{dst}_next", [aside.get(src, src)], [dst])


@dataclass(frozen=True)
class LoopCounter:
    """A loop variable ``i`` with condition ``i < N`` (the whole condition), stepped by a positive
    constant from a constant start: the loop runs ``trips`` times."""

    index: int
    trips: int
    step: Op  # the body's ``add`` stepping it
    only_counts: bool  # nothing else reads it (in the body, or after the loop)


def _counter(e: NetworkEmitter, op: Op) -> LoopCounter | None:
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
    only_counts = (not len(op.outputs[k].uses) and len(stepped.uses) == 1 and len(step_op.outputs[0].uses) == 1
                   and len(cond_block.inputs[k].uses) == 1
                   and all(o is test or o.type == "const" for o in cond_block.ops))
    return LoopCounter(k, max(0, math.ceil((lim - st) / inc)), step_op, only_counts)
