"""Op definitions: one class per op type holding type inference and a numpy reference kernel.

Signatures (parameter names, kinds, dtypes, constness and literal defaults, per opset) are data:
``ops/signatures.json``, generated from the MIL op reference by ``tools/gen_op_signatures.py``.
The class adds what data cannot say: ``infer()`` (output types), ``evaluate()`` (the executable
spec) and expression defaults (``default_<name>`` methods). Constant folding, the interpreter,
the verifier and the builder all use this one definition.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..errors import EvaluationError, TypeInferenceError, UnsupportedError
from ..limits import MAX_RANK, shape_problem, size_text
from . import infer_memo
from .consteval import compile_time_value
from .types import (
    DType,
    ListType,
    StateType,
    Symbol,
    TensorType,
    TupleType,
    Type,
    fresh_symbol,
    is_static_dim,
)

if TYPE_CHECKING:
    from .core import Block, Op, Value

OPSETS: tuple[str, ...] = ("iOS15", "iOS16", "iOS17", "iOS18")
# MIL opset names as written in Function.opset of a Program proto.
OPSET_TO_MIL = {"iOS15": "CoreML5", "iOS16": "CoreML6", "iOS17": "CoreML7", "iOS18": "CoreML8"}
MIL_TO_OPSET = {v: k for k, v in OPSET_TO_MIL.items()}
# Spec version of a model whose program uses this opset.
OPSET_TO_SPEC_VERSION = {"iOS15": 6, "iOS16": 7, "iOS17": 8, "iOS18": 9}


def opset_index(opset: str) -> int:
    try:
        return OPSETS.index(opset)
    except ValueError:
        raise UnsupportedError(f"unknown opset '{opset}' (known: {', '.join(OPSETS)})") from None


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()


@dataclass(frozen=True)
class Expr:
    """A default computed from other inputs (e.g. ``[1]*num_spatial_dims``); the op supplies it."""

    text: str


@dataclass(frozen=True)
class InputSpec:
    name: str
    kind: str  # tensor | tuple | list | internal | block | any | state
    optional: bool
    const: bool
    types: tuple[str, ...] | None = None
    domain: str | None = None
    default: Any = NO_DEFAULT

    @property
    def is_value(self) -> bool:
        """Whether this parameter is bound to IR values (not a block or an internal attribute)."""
        return self.kind not in ("internal", "block")


@dataclass(frozen=True)
class Signature:
    op: str
    opset: str
    since: str  # the opset where this version of the op first appears
    defined_in: str
    inputs: dict[str, InputSpec]
    type_domains: dict[str, tuple[str, ...]]

    def value_inputs(self) -> tuple[InputSpec, ...]:
        """The parameters bound to values, in signature order (computed once: loaders and checks ask
        for them for every op)."""
        return self._value_inputs

    @cached_property
    def _value_inputs(self) -> tuple[InputSpec, ...]:
        return tuple(s for s in self.inputs.values() if s.is_value)

    @cached_property
    def const_inputs(self) -> tuple[InputSpec, ...]:
        """The value inputs that must be compile-time constants."""
        return tuple(s for s in self._value_inputs if s.const)


def _spec_from_json(rec: dict) -> InputSpec:
    default = rec.get("default", NO_DEFAULT)
    if isinstance(default, dict) and "expr" in default:
        default = Expr(default["expr"])
    return InputSpec(
        name=rec["name"],
        kind=rec["kind"],
        optional=rec["optional"],
        const=rec["const"],
        types=tuple(rec["types"]) if "types" in rec else None,
        domain=rec.get("domain"),
        default=default,
    )


_SIGNATURE_FILE = Path(__file__).with_name("ops") / "signatures.json"
_RAW_SIGNATURES: dict[str, list[dict]] = json.loads(_SIGNATURE_FILE.read_text())["ops"]


# ---------------------------------------------------------------------------------------------
# Argument views handed to infer() and evaluate()


class _Args:
    """Common access to an op's parameters, with defaults from the signature."""

    def __init__(self, opdef: OpDef, op: Op) -> None:
        self.opdef = opdef
        self._op = op
        self.opset = opdef.opset

    @property
    def op(self) -> Op:
        return self._op

    def has(self, name: str) -> bool:
        return name in self._op.inputs

    def fail(self, message: str) -> TypeInferenceError:
        """Build (for ``raise``) an error naming the op."""
        return TypeInferenceError(message, **self._op.location())

    def type(self, name: str) -> Type | None:
        arg = self._op.inputs.get(name)
        if arg is None:
            return None
        if isinstance(arg, tuple):
            return TupleType(tuple(v.type for v in arg))
        return arg.type

    def tensor_type(self, name: str) -> TensorType:
        t = self.type(name)
        if not isinstance(t, TensorType):
            raise self.fail(f"input '{name}' must be a tensor, got {t}")
        return t

    def types(self, name: str) -> tuple[Type, ...]:
        arg = self._op.inputs.get(name, ())
        return tuple(v.type for v in (arg if isinstance(arg, tuple) else (arg,)))

    def rank(self, name: str) -> int | None:
        t = self.type(name)
        return t.rank if isinstance(t, TensorType) else None

    def _default(self, name: str) -> Any:
        spec = self.opdef.signature.inputs.get(name)
        if spec is None:
            raise KeyError(f"op '{self._op.type}' has no parameter '{name}'")
        d = spec.default
        if isinstance(d, Expr):
            hook = getattr(self.opdef, f"default_{name}", None)
            if hook is None:
                raise NotImplementedError(f"{self._op.type}: no default_{name}() for {d.text}")
            return hook(self)
        if d is NO_DEFAULT:
            return None
        return d


class InferArgs(_Args):
    """Parameters at type-inference time: types always, values only for constants."""

    def value(self, name: str) -> Any:
        """Compile-time value of a parameter (or its default); None if not known. Known: a
        constant, or a short chain of pure ops over constants and static shapes
        (`consteval.compile_time_value`: ``split(split_sizes=tile(c, reps))``)."""
        arg = self._op.inputs.get(name)
        if arg is None:
            return self._default(name)
        if isinstance(arg, tuple):
            vals = [compile_time_value(v) for v in arg]
            return None if any(x is None for x in vals) else tuple(vals)
        return compile_time_value(arg)

    def new_symbol(self) -> Symbol:
        return fresh_symbol()


def param(op: Op, key: str) -> Any:
    """The compile-time value of ``op``'s input ``key``, or its default (None when neither is
    known): how lowerings and rewrites read an op's parameters."""
    return InferArgs(op.opdef, op).value(key)


class _RecordingInferArgs(InferArgs):
    """InferArgs noting what inference looked at, to decide whether its result may be remembered
    (see `infer_memo`): the parameter values it read, and whether it looked anywhere else."""

    def __init__(self, opdef: OpDef, op: Op) -> None:
        super().__init__(opdef, op)
        self.reads: list[tuple[str, Any]] = []
        self.memo_safe = True

    @property
    def op(self) -> Op:
        self.memo_safe = False  # attributes, blocks, outputs: not part of the memo key
        return self._op

    def value(self, name: str) -> Any:
        v = super().value(name)
        if self.memo_safe:
            fp = infer_memo.fingerprint(v)
            if fp is infer_memo.UNUSABLE:
                self.memo_safe = False
            else:
                self.reads.append((name, fp))
        return v

    def new_symbol(self) -> Symbol:
        self.memo_safe = False
        return fresh_symbol()


class EvalArgs(_Args):
    """Parameters at run time: every bound input has a concrete value."""

    def __init__(self, opdef: OpDef, op: Op, env: dict, interpreter: Any) -> None:
        super().__init__(opdef, op)
        self.env = env
        self.interpreter = interpreter

    def value(self, name: str) -> Any:
        arg = self._op.inputs.get(name)
        if arg is None:
            return self._default(name)
        if isinstance(arg, tuple):
            return tuple(self.env[v] for v in arg)
        return self.env[arg]

    __getitem__ = value

    @property
    def out_types(self) -> list[Type]:
        return [v.type for v in self._op.outputs]

    def run_block(self, block: Block, inputs: Sequence[Any]) -> list[Any]:
        return self.interpreter.run_block(block, inputs, self.env)

    def check_intermediate(self, shape: Sequence[int], itemsize: int = 4) -> None:
        """For kernels that allocate more than their declared outputs (a padded copy, a transposed
        convolution's uncropped result): the run's bound on one tensor applies to that too (a
        crafted stride of 10^6 with a small cropped output asked for 27 GiB)."""
        limit = getattr(self.interpreter, "max_tensor_bytes", None)
        nbytes = math.prod(int(d) for d in shape) * itemsize
        if limit is not None and nbytes > limit:
            raise EvaluationError(f"an intermediate result of shape {[int(d) for d in shape]} would take "
                                  f"{size_text(nbytes)}, more than the interpreter's limit of {size_text(limit)} "
                                  "per tensor (max_tensor_bytes)")

    def rng(self, seed: int | None) -> np.random.Generator:
        return self.interpreter.rng(self._op, seed)


# ---------------------------------------------------------------------------------------------
# OpDef base and registry


class OpDef:
    """Base class. Subclasses set ``op_type`` and implement ``infer`` and ``evaluate``.

    Class attributes:
      op_type   the MIL op name
      traits    subset of {"pure", "elementwise", "commutative", "constexpr", "control_flow",
                "random", "stateful"}
      ir_only   True for ops the IR adds beyond MIL (their signature is given by ``inputs``)
    """

    op_type: ClassVar[str] = ""
    traits: ClassVar[frozenset] = frozenset({"pure"})
    ir_only: ClassVar[bool] = False
    # For ir_only ops: the input specs (the same for every opset).
    ir_inputs: ClassVar[Sequence[InputSpec]] = ()
    ir_since: ClassVar[str] = "iOS15"

    def __init__(self, signature: Signature) -> None:
        self.signature = signature
        self.opset = signature.opset

    def __repr__(self) -> str:
        return f"<OpDef {self.op_type}@{self.opset} (since {self.signature.since})>"

    @property
    def has_kernel(self) -> bool:
        return type(self).evaluate is not OpDef.evaluate

    def infer(self, a: InferArgs) -> list[Type]:
        raise NotImplementedError(f"{self.op_type}: infer() not implemented")

    def evaluate(self, a: EvalArgs) -> list[Any]:
        raise NotImplementedError(f"{self.op_type}: evaluate() not implemented")

    # -- checking --------------------------------------------------------------------------------

    def check_inputs(self, op: Op, is_const: Callable[[Value], bool] | None = None) -> None:
        """Check names, kinds, dtypes, type domains and constness of an op's inputs."""
        sig = self.signature
        inputs = op.inputs

        def fail(message: str, key: str) -> TypeInferenceError:
            return TypeInferenceError(message, field=key, **op.location())  # located only when raised

        specs = sig.inputs
        for key in inputs:
            spec = specs.get(key)
            if spec is None or not spec.is_value:
                raise fail(f"unknown parameter '{key}' for {op.type} in opset {self.opset} "
                           f"(expected one of: {', '.join(s.name for s in sig.value_inputs())})", key)
        domains: dict[str, tuple[DType, str]] = {}
        for spec in sig.value_inputs():
            arg = inputs.get(spec.name)
            if arg is None:
                if not spec.optional:
                    raise fail(f"missing required parameter '{spec.name}'", spec.name)
                continue
            values = arg if isinstance(arg, tuple) else (arg,)
            if spec.kind == "tuple":
                if not isinstance(arg, tuple):
                    raise fail(f"parameter '{spec.name}' must be a tuple of values", spec.name)
            elif isinstance(arg, tuple):
                raise fail(f"parameter '{spec.name}' takes one value, got {len(arg)}", spec.name)
            for v in values:
                t = v.type
                if spec.kind == "tensor":
                    if not isinstance(t, TensorType):
                        raise fail(f"parameter '{spec.name}' must be a tensor, got {t}", spec.name)
                    if spec.types is not None and t.dtype.name not in spec.types:
                        raise fail(f"parameter '{spec.name}' has dtype {t.dtype.name}; {op.type} accepts "
                                   f"{', '.join(spec.types)} in opset {self.opset}", spec.name)
                    if spec.domain is not None:
                        seen = domains.get(spec.domain)
                        if seen is None:
                            domains[spec.domain] = (t.dtype, spec.name)
                        elif seen[0] != t.dtype:
                            raise fail(f"parameters '{seen[1]}' ({seen[0].name}) and '{spec.name}' "
                                       f"({t.dtype.name}) must have the same dtype", spec.name)
                elif spec.kind == "list" and not isinstance(t, ListType):
                    if not (spec.const and v.is_const):  # const lists (classify's classes) are list values
                        raise fail(f"parameter '{spec.name}' must be a list, got {t}", spec.name)
                elif spec.kind == "state" and not isinstance(t, StateType):
                    raise fail(f"parameter '{spec.name}' must be a state, got {t}", spec.name)
                if spec.const and is_const is not None and not is_const(v):
                    raise fail(f"parameter '{spec.name}' must be a compile-time constant, but '{v.name}' is "
                               "computed at run time", spec.name)

    def check_constness(self, op: Op, is_const: Callable[[Value], bool] | None) -> None:
        """The part of `check_inputs` that looks past types: const parameters are compile-time
        constants."""
        if is_const is None:
            return
        for spec in self.signature.const_inputs:
            arg = op.inputs.get(spec.name)
            for v in () if arg is None else arg if isinstance(arg, tuple) else (arg,):
                if not is_const(v):
                    raise TypeInferenceError(f"parameter '{spec.name}' must be a compile-time constant, but "
                                             f"'{v.name}' is computed at run time", field=spec.name, **op.location())

    def infer_op(self, op: Op, is_const: Callable[[Value], bool] | None = None) -> list[Type]:
        """Check inputs and infer output types, with errors naming the op."""
        memo_key = infer_memo.key(self, op.inputs)
        seen = memo_key is not None and infer_memo.seen(memo_key)
        if seen:  # the names and types passed check_inputs before: only constness can differ
            self.check_constness(op, is_const)
        else:
            self.check_inputs(op, is_const)
        if seen:
            for reads, remembered in infer_memo.variants(memo_key):
                probe = InferArgs(self, op)
                if all(infer_memo.fingerprint(probe.value(name)) == fp for name, fp in reads):
                    return list(remembered)
        args = _RecordingInferArgs(self, op)
        try:
            types = list(self.infer(args))
        except TypeInferenceError as e:
            e.with_location(**op.location())
            raise
        # numpy AxisError is a ValueError; OverflowError: a size or value out of a dtype's range
        except (ValueError, TypeError, IndexError, KeyError, OverflowError) as e:
            raise TypeInferenceError(f"type inference failed: {type(e).__name__}: {e}", **op.location()) from e
        for i, t in enumerate(types):
            # sizes computed from parameters (a range of 1e30 elements, tiles of tiles) stay within
            # what a tensor can be: this is where every frontend's ops get their output types
            if isinstance(t, TensorType) and t.shape is not None:
                why = _static_dims_problem(t.shape) if len(t.shape) <= MAX_RANK else \
                    f"rank {len(t.shape)} is more than the {MAX_RANK} supported"
                if why:
                    raise TypeInferenceError(f"output {i} would have shape {[str(d) for d in t.shape]}: {why}",
                                             **op.location())
        if memo_key is not None:
            infer_memo.remember(memo_key, tuple(args.reads), types if args.memo_safe else None)
        return types


@lru_cache(maxsize=4096)
def _static_dims_problem(shape: tuple) -> str | None:
    """What is wrong with the static dims of an output shape (remembered: ops share a few shapes)."""
    return shape_problem([d for d in shape if is_static_dim(d)])


_OPDEF_CLASSES: dict[str, type[OpDef]] = {}
_INSTANCES: dict[tuple[str, str], OpDef] = {}
_FIRST_OPSET: dict[str, str | None] = {}


def register(cls: type[OpDef]) -> type[OpDef]:
    """Class decorator adding an op definition to the registry."""
    name = cls.op_type
    if not name:
        raise ValueError(f"{cls.__name__} has no op_type")
    if name in _OPDEF_CLASSES:
        raise ValueError(f"op '{name}' registered twice ({_OPDEF_CLASSES[name].__name__}, {cls.__name__})")
    if not cls.ir_only and name not in _RAW_SIGNATURES:
        raise ValueError(f"op '{name}' is not a MIL op; mark it ir_only and give ir_inputs")
    _OPDEF_CLASSES[name] = cls
    _FIRST_OPSET.clear()
    return cls


def _signature(op_type: str, opset: str) -> Signature | None:
    cls = _OPDEF_CLASSES.get(op_type)
    if cls is not None and cls.ir_only:
        if opset_index(opset) < opset_index(cls.ir_since):
            return None
        return Signature(op_type, opset, cls.ir_since, "ir", {s.name: s for s in cls.ir_inputs}, {})
    versions = _RAW_SIGNATURES.get(op_type)
    if not versions:
        return None
    idx = opset_index(opset)
    chosen = None
    for v in versions:
        if opset_index(v["since"]) <= idx:
            chosen = v
    if chosen is None:
        return None
    return Signature(
        op=op_type,
        opset=opset,
        since=chosen["since"],
        defined_in=chosen["defined_in"],
        inputs={r["name"]: _spec_from_json(r) for r in chosen["inputs"]},
        type_domains={k: tuple(v) for k, v in chosen["type_domains"].items()},
    )


def _ensure_loaded() -> None:
    from . import ops  # noqa: F401  (importing the package registers every op family)


def get_opdef(op_type: str, opset: str) -> OpDef:
    """The definition of ``op_type`` as it stands in ``opset``; UnsupportedError if absent."""
    key = (op_type, opset)
    inst = _INSTANCES.get(key)
    if inst is not None:
        return inst
    _ensure_loaded()
    cls = _OPDEF_CLASSES.get(op_type)
    sig = _signature(op_type, opset)
    if sig is None:
        first = first_opset(op_type)
        if first is None:
            raise UnsupportedError(f"unknown op type '{op_type}'", op_type=op_type)
        raise UnsupportedError(f"op '{op_type}' is not available in opset {opset} (first in {first})", op_type=op_type)
    if cls is None:
        raise UnsupportedError(f"op '{op_type}' has no definition in this converter", op_type=op_type)
    inst = cls(sig)
    _INSTANCES[key] = inst
    return inst


def first_opset(op_type: str) -> str | None:
    """The first opset that has ``op_type`` (None: none has). Asked for every op when a program is
    written (its target), so remembered per op type; registering an op forgets the answers."""
    if op_type in _FIRST_OPSET:
        return _FIRST_OPSET[op_type]
    _ensure_loaded()
    found = next((opset for opset in OPSETS if _signature(op_type, opset) is not None), None)
    _FIRST_OPSET[op_type] = found
    return found


def registered_op_types() -> list[str]:
    _ensure_loaded()
    return sorted(_OPDEF_CLASSES)


def mil_op_types() -> list[str]:
    """Every op type of the MIL opsets (whether or not it has a definition here)."""
    return sorted(_RAW_SIGNATURES)


def opsets_of(op_type: str) -> list[str]:
    return [o for o in OPSETS if _signature(op_type, o) is not None]


def versions_of(op_type: str) -> list[str]:
    """Opsets in which this op's signature changed (its first one included)."""
    _ensure_loaded()
    cls = _OPDEF_CLASSES.get(op_type)
    if cls is not None and cls.ir_only:
        return [cls.ir_since]
    return [v["since"] for v in _RAW_SIGNATURES.get(op_type, [])]


def all_opdefs(opsets: Iterable[str] = OPSETS) -> list[OpDef]:
    _ensure_loaded()
    out = []
    for name in sorted(_OPDEF_CLASSES):
        for opset in opsets:
            if _signature(name, opset) is not None:
                out.append(get_opdef(name, opset))
    return out
