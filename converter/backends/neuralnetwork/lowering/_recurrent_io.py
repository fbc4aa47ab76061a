"""The rank-5 blobs of the recurrent layers, read and written through the IR's rank changes.

simpleRecurrent, gru and the LSTM layers read ``[Seq, B, I, 1, 1]`` and ``[1, B, H, 1, 1]`` blobs
(one per direction and state) and write blobs of that form; the IR ops take ``[S, B, I]`` and
``[B, D*H]``. Programs often hold the rank-5 values already, wrapped around the op by ops that only
add or remove unit dims (a *rank change*: ``squeeze``, ``expand_dims`` or ``reshape`` whose input and
output have the same dims once the 1s are left out, so the same elements in the same order), and
for a bidirectional op a ``concat`` of the two directions' states and a ``split`` of its final
ones. Our NeuralNetwork frontend writes them (squeeze of the rank-5 inputs, expand_dims of the
results); the pass pipeline rewrites them (a declared ``[H]`` state feature becomes
``expand_dims(concat(h_fwd, h_bwd))`` into the op and ``split`` -> ``squeeze`` out of it). Any
chain of rank changes is read the same way:

- an input slot reads the nearest value on the chain back from the op's input that has the slot's
  rank-5 shape; else the rank-5 blob of the recurrent layer that made the chain's first value (one
  layer's result feeding another); else one ``expandDims`` (or ``reshapeStatic``) of that first
  value. A bidirectional state is first traced back through rank changes to a ``concat`` of its
  halves on the hidden axis, each half then read as above;
- an output blob is written as the first value on the chain of rank changes reading the result
  that has the blob's shape; else one ``squeeze`` (or ``reshapeStatic``) writes the chain's last
  value. A bidirectional final state is first traced to a ``split`` in its two halves (each a blob
  of its own); else its two blobs are concatenated.

The rank changes (and concat, split) only this path reads are absorbed: they get no layers. A
result that is also read otherwise keeps its own unwrapped blob; one that ends up read by nothing
(its readers took the rank-5 blob) is dropped with the other dead layers (network.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from weakref import WeakKeyDictionary

import numpy as np

from ....errors import LoweringError
from ....ir.consteval import compile_time_value
from ....ir.core import Block, Op, Value
from ....ir.types import Dim, TensorType, is_static_dim, is_static_shape
from ..emitter import NetworkEmitter

RECURRENT_OPS = frozenset({"rnn", "gru", "lstm"})
RANK_CHANGES = frozenset({"squeeze", "expand_dims", "reshape"})
X_AXES, STATE_AXES = (3, 4), (0, 3, 4)  # the unit axes of the rank-5 sequence and states

Shape = tuple[Dim, ...]

#: per emitter, the rank-5 blob (and its shape) each recurrent result or half of a final state is held in
_RANK5_BLOBS: WeakKeyDictionary[NetworkEmitter, dict[Value, tuple[str, Shape]]] = WeakKeyDictionary()


# ---------------------------------------------------------------------------------------------
# Shapes


def dims(v: object) -> Shape | None:
    if not isinstance(v, Value) or not isinstance(v.type, TensorType) or v.type.shape is None:
        return None
    return tuple(v.type.shape)


def _unit(d: Dim) -> bool:
    return is_static_dim(d) and int(d) == 1


def _same_dim(a: Dim, b: Dim) -> bool:
    if is_static_dim(a) or is_static_dim(b):
        return is_static_dim(a) and is_static_dim(b) and int(a) == int(b)
    return bool(a == b)


def same_shape(a: Sequence[Dim] | None, b: Sequence[Dim] | None) -> bool:
    return a is not None and b is not None and len(a) == len(b) and all(map(_same_dim, a, b))


def _core(shape: Shape) -> Shape:
    return tuple(d for d in shape if not _unit(d))


def with_unit_axes(shape: Shape, axes: Sequence[int]) -> Shape:
    out = list(shape)
    for a in sorted(axes):
        out.insert(a, 1)
    return tuple(out)


def unit_axes_between(big: Shape, small: Shape) -> tuple[int, ...] | None:
    """The axes of ``big`` that are left out to give ``small`` when all of them are unit dims (a
    squeeze of ``big``, or the axes an expand_dims of ``small`` inserts), else None."""
    axes, j = [], 0
    for i, d in enumerate(big):
        if j < len(small) and _same_dim(d, small[j]):
            j += 1
        elif _unit(d):
            axes.append(i)
        else:
            return None
    return tuple(axes) if j == len(small) else None


def is_rank_change(op: Op | None) -> bool:
    """Whether ``op`` only adds or removes unit dims: a squeeze, expand_dims or reshape whose input
    and output have the same dims, in order, once the 1s are left out."""
    if op is None or op.type not in RANK_CHANGES or len(op.outputs) != 1:
        return False
    src, out = dims(op.inputs.get("x")), dims(op.outputs[0])
    return src is not None and out is not None and same_shape(_core(src), _core(out))


def _one_user(v: Value, block: Block | None) -> Op | None:
    uses = list(v.uses)
    user = uses[0].user if len(uses) == 1 else None
    return user if isinstance(user, Op) and user.block is block else None


def _const_int(v: object) -> int | None:
    val = compile_time_value(v) if isinstance(v, Value) else None
    return None if val is None or np.asarray(val).size != 1 else int(np.asarray(val).reshape(()))


def _interleaved(concat: Op) -> bool:
    flag = concat.inputs.get("interleave")
    return isinstance(flag, Value) and bool(np.asarray(compile_time_value(flag)).any())


def _last_axis(op: Op, shape: Shape | None, half: int | None) -> int | None:
    """``op``'s ``axis`` when it is the last one that is not a unit dim of ``shape`` (what a
    ``[B, 2H]`` state's hidden axis becomes under rank changes) and ``shape`` has ``2 * half`` there."""
    axis = _const_int(op.inputs.get("axis"))
    if shape is None or axis is None or half is None or not -len(shape) <= axis < len(shape):
        return None
    axis %= len(shape)
    if not all(_unit(d) for d in shape[axis + 1:]) or not _same_dim(shape[axis], 2 * half):
        return None
    return axis


# ---------------------------------------------------------------------------------------------
# Plans: which value a slot reads, which value an output blob is written as. Pure functions of the
# program: the lowering and its absorbed-ops plan (recurrent.py `_absorbs`, run before any layer is
# written) agree on them.


@dataclass
class Source:
    """What a layer input reads: ``value`` itself (``expand``: None, it has the rank-5 shape, or is
    a recurrent result read as its layer's blob), or the one layer inserting ``expand`` axes
    (``reshape``: a reshapeStatic to ``target``); ``absorbed``: the rank changes skipped."""

    value: Value
    target: Shape
    expand: tuple[int, ...] | None = None
    reshape: bool = False
    absorbed: list[Op] = field(default_factory=list)


def input_source(v: Value, target: Shape, block: Block | None) -> Source:
    """Where the rank-5 ``target``-shaped blob of ``v`` comes from (module docstring)."""
    chain, u = [v], v
    while not same_shape(dims(u), target) and is_rank_change(u.producer) and u.producer.block is block:  # type: ignore[union-attr]
        u = u.producer.inputs["x"]  # type: ignore[union-attr]
        chain.append(u)
    end = len(chain) - 1
    picked: Source | None = None
    if same_shape(dims(u), target) or _may_hold_rank5(u):
        picked = Source(u, target)
    else:
        for i in range(end, -1, -1):
            axes = unit_axes_between(target, dims(chain[i]) or ())
            if axes is not None or is_static_shape(target):
                end = i
                picked = Source(chain[i], target, axes, axes is None)
                break
    if picked is None:
        raise LoweringError(f"'{v.name}' has no rank-5 form {list(target)}")
    for w in chain[:end]:  # each read only on the way to the slot
        if len(w.uses) != 1:
            break
        picked.absorbed.append(w.producer)  # type: ignore[arg-type]
    return picked


def _may_hold_rank5(u: Value) -> bool:
    """Whether ``u`` may be a result (or half of one) whose rank-5 layer blob is recorded."""
    p = u.producer
    return p is not None and (p.type in RECURRENT_OPS or p.type == "split")


@dataclass
class StateHalves:
    """A bidirectional state made of its two halves: the concat (and rank changes to it) only it
    reads, and each half's source."""

    absorbed: list[Op]
    halves: list[Source]


def state_halves(v: Value, hidden: int | None, block: Block | None) -> StateHalves | None:
    """``v`` (``[B, 2H]``) traced back through rank changes to a concat of its two ``H`` halves on
    the hidden axis; None when it is made otherwise."""
    shape = dims(v)
    if shape is None or len(shape) != 2 or hidden is None:
        return None
    target = (1, shape[0], hidden, 1, 1)
    chain, u = [v], v
    while is_rank_change(u.producer) and u.producer.block is block:  # type: ignore[union-attr]
        u = u.producer.inputs["x"]  # type: ignore[union-attr]
        chain.append(u)
    c = u.producer
    if c is None or c.type != "concat" or c.block is not block or _interleaved(c):
        return None
    parts = c.inputs.get("values")
    axis = _last_axis(c, dims(u), hidden)
    if not isinstance(parts, tuple) or len(parts) != 2 or axis is None:
        return None
    if not all(isinstance(p, Value) and p.type.shape is not None and _same_dim(p.type.shape[axis], hidden)  # type: ignore[union-attr]
               for p in parts):
        return None
    sources = [input_source(p, target, block) for p in parts]
    if any(len(w.uses) != 1 for w in chain):  # the concat stays (read otherwise): so do the halves' makers
        return StateHalves([], [Source(s.value, s.target, s.expand, s.reshape) for s in sources])
    absorbed = [w.producer for w in chain[:-1]] + [c] + [op for s in sources for op in s.absorbed]
    return StateHalves(absorbed, sources)  # type: ignore[arg-type]


@dataclass
class Sink:
    """Where a layer output blob goes: written as ``value`` (``squeeze`` None and not ``reshape``:
    it has the blob's shape), or one squeeze of those axes (or reshapeStatic) of it writes
    ``value``; ``absorbed``: the rank changes from the result to ``value``."""

    value: Value
    squeeze: tuple[int, ...] | None = None
    reshape: bool = False
    absorbed: list[Op] = field(default_factory=list)

    @property
    def direct(self) -> bool:
        return self.squeeze is None and not self.reshape


def _forward_chain(r: Value, block: Block | None) -> list[Value]:
    """``r`` and the values of the rank changes reading it, each the one reader of the last."""
    chain = [r]
    while True:
        user = _one_user(chain[-1], block)
        if not is_rank_change(user):
            return chain
        chain.append(user.outputs[0])  # type: ignore[union-attr]


def output_sink(r: Value, shape: Shape, block: Block | None) -> Sink:
    """Where the layer's ``shape``-shaped blob holding ``r`` is written (module docstring)."""
    chain = _forward_chain(r, block)
    for i, w in enumerate(chain):
        if same_shape(dims(w), shape):
            return Sink(w, absorbed=[x.producer for x in chain[1:i + 1]])  # type: ignore[misc]
    for i in range(len(chain) - 1, -1, -1):
        w_dims = dims(chain[i])
        axes = unit_axes_between(shape, w_dims) if w_dims is not None else None
        if axes is not None or is_static_shape(w_dims):
            return Sink(chain[i], axes, axes is None, [x.producer for x in chain[1:i + 1]])  # type: ignore[misc]
    raise LoweringError(f"'{r.name}' has no rank-5 form {list(shape)}")


@dataclass
class FinalHalves:
    """A final state's blobs (one per direction) and what reads them: ``results`` the values they
    hold (a bidirectional state's split halves, a unidirectional state itself), each one's sink,
    and the split and rank changes before it. ``joined``: a bidirectional state read otherwise, its
    two blobs concatenated into the one sink of ``results[0]``."""

    absorbed: list[Op]
    halves: list[Sink]
    results: list[Value]
    joined: bool = False


def final_halves(r: Value, hidden: int | None, block: Block | None) -> FinalHalves | None:
    """``r`` (``[B, 2H]``) read only through rank changes and a split in its two ``H`` halves on
    the hidden axis; None otherwise."""
    shape = dims(r)
    if shape is None or len(shape) != 2 or hidden is None:
        return None
    chain = _forward_chain(r, block)
    split = _one_user(chain[-1], block)
    if split is None or split.type != "split" or len(split.outputs) != 2:
        return None
    axis = _last_axis(split, dims(chain[-1]), hidden)
    if axis is None or not all(_same_dim((dims(h) or (0,) * (axis + 1))[axis], hidden) for h in split.outputs):
        return None
    target = (1, shape[0], hidden, 1, 1)
    sinks = [output_sink(h, target, block) for h in split.outputs]
    return FinalHalves([x.producer for x in chain[1:]] + [split], sinks, list(split.outputs))  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------
# Emission


def record_rank5(e: NetworkEmitter, v: Value, blob: str, shape: Shape) -> None:
    """``blob`` (of ``shape``) holds ``v`` in rank 5: a recurrent layer reading ``v`` reads it."""
    _RANK5_BLOBS.setdefault(e, {})[v] = (blob, shape)


def _recorded(e: NetworkEmitter, v: Value) -> tuple[str, Shape] | None:
    scope: NetworkEmitter | None = e
    while scope is not None:
        found = _RANK5_BLOBS.get(scope, {}).get(v)
        if found is not None:
            return found
        scope = scope.parent
    return None


def read_source(e: NetworkEmitter, s: Source, base: str) -> str:
    """The rank-5 blob ``s`` describes (one layer at most)."""
    blob = None
    if s.expand is None and not s.reshape:
        recorded = _recorded(e, s.value)
        if same_shape(dims(s.value), s.target):
            return e.blob(s.value)
        if recorded is not None and same_shape(recorded[1], s.target):
            return recorded[0]
        if recorded is not None and is_static_shape(s.target):  # the same elements in another rank-5 shape
            blob = recorded[0]
            s = Source(s.value, s.target, None, True)
        else:  # a result whose layer blob is not known
            axes = unit_axes_between(s.target, dims(s.value) or ())
            if axes is None:
                raise LoweringError(f"'{s.value.name}' has no rank-5 form {list(s.target)}")
            s = Source(s.value, s.target, axes)
    blob = blob or e.blob(s.value)
    out = e.fresh(base)
    if s.expand is not None:
        e.layer("expandDims", base, [blob], [out]).axes.extend(s.expand)
    else:
        e.layer("reshapeStatic", base, [blob], [out]).targetShape.extend(int(d) for d in s.target)
    return out


def sink_blob(e: NetworkEmitter, sink: Sink | None, base: str) -> str:
    """The name of the layer's output blob: the sink value's own when written directly."""
    return e.define(sink.value) if sink is not None and sink.direct else e.fresh(base)


def write_sink(e: NetworkEmitter, sink: Sink, blob: str, base: str) -> None:
    """The unwrapping layer of ``sink`` after the layer wrote ``blob`` (when anything reads it)."""
    if sink.direct or not len(sink.value.uses):
        return
    if sink.squeeze is not None:
        e.layer("squeeze", base, [blob], [e.define(sink.value)]).axes.extend(sink.squeeze)
    else:
        shape = [int(d) for d in dims(sink.value) or ()]
        e.layer("reshapeStatic", base, [blob], [e.define(sink.value)]).targetShape.extend(shape)
