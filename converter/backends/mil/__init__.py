"""IR -> MIL program (Core ML ``mlProgram``), written as an ``.mlpackage`` or a bare ``.mlmodel``.

- Target opset: ``target="iOS15".."iOS18"``; by default the program's own opset raised to the
  lowest opset that has every op used (see ``default_target``).
  An op (or a parameter of it) the target lacks is an UnsupportedError listing every offender.
- Constants of >= 10 elements whose dtype a blob can hold go to ``weights/weight.bin`` (64-byte
  aligned, identical blobs stored once); the rest are immediate values.
- List constants (``classify``'s ``classes``) are written inline, as the value of the binding that
  uses them, as coremltools does: Core ML programs have no list-typed ``const`` ops. Everything else
  a binding refers to is a named value. ``_const_symbolic`` (coremltools' internal constant) is
  written as ``const``.
- ``coreml_update_state`` (IR op) is written as Core ML writes a state update: ``write_state``
  (named ``<op>_write_state``), then ``read_state`` of the same state (named ``<op>``, producing
  the op's output) when that output is used.
- Names become valid MIL identifiers, unique per function; the IR itself is not modified.
- The model description comes from the functions' signatures; features a frontend recorded
  (images, classifier outputs, flexible shapes, doc strings) are written back unchanged when they
  still fit the function's types.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf.message import Message

from ...errors import ConversionWarning, ConverterError, FormatError, UnsupportedError
from ...formats.blob import BlobWriter
from ...formats.milproto import CodecError, string_to_proto, type_to_proto, value_to_proto, value_type
from ...formats.model_file import write_mlmodel
from ...formats.package import WEIGHT_FILE_REF, write_package
from ...formats.proto import MIL_pb2, Model_pb2
from ...gcpause import paused_gc
from ...ir.core import IR_ONLY_ATTRIBUTES, Block, Function, Op, Program, Value
from ...ir.interpreter import Interpreter
from ...ir.opdef import OPSET_TO_MIL, OPSET_TO_SPEC_VERSION, OPSETS, first_opset, get_opdef, opset_index
from ...ir.types import ListType, StateType, TensorType
from ...ir.verify import is_compile_time_const
from ...limits import MAX_NESTING
from ...passes.retarget import Causes, retarget
from ...passes.retarget.causes import without_value_names
from ..features import describe_feature, recorded_metadata

BLOB_MIN_ELEMENTS = 10
# IR-only ops this backend writes as MIL ops (see the module docstring).
_LOWERED_IR_OPS = {"coreml_update_state"}
_BLOB_DTYPES = {"fp16", "fp32", "uint8", "int8"}
_BLOB_DTYPES_IOS18 = _BLOB_DTYPES | {"uint16", "int16", "int32", "uint32", "int4", "uint1", "uint2", "uint3",
                                     "uint4", "uint6"}


# ---------------------------------------------------------------------------------------------
# Target selection


# The lowest opset whose model description can carry a function input/output of this dtype.
_IO_DTYPE_OPSET = {"fp16": "iOS16", "int8": "iOS18"}


def _op_min_opset(op: Op, is_const: Callable[[Value], bool]) -> tuple[int, bool]:
    """Index of the lowest opset whose version of ``op`` accepts its current inputs, and whether one
    does (False: no opset defines the op, index 0; or none accepts these inputs, the last index)."""
    first = first_opset(op.type)
    if first is None:
        return 0, False
    for i in range(opset_index(first), len(OPSETS)):
        try:
            get_opdef(op.type, OPSETS[i]).check_inputs(op, is_const)
            return i, True
        except ConverterError:
            continue
    return len(OPSETS) - 1, False


def default_target(prog: Program) -> str:
    """The program's own opset (a loaded model keeps its deployment target), raised to the lowest
    opset that can express every op and feature it uses. Frontends that build programs from
    scratch (NeuralNetwork migration, the builder) start at iOS15, so for them this is exactly the
    lowest opset that has every op used."""
    return _default_target_and_checked(prog)[0]


def _default_target_and_checked(prog: Program) -> tuple[str, frozenset[Op]]:
    """`default_target`, and the ops whose inputs that search already checked at it (the target
    check need not check them again: a program is not modified between the two)."""
    own = max(opset_index(fn.opset) for fn in prog.functions.values())
    lowest = _min_opsets(prog)
    need = max([own, *(i for i, _ in lowest.values()), *(idx for idx, _ in _interface_needs(prog))])
    return OPSETS[need], frozenset(op for op, (i, passed) in lowest.items() if passed and i == need)


def _interface_needs(prog: Program) -> list[tuple[int, str]]:
    """(opset index, what) for each function input/output or program feature that needs an opset:
    fp16 / int8 features, states, several functions."""
    needs = []
    for fn in prog.functions.values():
        for kind, values in (("input", fn.inputs), ("output", fn.outputs)):
            for v in values:
                if isinstance(v.type, StateType):
                    needs.append((opset_index("iOS18"), f"state '{v.name}' of function '{fn.name}'"))
                    continue
                t = v.type
                if isinstance(t, TensorType) and t.dtype.name in _IO_DTYPE_OPSET:
                    needs.append((opset_index(_IO_DTYPE_OPSET[t.dtype.name]),
                                  f"{t.dtype.name} {kind} '{v.name}' of function '{fn.name}'"))
    if len(prog.functions) > 1:
        needs.append((opset_index("iOS18"), f"{len(prog.functions)} functions"))
    return needs


def _min_opsets(prog: Program) -> dict[Op, tuple[int, bool]]:
    """{op: `_op_min_opset` of it}."""
    memo: dict[Value, bool] = {}
    return {op: _op_min_opset(op, lambda v: is_compile_time_const(v, memo))
            for fn in prog.functions.values() for op in fn.walk()}


def required_opset(prog: Program) -> str:
    """The lowest opset in which every op of the program, and its inputs/outputs, can be written."""
    lowest = (i for i, _ in _min_opsets(prog).values())
    return OPSETS[max([0, *lowest, *(idx for idx, _ in _interface_needs(prog))])]


def _is_constexpr(op: Op | None) -> bool:
    return op is not None and op.opdef is not None and "constexpr" in op.opdef.traits


def _writable_constexpr(op: Op, target: str, is_const: Callable[[Value], bool]) -> bool:
    """Whether the target has a form for this constexpr op as it stands: its type, a signature its
    inputs fit, and (before iOS18) only plain constants as inputs."""
    try:
        get_opdef(op.type, target).check_inputs(op, is_const)
    except ConverterError:
        return False
    chains = opset_index(target) >= opset_index("iOS18")
    return chains or all(v.is_const for v in op.input_values())


def decompressed_for(prog: Program, target: str) -> set[Op]:
    """Weight-decompression (constexpr_*) ops the target has no form for (the re-targeting pass
    says so in a note): they are written as the constants they compute (the weights lose their
    compression, the only faithful option for that target). Only the outermost such op of a chain
    of constexpr ops is listed; the ones it reads are evaluated with it."""
    memo: dict[Value, bool] = {}
    out = set()
    for op in prog.walk():
        if not _is_constexpr(op) or not all(is_compile_time_const(v, memo) for v in op.input_values()):
            continue
        if _writable_constexpr(op, target, lambda v: is_compile_time_const(v, memo)):
            continue
        uses = [u for v in op.outputs for u in v.uses]
        if not uses or any(not (isinstance(u.user, Op) and _is_constexpr(u.user)) for u in uses):
            out.add(op)
    return out


def check_target(prog: Program, target: str, decompressed: set[Op] | None = None,
                 problems: Causes | None = None, refused: set[Op] | None = None,
                 checked: frozenset[Op] = frozenset()) -> None:
    """Raise one UnsupportedError listing each distinct reason the target cannot express the program
    (ops or parameters it lacks, with a count and a few op names; function inputs/outputs such as
    fp16, int8 or states a model of that target cannot have), together with ``problems`` already
    found by re-targeting (about the ``refused`` ops, not checked again). ``checked``: ops whose
    inputs were already checked against the target's version of them (`_default_target_and_checked`)."""
    opset_index(target)
    memo: dict[Value, bool] = {}
    causes = Causes()
    if problems is not None:
        causes.extend(problems)
    if decompressed is None:
        decompressed = decompressed_for(prog, target)
    evaluated = _evaluated_with(decompressed)
    for fn in prog.functions.values():
        for op in fn.walk():
            if op in decompressed or op in evaluated or (refused is not None and op in refused) or op in checked:
                continue
            if op.opdef is not None and op.opdef.ir_only and op.type not in _LOWERED_IR_OPS:
                causes.add(f"{op.type} is an IR op with no MIL form", op.name)
                continue
            try:
                opdef = get_opdef(op.type, target)
            except UnsupportedError as e:
                causes.add(e.message, op.name)
                continue
            try:
                opdef.check_inputs(op, lambda v: is_compile_time_const(v, memo))
            except ConverterError as e:
                causes.add(f"{op.type}: {without_value_names(e.message, op)}", op.name)
    what: list[str] = []
    for idx, need in _interface_needs(prog):
        if idx > opset_index(target):
            what.append(f"{need} needs {OPSETS[idx]}")
    for fn in prog.functions.values():
        for v in fn.inputs:
            if isinstance(v.type, TensorType) and v.type.shape == ():
                what.append(f"function '{fn.name}' input '{v.name}' is a scalar: Core ML model inputs have "
                            f"rank >= 1 (give it shape [1])")
    if causes or what:
        lines = what + causes.lines()
        raise UnsupportedError(f"cannot target {target}: " + "; ".join(lines))


def _evaluated_with(decompressed: set[Op]) -> set[Op]:
    """Ops (constants and constexpr ops) read only by decompressed ops or by ops in this set: they
    are evaluated with the decompressed op that reads them and not written themselves."""
    out: set[Op] = set()
    work = [v.producer for op in decompressed for v in op.input_values() if v.producer is not None]
    while work:
        op = work.pop()
        if op in out or op in decompressed or not (op.type == "const" or _is_constexpr(op)):
            continue
        if all(isinstance(u.user, Op) and (u.user in decompressed or u.user in out)
               for v in op.outputs for u in v.uses):
            out.add(op)
            work.extend(v.producer for v in op.input_values() if v.producer is not None)
    return out


# ---------------------------------------------------------------------------------------------
# Naming


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_@]*")
_IDENTIFIER_START = re.compile(r"[A-Za-z_]")
_NOT_IDENTIFIER_CHAR = re.compile(r"[^A-Za-z0-9_@]")


class _Names:
    """Valid MIL identifiers, unique within their scope; the IR is left untouched.

    Sibling blocks (a cond's two branches, a loop's cond and body) are separate scopes and may
    reuse each other's names, as coremltools' own programs do; names defined after an op never
    reuse a name from inside its blocks. Scopes are chained (a child sees its parent's names
    without copying them); ``absorb`` adds a finished child's names to its parent.
    """

    def __init__(self, parent: _Names | None = None) -> None:
        self.parent = parent
        self.taken: set[str] = set()
        self.of: dict[Value, str] = parent.of if parent is not None else {}
        self.next_suffix: dict[str, int] = parent.next_suffix if parent is not None else {}

    def child(self) -> _Names:
        return _Names(self)

    def absorb(self, child: _Names) -> None:
        self.taken |= child.taken

    def is_taken(self, name: str) -> bool:
        scope: _Names | None = self
        while scope is not None:
            if name in scope.taken:
                return True
            scope = scope.parent
        return False

    @staticmethod
    def sanitize(name: str) -> str:
        if name and _IDENTIFIER.fullmatch(name):
            return name  # already one (nearly every name)
        s = _NOT_IDENTIFIER_CHAR.sub("_", name or "v")
        if not _IDENTIFIER_START.match(s):
            s = "_" + s
        return s

    def claim(self, base: str) -> str:
        base = self.sanitize(base)
        name = base
        if self.is_taken(name):
            n = self.next_suffix.get(base, 1)
            while self.is_taken(f"{base}_{n}"):
                n += 1
            self.next_suffix[base] = n + 1
            name = f"{base}_{n}"
        self.taken.add(name)
        return name

    def define(self, v: Value) -> str:
        got = self.of.get(v)
        if got is None:
            got = self.of[v] = self.claim(v.name)
        return got

    def __getitem__(self, v: Value) -> str:
        return self.of[v]


# ---------------------------------------------------------------------------------------------
# Program emission


@dataclass
class _Emitter:
    target: str
    store_blob: Callable[[np.ndarray, TensorType], tuple[str, int] | None] | None
    # per function: the MIL names of its inputs and outputs, for the model description
    signatures: dict[str, tuple[list[str], list[str]]] = field(default_factory=dict)
    # constexpr ops written as the constants they produce, and the constants only they read
    decompress: set[Op] = field(default_factory=set)
    skipped: set[Op] = field(default_factory=set)
    interpreter: Interpreter | None = None

    def program(self, prog: Program) -> MIL_pb2.Program:
        self.skipped = _evaluated_with(self.decompress)
        if opset_index(self.target) < opset_index("iOS18"):
            self.skipped |= _inlined_constexpr_params(prog, self.decompress)
        self.interpreter = Interpreter(prog)
        out = MIL_pb2.Program(version=1, docString=prog.doc_string)
        for k, v in prog.attributes.items():
            self.attribute(out.attributes[k], v, f"program attribute '{k}'")
        for name, fn in prog.functions.items():
            self.function(fn, out.functions[name])
        return out

    def attribute(self, out: MIL_pb2.Value, val: Any, what: str) -> None:
        if isinstance(val, str):
            if string_to_proto(val, out):
                return
            val = np.array(val)
        try:
            value_to_proto(val, value_type(val), out)
        except (CodecError, TypeError) as e:
            raise UnsupportedError(f"{what} cannot be written: {e}") from None

    def function(self, fn: Function, out: MIL_pb2.Function) -> None:
        names = _Names()
        mil_opset = OPSET_TO_MIL[self.target]
        out.opset = mil_opset
        for v in fn.inputs:
            nvt = out.inputs.add()
            nvt.name = names.define(v)
            type_to_proto(v.type, nvt.type)
        for k, v in fn.attributes.items():
            self.attribute(out.attributes[k], v, f"function '{fn.name}' attribute '{k}'")
        bout = out.block_specializations[mil_opset]
        self.block(fn.block, bout, names, fn)
        self.signatures[fn.name] = ([names[v] for v in fn.inputs], list(bout.outputs))

    def block(self, block: Block, out: MIL_pb2.Block, names: _Names, fn: Function) -> None:
        for v in block.inputs:
            if v.owner is block and block.function is None:
                nvt = out.inputs.add()
                nvt.name = names.define(v)
                type_to_proto(v.type, nvt.type)
        for k, v in block.attributes.items():
            self.attribute(out.attributes[k], v, f"block attribute '{k}'")
        for op in block.ops:
            if op in self.skipped:
                continue
            if op in self.decompress:
                self.decompressed(op, out, names, fn)
            elif op.type == "coreml_update_state":
                self.update_state(op, out, names, fn)
            elif not _inlined_const(op):
                self.operation(op, out.operations.add(), names, fn)
        emitted: set[str] = set()
        for v in block.outputs:
            name = names[v]
            if block.function is not None and (v.is_block_input or name in emitted):
                # A function output must be produced by an op and named once: copy it.
                name = self.identity(out, v, names)
            emitted.add(name)
            out.outputs.append(name)

    def decompressed(self, op: Op, out: MIL_pb2.Block, names: _Names, fn: Function) -> None:
        """Write a constexpr op as const ops holding its results (the constexpr ops it reads are
        evaluated with it)."""
        env: dict[Value, Any] = {}
        self._evaluate(op, env)
        for v in op.outputs:
            const = out.operations.add()
            const.type = "const"
            nvt = const.outputs.add()
            nvt.name = names.define(v)
            type_to_proto(v.type, nvt.type)
            self.attribute(const.attributes["name"], nvt.name, "op name")
            try:
                value_to_proto(env[v], v.type, const.attributes["val"], self.store_blob)
            except CodecError as e:
                raise UnsupportedError(f"decompressed weights cannot be written: {e}", function=fn.name,
                                       op=op.name, op_type=op.type) from None

    def _evaluate(self, op: Op, env: dict[Value, Any]) -> None:
        """Run ``op`` (and, first, the constexpr ops it reads) with the interpreter into ``env``."""
        assert self.interpreter is not None
        for v in op.input_values():
            if v in env:
                continue
            if v.producer is not None and v.producer.type == "const":
                env[v] = v.producer.attributes["val"]
            elif v.producer is not None:
                self._evaluate(v.producer, env)
        self.interpreter.run_op(op, env)

    def identity(self, out: MIL_pb2.Block, v: Value, names: _Names) -> str:
        name = names.claim(f"{v.name}_out")
        op = out.operations.add()
        op.type = "identity"
        op.inputs["x"].arguments.add().name = names[v]
        nvt = op.outputs.add()
        nvt.name = name
        type_to_proto(v.type, nvt.type)
        self.attribute(op.attributes["name"], name, "op name")
        return name

    def constexpr_attribute(self, op: Op, key: str, out: MIL_pb2.Operation, where: dict[str, Any]) -> None:
        """Before iOS18, a constexpr op's parameters are attributes holding their values, not input
        bindings (as coremltools writes them, and as the iOS18 constexpr_cast's documentation says
        the iOS16 one takes them). Its inputs are plain constants (else it is decompressed)."""
        v = op.inputs[key]
        assert isinstance(v, Value) and v.producer is not None and v.producer.type == "const"
        try:
            value_to_proto(v.producer.attributes["val"], v.type, out.attributes[key], self.store_blob)
        except CodecError as e:
            raise UnsupportedError(f"constant '{v.name}' cannot be written: {e}", field=key, **where) from None

    def update_state(self, op: Op, out: MIL_pb2.Block, names: _Names, fn: Function) -> None:
        state, value = op.inputs["state"], op.inputs["value"]
        assert isinstance(state, Value) and isinstance(value, Value)
        write = out.operations.add()
        write.type = "write_state"
        write.inputs["input"].arguments.add().name = names[state]
        write.inputs["data"].arguments.add().name = names[value]
        self.attribute(write.attributes["name"], names.sanitize(op.name) + "_write_state", "op name")
        result = op.outputs[0]
        if not result.uses:
            return
        read = out.operations.add()
        read.type = "read_state"
        read.inputs["input"].arguments.add().name = names[state]
        nvt = read.outputs.add()
        nvt.name = names.define(result)
        type_to_proto(result.type, nvt.type)
        self.attribute(read.attributes["name"], nvt.name if op.name == result.name else names.sanitize(op.name),
                       "op name")

    def operation(self, op: Op, out: MIL_pb2.Operation, names: _Names, fn: Function) -> None:
        out.type = "const" if op.type == "_const_symbolic" else op.type
        where = {"function": fn.name, "op": op.name, "op_type": op.type}
        as_attributes = _is_constexpr(op) and opset_index(self.target) < opset_index("iOS18")
        for key, arg in op.inputs.items():
            if as_attributes:
                self.constexpr_attribute(op, key, out, where)
                continue
            binding_list = out.inputs[key]
            for v in arg if isinstance(arg, tuple) else (arg,):
                binding = binding_list.arguments.add()
                if v.producer is not None and _inlined_const(v.producer):
                    try:
                        value_to_proto(v.producer.attributes["val"], v.type, binding.value)
                    except CodecError as e:
                        raise UnsupportedError(f"constant '{v.name}' cannot be written: {e}", field=key,
                                               **where) from None
                else:
                    binding.name = names[v]
        inner = []
        for nested in op.blocks:
            scope = names.child()
            self.block(nested, out.blocks.add(), scope, fn)
            inner.append(scope)
        for scope in inner:
            names.absorb(scope)
        for v in op.outputs:
            nvt = out.outputs.add()
            nvt.name = names.define(v)
            try:
                type_to_proto(v.type, nvt.type)
            except CodecError as e:
                raise UnsupportedError(str(e), **where) from None
        op_name = names.sanitize(op.name)
        if op.outputs and op.name == op.outputs[0].name:
            op_name = names[op.outputs[0]]
        self.attribute(out.attributes["name"], op_name, "op name")
        for k, val in op.attributes.items():
            if k in IR_ONLY_ATTRIBUTES:
                continue
            if k == "val" and op.type in ("const", "_const_symbolic"):
                t = op.outputs[0].type
                try:
                    value_to_proto(val, t, out.attributes["val"], self.store_blob)
                except CodecError as e:
                    raise UnsupportedError(f"constant cannot be written: {e}", **where) from None
                continue
            self.attribute(out.attributes[k], val, f"attribute '{k}'")


def _inlined_const(op: Op) -> bool:
    """A list constant used only by op inputs: written inline in each binding, not as an op (an
    unused one is not written at all)."""
    return (op.type == "const" and isinstance(op.outputs[0].type, ListType)
            and all(isinstance(u.user, Op) for u in op.outputs[0].uses))


def _inlined_constexpr_params(prog: Program, decompressed: set[Op]) -> set[Op]:
    """Const ops read only by constexpr ops that are written with attributes (before iOS18): their
    values are written in those attributes, so the ops themselves are not (as coremltools does)."""
    out = set()
    for op in prog.walk():
        if op.type != "const":
            continue
        users = [u.user for u in op.outputs[0].uses]
        if users and all(isinstance(u, Op) and _is_constexpr(u) and u not in decompressed for u in users):
            out.add(op)
    return out


def _blob_policy(target: str, writer_write: Callable[[np.ndarray, str], int]):
    allowed = _BLOB_DTYPES_IOS18 if opset_index(target) >= opset_index("iOS18") else _BLOB_DTYPES

    def store(arr: np.ndarray, t: TensorType) -> tuple[str, int] | None:
        if arr.size < BLOB_MIN_ELEMENTS or t.dtype.name not in allowed:
            return None
        return WEIGHT_FILE_REF, writer_write(arr, t.dtype.name)

    return store


# ---------------------------------------------------------------------------------------------
# Model description


def _describe(prog: Program, model: Model_pb2.Model, signatures: dict[str, tuple[list[str], list[str]]]) -> int:
    d = model.description
    recorded_metadata(prog, d)
    need = 1

    def fill(fn: Function, target: Any) -> None:
        nonlocal need
        in_names, out_names = signatures[fn.name]
        for v, name in zip(fn.inputs, in_names):
            kind = "state" if isinstance(v.type, StateType) else "input"
            info = (fn.state_info if kind == "state" else fn.input_info).get(v.name)
            need = max(need, describe_feature(info, name, v.type, getattr(target, kind).add()))
        for v, name in zip(fn.outputs, out_names):
            info = fn.output_info.get(name) or fn.output_info.get(v.name)
            need = max(need, describe_feature(info, name, v.type, target.output.add()))

    main = prog.main
    fill(main, d)
    if len(prog.functions) > 1:
        need = max(need, 9)
        d.defaultFunctionName = prog.default_function
        for name, fn in prog.functions.items():
            fd = d.functions.add()
            fd.name = name
            fill(fn, fd)
    return need


def program_to_model(prog: Program, *, target: str | None = None,
                     store_blob: Callable[[np.ndarray, TensorType], tuple[str, int] | None] | None = None,
                     checked: frozenset[Op] = frozenset()) -> Model_pb2.Model:
    """The Model proto of an mlProgram for ``prog`` (blobs go through ``store_blob``). ``checked``:
    ops of ``prog`` already checked at ``target`` (see `check_target`)."""
    if target is None:
        target, checked = _default_target_and_checked(prog)
    retargeted, problems, refused = retarget(prog, target)
    if retargeted is not prog:  # a clone: its ops were never checked
        prog, checked = retargeted, frozenset()
    decompress = decompressed_for(prog, target)
    check_target(prog, target, decompress, problems, refused, checked)
    model = Model_pb2.Model()
    emitter = _Emitter(target, store_blob, decompress=decompress)
    model.mlProgram.CopyFrom(emitter.program(prog))
    need = _describe(prog, model, emitter.signatures)
    model.specificationVersion = max(OPSET_TO_SPEC_VERSION[target], need)
    model.isUpdatable = False
    if any(op.blocks for op in prog.walk()):
        _check_nesting(model)
    _warn_renamed_features(prog, emitter.signatures)
    return model


def _message_depth(msg: Message, depth: int = 1) -> int:
    """How deep messages nest in ``msg`` (``msg`` itself is depth 1; map entries count, as on the wire)."""
    deepest = depth
    for fd, value in msg.ListFields():
        if fd.type != fd.TYPE_MESSAGE:
            continue
        if fd.message_type.GetOptions().map_entry:
            vf = fd.message_type.fields_by_name["value"]
            children = list(value.values()) if vf.type == vf.TYPE_MESSAGE else []
            deepest = max(deepest, depth + 1, *(_message_depth(c, depth + 2) for c in children))
        elif fd.is_repeated:
            deepest = max(deepest, *(_message_depth(c, depth + 1) for c in value))
        else:
            deepest = max(deepest, _message_depth(value, depth + 1))
        if deepest > MAX_NESTING:
            break
    return deepest


def _check_nesting(model: Model_pb2.Model) -> None:
    """Nested blocks (cond in while_loop in cond ...) nest protobuf messages; protobuf's parsers,
    Core ML's and ours, refuse more than MAX_NESTING levels, so such a file could never be read."""
    depth = _message_depth(model)
    if depth > MAX_NESTING:
        raise UnsupportedError(
            f"blocks (cond, while_loop) are nested too deeply: the model's messages would nest more than "
            f"{MAX_NESTING} levels, which protobuf readers (Core ML's too) refuse; about 40 nested blocks fit")


def _warn_renamed_features(prog: Program, signatures: dict[str, tuple[list[str], list[str]]]) -> None:
    """A feature whose name is not a MIL identifier (or is taken twice) is written under another name;
    apps that use the model must use the new name, so say so."""
    for name, fn in prog.functions.items():
        ins, outs = signatures[name]
        for kind, values, written in (("input", fn.inputs, ins), ("output", fn.outputs, outs)):
            for v, new in zip(values, written):
                if v.name != new:
                    warnings.warn(ConversionWarning(
                        f"function '{name}' {kind} '{v.name}' is written as '{new}' (MIL names must be unique "
                        f"identifiers [A-Za-z_][A-Za-z0-9_@]*): apps must use the new name"), stacklevel=3)


def save_mlprogram(prog: Program, path: str | os.PathLike, *, target: str | None = None,
                   single_file: bool | None = None, durable: bool = False, overwrite: bool = True) -> Path:
    """Write ``prog`` as an ``.mlpackage`` (default) or, when asked and possible, a bare ``.mlmodel``.

    A bare ``.mlmodel`` holds every value immediately; it is chosen by ``single_file=True`` or by a
    path ending in ``.mlmodel``. Outputs are written atomically: nothing appears at ``path`` unless
    the whole model was written (built beside it, then renamed). ``durable`` also fsyncs the files
    before the rename, for safety against power loss, at the cost of waiting for the disk.
    ``overwrite=False`` never replaces anything at ``path`` (`converter.save` decides what may be
    replaced, see converter/destination.py; this only closes the gap between its check and the rename).
    """
    with paused_gc():  # writing allocates per op and frees nothing cyclic: see converter/gcpause.py
        return _save_mlprogram(prog, Path(path), target, single_file, durable, overwrite)


def _save_mlprogram(prog: Program, path: Path, target: str | None, single_file: bool | None, durable: bool,
                    overwrite: bool) -> Path:
    checked: frozenset[Op] = frozenset()
    if target is None:
        target, checked = _default_target_and_checked(prog)
    if single_file is None:
        single_file = path.suffix == ".mlmodel"
    try:
        if single_file:
            model = program_to_model(prog, target=target, store_blob=None, checked=checked)
            write_mlmodel(path, model, durable=durable, overwrite=overwrite)
            return path
        holder: dict[str, Model_pb2.Model] = {}

        def write_weights(weights_dir: Path) -> None:
            with BlobWriter(weights_dir / "weight.bin", durable=durable) as writer:
                holder["model"] = program_to_model(prog, target=target, checked=checked,
                                                   store_blob=_blob_policy(target, writer.write))

        return write_package(path, lambda: holder["model"].SerializeToString(), write_weights, durable=durable,
                             overwrite=overwrite)
    except ConverterError as e:
        e.with_location(file=str(path))
        raise
    except OSError as e:
        raise FormatError(f"cannot write: {e.strerror or e}", file=str(path)) from None


__all__ = ["check_target", "default_target", "program_to_model", "required_opset", "save_mlprogram"]
