"""MIL program (Core ML ``mlProgram``) -> IR.

Generic: every operation is looked up in the op registry by type and opset; its bindings become
IR inputs (immediate values become ``const`` ops placed right before their user), its declared
output types are kept (refined with inferred ones where the file leaves dims unknown), nested
blocks keep their own scopes. Blob values are zero-copy views into the memory-mapped weight file.

One dialect mapping: a state update is written in files as ``write_state(input, data)`` (no
outputs), usually followed by ``read_state(input)`` of the same state; the IR has one op for both,
``coreml_update_state(state, value)`` whose output is the new value (the read_state's output when
one follows, as coremltools reads it).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from ..errors import ConverterError, FormatError, TypeInferenceError, UnsupportedError
from ..formats import description as desc
from ..formats.milproto import CodecError, TypeDecoder, value_from_proto
from ..formats.model_file import ModelFile
from ..formats.proto import MIL_pb2, Model_pb2
from ..gcpause import paused_gc
from ..ir.core import Block, FeatureInfo, Function, Op, Program, Value
from ..ir.opdef import MIL_TO_OPSET, OpDef, get_opdef, opset_index
from ..ir.rng import assign_rng_keys
from ..ir.symbols import canonicalize_symbols
from ..ir.types import ListType, Symbol, TensorType, Type, fresh_symbol, is_static_dim, types_compatible
from ..ir.verify import is_compile_time_const

# The encoding of a Value's type field for a string scalar, and the immediateValue field's key.
_STRING_SCALAR_HEAD = b"\x12\x04\x0a\x02\x08" + bytes([MIL_pb2.STRING]) + b"\x1a"

# Ops whose blocks see loop-carried values as block inputs, and how many blocks they own.
_BLOCK_COUNTS = {"cond": 2, "while_loop": 2}


def opset_from_mil(name: str, *, file: str, function: str) -> str:
    opset = MIL_TO_OPSET.get(name)
    if opset is None:
        if name == "CoreML9":
            # iOS26 programs: our op registry stops at iOS18; load them against iOS18 signatures.
            return "iOS18"
        raise UnsupportedError(f"unknown opset '{name}' (known: {', '.join(sorted(MIL_TO_OPSET))}, CoreML9)",
                               file=file, function=function, field="opset")
    return opset


def _describe_value(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"a {v.dtype} tensor of shape {list(v.shape)}"
    return f"a {type(v).__name__}"


def _is_fresh(d: Any) -> bool:
    """A symbol inference made up for a size it cannot know (an expression says more than that)."""
    return isinstance(d, Symbol) and d.name.startswith("_s")


def _refine(declared: Type, inferred: Type) -> Type:
    """The declared type, with unknown dims filled in from inference where it knows more."""
    if isinstance(declared, TensorType) and isinstance(inferred, TensorType):
        if declared.shape is not None and all(type(d) is int for d in declared.shape):
            return declared  # nothing unknown (the common case)
        if declared.shape is None:
            return TensorType(declared.dtype, inferred.shape)
        if inferred.shape is None or len(inferred.shape) != len(declared.shape):
            return declared
        dims = [i if isinstance(d, Symbol) and (is_static_dim(i) or not _is_fresh(i)) else d
                for d, i in zip(declared.shape, inferred.shape)]
        return TensorType(declared.dtype, tuple(dims))
    if isinstance(declared, ListType) and isinstance(inferred, ListType):
        return ListType(_refine(declared.elem, inferred.elem), declared.length, declared.dynamic_length)
    return declared


class _Scope:
    def __init__(self, parent: _Scope | None = None) -> None:
        self.parent = parent
        self.names: dict[str, Value] = {}
        # names defined in closed nested blocks -> the op owning the block (for error messages)
        self.hidden: dict[str, str] = {}

    def why_missing(self, name: str) -> str:
        s: _Scope | None = self
        while s is not None:
            owner = s.hidden.get(name)
            if owner is not None:
                return f"which is defined inside a nested block of op '{owner}' and is not visible here"
            s = s.parent
        return "which is not defined before this use"

    def lookup(self, name: str) -> Value | None:
        s: _Scope | None = self
        while s is not None:
            v = s.names.get(name)
            if v is not None:
                return v
            s = s.parent
        return None


class _Loader:
    def __init__(self, mf: ModelFile) -> None:
        self.mf = mf
        self.file = str(mf.model_path)
        self.const_memo: dict[Value, bool] = {}
        self.types = TypeDecoder(self.new_symbol)
        self.is_const = partial(is_compile_time_const, _memo=self.const_memo)  # not a lambda: no cycle via self

    # -- helpers ---------------------------------------------------------------------------------

    def new_symbol(self) -> Symbol:
        return fresh_symbol("_u")

    def decode_type(self, vt: MIL_pb2.ValueType, **where: Any) -> Type:
        try:
            return self.types(vt)
        except CodecError as e:
            raise FormatError(str(e), file=self.file, **where) from None

    def decode_value(self, v: MIL_pb2.Value, **where: Any) -> tuple[Any, Type]:
        try:
            return value_from_proto(v, self.mf.load_blob, self.new_symbol, self.types)
        except CodecError as e:
            raise FormatError(str(e), file=self.file, **where) from None
        except ConverterError as e:
            if e.file is not None and e.file != self.file:  # a weight file's error: its field is the file's
                where = {k: w for k, w in where.items() if k != "field"}
            raise e.with_location(file=self.file, **where) from None

    # -- program ---------------------------------------------------------------------------------

    def program(self) -> Program:
        model = self.mf.model
        spec = model.mlProgram
        if spec.version != 1:
            raise FormatError(f"MIL program version {spec.version} is not supported (expected 1)", file=self.file,
                              field="mlProgram.version")
        if not spec.functions:
            raise FormatError("MIL program has no functions", file=self.file, field="mlProgram.functions")
        try:
            desc.check_description(model.description)
        except desc.DescriptionError as e:
            raise FormatError(str(e), file=self.file, field="description") from None
        prog = Program()
        prog.doc_string = spec.docString
        for key, val in spec.attributes.items():
            prog.attributes[key] = self.decode_value(val, field=f"attributes.{key}")[0]
        descriptions = self.function_descriptions(model.description)
        # protobuf maps have no order: functions come in the order the description lists them
        described = [fd.name for fd in model.description.functions if fd.name in spec.functions]
        for name in dict.fromkeys([*described, *sorted(spec.functions)]):
            fn = self.function(name, spec.functions[name], descriptions.get(name))
            prog.add_function(fn)
        default = model.description.defaultFunctionName or ("main" if "main" in prog.functions else
                                                           next(iter(prog.functions)))
        if default not in prog.functions:
            raise FormatError(f"default function '{default}' is not in the program", file=self.file,
                              field="description.defaultFunctionName")
        prog.default_function = default
        prog.meta["spec_version"] = model.specificationVersion
        prog.meta["is_updatable"] = model.isUpdatable
        prog.meta["model_description"] = model.description.SerializeToString()
        prog.meta["source_format"] = "mlprogram"
        canonicalize_symbols(prog)
        for fn in prog.functions.values():
            assign_rng_keys(fn)  # random ops' streams, numbered in program order (converter.ir.rng)
        return prog

    def function_descriptions(self, d: Model_pb2.ModelDescription) -> dict[str, Any]:
        """Function name -> its FunctionDescription-like (input, output, state) feature lists."""
        out: dict[str, Any] = {fd.name: fd for fd in d.functions}
        if not d.functions:
            out["main"] = d
            if d.defaultFunctionName:
                out[d.defaultFunctionName] = d
        return out

    def function(self, name: str, fspec: MIL_pb2.Function, fdesc: Any) -> Function:
        opset = opset_from_mil(fspec.opset, file=self.file, function=name)
        if fspec.opset not in fspec.block_specializations:
            raise FormatError(f"function has no block for its opset '{fspec.opset}'", file=self.file, function=name,
                              field="block_specializations")
        fn = Function(name, opset)
        fn.attributes = {k: self.decode_value(v, function=name, field=f"attributes.{k}")[0]
                         for k, v in fspec.attributes.items()}
        fn.meta["mil_opset"] = fspec.opset
        features = {}
        if fdesc is not None:
            for kind in ("input", "output", "state"):
                for f in getattr(fdesc, kind):
                    features[(kind, f.name)] = f
        scope = _Scope()
        for nvt in fspec.inputs:
            t = self.decode_type(nvt.type, function=name, field=f"inputs.{nvt.name}")
            fd = features.get(("input", nvt.name)) or features.get(("state", nvt.name))
            if fd is not None:
                t = desc.apply_bounds(t, fd.type)
            v = fn.block.new_input(nvt.name, t)
            if nvt.name in scope.names:
                raise FormatError(f"function input '{nvt.name}' is declared twice", file=self.file, function=name)
            scope.names[nvt.name] = v
        for (kind, fname), fd in features.items():
            info = FeatureInfo(fname, fd.type.SerializeToString(), fd.shortDescription)
            {"input": fn.input_info, "output": fn.output_info, "state": fn.state_info}[kind][fname] = info
        self.block(fn, fn.block, fspec.block_specializations[fspec.opset], scope, name)
        return fn

    def block(self, fn: Function, block: Block, bspec: MIL_pb2.Block, scope: _Scope, fname: str) -> None:
        for key, val in bspec.attributes.items():
            block.attributes[key] = self.decode_value(val, function=fname, field=f"block.attributes.{key}")[0]
        ops = bspec.operations
        i = 0
        while i < len(ops):
            if ops[i].type == "write_state":
                nxt = ops[i + 1] if i + 1 < len(ops) else None
                merged = nxt is not None and _reads_state_written_by(nxt, ops[i])
                self.write_state(fn, block, ops[i], nxt if merged else None, scope, fname)
                i += 2 if merged else 1
                continue
            self.operation(fn, block, ops[i], scope, fname)
            i += 1
        outs = []
        for out_name in bspec.outputs:
            v = scope.lookup(out_name)
            if v is None:
                raise FormatError(f"block output refers to '{out_name}', {scope.why_missing(out_name)}",
                                  file=self.file, function=fname, field="block.outputs")
            outs.append(v)
        block.set_outputs(outs)

    def op_name(self, ospec: MIL_pb2.Operation, attrs: dict[str, Any], fname: str) -> str:
        """The op's name attribute (popped from ``attrs``), else its first output's name."""
        op_name = ospec.outputs[0].name if ospec.outputs else ospec.type
        if "name" in attrs:
            name_attr = attrs.pop("name")
            plain = self.plain_string(name_attr)
            if plain is not None:
                return plain
            name_val, _ = self.decode_value(name_attr, function=fname, op_type=ospec.type, field="attributes.name")
            if not (isinstance(name_val, np.ndarray) and name_val.dtype.kind in "USO" and name_val.size == 1):
                raise FormatError(f"attribute 'name' must be one string, got {_describe_value(name_val)}",
                                  file=self.file, function=fname, op=op_name, op_type=ospec.type,
                                  field="attributes.name")
            op_name = str(name_val.reshape(-1)[0])
        return op_name

    @staticmethod
    def plain_string(v: MIL_pb2.Value) -> str | None:
        """The string of a Value that is exactly an immediate string scalar holding one string of
        fewer than ~110 bytes (what nearly every name attribute is), read from the Value's encoding
        (one C call) rather than field by field; None for anything else, decoded the general way."""
        data = v.SerializeToString()
        n = len(data)
        # type {tensorType {dataType: STRING}}, immediateValue {tensor {strings {values: <n - 14 bytes>}}},
        # every length one byte and each message ending where its enclosing one ends
        if not (14 <= n < 128 and data.startswith(_STRING_SCALAR_HEAD) and data[7] == n - 8 and data[8] == 0x0A
                and data[9] == n - 10 and data[10] == 0x22 and data[11] == n - 12 and data[12] == 0x0A
                and data[13] == n - 14):
            return None
        s = data[14:].decode("utf-8", "surrogatepass")  # protobuf's parser has checked it is UTF-8
        return None if s.endswith("\x00") else s  # numpy drops trailing NULs: leave those to it

    def write_state(self, fn: Function, block: Block, ospec: MIL_pb2.Operation, read: MIL_pb2.Operation | None,
                    scope: _Scope, fname: str) -> None:
        """``write_state`` (+ the ``read_state`` that follows it) -> ``coreml_update_state``."""
        attrs = dict(ospec.attributes)
        op_name = self.op_name(ospec, attrs, fname)
        where = {"function": fname, "op": op_name, "op_type": ospec.type}
        if attrs:
            raise FormatError(f"unknown attribute(s) {', '.join(sorted(attrs))}", file=self.file,
                              field=f"attributes.{sorted(attrs)[0]}", **where)
        if ospec.outputs:
            raise FormatError(f"write_state has no outputs, the file declares {len(ospec.outputs)}",
                              file=self.file, field="outputs", **where)
        if ospec.blocks:
            raise FormatError("write_state has no nested blocks", file=self.file, field="blocks", **where)
        if opset_index(fn.opset) < opset_index("iOS18"):
            raise UnsupportedError(f"write_state is not available in opset {fn.opset} (first in iOS18)",
                                   file=self.file, field="type", **where)
        opdef = get_opdef("coreml_update_state", fn.opset)
        for key in ospec.inputs:
            if key not in ("input", "data"):
                raise TypeInferenceError(f"unknown parameter '{key}' for write_state (expected one of: input, data)",
                                         file=self.file, field=key, **where)
        bound = {}
        for key, ir_key in (("input", "state"), ("data", "value")):
            if key not in ospec.inputs:
                raise TypeInferenceError(f"missing required parameter '{key}'", file=self.file, field=key, **where)
            values = self.bind_argument(block, ospec.inputs[key], key, opdef.opset, where, scope)
            if len(values) != 1:
                raise FormatError(f"parameter '{key}' takes one value, the file binds {len(values)}",
                                  file=self.file, field=key, **where)
            bound[ir_key] = values[0]
        if read is not None:  # the pair is one IR op, named (and typed) as the read
            op_name = self.op_name(read, dict(read.attributes), fname)
            where = {"function": fname, "op": op_name, "op_type": read.type}
        elif op_name.endswith("_write_state"):
            op_name = op_name[: -len("_write_state")]
        op = Op("coreml_update_state", opdef, name=op_name)
        for key, v in bound.items():
            op.set_input(key, v)
        block.append(op)
        if read is not None:
            self.type_outputs(op, read, where)
            scope.names[op.outputs[0].name] = op.outputs[0]
            return
        # No output in the file, so nothing refers to it: give it a name no value in scope has.
        out_name, n = op_name, 0
        while scope.lookup(out_name) is not None:
            n += 1
            out_name = f"{op_name}_{n}"
        try:
            types = opdef.infer_op(op, self.is_const)
        except ConverterError as e:
            raise e.with_location(file=self.file, **where) from None
        op.create_outputs(types, [out_name])

    def operation(self, fn: Function, block: Block, ospec: MIL_pb2.Operation, scope: _Scope, fname: str) -> None:
        op_type = ospec.type
        attrs = dict(ospec.attributes)
        op_name = self.op_name(ospec, attrs, fname)
        where = {"function": fname, "op": op_name, "op_type": op_type}
        try:
            opdef = get_opdef(op_type, fn.opset)
        except UnsupportedError as e:
            raise e.with_location(file=self.file, field="type", **where) from None
        decoded_attrs: dict[str, Any] = {}
        attr_types: dict[str, Type] = {}
        params = self.attribute_params(block, ospec, opdef, attrs, op_name, where)
        for key, val in attrs.items():
            decoded_attrs[key], attr_types[key] = self.decode_value(val, field=f"attributes.{key}", **where)
        if op_type in ("const", "_const_symbolic"):
            self.const_op(block, ospec, opdef, op_name, decoded_attrs, attr_types.get("val"), scope, where)
            return
        op = Op(op_type, opdef, name=op_name, attributes=decoded_attrs)
        inputs = self.bind_inputs(block, ospec, opdef, scope, where)  # in signature order
        if params:  # constexpr parameters given as attributes take their places in that order
            inputs.update(params)
            inputs = {spec.name: inputs[spec.name] for spec in opdef.signature.value_inputs() if spec.name in inputs}
        for key, arg in inputs.items():
            op.set_input(key, arg)
        block.append(op)
        blocks = ospec.blocks
        expected_blocks = _BLOCK_COUNTS.get(op_type, 0)
        if len(blocks) != expected_blocks:
            raise FormatError(f"{op_type} needs {expected_blocks} nested blocks, has {len(blocks)}",
                              file=self.file, field="blocks", **where)
        for bspec in blocks:
            nested = Block()
            op.add_block(nested)
            inner = _Scope(scope)
            for nvt in bspec.inputs:
                t = self.decode_type(nvt.type, field=f"block input {nvt.name}", **where)
                inner.names[nvt.name] = nested.new_input(nvt.name, t)
            self.block(fn, nested, bspec, inner, fname)
            for inner_name in (*inner.names, *inner.hidden):
                scope.hidden.setdefault(inner_name, op.name)
        self.type_outputs(op, ospec, where)
        for v in op.outputs:
            scope.names[v.name] = v

    def attribute_params(self, block: Block, ospec: MIL_pb2.Operation, opdef: OpDef, attrs: dict[str, Any],
                         op_name: str, where: dict[str, Any]) -> dict[str, Value]:
        """Parameters written as attributes (popped from ``attrs``), as const values.

        Before iOS18, constexpr ops hold their parameters in attributes, not input bindings: that
        is how coremltools writes them and how the iOS16 runtime reads them.
        """
        if "constexpr" not in opdef.traits:
            return {}
        out = {}
        for key in [k for k in attrs if k in opdef.signature.inputs and opdef.signature.inputs[k].is_value]:
            if key in ospec.inputs:
                raise FormatError(f"parameter '{key}' is given both as an input and as an attribute", file=self.file,
                                  field=key, **where)
            out[key] = self.immediate_const(block, attrs.pop(key), f"{op_name}_{key}", opdef.opset, where,
                                            f"attributes.{key}")
        return out

    def const_op(self, block: Block, ospec: MIL_pb2.Operation, opdef: OpDef, op_name: str,
                 attrs: dict[str, Any], val_type: Type | None, scope: _Scope, where: dict[str, Any]) -> None:
        if "val" not in attrs or val_type is None:
            raise FormatError("const op has no 'val' attribute", file=self.file, field="attributes.val", **where)
        outputs = ospec.outputs
        if len(outputs) != 1:
            raise FormatError(f"const op has {len(outputs)} outputs", file=self.file, field="outputs", **where)
        if ospec.inputs or ospec.blocks:
            what = "inputs" if ospec.inputs else "blocks"
            raise FormatError(f"const op has {what}", file=self.file, field=what, **where)
        out = outputs[0]
        out_type = self.decode_type(out.type, field="outputs", **where)
        if not types_compatible(out_type, val_type):
            raise FormatError(f"const value of type {val_type} declared as {out_type}", file=self.file,
                              field="outputs", **where)
        op = Op(where["op_type"], opdef, name=op_name, attributes=attrs)
        out_name = out.name
        op.create_outputs([val_type], [out_name])
        block.append(op)
        scope.names[out_name] = op.outputs[0]

    def bind_inputs(self, block: Block, ospec: MIL_pb2.Operation, opdef: OpDef, scope: _Scope,
                    where: dict[str, Any]) -> dict[str, Any]:
        sig = opdef.signature
        bindings = dict(ospec.inputs)
        for key in bindings:
            spec = sig.inputs.get(key)
            if spec is None or not spec.is_value:
                raise TypeInferenceError(
                    f"unknown parameter '{key}' for {ospec.type} in opset {opdef.opset} (expected one of: "
                    f"{', '.join(s.name for s in sig.value_inputs())})", file=self.file, field=key, **where)
        out: dict[str, Any] = {}
        # bind in signature order: protobuf maps have no order, the IR text form does
        for spec in sig.value_inputs():
            key = spec.name
            arg = bindings.get(key)
            if arg is None:
                continue
            values = self.bind_argument(block, arg, key, opdef.opset, where, scope)
            if spec.kind == "tuple":
                out[key] = tuple(values)
            elif len(values) != 1:
                raise FormatError(f"parameter '{key}' takes one value, the file binds {len(values)}",
                                  file=self.file, field=key, **where)
            else:
                out[key] = values[0]
        return out

    def bind_argument(self, block: Block, arg: MIL_pb2.Argument, key: str, opset: str, where: dict[str, Any],
                      scope: _Scope) -> list[Value]:
        """The values one parameter binds: named values in scope, or immediate values (as const ops)."""
        arguments = arg.arguments
        if len(arguments) == 1:  # the common case: one value, by name
            binding = arguments[0]
            if binding.WhichOneof("binding") == "name":
                v = scope.lookup(binding.name)
                if v is not None:
                    return [v]
        values = []
        for i, binding in enumerate(arguments):
            kind = binding.WhichOneof("binding")
            if kind == "name":
                name = binding.name
                v = scope.lookup(name)
                if v is None:
                    raise FormatError(f"parameter '{key}' refers to '{name}', {scope.why_missing(name)}",
                                      file=self.file, field=key, **where)
            elif kind == "value":
                v = self.immediate_const(block, binding.value, f"{where['op']}_{key}" + (f"_{i}" if len(
                    arguments) > 1 else ""), opset, where, key)
            else:
                raise FormatError(f"parameter '{key}' has an empty binding", file=self.file, field=key, **where)
            values.append(v)
        return values

    def immediate_const(self, block: Block, vspec: MIL_pb2.Value, name: str, opset: str,
                        where: dict[str, Any], key: str) -> Value:
        val, t = self.decode_value(vspec, field=key, **where)
        op = Op("const", get_opdef("const", opset), name=name, attributes={"val": val})
        op.create_outputs([t], [name])
        block.append(op)
        return op.outputs[0]

    def type_outputs(self, op: Op, ospec: MIL_pb2.Operation, where: dict[str, Any]) -> None:
        outputs = list(ospec.outputs)
        names = [o.name for o in outputs]
        declared = []
        for o, name in zip(outputs, names):
            try:
                declared.append(self.types(o.type))
            except CodecError as e:
                raise FormatError(str(e), file=self.file, field=f"outputs.{name}", **where) from None
        try:
            inferred = op.opdef.infer_op(op, self.is_const)
        except ConverterError as e:
            raise e.with_location(file=self.file, **where) from None
        if len(inferred) != len(declared):
            raise FormatError(f"op declares {len(declared)} outputs, {op.type} produces {len(inferred)}",
                              file=self.file, field="outputs", **where)
        types = []
        for name, d, i in zip(names, declared, inferred):
            if not types_compatible(d, i):
                raise TypeInferenceError(f"output '{name}' is declared {d}, but {op.type} produces {i}",
                                         file=self.file, field="outputs", **where)
            types.append(_refine(d, i))
        op.create_outputs(types, names)


def _reads_state_written_by(read: MIL_pb2.Operation, write: MIL_pb2.Operation) -> bool:
    """Whether ``read`` is ``read_state`` of the state ``write`` (a write_state) updates."""
    if read.type != "read_state" or "input" not in read.inputs or "input" not in write.inputs:
        return False
    a, b = read.inputs["input"].arguments, write.inputs["input"].arguments
    return len(a) == len(b) == 1 and a[0].WhichOneof("binding") == b[0].WhichOneof("binding") == "name" and (
        a[0].name == b[0].name)


def load_mil_program(mf: ModelFile) -> Program:
    """The IR of an ``mlProgram`` model (see module docstring)."""
    with paused_gc(collect_first=True):
        return _Loader(mf).program()
