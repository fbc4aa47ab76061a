"""Stream keys of random ops: what the interpreter seeds a random op's draws from.

A random op with its own ``seed`` >= 0 draws from that seed alone (Core ML's meaning: the same
values on every run). Without one (``seed = -1``) its stream is fixed by the interpreter's seed and
the op's *stream key*, an IR-only attribute ``rng_key`` (never written to a model file):

- the Builder gives each random op it creates the next key of its function (0, 1, 2, ... in
  creation order), a model loader gives the random ops of each function keys in program order,
  the text form prints and parses them, and clones and op copies keep them with the attributes;
- so renaming an op, or rewriting the program around it, never changes its draws; two random ops
  with equal parameters draw differently; and a program saved and loaded again draws the same
  (its random ops are numbered in the same order), unless a pass added or reordered random ops.

An op made outside these paths (``Op(...)`` by hand) has no key; it falls back to one hashed from
its name, kept apart from the numbered keys.
"""

from __future__ import annotations

import zlib

from .core import IR_ONLY_ATTRIBUTES, Function, Op

RNG_KEY = "rng_key"
assert RNG_KEY in IR_ONLY_ATTRIBUTES


def is_random(op: Op) -> bool:
    return op.opdef is not None and "random" in op.opdef.traits


def rng_key(op: Op) -> int:
    """The op's stream key (see the module docstring)."""
    key = op.attributes.get(RNG_KEY)
    if isinstance(key, (int,)) and not isinstance(key, bool) and key >= 0:
        return int(key)
    return (1 << 32) + zlib.crc32(op.name.encode())


def next_rng_key(fn: Function) -> int:
    """A key no random op of ``fn`` has (one past the highest; the scan happens once per function)."""
    if fn._rng_next is None:
        keys = [op.attributes.get(RNG_KEY) for op in fn.walk()]
        fn._rng_next = 1 + max((k for k in keys if isinstance(k, int) and not isinstance(k, bool)), default=-1)
    key = fn._rng_next
    fn._rng_next += 1
    return key


def assign_rng_keys(fn: Function) -> None:
    """Give every random op of ``fn`` without a key the next one, in program order (loaders)."""
    for op in fn.walk():
        if is_random(op) and RNG_KEY not in op.attributes:
            op.attributes[RNG_KEY] = next_rng_key(fn)
