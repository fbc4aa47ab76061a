"""Constant folding: an op whose inputs are all constants becomes a ``const`` holding its result,
computed by the op's own kernel (`OpDef.evaluate`, through `..ir.consteval`).

Rules of the rewrite engine (so the worklist, the revisits and ``--explain`` come with it): a fold
makes the users of the folded value candidates again, so chains fold in one run, in time linear in
the program plus the data the kernels read. The rules:

- `fold_constant_op`: any op whose inputs are all ``const`` ops. Never a random, stateful or
  control-flow op, nor a ``constexpr_*`` weight decompression unless the pass is asked
  (``FoldConstants(expand_constexpr=True)``): `consteval.evaluation_refusal` decides, from the
  registry's traits (one place). A size cap keeps folding from inflating a model: a fold whose
  results take more than ``max_bytes`` AND more than the constants it frees (its const inputs
  nothing else reads) is refused; weight preparation (a split, concat, transpose or add of
  weights) frees what it makes, so it folds whatever its size. Results keep the declared dtypes
  exactly (a kernel result of another dtype is refused, never cast).
- `fold_static_shape`: ``shape(x)`` of a statically shaped ``x`` is a constant, whatever computes x.
- `select_constant_condition`, `select_same_branches`: a ``select`` whose condition is all true or
  all false is that branch; ``select(c, a, a)`` is ``a``.
- `cond_constant_predicate`: a ``cond`` whose predicate is a constant is its taken block, copied in
  its place (the block's ops, nested blocks included; random ops keep their stream keys).

Folding is exact: the kernels are the interpreter's, so a folded program computes bit for bit what
it computed before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import EvaluationError
from ..ir.builder import Builder
from ..ir.clone import copy_ops
from ..ir.consteval import evaluate_op, evaluation_refusal, nbytes_of, static_shape_value
from ..ir.core import Op, Value
from ..ir.interpreter import static_nbytes
from ..ir.opdef import registered_op_types
from ..ir.types import TensorType
from .rewrite import Match, Refuse, RewritePass, Rule, const, op, rule, var

#: A fold whose results take more than this many bytes must free at least as many (see the module
#: docstring): shape arithmetic and small tables fold, a ``fill`` or ``tile`` that would write a
#: large constant into the model does not.
MAX_FOLD_BYTES = 1 << 16


def _show_bytes(n: int) -> str:
    return f"{n} bytes" if n < 1024 else f"{n / 1024:.0f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MiB"


def all_inputs_constant(root: Op) -> bool:
    return all(v.is_const for v in root.input_values())


def _freed_bytes(root: Op) -> int:
    """Bytes of the distinct const inputs of ``root`` that only ``root`` reads (freed by folding it)."""
    total = 0
    for v in dict.fromkeys(root.input_values()):
        if all(u.user is root for u in v.uses):
            total += nbytes_of(v.const_val)
    return total


def _too_large(out_bytes: int, root: Op, max_bytes: int) -> str | None:
    if out_bytes <= max_bytes:
        return None
    freed = _freed_bytes(root)
    if out_bytes <= freed:
        return None
    return (f"its result would take {_show_bytes(out_bytes)}, more than the folding limit of "
            f"{_show_bytes(max_bytes)} and than the {_show_bytes(freed)} of constants it frees")


def _const_like(b: Builder, value: Any, like: Value) -> Value:
    t = like.type
    assert isinstance(t, TensorType)
    return b.const(value, t.dtype)


def _widens_fp16(op: Op) -> bool:
    """A cast of an fp16 value to fp32 (an fp16 weight as the program computes with it)."""
    x = op.inputs.get("x")
    return (op.type == "cast" and isinstance(x, Value) and isinstance(x.type, TensorType)
            and x.type.dtype.name == "fp16" and isinstance(op.outputs[0].type, TensorType)
            and op.outputs[0].type.dtype.name == "fp32")


def make_fold_rule(*, expand_constexpr: bool = False, max_bytes: int = MAX_FOLD_BYTES,
                   keep_fp16_weights: bool = False) -> Rule:
    """The `fold_constant_op` rule with the pass's parameters."""
    root_types = tuple(t for t in registered_op_types() if t not in ("const", "_const_symbolic"))

    def check(m: Match) -> str | None:
        root = m.root
        why = evaluation_refusal(root, expand_constexpr=expand_constexpr)
        if why is not None:
            return why
        if not any(v.uses for v in root.outputs):
            return "its results are unused (dead_code removes it)"
        if keep_fp16_weights and _widens_fp16(root):
            return "an fp16 weight stays fp16 (the target writes fp16 weights as they are)"
        if "constexpr" in root.opdef.traits:
            return None  # decompression asked for: the cap does not apply
        sizes = [static_nbytes(v.type) for v in root.outputs]
        if all(s is not None for s in sizes):
            return _too_large(sum(sizes), root, max_bytes)
        return None

    def fold_constant_op(b: Builder, m: Match) -> Sequence[Value]:
        """An op whose inputs are all constants -> a const holding its result (per output).

            %c1 = const() [val=2.0]
            %c2 = const() [val=3.0]
            %p = mul(x=%c1, y=%c2)
            %y = add(x=%x, y=%p)          ->    %p = const() [val=6.0]
                                                %y = add(x=%x, y=%p)
        Exact: the op's own kernel computes the constant."""
        root = m.root
        inputs = {v: v.const_val for v in root.input_values()}
        try:
            results = evaluate_op(root, inputs)
        except EvaluationError as e:
            raise Refuse(f"its kernel fails on these constants: {e.message}") from None
        if "constexpr" not in root.opdef.traits:
            why = _too_large(sum(nbytes_of(r) for r in results), root, max_bytes)
            if why is not None:
                raise Refuse(why)
        return [_const_like(b, r, v) for r, v in zip(results, root.outputs)]

    return Rule("fold_constant_op", op.any_of(*root_types)("root").where(all_inputs_constant),
                fold_constant_op, check, (fold_constant_op.__doc__ or "").strip())


def _static_shape(m: Match) -> str | None:
    if static_shape_value(m.root) is not None:
        return None
    return f"the shape of '{m['x'].name}' ({m['x'].type}) is not static"


@rule(op.shape(x=var("x")), check=_static_shape)
def fold_static_shape(b: Builder, m: Match) -> Value:
    """The shape of a statically shaped value is a constant (whatever computes the value).

        %s: tensor<int32, [2]> = shape(x=%x: tensor<fp32, [2, 3]>)    ->    %s = const() [val=[2, 3]]"""
    return b.const(static_shape_value(m.root), "int32")


def _uniform_condition(m: Match) -> str | None:
    c = np.asarray(m.value("c"))
    if c.size == 0:
        return "the condition is empty"
    if c.all() or not c.any():
        return None
    shown = c.reshape(-1).tolist() if c.size <= 8 else f"an array of shape {list(c.shape)}"
    return f"the condition mixes true and false ({shown})"


@rule(op.select(cond=const("c"), a=var("a"), b=var("b")), check=_uniform_condition)
def select_constant_condition(b: Builder, m: Match) -> Value:
    """A select whose constant condition is all true (all false) is its ``a`` (``b``) branch, when
    that branch already has the select's type (a branch that the select would broadcast is kept:
    the engine refuses a replacement of another type).

        %c = const() [val=[true, true]]
        %y = select(cond=%c, a=%a, b=%b)    ->    uses of %y read %a"""
    return m["a"] if np.asarray(m.value("c")).all() else m["b"]


@rule(op.select(cond=var("c"), a=var("a"), b=var("a")))
def select_same_branches(b: Builder, m: Match) -> Value:
    """A select between a value and itself is that value (when it has the select's type).

        %y = select(cond=%c, a=%a, b=%a)    ->    uses of %y read %a"""
    return m["a"]


def _scalar_predicate(m: Match) -> str | None:
    p = np.asarray(m.value("p"))
    return None if p.size == 1 else f"the predicate has {p.size} values"


@rule(op.cond(pred=const("p")), check=_scalar_predicate)
def cond_constant_predicate(b: Builder, m: Match) -> Sequence[Value]:
    """A cond whose predicate is a constant is its taken block, copied in its place (the other
    block is dropped with the cond).

        %p = const() [val=true]
        %y = cond(pred=%p) {                %t = mul(x=%x, y=%two)
          %t = mul(x=%x, y=%two)      ->    uses of %y read %t
        } -> (%t) {
          %f = sub(x=%x, y=%one)
        } -> (%f)"""
    taken = m.root.blocks[0 if bool(np.asarray(m.value("p")).reshape(-1)[0]) else 1]
    return copy_ops(taken, b.block, rename=b.names.unique)


SIMPLIFY_RULES = [fold_static_shape, select_constant_condition, select_same_branches, cond_constant_predicate]


class FoldConstants(RewritePass):
    """Constant folding and the simplifications constants allow (see the module docstring).

    ``expand_constexpr``: also fold ``constexpr_*`` weight decompressions (and what reads them) into
    plain constants; ``max_bytes``: the size cap of a fold that frees less than it makes."""

    name = "fold_constants"

    def __init__(self, *, expand_constexpr: bool = False, max_bytes: int = MAX_FOLD_BYTES,
                 keep_fp16_weights: bool = False) -> None:
        fold = make_fold_rule(expand_constexpr=expand_constexpr, max_bytes=max_bytes,
                              keep_fp16_weights=keep_fp16_weights)
        super().__init__("fold_constants", [fold, *SIMPLIFY_RULES])
