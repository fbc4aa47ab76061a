"""Compile-time evaluation: an op's numpy kernel (its `OpDef.evaluate`) run on inputs known before
run time.

The one place that decides which ops may be evaluated ahead of time (`evaluation_refusal`, from the
traits of the op registry: only ``pure`` ops, never ``random``, ``stateful`` or control-flow ones;
``constexpr`` weight decompression only when asked) and that runs them (`evaluate_op`). Two users:

- constant folding (converter/passes/fold_constants.py) replaces such ops by ``const`` ops;
- type inference reads parameters computed from constants through `compile_time_value` (behind
  `InferArgs.value`): coremltools writes torch's ``qkv.split(d)`` as ``split(split_sizes=tile(c,
  reps))``, whose sizes are known at compile time though no ``const`` op holds them. That path is
  bounded (a few dozen small ops per value), so type inference stays O(1) per op whatever the
  program holds.

A ``shape`` of a statically shaped value is known too, whatever computes the value
(`static_shape_value`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ConverterError
from .core import Op, Program, Value
from .types import TensorType, is_static_dim

#: `compile_time_value`: the most bytes one tensor of an evaluated chain (inputs included) may take,
#: and the most ops a chain may hold. Parameters (sizes, shapes, axes) are a few dozen bytes; the
#: bounds keep type inference cheap on a program whose parameters come from long or large chains.
VALUE_MAX_BYTES = 1 << 12
VALUE_MAX_OPS = 64


def evaluation_refusal(op: Op, *, expand_constexpr: bool = False) -> str | None:
    """Why ``op`` must not be evaluated ahead of time (None when it may be, once its inputs are
    known). Reads the registry's traits: ``pure`` ops only (no side effects, the same result on
    every run); ``random`` and ``stateful`` ops and ops holding blocks never; ``constexpr`` weight
    decompression only with ``expand_constexpr`` (its compressed form is what keeps a model small)."""
    opdef = op.opdef
    if opdef is None:
        return f"{op.type} has no definition"
    traits = opdef.traits
    if "constant" in traits:
        return "it is a constant already"
    if "random" in traits:
        return f"{op.type} is random: it draws new values on every run"
    if "stateful" in traits:
        return f"{op.type} reads or writes a state"
    if op.blocks or "control_flow" in traits:
        return f"{op.type} runs nested blocks"
    if "pure" not in traits:
        return f"{op.type} is not pure (it has side effects)"
    if "constexpr" in traits and not expand_constexpr:
        return (f"{op.type} is a compressed weight, kept compressed "
                "(FoldConstants(expand_constexpr=True) expands it)")
    if not opdef.has_kernel:
        return f"{op.type} has no numpy kernel"
    for v in op.outputs:
        if not isinstance(v.type, TensorType):
            return f"its result '{v.name}' is a {type(v.type).__name__}, not a tensor"
    return None


def static_shape_value(op: Op) -> np.ndarray | None:
    """The result of a ``shape`` op whose input has a static shape (None otherwise): a constant,
    whatever computes the input."""
    if op.type != "shape":
        return None
    t = op.inputs["x"].type if isinstance(op.inputs.get("x"), Value) else None
    if not isinstance(t, TensorType) or t.shape is None or not all(is_static_dim(d) for d in t.shape):
        return None
    return np.array([int(d) for d in t.shape], dtype=np.int32)


def constant_value(v: Value) -> Any:
    """The value a ``const`` (or other ``constant``-trait) op holds, else None."""
    p = v.producer
    if p is None or p.opdef is None or "constant" not in p.opdef.traits:
        return None
    return p.attributes.get("val")


def nbytes_of(val: Any) -> int:
    return int(np.asarray(val).nbytes) if isinstance(val, (np.ndarray, np.generic)) else 0


def evaluate_op(op: Op, inputs: dict[Value, Any], *, max_tensor_bytes: int | None = None) -> list[Any]:
    """Run ``op``'s kernel on ``inputs`` ({input value: array}, every input of the op). The results
    conform to the op's declared output types exactly (dtype and static sizes), else
    `EvaluationError`; an intermediate larger than ``max_tensor_bytes`` is refused the same way."""
    from .interpreter import Interpreter  # the interpreter imports this module's neighbours

    env = dict(inputs)
    Interpreter(Program(), max_tensor_bytes=max_tensor_bytes).run_op(op, env)
    return [env[v] for v in op.outputs]


def compile_time_value(v: Value, *, max_bytes: int = VALUE_MAX_BYTES, max_ops: int = VALUE_MAX_OPS) -> Any:
    """The value ``v`` takes in every run when it is known at compile time, else None: a constant,
    the shape of a statically shaped value, or the result of a short chain of pure ops over those
    (at most ``max_ops`` ops, each tensor of it at most ``max_bytes``; random, stateful and
    control-flow ops are never evaluated). Never raises: a chain whose evaluation fails is unknown."""
    val = constant_value(v)
    if val is not None or v.producer is None:
        return val
    known: dict[Value, Any] = {}
    order: list[Op] = []  # ops to evaluate, producers first
    seen: set[Op] = set()
    stack: list[tuple[Op, bool]] = [(v.producer, False)]
    while stack:
        op, expanded = stack.pop()
        if expanded:
            order.append(op)
            continue
        if op in seen:
            continue
        seen.add(op)
        if len(seen) > max_ops:
            return None
        shape = static_shape_value(op)
        if shape is not None:
            known[op.outputs[0]] = shape
            continue
        if evaluation_refusal(op, expand_constexpr=True) is not None or not _small(op.outputs, max_bytes):
            return None
        stack.append((op, True))
        for x in op.input_values():
            if x in known:
                continue
            c = constant_value(x)
            if c is not None:
                if nbytes_of(c) > max_bytes:
                    return None
                known[x] = c
            elif x.producer is None:
                return None  # a function or block input
            else:
                stack.append((x.producer, False))
    try:
        for op in order:
            results = evaluate_op(op, {x: known[x] for x in op.input_values()}, max_tensor_bytes=max_bytes)
            known.update(zip(op.outputs, results))
    except (ConverterError, KeyError):
        return None
    return known.get(v)


class RunTimeDependence:
    """Whether values depend on a run-time input (a function or block input, or the result of an op
    that is never evaluated ahead of time: random, stateful, control flow), remembered: asked about
    every value of a program, it visits each op once. Such a value is never known at compile time,
    so asking this first keeps `compile_time_value` from walking up to ``max_ops`` producers of a
    value that cannot be known (on a long chain, once per op). A ``shape`` of a statically shaped
    value does not depend on its input's run-time values."""

    def __init__(self) -> None:
        self._memo: dict[Value, bool] = {}

    def __call__(self, v: Value) -> bool:
        memo = self._memo
        stack = [v]
        while stack:
            x = stack[-1]
            if x in memo:
                stack.pop()
                continue
            op = x.producer
            if op is None:
                memo[x] = True
            elif constant_value(x) is not None or static_shape_value(op) is not None:
                memo[x] = False
            elif evaluation_refusal(op, expand_constexpr=True) is not None:
                memo[x] = True
            else:
                pending = [i for i in op.input_values() if i not in memo]
                if pending:
                    stack.extend(pending)
                    continue
                memo[x] = any(memo[i] for i in op.input_values())
            stack.pop()
        return memo[v]


def _small(values: list[Value], max_bytes: int) -> bool:
    """Whether every value has a static tensor type of at most ``max_bytes``."""
    for x in values:
        t = x.type
        if not isinstance(t, TensorType) or t.shape is None or not all(is_static_dim(d) for d in t.shape):
            return False
        n = t.dtype.storage.itemsize
        for d in t.shape:
            n *= int(d)
        if n > max_bytes:
            return False
    return True
