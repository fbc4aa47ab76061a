"""Control flow: branch -> cond, loop -> while_loop, loopBreak / loopContinue -> loop-carried flags,
and copy.

NeuralNetwork control flow has no outputs: a nested network writes blobs of the enclosing network
by name (copy is the layer meant to overwrite an existing blob), and blobs it produces stay visible
afterwards. Here a nested network is converted by the same NetworkConverter into a nested block,
over a copy of the enclosing blob table. What it (re)binds becomes a result of the cond, or a
loop-carried variable of the while_loop, bound under the same name in the enclosing table:

- blobs that existed before the layer always flow out (their new value, or the old one on paths
  that leave them alone);
- blobs first produced inside flow out only when something outside the layer reads them (another
  layer of the model, a loop's conditionVar, or a model output). On a path that does not produce
  such a blob (a branch arm, an iteration cut short by loopContinue, a loop that runs zero times)
  Core ML leaves it undefined; here it is zeros of the type the other path gives it.

A branch takes the if branch when its one-element input has magnitude above 1e-6 (the threshold
coremltools' builder documents). A loop follows the spec's three cases (count only; condition only;
both), the count coming from the optional input (cast to int32) or ``maxLoopIterations``; the
condition network runs once before the loop and again after each completed iteration (so the blobs
it produces are loop-carried like the body's). loopBreak and loopContinue set boolean flags held in
the blob table under reserved names: the layers after one that may have set a flag run under
``cond(not (break or continue))``; a set break flag ends the loop (the loop's condition tests it)
and skips the condition network.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Container, Iterable, Sequence
from typing import Any

import numpy as np

from ....ir.builder import Builder, NameScope
from ....ir.core import Block, Value
from ....ir.types import TensorType, Type, is_static_dim
from ....ir.verify import is_compile_time_const
from ..context import LayerContext, NetworkState
from ..registry import lowers

# Reserved blob-table keys of the loop flags (NeuralNetwork blob names cannot hold a NUL).
BREAK = "\0loopBreak"
CONTINUE = "\0loopContinue"
INT32_MAX = 2**31 - 1
PRED_EPS = 1e-6  # a condition is true when its magnitude exceeds this

Layer = Any  # NeuralNetwork_pb2.NeuralNetworkLayer
Run = Callable[[Builder, NetworkState], None]


# ---------------------------------------------------------------------------------------------
# copy, loopBreak, loopContinue


@lowers("copy")
def copy(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1)
    if len(ctx.layer.output) != 1:
        raise ctx.fail(f"has {len(ctx.layer.output)} outputs, 1 expected")
    if ctx.layer.output[0] == ctx.layer.input[0]:
        raise ctx.fail(f"input and output must be distinct blobs, both are '{ctx.layer.input[0]}'")
    return ctx.input(0)  # the value itself: the output name now refers to it


@lowers("loopBreak", "loopContinue")
def loop_jump(ctx: LayerContext) -> list[Value]:
    flag = BREAK if ctx.kind == "loopBreak" else CONTINUE
    if flag not in ctx.state.values:
        raise ctx.fail("must be inside the bodyNetwork of a loop layer")
    _no_outputs(ctx)
    ctx.state.values[flag] = ctx.b.const(True, name=f"{ctx.name}_set")
    return []


# ---------------------------------------------------------------------------------------------
# branch


@lowers("branch")
def branch(ctx: LayerContext) -> list[Value]:
    ctx.expect_inputs(1)
    _no_outputs(ctx)
    p = ctx.params
    pred = _predicate(ctx, ctx.b, ctx.input(0), f"{ctx.name}_pred")
    inside = [*p.ifBranch.layers, *p.elseBranch.layers]
    two_way(ctx, ctx.state, ctx.b, pred, _layers_run(ctx, p.ifBranch.layers), _layers_run(ctx, p.elseBranch.layers),
            _read_outside(ctx, inside), ctx.name)
    return []


class _NothingFlowsOut(Exception):
    """Raised while building a cond whose arms bind nothing seen outside (the cond is dropped)."""


def two_way(ctx: LayerContext, state: NetworkState, b: Builder, pred: Value, if_run: Run, else_run: Run,
            needed: Container[str], name: str) -> None:
    """A cond whose arms convert into copies of ``state``; the blobs they bind flow out (module
    docstring) and are rebound in ``state``."""
    arms: list[tuple[NetworkState, Builder]] = []
    names: list[str] = []

    def arm(run: Run, last: bool) -> Callable[[Builder], list[Value]]:
        def build(bb: Builder) -> list[Value]:
            child = child_state(state)
            run(bb, child)
            arms.append((child, bb))
            if not last:
                return []  # replaced below, once both arms are known
            names.extend(_flowing_out(state, [c for c, _ in arms], needed))
            if not names:
                raise _NothingFlowsOut
            types = _types_of(ctx, names, [c for c, _ in arms])
            first, second = (_arm_results(ctx, state, c, cb, names, types, name) for c, cb in arms)
            arms[0][1].block.set_outputs(first)
            return second

        return build

    try:
        results = b.cond(pred, arm(if_run, False), arm(else_run, True), name=name)
    except _NothingFlowsOut:  # nothing the arms compute is seen outside: no cond at all
        for _, bb in arms:
            bb.block.drop_all()
        return
    for n, v in zip(names, results):
        state.values[n] = v


def _flowing_out(state: NetworkState, children: Sequence[NetworkState], needed: Container[str]) -> list[str]:
    out: dict[str, None] = {}
    for child in children:
        for n in written(state, child):
            if n in state.values or n in needed:
                out[n] = None
    return list(out)


def _types_of(ctx: LayerContext, names: Sequence[str], children: Sequence[NetworkState]) -> dict[str, Type]:
    """The type of each blob first produced in the arms (checked to agree in dtype and rank)."""
    out: dict[str, Type] = {}
    for n in names:
        for child in children:
            v = child.values.get(n)
            if v is None:
                continue
            if n in out and not _compatible(out[n], v.type):
                raise ctx.unsupported(f"blob '{n}' is {out[n]} on one path and {v.type} on another")
            out.setdefault(n, v.type)
    return out


def _compatible(a: Type, b: Type) -> bool:
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        return a.dtype == b.dtype and (a.shape is None or b.shape is None or len(a.shape) == len(b.shape))
    return a == b


def _arm_results(ctx: LayerContext, state: NetworkState, child: NetworkState, b: Builder, names: Sequence[str],
                 types: dict[str, Type], name: str) -> list[Value]:
    return [child.values[n] if n in child.values else _zeros(ctx, state, b, n, types[n], name) for n in names]


def _zeros(ctx: LayerContext, state: NetworkState, b: Builder, blob: str, t: Type, name: str) -> Value:
    """Stand-in for a blob a path leaves undefined (Core ML has no value for it there)."""
    if not (isinstance(t, TensorType) and t.shape is not None and all(is_static_dim(d) for d in t.shape)):
        raise ctx.unsupported(f"blob '{blob}' is produced on only some paths of '{name}' and read after it; "
                              f"its type {t} is not static, so the other paths cannot stand in a value")
    state.note(f"'{name}': blob '{blob}' is produced on only some paths; the others give zeros (Core ML "
               f"leaves it undefined there)")
    return b.const(np.zeros(tuple(int(d) for d in t.shape), t.dtype.storage), t.dtype, name=f"{name}_{blob}_undef")


# ---------------------------------------------------------------------------------------------
# loop


@lowers("loop")
def loop(ctx: LayerContext) -> list[Value]:
    ctx.expect_inputs(0, 1)
    _no_outputs(ctx)
    p = ctx.params
    b, state, name = ctx.b, ctx.state, ctx.name
    cond_var = p.conditionVar
    if not cond_var and len(p.conditionNetwork.layers):
        raise ctx.fail("has a conditionNetwork but no conditionVar", field="conditionVar")
    if _jumps(p.conditionNetwork.layers):
        raise ctx.fail("loopBreak / loopContinue may only be in the bodyNetwork", field="conditionNetwork")
    body_layers, cond_layers = list(p.bodyNetwork.layers), list(p.conditionNetwork.layers) if cond_var else []
    count = _count(ctx) if ctx.inputs or not cond_var or p.maxLoopIterations > 0 else None
    flag0 = None
    if cond_var:  # conditionVar = conditionNetwork(), in the enclosing scope
        ctx.converter.convert_layers(state, cond_layers, b)
        flag0 = _predicate(ctx, b, _blob(ctx, state, cond_var), f"{name}_cond0")
    breaks, continues = _jumps(body_layers, "loopBreak"), _jumps(body_layers, "loopContinue")
    maybe = list(dict.fromkeys(outputs_of([*body_layers, *cond_layers])))
    carried = [n for n in maybe if n in state.values]
    seen = _read_outside(ctx, [*body_layers, *cond_layers])
    fresh = [n for n in maybe if n not in state.values and n in seen]
    fresh_init = _fresh_initial(ctx, state, body_layers, cond_layers, carried, fresh, breaks, continues) if fresh else []

    heads: list[tuple[str, Value]] = []
    if count is not None:
        heads.append(("t", b.const(np.int32(0), name=f"{name}_t0")))
    if flag0 is not None:
        heads.append(("flag", flag0))
    if breaks:
        heads.append(("broken", b.const(False, name=f"{name}_broken0")))
    names = carried + fresh
    init = [v for _, v in heads] + [state.values[n] for n in carried] + fresh_init

    def cond(bb: Builder, *args: Value) -> Value:
        head = dict(zip([k for k, _ in heads], args))
        tests = []
        if "t" in head:
            tests.append(bb.less(x=head["t"], y=count, name=f"{name}_more"))
        if "flag" in head:
            tests.append(head["flag"])
        if "broken" in head:
            tests.append(bb.logical_not(x=head["broken"], name=f"{name}_not_broken"))
        out = tests[0]
        for extra in tests[1:]:
            out = bb.logical_and(x=out, y=extra, name=f"{name}_go")
        return out

    def body(bb: Builder, *args: Value) -> list[Value]:
        head = dict(zip([k for k, _ in heads], args))
        child = child_state(state)
        child.values.update(zip(names, args[len(heads):]))
        iteration(ctx, child, bb, body_layers, cond_layers, breaks, continues, name)
        out = []
        if "t" in head:
            out.append(bb.add(x=head["t"], y=np.int32(1), name=f"{name}_t"))
        if "flag" in head:
            out.append(_predicate(ctx, bb, _blob(ctx, child, cond_var), f"{name}_cond"))
        if "broken" in head:
            out.append(child.values[BREAK])
        return out + [child.values[n] for n in names]

    results = b.while_loop(init, cond, body, name=name)
    for n, v in zip(names, results[len(heads):]):
        state.values[n] = v
    return []


def iteration(ctx: LayerContext, state: NetworkState, b: Builder, body_layers: Sequence[Layer],
              cond_layers: Sequence[Layer], breaks: bool, continues: bool, name: str) -> None:
    """One loop iteration in ``state``: the body, then (unless it broke) the condition network."""
    for flag, used, tag in ((BREAK, breaks, "break0"), (CONTINUE, continues, "continue0")):
        if used:
            state.values[flag] = b.const(False, name=f"{name}_{tag}")
        else:  # an enclosing loop's flag is not this loop's
            state.values.pop(flag, None)
    guarded(ctx, state, b, body_layers, (BREAK, CONTINUE), name)
    if cond_layers:  # skipped by a break, not by a continue
        guarded(ctx, state, b, [_Prefix(cond_layers)], (BREAK,), name)


class _Prefix:
    """Placeholder 'layer' standing for a whole network run after a possible jump."""

    def __init__(self, layers: Sequence[Layer]) -> None:
        self.layers = list(layers)


def guarded(ctx: LayerContext, state: NetworkState, b: Builder, layers: Sequence[Layer | _Prefix],
            flags: tuple[str, ...], name: str) -> None:
    """Convert ``layers``; after one that may have set a flag, the rest runs under
    ``cond(not any flag)`` (not at all when a flag is surely set)."""
    layers = list(layers)
    for k, layer in enumerate(layers):
        skip = _skip(b, state, flags, f"{name}_skip")
        if skip is True:
            return
        if skip is not False:
            _unless(ctx, state, b, skip, layers[k:], flags, name)
            return
        if isinstance(layer, _Prefix):
            ctx.converter.convert_layers(state, layer.layers, b)
        else:
            ctx.converter.convert_layers(state, [layer], b)


def _unless(ctx: LayerContext, state: NetworkState, b: Builder, skip: Value, rest: list[Layer | _Prefix],
            flags: tuple[str, ...], name: str) -> None:
    """``if not skip: rest`` (the rest of an iteration after a layer that may have set a flag)."""

    def go_on(bb: Builder, st: NetworkState) -> None:
        cleared = {}
        for f in flags:  # on this path no flag is set
            if f in st.values and not st.values[f].is_const:
                st.values[f] = cleared[f] = bb.const(False, name=f"{name}_clear")
        guarded(ctx, st, bb, rest, flags, name)
        for f, v in cleared.items():  # still clear: the enclosing (false here) value, so it need not flow out
            if st.values[f] is v:
                st.values[f] = state.values[f]

    inside = [x for item in rest for x in (item.layers if isinstance(item, _Prefix) else [item])]
    two_way(ctx, state, b, b.logical_not(x=skip, name=f"{name}_go_on"), go_on, lambda bb, st: None,
            _read_outside(ctx, inside), f"{name}_rest")


def _skip(b: Builder, state: NetworkState, flags: tuple[str, ...], name: str) -> Value | bool:
    """Whether the rest of the iteration is skipped: a bool when known at conversion time."""
    vals = [state.values[f] for f in flags if f in state.values]
    dynamic = [v for v in vals if not v.is_const]
    if any(v.is_const and bool(np.asarray(v.const_val)) for v in vals):
        return True
    if not dynamic:
        return False
    out = dynamic[0]
    for v in dynamic[1:]:
        out = b.logical_or(x=out, y=v, name=name)
    return out


def _fresh_initial(ctx: LayerContext, state: NetworkState, body_layers: Sequence[Layer],
                   cond_layers: Sequence[Layer], carried: Sequence[str], fresh: Sequence[str], breaks: bool,
                   continues: bool) -> list[Value]:
    """Initial values (zeros) of blobs first produced inside the loop and read after it.

    Why a probe: the while_loop's variables (these blobs among them) need their types before its
    body is built, and only converting the body tells a blob's type (every layer on the way decides
    it). So one iteration is first converted into a scratch block, which is then discarded: the
    body is converted twice. The probe sees what the real body sees (loop-carried blobs as block
    inputs of the same types), so the types it finds are the ones the body produces.

    The bound: a loop nested in another loop's body is converted once per conversion of that body,
    and would probe each time (2**depth conversions of the innermost body). The probe's result
    depends only on the loop layer and on what it finds in the blob table (which blobs are bound,
    their types, and the constant values it reads), so it is cached on the converter per layer and
    that signature: the body of a loop at depth d is then converted at most d + 1 times."""
    # The entry holds the layer (a protobuf wrapper): alive, it keeps its id and stays the object
    # that reading the nested network again returns.
    key = (id(ctx.layer), _probe_signature(state, body_layers, cond_layers, carried))
    probes: dict[Any, tuple[Layer, list[Type | None]]] = ctx.converter.loop_probes
    hit = probes.get(key)
    if hit is not None and hit[0] is ctx.layer:
        types = hit[1]
    else:
        types = _probe_types(ctx, state, body_layers, cond_layers, carried, fresh, breaks, continues)
        probes[key] = (ctx.layer, types)
    out = []
    for n, t in zip(fresh, types):
        if t is None:  # produced only inside a branch that does not read out
            raise ctx.unsupported(f"blob '{n}' is produced inside the loop only on some paths and read after it")
        out.append(_zeros(ctx, state, ctx.b, n, t, ctx.name))
    return out


def _probe_types(ctx: LayerContext, state: NetworkState, body_layers: Sequence[Layer], cond_layers: Sequence[Layer],
                 carried: Sequence[str], fresh: Sequence[str], breaks: bool, continues: bool) -> list[Type | None]:
    """The types of the ``fresh`` blobs after one iteration converted into a discarded block."""
    scratch = Block()
    names = NameScope()
    probe = child_state(state)
    probe.notes = []  # the probe's notes are discarded with it
    for n in carried:  # as the loop body sees them: loop-carried block inputs, not the values before the loop
        probe.values[n] = scratch.new_input(names.unique(f"{ctx.name}_probe_{n}"), state.values[n].type)
    bb = Builder(scratch, names=names, function=ctx.b.function, opset=ctx.b.opset)
    iteration(ctx, probe, bb, body_layers, cond_layers, breaks, continues, f"{ctx.name}_probe")
    scratch.drop_all()
    return [probe.values[n].type if n in probe.values else None for n in fresh]


def _probe_signature(state: NetworkState, body_layers: Sequence[Layer], cond_layers: Sequence[Layer],
                     carried: Sequence[str]) -> tuple:
    """What a probe of the loop depends on in ``state``: for each blob the loop reads or writes,
    whether it is bound, its type, and for a blob read as is (not loop-carried) its compile-time
    value (a const's bytes; another compile-time value by identity)."""
    names = set()
    for layer in (*body_layers, *cond_layers):
        for x in (layer, *nested_layers(layer)):
            names.update(x.input)
            names.update(x.output)
            if x.WhichOneof("layer") == "loop" and x.loop.conditionVar:
                names.add(x.loop.conditionVar)
    carried_set = set(carried)
    memo: dict[Value, bool] = {}
    sig = []
    for n in sorted(names):
        v = state.values.get(n)
        if v is None:
            sig.append((n,))
        elif n in carried_set:
            sig.append((n, v.type))
        else:
            sig.append((n, v.type, _const_signature(v, memo)))
    return tuple(sig)


def _const_signature(v: Value, memo: dict[Value, bool]) -> Any:
    """A const array by content; another compile-time value by identity (the Value itself, so that
    the cache entry keeps it alive and its identity unique); None for a run-time value."""
    if v.is_const and isinstance(v.const_val, (np.ndarray, np.generic)):
        arr = np.asarray(v.const_val)
        return ("const", arr.dtype.str, arr.shape, hashlib.blake2b(arr.tobytes()).digest())
    if is_compile_time_const(v, memo):
        return ("value", v)
    return None


def _count(ctx: LayerContext) -> Value:
    """The iteration limit: the input (a one-element tensor) when given, else maxLoopIterations."""
    b, name = ctx.b, ctx.name
    if ctx.inputs:
        v = b.reshape(x=ctx.input(0), shape=np.zeros(0, np.int32), name=f"{name}_count_scalar")
        return v if v.type.dtype.name == "int32" else b.cast(x=v, dtype="int32", name=f"{name}_count")
    n = int(ctx.params.maxLoopIterations)
    if n > INT32_MAX:
        ctx.note(f"'{name}': maxLoopIterations {n} is above the int32 range; it is capped at {INT32_MAX}")
    return b.const(np.int32(min(n, INT32_MAX)), name=f"{name}_count")


# ---------------------------------------------------------------------------------------------
# Shared helpers


def child_state(state: NetworkState) -> NetworkState:
    """A nested network's state: the enclosing blob table, copied (rebinding stays local)."""
    return NetworkState(state.file, state.spec_version, state.rank5, state.options, state.notes,
                        values=dict(state.values))


def written(parent: NetworkState, child: NetworkState) -> list[str]:
    """Blob names ``child`` bound to a value other than the parent's."""
    return [n for n, v in child.values.items() if parent.values.get(n) is not v]


def _layers_run(ctx: LayerContext, layers: Sequence[Layer]) -> Run:
    return lambda bb, st: ctx.converter.convert_layers(st, layers, bb)


def _predicate(ctx: LayerContext, b: Builder, v: Value, name: str) -> Value:
    """A one-element tensor as a bool scalar: true when ``|x| > 1e-6`` (the threshold coremltools'
    builder documents for the branch layer; a loop's condition is read the same way)."""
    shape = ctx.shape(v)
    if all(is_static_dim(d) for d in shape) and int(np.prod([int(d) for d in shape])) != 1:
        raise ctx.fail(f"the condition '{v.name}' must hold one value, has shape {list(shape)}")
    s = b.reshape(x=v, shape=np.zeros(0, np.int32), name=f"{name}_scalar") if shape != () else v
    dt = s.type.dtype
    if dt.name == "bool":
        return s
    if not dt.is_float:
        return b.not_equal(x=s, y=np.zeros((), dt.storage), name=name)
    return b.greater(x=b.abs(x=s, name=f"{name}_abs"), y=np.asarray(PRED_EPS, dt.storage), name=name)


def _blob(ctx: LayerContext, state: NetworkState, blob: str) -> Value:
    v = state.values.get(blob)
    if v is None:
        raise ctx.fail(f"conditionVar '{blob}' is not produced by the conditionNetwork or earlier layers",
                       field="conditionVar")
    return v


def _no_outputs(ctx: LayerContext) -> None:
    if ctx.layer.output:
        raise ctx.fail(f"has no outputs, lists {len(ctx.layer.output)}")


def nested_layers(layer: Layer, *, into_loops: bool = True) -> Iterable[Layer]:
    """The layers of ``layer``'s nested networks, recursively."""
    kind = layer.WhichOneof("layer")
    nets = []
    if kind == "branch":
        nets = [layer.branch.ifBranch, layer.branch.elseBranch]
    elif kind == "loop" and into_loops:
        nets = [layer.loop.conditionNetwork, layer.loop.bodyNetwork]
    for net in nets:
        for inner in net.layers:
            yield inner
            yield from nested_layers(inner, into_loops=into_loops)


def outputs_of(layers: Iterable[Layer]) -> list[str]:
    """Every blob name ``layers`` (nested networks included) may bind."""
    out = []
    for layer in layers:
        for x in (layer, *nested_layers(layer)):
            out.extend(x.output)
    return out


def _jumps(layers: Iterable[Layer], kind: str | None = None) -> bool:
    """Whether ``layers`` hold a loopBreak / loopContinue of the enclosing loop (not of inner loops)."""
    kinds = (kind,) if kind else ("loopBreak", "loopContinue")
    for layer in layers:
        for x in (layer, *nested_layers(layer, into_loops=False)):
            if x.WhichOneof("layer") in kinds:
                return True
    return False


def _reads_inside(layers: Iterable[Layer]) -> Counter:
    """How many times ``layers`` and their nested networks read each blob (``model.blob_reads``)."""
    from ..model import blob_reads  # the model module imports this package

    return blob_reads(x for layer in layers for x in (layer, *nested_layers(layer)))


class _ReadOutside:
    """The blob names read outside some layers (``name in``): by any other layer of the model, as
    a loop's conditionVar, or as a model output. The model-wide counts are computed once per
    conversion (``NetworkConverter.model_reads``); a call only counts the layers it leaves out."""

    def __init__(self, total: Counter, outputs: frozenset[str], inside: Counter) -> None:
        self.total, self.outputs, self.inside = total, outputs, inside

    def __contains__(self, name: object) -> bool:
        return name in self.outputs or self.total[name] > self.inside[name]


def _read_outside(ctx: LayerContext, inside: Sequence[Layer]) -> Container[str]:
    """Blob names read outside ``inside`` (and its nested networks): by any other layer of the
    model, as a loop's conditionVar, or as a model output."""
    total, outputs = ctx.converter.model_reads
    return _ReadOutside(total, outputs, _reads_inside(inside))
