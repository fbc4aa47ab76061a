"""The rules of ``remove_scaffolding`` (see the package docstring)."""

from __future__ import annotations

from ...ir.builder import Builder
from ...ir.core import Op, Value
from ..rewrite import Match, Refuse, op, rule, var
from .axes import reshape_to, shape_of, unit_insertion
from .sink import MAX_OTHER_READERS, RESHAPES, check_sink, emit_sink, plan_sink
from .table import TABLE


def _sinks(m: Match) -> str | None:
    return check_sink(m.root)


def reads_lifted_value(o: Op) -> bool:
    """Some data input of ``o`` is lifted by unit axes (the cheap test that makes every other op
    of the table a plain non-match rather than a near miss)."""
    for key in TABLE[o.type].data:
        arg = o.inputs.get(key)
        for a in arg if isinstance(arg, tuple) else (arg,) if arg is not None else ():
            if unit_insertion(a) is not None:
                return True
    return False


@rule(op.any_of(*sorted(TABLE))().where(reads_lifted_value), check=_sinks)
def sink_unit_axes(b: Builder, m: Match):
    """An op that does not care about unit axes is computed below the op that inserted them
    (sink.py says when; table.py which ops and how their axis arguments change). Exact: the same
    op computes the same elements at the low rank.

        %r = reshape(x=%x: [1, 7, 16], shape=[1, 7, 1, 16])
        %m = reduce_mean(x=%r, axes=[-2, -1], keep_dims=true)          # [1, 7, 1, 1]
      ->
        %m0 = reduce_mean(x=%x, axes=[2], keep_dims=true)              # [1, 7, 1]
        %m = expand_dims(x=%m0, axes=[2])                              # [1, 7, 1, 1]

    ``sub(%r, %m)`` then reads two insertions of one frame and sinks too, and so on down to the
    reshape back, which cancels the last insertion (`reshape_like_chain`). The NeuralNetwork
    frontend's ``relu(expand_dims(conv, [0]))`` becomes ``expand_dims(relu(conv), [0])``."""
    plan = plan_sink(m.root)
    if isinstance(plan, str):
        raise Refuse(plan)
    return emit_sink(b, plan)


def _same_shape(a: tuple, c: tuple) -> bool:
    return len(a) == len(c) and all(x == y for x, y in zip(a, c))


def _chain(m: Match) -> str | None:
    inner, outer = m.op("inner"), m.root
    if inner.type == "reshape" and outer.type == "reshape":
        return "two reshapes: canonicalize's reshape_chain"
    lifted = outer.outputs[0]
    if unit_insertion(lifted) is not None and unit_insertion(inner.outputs[0]) is None and (
            len(lifted.uses) > MAX_OTHER_READERS
            or any(isinstance(u.user, Op) and u.user.type in TABLE for u in lifted.uses)):
        return (f"'{lifted.name}' lifts by unit axes into ops sink_unit_axes may lower: one reshape instead "
                "would hide the unit axes")
    x_shape, out_shape = shape_of(m["x"]), shape_of(outer.outputs[0])
    if x_shape is None or out_shape is None:
        return "a shape is unknown"
    if len(m["inner"].uses) > 1 and not _same_shape(tuple(x_shape), tuple(out_shape)):
        return (f"'{m['inner'].name}' has other uses and the chain does not reduce to '{m['x'].name}' "
                "(nothing would be saved)")
    return None


@rule(op.any_of(*RESHAPES)(x=op.any_of(*RESHAPES)("inner", x=var("x")).multi_use()), check=_chain)
def reshape_like_chain(b: Builder, m: Match):
    """Two ops of {reshape, squeeze, expand_dims} in a row are one, or none: none of them changes
    the order of the elements. What the NeuralNetwork frontend leaves around (multi-output) ops
    whose results it lifts to rank 5 and then takes back down, and what `sink_unit_axes` leaves:

        %y, %h, %c = lstm(...)
        %e = expand_dims(x=%y, axes=[3, 4])               # [9, 1, 10, 1, 1]
        %s = squeeze(x=%e, axes=[3, 4])                   # [9, 1, 10]        ->  uses of %s read %y

        %h0, %h1 = split(x=%h, num_splits=2, axis=1)
        %e = expand_dims(x=%h0, axes=[0, 3, 4])           # [1, 1, 5, 1, 1]
        %o = reshape(x=%e, shape=[5])                     ->  %o = squeeze(x=%h0, axes=[0])

    When the inner op has other uses it stays, and the rule fires only if the chain reduces to its
    input. (Two reshapes are canonicalize's reshape_chain.)"""
    x: Value = m["x"]
    out_shape = shape_of(m.root.outputs[0])
    assert out_shape is not None  # checked
    out = reshape_to(b, x, out_shape)
    if isinstance(out, str):
        raise Refuse(out)
    return out


RULES = [reshape_like_chain, sink_unit_axes]
