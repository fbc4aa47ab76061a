"""Sinking unit-axis insertions below the ops that do not care about them.

An op of the commutation table (table.py) whose data inputs are all lifted by unit-axis insertions
of one frame (``expand_dims``, or a ``reshape`` that only inserts 1s), or are constants, is
computed at the low rank and its result lifted instead:

    f(expand_dims(x, A), c)  ->  expand_dims(f'(x, c'), A')

Inputs lifted into frames that differ only in where unit axes sit are one frame (the same low
tensor); an input with more inserted axes than the frame with the fewest, read only by this op,
gets the difference back with one ``expand_dims`` (its own insertion goes: no op more).

Repeated, the insertion moves down until it meets the reshape that takes the value back to the
low rank, where the two cancel (`reshape_like_chain`). Each step is local (O(1) per match) and
handles any DAG between the insertions and the reshapes back (a value read twice, residual adds).

When to refuse, so that sinking does not leave more ops than it found: an insertion that something
else reads stays for it, so every other reader must be a reshape-like op (which absorbs the
insertion) or a table op that will sink too once the table ops above it have (``sub(r,
reduce_mean(r))``: looked ahead through at most `FORESIGHT_BUDGET` ops), never a block output --
unless the op's result is read once, by a reshape-like op, which absorbs the insertion put after
it (then sinking costs nothing whatever stays above).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...ir.builder import Builder
from ...ir.core import Block, Op, Value
from .axes import Frame, low_shape, reshape_to, same_low, shape_of, unit_insertion
from .table import TABLE, Lowering

RESHAPES = ("reshape", "squeeze", "expand_dims")
#: other readers of an insertion checked at most (more: refuse, to keep a match O(1))
MAX_OTHER_READERS = 16
#: ops looked at, at most, to foresee whether another reader of an insertion will sink
FORESIGHT_BUDGET = 32


@dataclass
class Sink:
    """How to compute ``op`` at low rank: its data inputs' frame, lowering and low inputs."""

    op: Op
    frame: Frame
    lowering: Lowering
    low: dict[Value, Value]  # lifted input -> its low value
    constants: dict[tuple[str, int], np.ndarray | None]  # (key, index) -> low constant (None: as is)
    openings: list[Value]
    #: lifted inputs with more unit axes than the frame (read only here): the low shape they take
    relift: dict[Value, tuple]
    lifted_from: dict[Value, Value]  # every lifted input -> the value it lifts


def _read_only_by(v: Value, op: Op) -> bool:
    """Every use of ``v`` is by ``op`` (looked at only when it has few uses: O(1))."""
    return len(v.uses) <= MAX_OTHER_READERS and all(u.user is op for u in v.uses)


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


def plan_sink(op: Op) -> Sink | str:
    """How ``op`` sinks below its inputs' unit-axis insertions, or why it cannot (this op alone)."""
    entry = TABLE.get(op.type)
    if entry is None:
        return f"{op.type} is not in the table of ops that commute with unit axes"
    if len(op.outputs) != 1:
        return f"{op.type} has {len(op.outputs)} outputs"
    lifted_inputs: list[tuple[Value, Value, Frame]] = []  # (input, its low value, its frame)
    consts: list[tuple[str, int, Value]] = []
    for key in entry.data:
        arg = op.inputs.get(key)
        items = arg if isinstance(arg, tuple) else (arg,) if arg is not None else ()
        for i, a in enumerate(items):
            if a.is_const:
                consts.append((key, i, a))
                continue
            lifted = unit_insertion(a)
            if lifted is None:
                what = "an input" if a.producer is None else f"computed by {a.producer.type}"
                return f"its input '{a.name}' ({what}) is not lifted by unit axes"
            lifted_inputs.append((a, lifted[0], lifted[1]))
    frame = min((f for _, _, f in lifted_inputs), key=lambda f: len(f.axes), default=None)
    low: dict[Value, Value] = {}
    relift: dict[Value, tuple] = {}
    for a, x, f in lifted_inputs:
        assert frame is not None
        if same_low(shape_of(a) or (), f, frame):
            low[a] = x
        elif f.rank == frame.rank and set(frame.axes) < set(f.axes) and _read_only_by(a, op):
            relift[a] = low_shape(shape_of(a) or (), frame)  # x with the extra unit axes: one op
        else:
            return f"its inputs are lifted differently ({frame}; {f})"
    if frame is None:
        return "it reads only constants"
    constants: dict[tuple[str, int], np.ndarray | None] = {}
    for key, i, a in consts:
        lowered = lower_constant(a.const_val, frame)
        if isinstance(lowered, str):
            return lowered
        constants[(key, i)] = lowered
    lowering = entry.lower(op, frame)
    if isinstance(lowering, str):
        return lowering
    return Sink(op, frame, lowering, low, constants, [a for a, _, _ in lifted_inputs], relift,
                {a: x for a, x, _ in lifted_inputs})


class _Foresight:
    """The frame a value will have once every op above it that can sink has sunk (None: it will
    not be lifted), looked up with a budget of ops so that one check stays O(1)."""

    def __init__(self, budget: int = FORESIGHT_BUDGET) -> None:
        self.budget = budget
        self.memo: dict[Value, Frame | None] = {}

    def frame(self, v: Value) -> Frame | None:
        if v in self.memo:
            return self.memo[v]
        self.memo[v] = None  # a cycle cannot occur in SSA, but a repeated visit costs nothing
        lifted = unit_insertion(v)
        if lifted is not None:
            self.memo[v] = lifted[1]
            return lifted[1]
        op = v.producer
        if op is None or op.type not in TABLE or len(op.outputs) != 1 or self.budget <= 0:
            return None
        self.budget -= 1
        frame = self.inputs_frame(op)
        if frame is None:
            return None
        lowering = TABLE[op.type].lower(op, frame)
        out = None if isinstance(lowering, str) or not lowering.out_frames[0].axes else lowering.out_frames[0]
        self.memo[v] = out
        return out

    def inputs_frame(self, op: Op) -> Frame | None:
        """The one frame of ``op``'s data inputs once they have sunk (constants must fit it)."""
        found: list[tuple[Value, Frame]] = []
        consts: list[Value] = []
        for key in TABLE[op.type].data:
            arg = op.inputs.get(key)
            for a in arg if isinstance(arg, tuple) else (arg,) if arg is not None else ():
                if a.is_const:
                    consts.append(a)
                    continue
                f = self.frame(a)
                if f is None:
                    return None
                found.append((a, f))
        frame = min((f for _, f in found), key=lambda f: len(f.axes), default=None)
        for a, f in found:
            assert frame is not None
            if not same_low(shape_of(a) or (), f, frame) and not (
                    f.rank == frame.rank and set(frame.axes) < set(f.axes) and _read_only_by(a, op)):
                return None
        if frame is None or any(isinstance(lower_constant(c.const_val, frame), str) for c in consts):
            return None
        return frame


def _stays_for_others(sink: Sink) -> str | None:
    """Why an insertion ``sink.op`` reads would stay for good (None: every other reader absorbs it,
    or will sink once what it reads has sunk, so the insertion goes once they have)."""
    foresight = _Foresight()
    for lifted in sink.openings:
        if len(lifted.uses) > MAX_OTHER_READERS + 1:
            return f"'{lifted.name}' has more than {MAX_OTHER_READERS} other readers"
        for u in lifted.uses:
            user = u.user
            if user is sink.op:
                continue
            if isinstance(user, Block):
                return f"'{lifted.name}' is also an output of its block"
            if user.type in RESHAPES:
                continue
            if user.type not in TABLE or len(user.outputs) != 1:
                return f"'{lifted.name}' is also read by {user.type} '{user.name}', which keeps it lifted"
            frame = foresight.inputs_frame(user)
            lowering = None if frame is None else TABLE[user.type].lower(user, frame)
            if frame is None or isinstance(lowering, str):
                why = "its other inputs will not be lifted alike" if frame is None else lowering
                return f"'{lifted.name}' is also read by {user.type} '{user.name}', which cannot sink: {why}"
    return None


def _absorbed_below(op: Op) -> bool:
    """``op``'s result is read once, by a reshape-like op: the insertion put after it merges into
    that op (`reshape_like_chain`), so sinking costs nothing even if an insertion above stays."""
    uses = op.outputs[0].uses
    if len(uses) != 1:
        return False
    user = next(iter(uses)).user
    return not isinstance(user, Block) and user.type in RESHAPES


def check_sink(op: Op) -> str | None:
    plan = plan_sink(op)
    if isinstance(plan, str):
        return plan
    why = _stays_for_others(plan)
    if why is not None and not _absorbed_below(op):
        return why
    return None


def emit_sink(b: Builder, plan: Sink) -> Value:
    """The low-rank op, lifted back to ``plan.op``'s output type."""
    op, lowering = plan.op, plan.lowering
    entry = TABLE[op.type]
    inputs: dict[str, object] = {}
    for key, arg in op.inputs.items():
        if key in lowering.params:
            inputs[key] = lowering.params[key]
        elif key in entry.data:
            items = arg if isinstance(arg, tuple) else (arg,)
            lowered = [_low_input(b, key, i, a, plan) for i, a in enumerate(items)]
            inputs[key] = tuple(lowered) if isinstance(arg, tuple) else lowered[0]
        else:
            inputs[key] = arg
    for key, value in lowering.params.items():
        inputs.setdefault(key, value)
    perm = lowering.params.get("perm")
    if op.type == "transpose" and perm is not None and list(perm) == list(range(len(perm))):
        out = inputs["x"]  # it only moved unit axes: a reshape, which the insertion below is
    else:
        out = b.add_op(op.type, inputs, name=f"{op.name}_low").outputs[0]
    axes = lowering.out_frames[0].axes
    return b.expand_dims(x=out, axes=np.array(axes, dtype=np.int32)) if axes else out


def _low_input(b: Builder, key: str, i: int, a: Value, plan: Sink) -> Value:
    if a in plan.low:
        return plan.low[a]
    if a in plan.relift:
        out = reshape_to(b, plan.lifted_from[a], plan.relift[a])
        assert not isinstance(out, str), out  # only unit axes are inserted
        plan.low[a] = out
        return out
    arr = plan.constants[(key, i)]
    if arr is None:
        return a
    return b.const(arr, a.type.dtype, name=f"{a.name}_low")  # type: ignore[attr-defined]
