"""Reference executor: runs any Program with the numpy kernels of the op registry.

Every failure is reported as an EvaluationError naming the function, the op (name and type) and the
shapes of its inputs, in the spirit of torch.fx's interpreter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ConverterError, EvaluationError
from ..limits import DEFAULT_MAX_LOOP_ITERATIONS, DEFAULT_MAX_TENSOR_BYTES, size_text
from .core import Block, Function, Op, Program, Value
from .opdef import EvalArgs
from .rng import rng_key
from .runtime import ListValue, StateCell
from .types import (
    DictType,
    ListType,
    StateType,
    Symbol,
    TensorType,
    TupleType,
    Type,
    is_static_dim,
)


def describe_runtime(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"{v.dtype}{list(v.shape)}"
    if isinstance(v, ListValue):
        return f"list[{len(v.items)}]"
    if isinstance(v, StateCell):
        return f"state({describe_runtime(v.value)})"
    if isinstance(v, tuple):
        return "(" + ", ".join(describe_runtime(x) for x in v) + ")"
    return type(v).__name__


def _conforms(value: Any, t: Type, bindings: dict[str, int] | None = None) -> str | None:
    """None if a run-time value fits a declared type, else the reason."""
    if isinstance(t, TensorType):
        if not isinstance(value, np.ndarray):
            return f"expected a tensor, got {type(value).__name__}"
        want = t.dtype.storage
        if t.dtype.name == "string":
            if value.dtype.kind not in ("U", "S", "O"):
                return f"expected strings, got {value.dtype}"
        elif value.dtype != want:
            return f"expected dtype {t.dtype.name} ({want}), got {value.dtype}"
        if t.shape is None:
            return None
        if value.ndim != len(t.shape):
            return f"expected rank {len(t.shape)} {list(t.shape)}, got shape {list(value.shape)}"
        later = []
        for d, n in zip(t.shape, value.shape):
            if is_static_dim(d):
                if int(d) != n:
                    return f"expected shape {[str(x) for x in t.shape]}, got {list(value.shape)}"
            elif bindings is not None:
                if not isinstance(d, Symbol):
                    later.append((d, n))  # an expression: checked once its symbols are bound
                    continue
                bound = bindings.setdefault(d.name, n)
                if bound != n:
                    return f"dimension {d.name} is {bound} elsewhere but {n} here"
                if n < d.lower or (d.upper is not None and n > d.upper) or (d.choices and n not in d.choices):
                    return f"dimension {d.name} = {n} is outside its allowed sizes"
        for d, n in later:
            if all(s.name in bindings for s in d.symbols()):  # type: ignore[operator]
                want = d.evaluate(bindings)  # type: ignore[arg-type]
                if want != n:
                    return f"dimension {d} is {want} here, got {n}"
        return None
    if isinstance(t, ListType):
        return None if isinstance(value, ListValue) else f"expected a list, got {type(value).__name__}"
    if isinstance(t, StateType):
        return None if isinstance(value, StateCell) else f"expected a state, got {type(value).__name__}"
    if isinstance(t, TupleType):
        if not isinstance(value, tuple) or len(value) != len(t.types):
            return "expected a tuple"
        return None
    if isinstance(t, DictType):
        return None if isinstance(value, dict) else "expected a dict"
    return None


def lookup_function(program: Program, name: str | None = None) -> Function:
    """The function ``name`` (default: the program's default function); `EvaluationError` listing
    the functions the program has when there is no such function."""
    key = name or program.default_function
    fn = program.functions.get(key) if isinstance(key, str) else None
    if fn is None:
        known = ", ".join(repr(k) for k in program.functions) or "none"
        what = "no function" if name else "no default function"
        raise EvaluationError(f"{what} named {key!r} (the program has: {known})", function=str(key))
    return fn


class Interpreter:
    """Executes a Program. ``seed`` fixes the streams of random ops that have no seed of their own.

    A model is untrusted, so a run is bounded: loops stop with an `EvaluationError` after
    ``max_loop_iterations`` iterations, all loops of one run together (nested loops count every inner
    iteration, so two nested loops cannot multiply their way past the bound; default
    `limits.DEFAULT_MAX_LOOP_ITERATIONS`), and an op whose declared output would take more than
    ``max_tensor_bytes`` (default `limits.DEFAULT_MAX_TENSOR_BYTES`) is refused before it runs.
    KeyboardInterrupt is never caught: Ctrl-C stops a run between two ops at the latest.
    """

    def __init__(self, program: Program, *, seed: int = 0, max_loop_iterations: int | None = None,
                 max_tensor_bytes: int | None = None) -> None:
        self.program = program
        self.seed = seed
        self.max_loop_iterations = _positive("max_loop_iterations", max_loop_iterations,
                                             DEFAULT_MAX_LOOP_ITERATIONS)
        self.max_tensor_bytes = _positive("max_tensor_bytes", max_tensor_bytes, DEFAULT_MAX_TENSOR_BYTES)
        self.loop_iterations = 0  # in the current run
        self._sizes_checked: set[Op] = set()
        self._releases: dict[Block, dict[int, list[Value]]] = {}

    # -- public ----------------------------------------------------------------------------------

    def run(self, feeds: Mapping[str, Any], function: str | None = None) -> dict[str, Any]:
        self.loop_iterations = 0
        fn = lookup_function(self.program, function)
        args = self._bind_inputs(fn, feeds)
        outs = self.run_block(fn.block, args, {})
        return {v.name: val for v, val in zip(fn.outputs, outs)}

    def run_block(self, block: Block, inputs: Sequence[Any], env: dict[Value, Any]) -> list[Any]:
        """Run a block with its inputs bound to ``inputs``; outer values are read from ``env``."""
        if len(inputs) != len(block.inputs):
            raise EvaluationError(f"block expects {len(block.inputs)} inputs, got {len(inputs)}")
        for v, x in zip(block.inputs, inputs):
            env[v] = x
        release = self._releases.get(block)
        if release is None:
            release = self._releases[block] = _release_plan(block)
        for i, op in enumerate(block.ops):
            if op not in self._sizes_checked:
                self._check_output_sizes(op)
            self._run_op(op, env)
            for v in release.get(i, ()):
                env.pop(v, None)
        return [env[v] for v in block.outputs]

    def run_op(self, op: Op, env: dict[Value, Any]) -> None:
        """Evaluate one op, reading its inputs from and writing its outputs to ``env`` (not bounded
        by ``max_tensor_bytes``: a backend decompressing a weight the file holds uses this)."""
        self._run_op(op, env)

    def count_loop_iteration(self) -> None:
        """Called by loop kernels before each iteration; raises once the run's loops have taken
        ``max_loop_iterations`` iterations."""
        self.loop_iterations += 1
        if self.loop_iterations > self.max_loop_iterations:
            raise EvaluationError(
                f"loops did not finish within {self.max_loop_iterations} iterations (all loops of the run together), "
                "the interpreter's limit: raise it with max_loop_iterations=... (converter.run) or "
                "--max-loop-iterations (command line)")

    def rng(self, op: Op, seed: int | None) -> np.random.Generator:
        """The stream of a random op: its own seed when >= 0, else the interpreter's seed and the
        op's stream key (`converter.ir.rng`: stable under renames and rewrites)."""
        if seed is not None and int(seed) >= 0:
            return np.random.default_rng(int(seed))
        return np.random.default_rng([self.seed, rng_key(op)])

    # -- internals -------------------------------------------------------------------------------

    def _bind_inputs(self, fn: Function, feeds: Mapping[str, Any]) -> list[Any]:
        missing = [v.name for v in fn.inputs if v.name not in feeds]
        if missing:
            raise EvaluationError(f"missing inputs: {', '.join(missing)}", function=fn.name)
        unknown = sorted(set(feeds) - {v.name for v in fn.inputs})
        if unknown:
            raise EvaluationError(
                f"unknown inputs: {', '.join(unknown)} (expected {', '.join(v.name for v in fn.inputs)})",
                function=fn.name,
            )
        bindings: dict[str, int] = {}
        out = []
        for v in fn.inputs:
            x = feeds[v.name]
            t = v.type
            if isinstance(t, StateType):
                cell = x if isinstance(x, StateCell) else StateCell(np.array(x, dtype=t.wrapped.dtype.storage))
                out.append(cell)
                continue
            if isinstance(t, TensorType):
                x = np.asarray(x)
                if t.dtype.name != "string" and x.dtype != t.dtype.storage:
                    if x.dtype.kind not in "biuf":
                        raise EvaluationError(
                            f"input '{v.name}': cannot use {x.dtype} data for a {t.dtype.name} input", function=fn.name
                        )
                    check_integer_range(v.name, x, t, fn.name)
                    x = x.astype(t.dtype.storage)
            why = _conforms(x, t, bindings)
            if why:
                raise EvaluationError(f"input '{v.name}': {why}", function=fn.name)
            out.append(x)
        return out

    def _check_output_sizes(self, op: Op) -> None:
        """Refuse an op of a run whose declared (static) outputs would take more than
        ``max_tensor_bytes`` (checked once per op: types do not change while a program runs)."""
        for v in op.outputs:
            nbytes = static_nbytes(v.type)
            if nbytes is not None and nbytes > self.max_tensor_bytes:
                raise EvaluationError(
                    f"output '{v.name}' of type {v.type} would take {size_text(nbytes)}, more than the "
                    f"interpreter's limit of {size_text(self.max_tensor_bytes)} per tensor (raise it with "
                    "max_tensor_bytes=... or --max-tensor-mib)", **op.location())
        self._sizes_checked.add(op)

    def _run_op(self, op: Op, env: dict[Value, Any]) -> None:
        opdef = op.opdef
        try:
            if opdef is None:
                raise EvaluationError("op has no definition")
            results = opdef.evaluate(EvalArgs(opdef, op, env, self))
            if len(results) != len(op.outputs):
                raise EvaluationError(f"kernel returned {len(results)} values for {len(op.outputs)} outputs")
            for v, r in zip(op.outputs, results):
                if isinstance(v.type, TensorType) and not isinstance(r, np.ndarray):
                    r = np.asarray(r)
                why = _conforms(r, v.type)
                if why:
                    raise EvaluationError(f"output '{v.name}': {why}")
                env[v] = r
        except ConverterError as e:
            if isinstance(e, EvaluationError) and e.op is not None:
                raise  # already located (nested block)
            raise EvaluationError(
                f"{e.message}; inputs: {self._describe_inputs(op, env)}", **op.location()
            ) from e
        except Exception as e:  # noqa: BLE001 - any kernel failure becomes a located error
            raise EvaluationError(
                f"{type(e).__name__}: {e}; inputs: {self._describe_inputs(op, env)}", **op.location()
            ) from e

    @staticmethod
    def _describe_inputs(op: Op, env: dict[Value, Any]) -> str:
        parts = []
        for key, arg in op.inputs.items():
            vals = arg if isinstance(arg, tuple) else (arg,)
            shown = ", ".join(describe_runtime(env[v]) if v in env else "?" for v in vals)
            parts.append(f"{key}={shown}")
        return ", ".join(parts) or "none"


def _release_plan(block: Block) -> dict[int, list[Value]]:
    """{op index: values of ``block`` no op after it reads}: what a run of the block can drop after
    each op, so that it holds only live values (a run of a large model otherwise keeps every
    intermediate tensor until the end). A value read inside a nested block counts as read by the
    op of ``block`` that owns the nested block; block outputs and anything read from elsewhere
    stay."""
    position = {op: i for i, op in enumerate(block.ops)}
    plan: dict[int, list[Value]] = {}
    for i, op in enumerate(block.ops):
        for v in op.outputs:
            last: int | None = i
            for use in v.uses:
                if isinstance(use.user, Block):  # an output of this block, or of a nested one
                    user = None if use.user is block else use.user.parent_op
                else:
                    user = use.user
                while user is not None and user.block is not block:
                    user = user.block.parent_op if user.block is not None else None
                if user is None:  # a block output, or a use outside this block: keep it
                    last = None
                    break
                last = max(last, position[user])
            if last is not None:
                plan.setdefault(last, []).append(v)
    return plan


def static_nbytes(t: Type) -> int | None:
    """The bytes a tensor of type ``t`` takes, when its shape is static (else None); for a list of
    known length, its slots (8 bytes each) or its elements when their shape is static."""
    if isinstance(t, ListType) and isinstance(t.length, int):
        elem = static_nbytes(t.elem)
        return t.length * max(elem or 0, 8)
    if not isinstance(t, TensorType) or t.shape is None:
        return None
    n = t.dtype.storage.itemsize
    for d in t.shape:
        if not is_static_dim(d):
            return None
        n *= int(d)
    return n


def _positive(name: str, value: int | None, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise EvaluationError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def run(program: Program, feeds: Mapping[str, Any], *, function: str | None = None, seed: int = 0,
        max_loop_iterations: int | None = None, max_tensor_bytes: int | None = None) -> dict[str, Any]:
    """Run ``program`` on ``feeds`` ({input name: array}) and return {output name: array} (bounds: see
    `Interpreter`)."""
    return Interpreter(program, seed=seed, max_loop_iterations=max_loop_iterations,
                       max_tensor_bytes=max_tensor_bytes).run(feeds, function)


def check_integer_range(name: str, x: np.ndarray, t: TensorType, function: str) -> None:
    """Integer data for an integer input of a narrower dtype (an int64 feed for an int32 input, as
    ONNX models' int64 inputs become) must fit: a wrapped value would be silently wrong."""
    if x.dtype.kind not in "iu" or not t.dtype.is_int or x.size == 0 or t.dtype.is_subbyte:
        return
    lo, hi = t.dtype.value_range()
    got_lo, got_hi = int(x.min()), int(x.max())
    if got_lo < lo or got_hi > hi:
        bad = got_lo if got_lo < lo else got_hi
        raise EvaluationError(f"input '{name}': value {bad} does not fit the input's type {t.dtype.name} "
                              f"([{lo}, {hi}]), and would wrap around", function=function)
