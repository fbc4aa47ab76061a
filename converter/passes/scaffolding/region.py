"""A region of rank-5 scaffolding: the ops between unit-axis insertions and a reshape back.

Planning starts at a *closing* op (``squeeze``/``reshape``/``expand_dims`` of a value ``y``) and
walks up from ``y`` through ops of the commutation table (table.py) until every path ends at an
*opening* (``expand_dims``, or a ``reshape`` that only inserts 1s) or a constant. The ops walked
form the region's *cone*. It is rewritten at low rank when:

- every value on the way has one frame (the openings agree, and each op's table entry accepts its
  frame: see table.py);
- the cone's ops are used only inside the cone (openings excepted: they stay while something else
  reads them), so nothing is computed twice;
- it saves an op: an opening dies with the cone, or the closing becomes the low value itself.

The walk is bounded (`MAX_REGION_OPS`), so one match costs at most a constant.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...ir.builder import Builder
from ...ir.core import Block, Op, Value
from .axes import Frame, low_shape, reshape_to, shape_of, unit_insertion
from .table import TABLE, Lowering

#: ops of one cone at most (a longer run of scaffolded ops is left alone)
MAX_REGION_OPS = 256


@dataclass
class Plan:
    """What `plan_region` found: the cone in topological order and how to lower it."""

    root: Op
    y: Value
    openings: dict[Op, Value] = field(default_factory=dict)  # opening op -> its low input
    frames: dict[Value, Frame] = field(default_factory=dict)
    ops: list[Op] = field(default_factory=list)
    lowerings: dict[Op, Lowering] = field(default_factory=dict)
    in_frames: dict[Op, Frame] = field(default_factory=dict)
    constants: dict[tuple[Op, str, int], np.ndarray | None] = field(default_factory=dict)


def lower_constant(c: np.ndarray, frame: Frame) -> np.ndarray | None | str:
    """The constant that stands for ``c`` (broadcast against values of ``frame``) at low rank:
    None when ``c`` itself does (it does not reach any unit axis), a reason when none does."""
    arr = np.asarray(c)
    if arr.ndim > frame.rank:
        return f"a constant of rank {arr.ndim} widens the rank {frame.rank}"
    first = frame.rank - arr.ndim  # the high axis the constant's axis 0 pairs with
    if all(a < first for a in frame.axes):
        return None
    padded = arr.reshape((1,) * first + arr.shape)
    if any(padded.shape[a] != 1 for a in frame.axes):
        return f"a constant of shape {list(arr.shape)} is not 1 on the unit axes {list(frame.axes)}"
    return np.squeeze(padded, axis=frame.axes)


class _Walker:
    def __init__(self, root: Op) -> None:
        self.root = root
        self.block: Block | None = root.block
        self.plan = Plan(root, root.inputs["x"])  # type: ignore[arg-type]
        self.cone: set[Op] = set()

    def visit(self, v: Value) -> str | None:
        plan = self.plan
        if v in plan.frames:
            return None
        p = v.producer
        if p is None:
            return f"'{v.name}' is an input, not lifted by an op"
        if p.block is not self.block:
            return f"'{v.name}' is computed in another block"
        opening = unit_insertion(v)
        if opening is not None:
            plan.openings[p] = opening[0]
            plan.frames[v] = opening[1]
            return None
        entry = TABLE.get(p.type)
        if entry is None:
            return f"'{v.name}' is computed by {p.type}, which the table does not know to commute with unit axes"
        if len(self.cone) >= MAX_REGION_OPS:
            return f"the region has more than {MAX_REGION_OPS} ops"
        self.cone.add(p)
        frame: Frame | None = None
        consts: list[tuple[str, int, Value]] = []
        for key in entry.data:
            arg = p.inputs.get(key)
            items = arg if isinstance(arg, tuple) else (arg,) if arg is not None else ()
            for i, a in enumerate(items):
                if a.is_const:
                    consts.append((key, i, a))
                    continue
                why = self.visit(a)
                if why is not None:
                    return why
                f = plan.frames[a]
                if frame is None:
                    frame = f
                elif f != frame:
                    return f"{p.type} '{p.name}' reads values of two frames ({frame}; {f})"
        if frame is None:
            return f"{p.type} '{p.name}' reads only constants"
        for key, i, a in consts:
            low = lower_constant(a.const_val, frame)
            if isinstance(low, str):
                return f"{p.type} '{p.name}': {low}"
            plan.constants[(p, key, i)] = low
        lowering = entry.lower(p, frame)
        if isinstance(lowering, str):
            return f"{p.type} '{p.name}': {lowering}"
        plan.lowerings[p] = lowering
        plan.in_frames[p] = frame
        for out, f in zip(p.outputs, lowering.out_frames):
            plan.frames[out] = f
        plan.ops.append(p)
        return None


def plan_region(root: Op) -> Plan | str:
    """The plan to lower the cone above closing op ``root``, or why not (see the module docstring)."""
    y = root.inputs.get("x")
    if not isinstance(y, Value):
        return "it has no single input x"
    if unit_insertion(y) is not None:
        return "it directly follows the op that inserts the unit axes (a plain pair, not a region)"
    walker = _Walker(root)
    why = walker.visit(y)
    if why is not None:
        return why
    plan = walker.plan
    inside = walker.cone | {root}
    for op in plan.ops:
        for v in op.outputs:
            for u in v.uses:
                if isinstance(u.user, Block):
                    return f"'{v.name}' is an output of its block"
                if u.user not in inside:
                    return f"'{v.name}' is also read by {u.user.type} '{u.user.name}', outside the region"
    dead_openings = sum(1 for op in plan.openings if all(u.user in inside for v in op.outputs for u in v.uses))
    y_low = low_shape(shape_of(y) or (), plan.frames[y])
    out_shape = shape_of(root.outputs[0])
    closes = out_shape is not None and len(out_shape) == len(y_low) and all(
        a == b for a, b in zip(out_shape, y_low))
    if dead_openings == 0 and not closes:
        return "nothing to save: every opening is read outside the region and the closing stays a reshape"
    return plan


def emit(b: Builder, plan: Plan) -> Value | str:
    """Build the lowered cone with ``b``; the value standing for the closing's result (or why not)."""
    low: dict[Value, Value] = {}
    for op, x in plan.openings.items():
        low[op.outputs[0]] = x
    for op in plan.ops:
        entry = TABLE[op.type]
        lowering = plan.lowerings[op]
        inputs: dict[str, object] = {}
        for key, arg in op.inputs.items():
            if key in lowering.params:
                inputs[key] = lowering.params[key]
            elif key in entry.data:
                items = arg if isinstance(arg, tuple) else (arg,)
                lowered = [_low_input(b, op, key, i, a, plan, low) for i, a in enumerate(items)]
                inputs[key] = tuple(lowered) if isinstance(arg, tuple) else lowered[0]
            else:
                inputs[key] = arg
        for key, value in lowering.params.items():
            inputs.setdefault(key, value)
        new = b.add_op(op.type, inputs, name=op.name)
        for old_v, new_v in zip(op.outputs, new.outputs):
            low[old_v] = new_v
    out_shape = shape_of(plan.root.outputs[0])
    if out_shape is None:
        return "the closing's result has no known shape"
    return reshape_to(b, low[plan.y], out_shape)


def _low_input(b: Builder, op: Op, key: str, i: int, a: Value, plan: Plan, low: dict[Value, Value]) -> Value:
    if a in low:
        return low[a]
    arr = plan.constants[(op, key, i)]
    if arr is None:
        return a
    return b.const(arr, a.type.dtype, name=f"{a.name}_low")  # type: ignore[attr-defined]
