"""What an ONNX op mapping sees: the IR builder, the node, its operands and attributes.

The dtype policy (the ONE place it is applied)
----------------------------------------------
The IR is MIL's: tensors are fp16/fp32/int32/bool for arithmetic, with int8/uint8/int16/uint16 held
(cast accepts them) but computed in int32, and no 64-bit types. As coremltools does for torch:

- int64 and uint32/uint64 values are held as int32; fp64 (and bf16) values as fp32. Graph inputs
  and outputs of those types are declared with the held dtype; the ONNX type is kept in the
  feature's ``extra["onnx_elem_type"]`` so that a writer can restore it. (So a cast to bf16 or
  fp64 does not round: results are at least as precise as ONNX's.)
- float8 / float4 / int4 / uint4 / int2 / uint2 graph inputs and constants are held exactly in
  fp32 / int8 / uint8; a result of those types (a Cast to float8, ...) is refused, since the IR
  cannot round or saturate to them, unless the mapping clipped it to the type's range itself
  (QuantizeLinear to int4 held in int8: `Ctx.held_in_range`).
- string and complex tensors are refused.
- Compile-time constants (initializers, ``Constant``) keep their ONNX numpy array in `Ctx.arrays`
  (so shape/axes/pads parameters are read exactly, int64 included); they become IR ``const`` ops
  only when used as a tensor operand, narrowed then (int64 -> int32 after a range check: a value
  outside the int32 range is an UnsupportedError naming the tensor, never a silent wrap).
- A mapping asks for its operands in the dtypes the IR op takes (`Ctx.operand` casts up, e.g.
  uint8 -> int32); the driver then casts each result to the dtype that holds the ONNX output type
  (`Ctx.fit`), so int8 arithmetic wraps as ONNX's does and comparisons stay bool.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto

from ...errors import FormatError, UnsupportedError
from ...ir.builder import Builder
from ...ir.consteval import compile_time_value
from ...ir.core import Value
from ...ir.opdef import get_opdef
from ...limits import DEFAULT_MAX_TENSOR_BYTES, MAX_UNROLLED_OPS

#: ONNX element type -> the IR dtype holding it (None: no IR dtype can hold it).
IR_DTYPE: dict[int, str | None] = {
    TensorProto.FLOAT: "fp32", TensorProto.FLOAT16: "fp16", TensorProto.DOUBLE: "fp32",
    TensorProto.BFLOAT16: "fp32", TensorProto.INT64: "int32", TensorProto.INT32: "int32",
    TensorProto.UINT64: "int32", TensorProto.UINT32: "int32", TensorProto.INT16: "int16",
    TensorProto.UINT16: "uint16", TensorProto.INT8: "int8", TensorProto.UINT8: "uint8",
    TensorProto.BOOL: "bool", TensorProto.STRING: None, TensorProto.COMPLEX64: None,
    TensorProto.COMPLEX128: None,
}
#: Element types the IR can hold exactly in a wider dtype but cannot produce (it cannot round or
#: saturate to them): accepted for graph inputs and constants, refused as a computed result.
READ_ONLY_DTYPE: dict[int, str] = {
    TensorProto.FLOAT8E4M3FN: "fp32", TensorProto.FLOAT8E4M3FNUZ: "fp32", TensorProto.FLOAT8E5M2: "fp32",
    TensorProto.FLOAT8E5M2FNUZ: "fp32", TensorProto.INT4: "int8", TensorProto.UINT4: "uint8",
}
for _name, _held in (("FLOAT8E8M0", "fp32"), ("FLOAT4E2M1", "fp32"), ("INT2", "int8"), ("UINT2", "uint8")):
    if hasattr(TensorProto, _name):  # newer onnx releases
        READ_ONLY_DTYPE[getattr(TensorProto, _name)] = _held
FLOATS = ("fp32", "fp16")
NUMERIC = ("fp32", "fp16", "int32")
_INT32 = np.iinfo(np.int32)


def elem_type_name(elem_type: int) -> str:
    try:
        return TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return f"element type {elem_type}"


def ir_dtype(elem_type: int, what: str = "a tensor", *, read_only: bool = False) -> str:
    """The IR dtype holding ONNX ``elem_type``; UnsupportedError when none can. ``read_only``:
    also the types held in a wider dtype (graph inputs, constants; see READ_ONLY_DTYPE)."""
    dt = IR_DTYPE.get(elem_type)
    if dt is None and read_only:
        dt = READ_ONLY_DTYPE.get(elem_type)
    if dt is None:
        raise UnsupportedError(f"{what} of type {elem_type_name(elem_type)}, which Core ML programs cannot hold")
    return dt


def narrow(arr: np.ndarray, what: str) -> np.ndarray:
    """A constant array as the IR dtype holding its ONNX dtype (int64 -> int32 range-checked,
    fp64 -> fp32). Arrays already in an IR dtype are returned as they are (no copy)."""
    k = arr.dtype
    if k in (np.float32, np.float16, np.int32, np.int8, np.uint8, np.int16, np.uint16, np.bool_):
        return arr
    if k.kind in "iu":
        if arr.size and (arr.min() < _INT32.min or arr.max() > _INT32.max):
            raise UnsupportedError(f"{what} ({k}) holds values outside the int32 range, which Core ML programs "
                                   "cannot hold")
        return arr.astype(np.int32)
    if k.kind == "f":
        with np.errstate(over="ignore"):
            return arr.astype(np.float32)
    if k.kind == "V":  # ml_dtypes' bf16, float8, float4, int4, int2 (onnx's numpy_helper gives them)
        if k.name in ("int4", "int2"):
            return arr.astype(np.int8)
        if k.name in ("uint4", "uint2"):
            return arr.astype(np.uint8)
        return arr.astype(np.float32)
    raise UnsupportedError(f"{what} has numpy dtype {k}, which Core ML programs cannot hold")


@dataclass
class Node:
    """One ONNX node as a mapping sees it. ``version`` is the since_version of the op's schema at
    the model's opset (what the registry dispatches on); absent optional inputs are ''."""

    proto: onnx.NodeProto
    schema: Any  # onnx.defs.OpSchema
    version: int
    attrs: dict[str, onnx.AttributeProto]

    @property
    def op_type(self) -> str:
        return self.proto.op_type

    @property
    def name(self) -> str:
        return self.proto.name or (self.proto.output[0] if self.proto.output else self.proto.op_type)

    @property
    def inputs(self) -> list[str]:
        return list(self.proto.input)

    @property
    def outputs(self) -> list[str]:
        return list(self.proto.output)


@dataclass
class Ctx:
    """State of one graph's conversion. ``values``: ONNX name -> IR value; ``arrays``: ONNX name ->
    compile-time array in its ONNX dtype (initializers and constants, materialized lazily);
    ``elem_types``: ONNX name -> ONNX element type, where known."""

    b: Builder
    source: Any = None  # model_file.ModelSource: the model, its label and external-data folder
    file: str | None = None
    values: dict[str, Value] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    elem_types: dict[str, int] = field(default_factory=dict)
    node: Node | None = None
    #: Values a mapping has already saturated to the range of a narrow ONNX result type held in a
    #: wider dtype (int4 in int8, ...; see READ_ONLY_DTYPE): `fit` keeps them instead of refusing.
    in_range: set[Value] = field(default_factory=set)

    # -- operands --------------------------------------------------------------------------------

    def has(self, i: int) -> bool:
        """True when the node's input ``i`` is given (not absent, not the empty name)."""
        ins = self.node.proto.input
        return i < len(ins) and ins[i] != ""

    def value(self, name: str) -> Value:
        """The IR value of an ONNX value (a constant becomes a ``const`` op on first use)."""
        v = self.values.get(name)
        if v is None:
            if name not in self.arrays:
                raise self.format_error(f"'{name}' is not a graph input, an initializer or the output of an earlier "
                                        "node (ONNX nodes are in topological order)")
            v = self.b.const(narrow(self.arrays[name], f"tensor '{name}'"), name=name)
            self.values[name] = v
        return v

    def input(self, i: int, allowed: Sequence[str] | None = None) -> Value:
        """The node's input ``i`` as an IR value, cast up to a dtype in ``allowed`` when given."""
        if not self.has(i):
            raise self.format_error(f"input {i} is required")
        v = self.value(self.node.proto.input[i])
        return v if allowed is None else self.widen(v, allowed)

    def optional_input(self, i: int, allowed: Sequence[str] | None = None) -> Value | None:
        return self.input(i, allowed) if self.has(i) else None

    def const_input(self, i: int) -> np.ndarray | None:
        """Input ``i`` as a compile-time numpy array in its ONNX dtype (int64 kept), or None when it
        is absent or only known at run time."""
        if not self.has(i):
            return None
        name = self.node.proto.input[i]
        if name in self.arrays:
            return self.arrays[name]
        got = compile_time_value(self.value(name))
        return None if got is None else np.asarray(got)

    def require_const(self, i: int, what: str) -> np.ndarray:
        """Input ``i`` as a compile-time array; UnsupportedError (``details`` = {"needs_constant":
        ONNX name}) when it is only known at run time."""
        got = self.const_input(i)
        if got is None:
            e = self.unsupported(f"{what} (input {i}) must be known at conversion time")
            e.details = {"needs_constant": self.node.proto.input[i]}
            raise e
        return got

    def elem_type(self, name: str) -> int | None:
        return self.elem_types.get(name)

    def input_elem_type(self, i: int) -> int | None:
        return self.elem_types.get(self.node.proto.input[i]) if self.has(i) else None

    def rank(self, v: Value) -> int:
        if v.type.shape is None:
            raise self.unsupported(f"the rank of '{v.name}' is unknown")
        return len(v.type.shape)

    @staticmethod
    def static_shape(v: Value) -> tuple[int, ...] | None:
        """The shape of ``v`` as ints when every dim is known (else None)."""
        shape = v.type.shape
        if shape is None or not all(isinstance(d, (int, np.integer)) for d in shape):
            return None
        return tuple(int(d) for d in shape)

    def widen(self, v: Value, allowed: Sequence[str] = NUMERIC) -> Value:
        """``v`` cast to the first dtype of ``allowed`` that holds its values exactly (bool and small
        integers -> int32, then fp32; fp16 stays fp16 where allowed)."""
        dt = v.type.dtype.name
        if dt in allowed:
            return v
        order = ("int32", "fp32", "fp16") if dt in ("bool", "int8", "uint8", "int16", "uint16") else ("fp32", "fp16")
        for target in order:
            if target in allowed:
                return self.b.cast(x=v, dtype=target)
        raise self.unsupported(f"a {dt} operand where the IR op takes {', '.join(allowed)}")

    def fit(self, v: Value, elem_type: int | None) -> Value:
        """``v`` as the IR dtype holding ONNX ``elem_type`` (unchanged when unknown or already so)."""
        if elem_type is None:
            return v
        if v in self.in_range and READ_ONLY_DTYPE.get(elem_type) == v.type.dtype.name:
            return v
        want = ir_dtype(elem_type, "a value")
        if v.type.dtype.name == want:
            return v
        return self.b.cast(x=v, dtype=want)

    def op(self, ir_op: str, **inputs: Any) -> Value:
        """Append IR op ``ir_op`` and return its (first) output."""
        return self.b.add_op(ir_op, inputs).outputs[0]

    def accepts(self, ir_op: str, param: str = "x") -> tuple[str, ...]:
        """The dtypes IR op ``ir_op`` takes for ``param`` (what to `widen` an operand to)."""
        spec = get_opdef(ir_op, self.b.opset).signature.inputs[param]
        return tuple(spec.types) if spec.types else ("fp32", "fp16", "int32", "bool", "int8", "uint8", "int16",
                                                      "uint16")

    def ints(self, i: int, what: str = "") -> list[int] | None:
        """Input ``i`` as a list of Python ints when known at conversion time (None when absent)."""
        if not self.has(i):
            return None
        arr = self.require_const(i, what or f"input {i}")
        return [int(v) for v in np.asarray(arr).reshape(-1)]

    def held_in_range(self, v: Value) -> Value:
        """Mark ``v`` (already clipped to the range of the node's narrow ONNX output type, e.g.
        int4 values in an int8 tensor) as an exact result of that type."""
        self.in_range.add(v)
        return v

    def const(self, val: Any, like: Value | None = None) -> Value:
        """A constant in the dtype of ``like`` when given (Python literals: fp32 / int32)."""
        if like is not None:
            return self.b.const(np.asarray(val, dtype=like.type.dtype.storage))
        return self.b.const(val)

    # -- attributes --------------------------------------------------------------------------------

    def attr(self, name: str, default: Any = None) -> Any:
        """Attribute ``name`` as a Python value; the schema's default when absent (else ``default``)."""
        a = self.node.attrs.get(name)
        if a is None:
            schema_attr = self.node.schema.attributes.get(name) if self.node.schema is not None else None
            if schema_attr is not None and schema_attr.default_value.type != 0:
                a = schema_attr.default_value
            else:
                return default
        if a.ref_attr_name:
            raise self.unsupported(f"attribute '{name}' refers to a function attribute")
        val = onnx.helper.get_attribute_value(a)
        if isinstance(val, bytes):
            val = val.decode("utf-8", "replace")
        elif isinstance(val, list) and val and isinstance(val[0], bytes):
            val = [x.decode("utf-8", "replace") for x in val]
        return val

    def required_attr(self, name: str) -> Any:
        val = self.attr(name)
        if val is None:
            raise self.format_error(f"attribute '{name}' is required")
        return val

    # -- bounds on what a mapping makes from declared sizes -----------------------------------------

    def check_unrolled(self, count: int, what: str) -> int:
        """``count`` when a mapping may make that many ops or sequence items (one per element of
        a declared dim, say); an `UnsupportedError` past `limits.MAX_UNROLLED_OPS`: a hostile
        file declaring a dim of 2^32 must not make the converter build 2^32 ops."""
        if count > MAX_UNROLLED_OPS:
            raise self.unsupported(f"{what}: {count} would be unrolled into as many ops (at most "
                                   f"{MAX_UNROLLED_OPS}, converter.limits.MAX_UNROLLED_OPS)")
        return count

    def arange(self, n: int, what: str) -> np.ndarray:
        """``np.arange(n)`` as int32, for a constant table the size of a declared dim (positions,
        indices); an `UnsupportedError` when it would exceed the interpreter's default tensor
        limit, before anything is allocated."""
        if n * 4 > DEFAULT_MAX_TENSOR_BYTES:
            raise self.unsupported(f"{what} would be a constant of {n} elements (over the "
                                   f"{DEFAULT_MAX_TENSOR_BYTES >> 20} MiB tensor limit)")
        return np.arange(n, dtype=np.int32)

    # -- errors ------------------------------------------------------------------------------------

    def unsupported(self, message: str) -> UnsupportedError:
        n = self.node
        return UnsupportedError(message, file=self.file, op=n.name if n else None, op_type=n.op_type if n else None)

    def format_error(self, message: str) -> FormatError:
        n = self.node
        return FormatError(message, file=self.file, op=n.name if n else None, op_type=n.op_type if n else None)


def normalize_axis(ctx: Ctx, axis: int, rank: int) -> int:
    """``axis`` in [0, rank) (negative counts from the end); FormatError when out of range."""
    if not -rank <= axis < max(rank, 1):
        raise ctx.format_error(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis
