"""Matching a rule's pattern at a root op, with the reason it fails.

The matcher walks from the root up through producers, binding capture names; it backtracks over
the two operand orders of commutative ops. When no way matches, the reason is that of the failure
that got furthest into the pattern (the first element that could not be matched there), e.g.
``input 'y' of add 'a1': 'b' is not a constant``. A structural match must then pass the use check
(every op below the root has all its uses inside the match, unless marked ``multi_use``) and the
rule's own check; a refusal there is a *near miss*.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import ConverterError
from ...ir.core import Block, InputArg, Op, Value
from ...ir.opdef import NO_DEFAULT, Expr, InferArgs
from .pattern import (
    Const,
    Literal,
    OpPattern,
    OptionalInput,
    Pattern,
    TuplePattern,
    Var,
    _Absent,
)
from .rule import Refuse

if TYPE_CHECKING:
    from .rule import Rule

COMMUTATIVE_INPUTS = ("x", "y")
_UNBOUND: Any = object()


class Match:
    """A successful match: what the pattern's names are bound to.

    ``m[name]``: the `Value` a name is bound to (None for a name inside an absent ``optional``);
    ``m.value(name)``: the array of a constant; ``m.op(name)``: the op a named op pattern matched;
    ``m.inputs(name)``: that op's inputs (to copy its parameters into a replacement);
    ``m.root``: the root op; ``m.ops``: every matched op, root first.
    """

    def __init__(self, root: Op, values: dict[str, Value | None], ops: dict[str, Op], matched: list[Op]) -> None:
        self.root = root
        self._values = values
        self._ops = ops
        self.ops = matched

    def __getitem__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise KeyError(f"the pattern has no name '{name}' (names: {', '.join(self._values)})") from None

    def __contains__(self, name: str) -> bool:
        return self._values.get(name) is not None

    def get(self, name: str, default: Any = None) -> Any:
        v = self._values.get(name)
        return default if v is None else v

    def value(self, name: str) -> Any:
        """The array of the constant bound to ``name`` (None when the name is unbound)."""
        v = self[name]
        if v is None:
            return None
        if not v.is_const:
            raise ValueError(f"'{name}' is bound to '{v.name}', which is not a constant")
        return v.const_val

    def op(self, name: str) -> Op:
        try:
            return self._ops[name]
        except KeyError:
            raise KeyError(f"the pattern has no op named '{name}' (ops: {', '.join(self._ops)})") from None

    def inputs(self, name: str) -> dict[str, InputArg]:
        """A copy of the inputs of the op named ``name`` (``{key: Value or tuple}``)."""
        return dict(self.op(name).inputs)

    def __repr__(self) -> str:
        return f"<Match at {self.root.type} '{self.root.name}': {', '.join(self._values)}>"


class Outcome:
    """The result of trying one rule at one op: ``match`` (None when it does not match),
    ``reason`` why not ('' when it matches), ``near_miss`` (the pattern matched, but the use check
    or the rule's check refused it). A structural failure's reason is worded only when read (the
    driver never reads it; ``explain`` does)."""

    __slots__ = ("match", "_reason", "near_miss")

    def __init__(self, match: Match | None, reason: str | Callable[[], str], near_miss: bool) -> None:
        self.match = match
        self._reason = reason
        self.near_miss = near_miss

    @property
    def reason(self) -> str:
        if callable(self._reason):
            self._reason = self._reason()
        return self._reason

    def __repr__(self) -> str:
        return f"Outcome(match={self.match!r}, reason={self.reason!r}, near_miss={self.near_miss})"


def _describe(v: Value) -> str:
    return f"'{v.name}'"


def _literal_equal(arr: Any, literal: Any) -> bool:
    a = np.asarray(arr)
    if isinstance(literal, str):
        return a.size == 1 and a.dtype.kind in "USO" and str(a.reshape(-1)[0]) == literal
    lit = np.asarray(literal)
    if a.dtype.kind in "USO" or lit.dtype.kind in "USO":
        return a.shape == lit.shape and bool(np.all(a.astype(str) == lit.astype(str)))
    if lit.ndim == 0:
        return a.size > 0 and bool(np.all(a == lit))
    return a.shape == lit.shape and bool(np.array_equal(a, lit))


def _show_literal(x: Any) -> str:
    a = np.asarray(x)
    if a.size > 8:
        return f"an array of shape {list(a.shape)}"
    return repr(a.tolist()) if a.ndim else repr(a.item()) if a.dtype.kind not in "USO" else repr(str(a))


class Matcher:
    """One attempt of one pattern at one root op (see the module docstring)."""

    def __init__(self, root: Op) -> None:
        self.root = root
        self.values: dict[str, Value | None] = {}
        self.named_ops: dict[str, Op] = {}
        self.matched: dict[Op, bool] = {}  # op -> its results may be used outside the match
        self.progress = 0
        self.best_progress = -1
        self.best_reason: Callable[[], str] | None = None

    def fail(self, reason: Callable[[], str]) -> None:
        """Note a failure (worded by ``reason()``, only if it is the one reported: the furthest)."""
        if self.progress > self.best_progress:
            self.best_progress, self.best_reason = self.progress, reason

    # -- binding -----------------------------------------------------------------------------

    def _bind(self, name: str | None, v: Value | None, where: str) -> Iterator[None]:
        """Bind ``name`` to ``v`` for the duration of the yield (or check an earlier binding)."""
        if name is None:
            yield
            return
        bound = self.values.get(name, _UNBOUND)
        if bound is not _UNBOUND:
            if bound is v:
                yield
            else:
                shown = "absent" if v is None else _describe(v)
                self.fail(lambda: f"{where}: {shown} is not '{name}' ({'absent' if bound is None else _describe(bound)})")
            return
        self.values[name] = v
        try:
            yield
        finally:
            del self.values[name]

    # -- values ------------------------------------------------------------------------------

    def value(self, pat: Pattern, v: Value, where: str) -> Iterator[None]:
        """Yield once per way ``v`` matches ``pat`` (bindings hold during the yield)."""
        if isinstance(pat, OpPattern):
            yield from self.op_value(pat, v, where)
        elif isinstance(pat, Const):
            yield from self.const(pat, v, where)
        elif isinstance(pat, Var):
            if pat.predicate is not None and not pat.predicate(v):
                self.fail(lambda: f"{where}: {_describe(v)} fails the condition {_pred_name(pat.predicate)}")
                return
            yield from self._advance(self._bind(pat.name, v, where))
        else:
            raise TypeError(f"{pat!r} cannot match a single value ({where})")

    def _advance(self, it: Iterator[None]) -> Iterator[None]:
        for _ in it:
            self.progress += 1
            try:
                yield
            finally:
                self.progress -= 1

    def const(self, pat: Const, v: Value, where: str) -> Iterator[None]:
        if not v.is_const:
            what = "an input" if v.producer is None else f"computed by {v.producer.type}"
            self.fail(lambda: f"{where}: {_describe(v)} is not a constant ({what})")
            return
        val = v.const_val
        if pat.equals is not None and not _literal_equal(val, pat.equals):
            self.fail(lambda: f"{where}: constant {_describe(v)} is {_show_literal(val)}, not {_show_literal(pat.equals)}")
            return
        if pat.predicate is not None and not pat.predicate(np.asarray(val) if not hasattr(val, "items") else val):
            self.fail(lambda: f"{where}: constant {_describe(v)} fails the condition {_pred_name(pat.predicate)}")
            return
        yield from self._advance(self._bind(pat.name, v, where))

    # -- ops -----------------------------------------------------------------------------------

    def op_value(self, pat: OpPattern, v: Value, where: str) -> Iterator[None]:
        producer = v.producer
        if producer is None:
            self.fail(lambda: f"{where}: {_describe(v)} is an input, not the result of {pat.type_text}")
            return
        if producer.type not in pat.types:
            self.fail(lambda: f"{where}: {_describe(v)} is computed by {producer.type}, not {pat.type_text}")
            return
        if v.index != pat.output_index:
            self.fail(lambda: f"{where}: {_describe(v)} is output {v.index} of {producer.type} '{producer.name}', "
                      f"not output {pat.output_index}")
            return
        if producer is self.root:
            self.fail(lambda: f"{where}: {_describe(v)} is the root's own result")
            return
        if producer.block is not self.root.block:
            self.fail(lambda: f"{where}: {producer.type} '{producer.name}' is in another block than the root")
            return
        if producer.opdef is None or "pure" not in producer.opdef.traits:
            self.fail(lambda: f"{where}: {producer.type} '{producer.name}' is not pure (it cannot be removed)")
            return
        yield from self.op(pat, producer, where)

    def op(self, pat: OpPattern, op: Op, where: str) -> Iterator[None]:
        """Match ``op`` itself (the root, or a producer) against ``pat``."""
        if op.type not in pat.types:
            self.fail(lambda: f"{where}: op '{op.name}' is {op.type}, not {pat.type_text}")
            return
        if pat.predicate is not None and not pat.predicate(op):
            self.fail(lambda: f"{where}: {op.type} '{op.name}' fails the condition {_pred_name(pat.predicate)}")
            return
        if pat.name is not None:
            seen = self.named_ops.get(pat.name)
            if seen is not None and seen is not op:
                self.fail(lambda: f"{where}: {op.type} '{op.name}' is not '{pat.name}' ('{seen.name}')")
                return
        first_time = op not in self.matched
        previous = self.matched.get(op, False)
        self.matched[op] = previous or pat.allow_outside_uses
        named_here = pat.name is not None and pat.name not in self.named_ops
        if named_here:
            self.named_ops[pat.name] = op
        try:
            own = op.outputs[pat.output_index] if pat.output_index < len(op.outputs) else None
            for _ in self._advance(self._bind(pat.name, own, where)):
                items = list(pat.inputs.items())
                commutative = (op.opdef is not None and "commutative" in op.opdef.traits
                               and any(k in COMMUTATIVE_INPUTS for k, _ in items))
                yield from self.inputs(op, items, 0)
                if commutative:
                    swap = {"x": "y", "y": "x"}
                    yield from self.inputs(op, [(swap.get(k, k), p) for k, p in items], 0)
        finally:
            if named_here:
                del self.named_ops[pat.name]
            if first_time:
                del self.matched[op]
            else:
                self.matched[op] = previous

    def inputs(self, op: Op, items: list[tuple[str, Pattern]], i: int) -> Iterator[None]:
        if i == len(items):
            yield
            return
        key, pat = items[i]
        for _ in self.input(op, key, pat):
            yield from self.inputs(op, items, i + 1)

    def input(self, op: Op, key: str, pat: Pattern) -> Iterator[None]:
        arg = op.inputs.get(key)
        where = f"input '{key}' of {op.type} '{op.name}'"
        if isinstance(pat, _Absent):
            if arg is None:
                yield from self._advance(iter((None,)))
            else:
                self.fail(lambda: f"{where}: bound, but the pattern wants it absent")
            return
        if isinstance(pat, OptionalInput):
            if arg is None:
                yield from self._bind_none(pat.names(), where)
            else:
                yield from self.input(op, key, pat.pattern)
            return
        if isinstance(pat, TuplePattern):
            if not isinstance(arg, tuple):
                self.fail(lambda: f"{where}: {'absent' if arg is None else 'not a tuple'}")
                return
            if len(arg) != len(pat.items):
                self.fail(lambda: f"{where}: {len(arg)} values, the pattern has {len(pat.items)}")
                return
            yield from self._tuple(pat.items, arg, 0, where)
            return
        if arg is None:
            if isinstance(pat, Literal):
                default = self._default(op, key)
                if default is not _UNBOUND and _literal_equal(default, pat.equals):
                    yield from self._advance(iter((None,)))
                    return
                shown = "has no default" if default is _UNBOUND else f"defaults to {_show_literal(default)}"
                self.fail(lambda: f"{where}: absent (and {shown}), not {_show_literal(pat.equals)}")
                return
            self.fail(lambda: f"{where}: absent")
            return
        if isinstance(arg, tuple):
            self.fail(lambda: f"{where}: a tuple of {len(arg)} values, the pattern wants one value")
            return
        yield from self.value(pat, arg, where)

    def _tuple(self, pats: list[Pattern], vals: tuple, i: int, where: str) -> Iterator[None]:
        if i == len(pats):
            yield
            return
        for _ in self.value(pats[i], vals[i], f"{where}[{i}]"):
            yield from self._tuple(pats, vals, i + 1, where)

    def _bind_none(self, names: list[str], where: str) -> Iterator[None]:
        if not names:
            yield
            return
        for _ in self._bind(names[0], None, where):
            yield from self._bind_none(names[1:], where)

    @staticmethod
    def _default(op: Op, key: str) -> Any:
        """The value an absent input takes: the signature's literal default, or the op's
        ``default_<key>`` for a computed one (``conv``'s strides); _UNBOUND if there is none."""
        opdef = op.opdef
        spec = opdef.signature.inputs.get(key) if opdef is not None else None
        if spec is None or spec.default is NO_DEFAULT:
            return _UNBOUND
        if isinstance(spec.default, Expr):
            hook = getattr(opdef, f"default_{key}", None)
            if hook is None:
                return _UNBOUND
            try:
                return hook(InferArgs(opdef, op))
            except (ConverterError, ValueError, TypeError, IndexError):
                return _UNBOUND
        return spec.default

    # -- after a structural match --------------------------------------------------------------

    def outside_uses(self) -> str | None:
        """Why some op below the root has uses outside the match (None if none has)."""
        for op, allowed in self.matched.items():
            if op is self.root or allowed:
                continue
            for v in op.outputs:
                outside = sum(1 for u in v.uses if isinstance(u.user, Block) or u.user not in self.matched)
                if outside:
                    return (f"{_describe(v)} ({op.type} '{op.name}') has {len(v.uses)} use"
                            f"{'s' * (len(v.uses) != 1)}, {outside} outside the pattern")
        return None

    def snapshot(self) -> Match:
        ops = [self.root] + [op for op in self.matched if op is not self.root]
        return Match(self.root, dict(self.values), dict(self.named_ops), ops)


def _pred_name(pred: Any) -> str:
    name = getattr(pred, "__name__", "")
    return f"'{name}'" if name and name != "<lambda>" else "(a lambda)"


# -- a quick structural pre-check ------------------------------------------------------------------

OpCheck = Callable[[Op], bool]
ArgCheck = Callable[[Any], bool]


def prefilter(pattern: OpPattern) -> OpCheck:
    """A cheap test of the structure ``pattern`` needs at a root op (op types, output indices,
    constants, absent and tuple inputs, both operand orders of commutative ops, the ops' own
    ``where`` conditions), with no bindings, value conditions or reasons: False only where
    `match_rule` cannot match (so the driver skips the matcher there and loses nothing but the
    reason, which only ``explain`` shows)."""
    return _op_check(pattern)


def _op_check(pat: OpPattern) -> OpCheck:
    types = frozenset(pat.types)
    items = [(k, _arg_check(p)) for k, p in pat.inputs.items()]
    swapped = [({"x": "y", "y": "x"}.get(k, k), c) for k, c in items]
    has_xy = any(k in COMMUTATIVE_INPUTS for k, _ in items)
    predicate = pat.predicate

    def check(op: Op) -> bool:  # loops, not all(generator): this runs for every rule at every op
        if op.type not in types:
            return False
        inputs = op.inputs
        for k, c in items:
            if not c(inputs.get(k)):
                break
        else:
            # the op's own condition last (the matcher tests it first, so it holds for any op of
            # these types); a rule rooted at every op type (constant folding) is decided here
            return predicate is None or bool(predicate(op))
        if not has_xy or op.opdef is None or "commutative" not in op.opdef.traits:
            return False
        for k, c in swapped:
            if not c(inputs.get(k)):
                return False
        return predicate is None or bool(predicate(op))

    return check


def _arg_check(pat: Pattern) -> ArgCheck:
    """A test of one input (a Value, a tuple, or None when absent) against ``pat``."""
    if isinstance(pat, _Absent):
        return lambda arg: arg is None
    if isinstance(pat, OptionalInput):
        inner = _arg_check(pat.pattern)
        return lambda arg: arg is None or inner(arg)
    if isinstance(pat, TuplePattern):
        checks = [_arg_check(p) for p in pat.items]
        n = len(checks)

        def tuple_check(arg: Any) -> bool:
            return (isinstance(arg, tuple) and len(arg) == n
                    and all(c(v) for c, v in zip(checks, arg)))

        return tuple_check
    if isinstance(pat, Literal):  # absent: the op's default may equal it (the matcher decides)
        return lambda arg: arg is None or (isinstance(arg, Value) and arg.is_const)
    if isinstance(pat, Const):
        return lambda arg: isinstance(arg, Value) and arg.is_const
    if isinstance(pat, Var):
        return lambda arg: isinstance(arg, Value)
    if isinstance(pat, OpPattern):
        op_check = _op_check(pat)
        index = pat.output_index

        def producer_check(arg: Any) -> bool:
            if not isinstance(arg, Value):
                return False
            producer = arg.producer
            return (producer is not None and arg.index == index and producer.opdef is not None
                    and "pure" in producer.opdef.traits and op_check(producer))

        return producer_check
    return lambda arg: True  # an element the matcher knows and this check does not: no opinion


def match_rule(rule: Rule, root: Op) -> Outcome:
    """Try ``rule`` at ``root``: its pattern, the use check, then the rule's check."""
    m = Matcher(root)
    near_reason = ""
    for _ in m.op(rule.pattern, root, "root"):
        reason = m.outside_uses()
        if reason is None:
            match = m.snapshot()
            try:
                reason = rule.check(match) if rule.check is not None else None
            except Refuse as r:
                reason = r.reason
            if reason is None:
                return Outcome(match, "", False)
        near_reason = near_reason or reason
    if near_reason:
        return Outcome(None, near_reason, True)
    return Outcome(None, m.best_reason or "no match", False)  # worded when read
