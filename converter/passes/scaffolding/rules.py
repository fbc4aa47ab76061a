"""The rules of ``remove_scaffolding`` (see the package docstring)."""

from __future__ import annotations

from ...ir.builder import Builder
from ...ir.core import Value
from ..rewrite import Match, Refuse, op, rule, var
from .axes import reshape_to, shape_of, unit_insertion
from .region import emit, plan_region
from .table import TABLE

RESHAPES = ("reshape", "squeeze", "expand_dims")


def _region(m: Match) -> str | None:
    plan = plan_region(m.root)
    return plan if isinstance(plan, str) else None


@rule(op.any_of(*RESHAPES)(x=var("y")), check=_region)
def lower_unit_axes_region(b: Builder, m: Match):
    """Ops computed in a rank raised by unit axes, between the ops that add the axes and a reshape
    back, are computed at the low rank instead (see region.py for when, table.py for which ops).
    Exact: every op of the table computes the same elements at low rank.

        %r = reshape(x=%x: [1, 7, 16], shape=[1, 7, 1, 16])
        %m = reduce_mean(x=%r, axes=[-2, -1], keep_dims=true)          # [1, 7, 1, 1]
        %c = sub(x=%r, y=%m)                                           # [1, 7, 1, 16]
        %y = reshape(x=%c, shape=[1, 7, 16])
      ->
        %m = reduce_mean(x=%x, axes=[2], keep_dims=true)               # [1, 7, 1]
        %y = sub(x=%x, y=%m)                                           # [1, 7, 16]

    and the NeuralNetwork frontend's ``expand_dims(conv, [0]) -> relu -> squeeze([0])`` becomes
    ``relu(conv)``; ``expand_dims -> transpose(perm) -> squeeze`` a transpose of the low rank."""
    plan = plan_region(m.root)
    if isinstance(plan, str):
        raise Refuse(plan)
    out = emit(b, plan)
    if isinstance(out, str):
        raise Refuse(out)
    return out


def _producer_is_single_output(v: Value) -> bool:
    return v.producer is not None and len(v.producer.outputs) == 1


def _chain(m: Match) -> str | None:
    inner, outer = m.op("inner"), m.root
    if inner.type == "reshape" and outer.type == "reshape":
        return "two reshapes: canonicalize's reshape_chain"
    if {inner.type, outer.type} == {"squeeze", "expand_dims"} and _producer_is_single_output(m["x"]):
        a, c = shape_of(m["x"]), shape_of(outer.outputs[0])
        if a is not None and c is not None and tuple(a) == tuple(c):
            return "squeeze and expand_dims undo each other on a single-output op's result: canonicalize's pair rule"
    lifted = outer.outputs[0]
    if unit_insertion(lifted) is not None and unit_insertion(inner.outputs[0]) is None and any(
            u.type in TABLE for u in lifted.users()):
        return (f"'{lifted.name}' lifts by unit axes into ops lower_unit_axes_region may lower: one reshape "
                "instead would hide the unit axes")
    x_shape, out_shape = shape_of(m["x"]), shape_of(outer.outputs[0])
    if x_shape is None or out_shape is None:
        return "a shape is unknown"
    if len(m["inner"].uses) > 1 and not (len(x_shape) == len(out_shape)
                                     and all(a == c for a, c in zip(x_shape, out_shape))):
        return (f"'{m['inner'].name}' has other uses and the chain does not reduce to '{m['x'].name}' "
                "(nothing would be saved)")
    return None


@rule(op.any_of(*RESHAPES)(x=op.any_of(*RESHAPES)("inner", x=var("x")).output(0).multi_use()), check=_chain)
def reshape_like_chain(b: Builder, m: Match):
    """Two ops of {reshape, squeeze, expand_dims} in a row are one (or none): only the element
    order matters, and none of them changes it. Typical after the NeuralNetwork frontend, which
    lifts a (multi-output) op's results to rank 5 and then reshapes them to the declared output:

        %h0, %h1 = split(x=%h, num_splits=2, axis=1)
        %e = expand_dims(x=%h0, axes=[0, 3, 4])          # [1, 1, 5, 1, 1]
        %y = reshape(x=%e, shape=[5])
      ->
        %y = squeeze(x=%h0, axes=[0])                    # [1, 5] -> [5]

    and ``squeeze(expand_dims(lstm.output(0), [3, 4]), [3, 4]) -> lstm.output(0)``. When the
    inner op has other uses it stays, and the rule fires only if the chain reduces to its input."""
    x = m["x"]
    out_shape = shape_of(m.root.outputs[0])
    assert out_shape is not None  # checked
    out = reshape_to(b, x, out_shape)
    if isinstance(out, str):
        raise Refuse(out)
    return out


RULES = [reshape_like_chain, lower_unit_axes_region]
