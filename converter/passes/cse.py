"""Common subexpression elimination: a pure op that computes what an earlier op already computes
(same op type, same input values, same attributes; the operands of a commutative op in either
order) is replaced by that earlier op's results.

Constants are compared by value: the same dtype, shape and bytes (so identical weights loaded
twice, identical weight blobs, become one constant; ``-0.0`` and ``0.0`` stay apart, and NaNs with
the same bits are the same). A constant is keyed by its bytes when small; a large one is hashed
only when another constant shares its IR type, byte size and a sample of its bytes (4 runs of 16
at its start, thirds and end: a few pages, so weights mapped from a file are barely read, and
not made resident, for this), and a pass object remembers
the digests it made (a pipeline's later rounds do not hash the same weights again). Ops merged
this way make their users identical in turn, which the same single walk then merges too.

Nested blocks: an op may reuse a value only where that value's definition dominates it: a value of
an enclosing block defined before the nested block's op, never one of a sibling block. Scoped hash
tables (one per block, chained to the enclosing block's) give that: linear time overall. Random,
stateful and control-flow ops are never merged (they are not ``pure``). A function output keeps its
name (`..edits.replace_value`); two function outputs are never merged into one.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from ..ir.core import Block, Op, Program
from ..ir.runtime import ListValue
from ..ir.types import TensorType
from .base import Pass, PassResult
from .edits import Edits, replace_refusal, replace_value

_UNHASHABLE = object()
#: constants of at most this many bytes are keyed by their bytes (no hashing)
SMALL_CONST = 64
#: bytes sampled from a larger constant before it is hashed: SAMPLE_RUNS runs of contiguous bytes
#: (each run reads one or two pages of a file-mapped weight, however large it is)
SAMPLE, SAMPLE_RUNS = 64, 4


def _digest(arr: np.ndarray) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    h.update(_bytes(arr))
    return h.digest()


def _freeze(val: Any) -> Any:
    """A hashable stand-in for an attribute value (arrays by dtype, shape and a digest of their bytes)."""
    if isinstance(val, np.ndarray) or isinstance(val, np.generic):
        arr = np.asarray(val)
        if arr.dtype.kind == "O":
            return _UNHASHABLE
        return ("array", arr.dtype.str, arr.shape, _digest(arr))
    if isinstance(val, (list, tuple)):
        items = tuple(_freeze(x) for x in val)
        return _UNHASHABLE if any(x is _UNHASHABLE for x in items) else (type(val).__name__, items)
    if isinstance(val, dict):
        items = tuple((k, _freeze(v)) for k, v in sorted(val.items()))
        return _UNHASHABLE if any(v is _UNHASHABLE for _, v in items) else ("dict", items)
    if isinstance(val, (str, bytes, int, float, bool)) or val is None:
        return (type(val).__name__, val)
    return _UNHASHABLE


class _Scope:
    """Keys of the ops seen in one block, chained to the enclosing block's scope."""

    __slots__ = ("table", "parent")

    def __init__(self, parent: _Scope | None) -> None:
        self.table: dict[Any, Op] = {}
        self.parent = parent

    def find(self, key: Any) -> Op | None:
        scope: _Scope | None = self
        while scope is not None:
            hit = scope.table.get(key)
            if hit is not None:
                return hit
            scope = scope.parent
        return None


class CommonSubexpressionElimination(Pass):
    name = "cse"

    def __init__(self) -> None:
        # const op -> (the array it held when hashed, the digest): later runs of this pass object
        # (a pipeline's rounds) reuse a digest while the op holds the same array
        self._digests: dict[Op, tuple[Any, bytes]] = {}

    def run(self, program: Program) -> PassResult:
        self.edits = Edits(lazy_uses=True)  # merging never reads the use-lists of inputs
        self.merged: dict[str, int] = {}
        self.refused = 0
        self.const_groups = self._const_groups(program)
        for fn in program.functions.values():
            self._block(fn.block, None)
        self.edits.apply()
        stats: dict[str, Any] = {"merged": dict(self.merged)}
        if self.refused:
            stats["kept (function outputs)"] = self.refused
        return PassResult(bool(self.merged), stats)

    def _const_groups(self, program: Program) -> dict[Any, int]:
        """How many const ops share each (type, byte size, sample of the bytes): a large constant
        is hashed only when its group holds another. Also drops digests of ops that are gone."""
        groups: dict[Any, int] = {}
        self._group_of: dict[Op, Any] = {}
        live: dict[Op, tuple[Any, bytes]] = {}
        for op in program.walk():
            if op.type == "const":
                k = _const_group(op)
                if k is not None:
                    self._group_of[op] = k
                    groups[k] = groups.get(k, 0) + 1
                    cached = self._digests.get(op)
                    if cached is not None:
                        live[op] = cached
        self._digests = live
        return groups

    def _digest_of(self, op: Op) -> bytes:
        val = op.attributes.get("val")
        cached = self._digests.get(op)
        if cached is not None and cached[0] is val:
            return cached[1]
        digest = _digest(np.asarray(val))
        self._digests[op] = (val, digest)
        return digest

    def _block(self, block: Block, parent: _Scope | None) -> None:
        # (block, its ops as they were before this pass edited them, its scope, next index)
        stack: list[tuple[list[Op], _Scope, int]] = [(list(block.ops), _Scope(parent), 0)]
        while stack:
            ops, scope, i = stack.pop()
            while i < len(ops):
                op = ops[i]
                i += 1
                if op.blocks:
                    # visit the nested blocks (each its own child scope), then the rest of this block
                    stack.append((ops, scope, i))
                    for b in reversed(op.blocks):
                        stack.append((list(b.ops), _Scope(scope), 0))
                    break
                if op.block is None:
                    continue
                key = self._key(op)
                if key is None:
                    continue
                earlier = scope.find(key)
                if earlier is None:
                    scope.table[key] = op
                elif not self._merge(op, earlier):
                    scope.table.setdefault(key, op)

    def _key(self, op: Op) -> Any:
        if op.opdef is None or "pure" not in op.opdef.traits or op.blocks or not op.outputs:
            return None
        if op.type == "const":
            group = self._group_of.get(op)
            if group is None or self.const_groups.get(group, 0) < 2:
                return None
            if group[-1][0] == "bytes":  # small: its bytes are the key already
                return ("const", group)
            return ("const", group, self._digest_of(op))
        inputs = [(k, arg) for k, arg in op.inputs.items()]
        if "commutative" in op.opdef.traits and "x" in op.inputs and "y" in op.inputs:
            # add(a, b) and add(b, a) are the same: the operands as an unordered pair
            x, y = op.inputs["x"], op.inputs["y"]
            inputs = [kv for kv in inputs if kv[0] not in ("x", "y")] + [("x|y", frozenset((x, y)))]
        attrs = _freeze(op.attributes) if op.attributes else None
        if attrs is _UNHASHABLE:
            return None
        return (op.type, op.opdef.opset, tuple(sorted(inputs, key=lambda kv: kv[0])), attrs, len(op.outputs))

    def _merge(self, op: Op, earlier: Op) -> bool:
        if op.type == "const" and not _same_array(op.attributes["val"], earlier.attributes["val"]):
            return False  # a digest collision: never merge unequal constants
        pairs = list(zip(op.outputs, earlier.outputs))
        if any(replace_refusal(old, new) is not None for old, new in pairs):
            self.refused += 1
            return False
        for old, new in pairs:
            reason = replace_value(self.edits.exact_uses(old), self.edits.exact_uses(new))
            assert reason is None, reason
        self.edits.remove(op)
        self.merged[op.type] = self.merged.get(op.type, 0) + 1
        return True


def _const_group(op: Op) -> Any:
    """(IR dtype, shape, array dtype, byte size, ("bytes", all the bytes) for a small constant or
    ("sample", 64 bytes spread over it) for a larger one), or None for what is not compared."""
    val = op.attributes.get("val")
    if val is None or isinstance(val, ListValue) or not op.outputs:
        return None
    arr = np.asarray(val)
    t = op.outputs[0].type
    if arr.dtype.kind == "O" or not isinstance(t, TensorType):
        return None
    raw = _bytes(arr)
    if raw.size <= SMALL_CONST:
        content = ("bytes", raw.tobytes())
    else:
        content = ("sample", _sample(raw))
    # plain strings and ints: hashing a frozen dataclass type is slow, and the key is hashed often
    return (t.dtype.name, str(t.shape), arr.dtype.str, arr.nbytes, content)


def _sample(raw: np.ndarray) -> bytes:
    """`SAMPLE` bytes of ``raw`` (more than `SAMPLE` bytes) in `SAMPLE_RUNS` contiguous runs from its
    start to its end."""
    run = SAMPLE // SAMPLE_RUNS
    last = raw.size - run
    return b"".join(raw[i * last // (SAMPLE_RUNS - 1):][:run].tobytes() for i in range(SAMPLE_RUNS))


def _same_array(a: Any, b: Any) -> bool:
    x, y = np.asarray(a), np.asarray(b)
    if x.dtype != y.dtype or x.shape != y.shape:
        return False
    return bool(np.array_equal(_bytes(x), _bytes(y)))


def _bytes(arr: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(arr).view(np.uint8).reshape(-1) if arr.size else np.zeros(0, np.uint8)
