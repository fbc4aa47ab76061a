"""The state of one ONNX graph being written from one IR function.

Lowerings (converter/backends/onnx/lowering) read IR values and parameters through the emitter and
write nodes with `OnnxEmitter.node`:

- ``e.input(op, "x")``: the ONNX name holding the op's input ``x`` (a ``const`` value becomes an
  initializer on first use, named after the IR value);
- ``e.const_param(op, "axis")``: a parameter's compile-time value (numpy), or a `LoweringError`
  when it is only known at run time; ``e.param`` gives None instead;
- ``e.node("Add", [a, b])`` appends a node and returns its (fresh) output name;
  ``e.node("Add", [a, b], [e.out(op)])`` writes the op's result under its IR name;
  ``outputs=3`` gives three fresh names; attributes are keyword arguments;
- ``e.constant(array)``, ``e.scalar(1.5, like=x)``, ``e.int64s([0, 2])``: initializers (deduplicated
  by content; arrays as raw_data);
- ``e.bind(value, name)``: make an IR value an alias of an existing ONNX name (no node).

ONNX names: IR values keep their names (feature names stay exactly as they are); names the
emitter makes up never collide with any IR value name of the function. Control flow: a
lowering can make a child emitter for a subgraph with `OnnxEmitter.subgraph`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ...errors import LoweringError
from ...ir.consteval import compile_time_value
from ...ir.core import Function, Op, Value
from ...ir.types import DType, TensorType, dtype, is_static_dim
from ..params import param as _param
from ..params import required_param

#: IR dtype name -> ONNX TensorProto element type
ONNX_TYPES: dict[str, int] = {
    "fp16": TensorProto.FLOAT16, "fp32": TensorProto.FLOAT, "fp64": TensorProto.DOUBLE,
    "bf16": TensorProto.BFLOAT16, "fp8e4m3fn": TensorProto.FLOAT8E4M3FN, "fp8e5m2": TensorProto.FLOAT8E5M2,
    "bool": TensorProto.BOOL, "string": TensorProto.STRING,
    "int4": TensorProto.INT4, "int8": TensorProto.INT8, "int16": TensorProto.INT16, "int32": TensorProto.INT32,
    "int64": TensorProto.INT64, "uint4": TensorProto.UINT4, "uint8": TensorProto.UINT8,
    "uint16": TensorProto.UINT16, "uint32": TensorProto.UINT32, "uint64": TensorProto.UINT64,
}


_IR_NAMES = {v: k for k, v in ONNX_TYPES.items()}


def onnx_type(dt: DType | str) -> int:
    """The ONNX element type of IR dtype ``dt`` (LoweringError for uint1/2/3/6, which ONNX lacks)."""
    name = dt if isinstance(dt, str) else dt.name
    try:
        return ONNX_TYPES[name]
    except KeyError:
        raise LoweringError(f"data type {name} has no ONNX form") from None


def numpy_type(elem_type: int) -> np.dtype:
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))


class Unavailable(Exception):
    """A value whose producer could not be lowered (already reported there)."""

    def __init__(self, value: Value) -> None:
        super().__init__(value.name)
        self.value = value


def dim_proto(d: Any) -> int | str | None:
    """An IR dim as ``make_tensor_value_info`` takes it: an int, or a symbol's text as dim_param."""
    if is_static_dim(d):
        return int(d)
    return str(d)


def value_info(name: str, v: Value, doc: str = "", elem_type: int | None = None) -> onnx.ValueInfoProto:
    """The typed graph input/output ``name`` of IR value ``v`` (symbolic dims as dim_param), of
    ONNX element type ``elem_type`` when given (else ``v``'s dtype's)."""
    t = v.type
    if not isinstance(t, TensorType):
        raise LoweringError(f"'{v.name}' is a {t}; ONNX graph inputs and outputs here are tensors")
    shape = None if t.shape is None else [dim_proto(d) for d in t.shape]
    return helper.make_tensor_value_info(name, onnx_type(t.dtype) if elem_type is None else elem_type, shape,
                                         doc_string=doc)


class OnnxEmitter:
    """Nodes and initializers of one graph, and the ONNX name of each IR value lowered so far."""

    def __init__(self, fn: Function, opset: int, *, taken: Iterable[str] | None = None,
                 parent: OnnxEmitter | None = None) -> None:
        self.fn = fn
        self.opset = opset
        self.parent = parent
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        #: extra operator-set domains used (domain -> version), e.g. {"ai.onnx.ml": 3}
        self.domains: dict[str, int] = parent.domains if parent is not None else {}
        self._names: dict[Value, str] = {}
        self._taken: set[str] = parent._taken if parent is not None else set(
            taken if taken is not None else (v.name for v in fn.values()))
        self._counter = [0] if parent is None else parent._counter
        self._constants: dict[tuple, str] = {}
        self.comment = ""  # the IR op being lowered (node doc_string)
        #: options of the conversion shared by the lowerings (e.g. {"classifier": "zipmap"})
        self.options: dict[str, Any] = parent.options if parent is not None else {}
        #: graph-output types a lowering gives itself (a value the IR types as a non-tensor)
        self.output_infos: dict[Value, onnx.ValueInfoProto] = {}
        #: names `out` gives values other than their IR names (a graph output cast to its ONNX type)
        self.out_names: dict[Value, str] = {}

    # -- names -----------------------------------------------------------------------------------

    def fresh(self, prefix: str = "t") -> str:
        """A name no IR value of the function and no other made-up name has."""
        while True:
            self._counter[0] += 1
            name = f"{prefix}__{self._counter[0]}"
            if name not in self._taken:
                self._taken.add(name)
                return name

    def bind(self, v: Value, name: str) -> None:
        """``v`` is held by the ONNX name ``name``."""
        self._names[v] = name

    def bound(self, v: Value) -> str | None:
        e: OnnxEmitter | None = self
        while e is not None:
            name = e._names.get(v)
            if name is not None:
                return name
            e = e.parent
        return None

    def name(self, v: Value) -> str:
        """The ONNX name holding ``v`` (a constant becomes an initializer named after it)."""
        name = self.bound(v)
        if name is not None:
            return name
        if v.is_const and self.parent is not None:  # one initializer, in the main graph, for every use
            return self.parent.name(v)
        if v.is_const:
            val = v.const_val
            if not isinstance(val, np.ndarray | np.generic | int | float | bool):
                raise LoweringError(f"constant '{v.name}' ({v.type}) has no ONNX tensor form")
            t = v.type
            arr = np.asarray(val)
            if isinstance(t, TensorType) and t.dtype.has_native_numpy:
                arr = arr.astype(t.dtype.storage, copy=False)
            self.initializers.append(self._tensor(arr, v.name, t.dtype if isinstance(t, TensorType) else None))
            self._names[v] = v.name
            return v.name
        raise Unavailable(v)

    def input(self, op: Op, key: str = "x") -> str:
        """The ONNX name of ``op``'s input ``key``."""
        v = op.inputs.get(key)
        if not isinstance(v, Value):
            raise LoweringError(f"input '{key}' is missing" if v is None else f"input '{key}' is a tuple")
        return self.name(v)

    def out(self, op: Op, index: int = 0) -> str:
        """The ONNX name for ``op``'s result ``index`` (its IR name), bound to it: write the last
        node of a lowering with ``outputs=[e.out(op)]``."""
        v = op.outputs[index]
        name = self._names[v] = self.out_names.get(v, v.name)
        return name

    # -- nodes -----------------------------------------------------------------------------------

    def node(self, op_type: str, inputs: Sequence[str | None], outputs: int | Sequence[str] = 1, *,
             domain: str = "", **attrs: Any) -> Any:
        """Append a node; returns its output name when it has one output, else the list of names. ``None``
        inputs are omitted optional inputs; attributes whose value is None are left out."""
        names = [self.fresh(op_type.lower()) for _ in range(outputs)] if isinstance(outputs, int) else list(outputs)
        ins = ["" if i is None else i for i in inputs]
        while ins and ins[-1] == "":
            ins.pop()
        node = helper.make_node(op_type, ins, names, name=self.fresh(f"{op_type}"), domain=domain or None,
                                **{k: v for k, v in attrs.items() if v is not None})
        if self.comment:
            node.doc_string = self.comment
        self.nodes.append(node)
        return names[0] if len(names) == 1 else names

    def use_domain(self, domain: str, version: int) -> None:
        """Declare an operator-set domain other than the default one (e.g. ``ai.onnx.ml``)."""
        self.domains[domain] = max(version, self.domains.get(domain, 0))

    def subgraph(self, fn: Function | None = None) -> OnnxEmitter:
        """A child emitter for a subgraph (If/Loop body): it sees this emitter's names (outer
        scope values), shares its name space and domains, and keeps its own nodes."""
        return OnnxEmitter(fn or self.fn, self.opset, parent=self)

    # -- constants -------------------------------------------------------------------------------

    def _tensor(self, arr: np.ndarray, name: str, dt: DType | None = None) -> onnx.TensorProto:
        ir_dt = dt or dtype(arr.dtype)
        if ir_dt.has_native_numpy and ir_dt.name != "string":
            # np.ascontiguousarray makes a 0-d array 1-d: keep scalars rank 0
            return numpy_helper.from_array(np.ascontiguousarray(arr) if arr.ndim else arr, name)
        if ir_dt.name == "string":
            return helper.make_tensor(name, TensorProto.STRING, arr.shape,
                                      [str(s).encode() for s in arr.reshape(-1)])
        # sub-byte / bf16 / fp8 held in a wider storage dtype: one element per value
        return helper.make_tensor(name, onnx_type(ir_dt), arr.shape, arr.reshape(-1).tolist())

    def constant(self, array: Any, elem_type: int | None = None, name: str | None = None) -> str:
        """An initializer holding ``array`` (as ONNX ``elem_type`` when given); equal small
        constants are written once."""
        arr = np.asarray(array)
        ir_dt = None
        if elem_type is not None:
            ir_dt = dtype(_IR_NAMES[elem_type])
            if ir_dt.has_native_numpy:
                arr = arr.astype(numpy_type(elem_type), copy=False)
            else:  # int4/uint4/...: the values, held in the IR's storage dtype
                arr = arr.astype(ir_dt.storage, copy=False)
        key = None
        if arr.size <= 64 and arr.dtype.kind != "U" and name is None:
            key = (elem_type, arr.dtype.str, arr.shape, arr.tobytes())
            hit = self._constants.get(key)
            if hit is not None:
                return hit
        out = name or self.fresh("const")
        self._taken.add(out)
        self.initializers.append(self._tensor(arr, out, ir_dt))
        if key is not None:
            self._constants[key] = out
        return out

    def scalar(self, value: Any, like: Value | DType | str | int) -> str:
        """A rank-0 constant of the element type of ``like`` (a value, an IR dtype or an ONNX type)."""
        if isinstance(like, Value):
            elem = onnx_type(self.dtype(like))
        elif isinstance(like, int):
            elem = like
        else:
            elem = onnx_type(like)
        return self.constant(np.asarray(value), elem)

    def int64s(self, values: Iterable[int] | np.ndarray) -> str:
        """A rank-1 int64 constant (shapes, axes, starts of Slice, ...)."""
        return self.constant(np.asarray(list(values) if not isinstance(values, np.ndarray) else values,
                                        np.int64).reshape(-1))

    # -- IR values -------------------------------------------------------------------------------

    @staticmethod
    def const(v: Value | None) -> Any:
        """The compile-time value of ``v`` (None when known only at run time)."""
        return None if v is None else compile_time_value(v)

    param = staticmethod(_param)

    @staticmethod
    def const_param(op: Op, key: str) -> Any:
        """Like `param`, but a parameter known only at run time is a `LoweringError`."""
        return required_param(op, key)

    @staticmethod
    def tensor_type(v: Value) -> TensorType:
        t = v.type
        if not isinstance(t, TensorType):
            raise LoweringError(f"'{v.name}' is a {t}, not a tensor")
        return t

    def dtype(self, v: Value) -> DType:
        return self.tensor_type(v).dtype

    def rank(self, v: Value) -> int:
        r = self.tensor_type(v).rank
        if r is None:
            raise LoweringError(f"'{v.name}' has an unknown rank")
        return r

    def cast(self, name: str, to: DType | str | int) -> str:
        """A Cast node of ``name`` to IR dtype / ONNX type ``to``."""
        return self.node("Cast", [name], to=to if isinstance(to, int) else onnx_type(to))


__all__ = ["ONNX_TYPES", "OnnxEmitter", "Unavailable", "dim_proto", "numpy_type", "onnx_type", "value_info"]
