"""The state of one graph being written as MLGraphBuilder calls.

Lowerings (converter/backends/webnn/lowering) read IR values through the emitter and write builder
calls with `GraphEmitter.emit`; the emitter names the JavaScript variables, writes constants to
model.bin on first use, checks every call against Chromium's op support limits, and tracks layouts.

Layouts: an IR value is bound to an `Operand` whose data may be a transposition of the value
(``perm``: physical axis i holds the value's axis ``perm[i]``). In NHWC mode the spatial ops
produce NHWC operands; elementwise ops, reductions, softmax, concat and the like work on any
layout (their axes are mapped), so an NHWC CNN stays NHWC from its first conv to its last op and
transposes appear only where an op needs the IR's own layout (graph outputs, reshapes, ...).
Constants are transposed at conversion time, never in the graph. A transpose to a layout is made
once per value and reused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...ir.consteval import compile_time_value
from ...ir.core import Function, Op, Value
from ...ir.types import DType, TensorType, is_static_shape
from ..params import param as _param
from ..params import required_param
from .jsliteral import Raw, js_comment, js_value
from .limits import POSITIONAL, check_operand, max_tensor_bytes
from .weights import WeightFile

#: IR dtype -> WebNN data type inside the graph (WebNN has no bool: uint8 0/1; no int64 in most ops:
#: int32 after a range check; no 16-bit integers or float64)
DATA_TYPES = {"fp32": "float32", "fp16": "float16", "fp64": "float32", "int32": "int32", "int64": "int32",
              "int16": "int32", "uint16": "int32", "uint32": "uint32", "uint64": "uint32", "int8": "int8",
              "uint8": "uint8", "bool": "uint8"}
NUMPY_TYPES = {"float32": np.float32, "float16": np.float16, "int32": np.int32, "uint32": np.uint32,
               "int64": np.int64, "uint64": np.uint64, "int8": np.int8, "uint8": np.uint8}
TYPED_ARRAYS = {"float32": "Float32Array", "float16": "Float16Array", "int32": "Int32Array",
                "uint32": "Uint32Array", "int64": "BigInt64Array", "uint64": "BigUint64Array",
                "int8": "Int8Array", "uint8": "Uint8Array"}

Perm = tuple[int, ...]
NCHW_TO_NHWC: Perm = (0, 2, 3, 1)


class LoweringError(Exception):
    """An op (or a parameter of it) has no WebNN form here; the message says why."""


@dataclass(frozen=True)
class Operand:
    """A JavaScript variable holding an MLOperand: its physical shape and data type, and the
    permutation of the IR value it holds (None: the IR value's own layout)."""

    js: str
    shape: tuple[int, ...]
    dtype: str
    perm: Perm | None = None

    @property
    def rank(self) -> int:
        return len(self.shape)


def invert(perm: Sequence[int]) -> Perm:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def is_identity(perm: Sequence[int] | None) -> bool:
    return perm is None or all(i == p for i, p in enumerate(perm))


def compose(first: Perm | None, then: Sequence[int]) -> Perm:
    """The perm of ``transpose(transpose(x, first), then)`` relative to x."""
    base = tuple(range(len(then))) if first is None else first
    return tuple(base[t] for t in then)


class GraphEmitter:
    def __init__(self, fn: Function, weights: WeightFile, *, layout: str = "nchw", precision: str = "fp32") -> None:
        self.fn = fn
        self.weights = weights
        self.layout = layout
        self.precision = precision
        self.lines: list[str] = []
        self._bound: dict[Value, Operand] = {}
        # values flattened from a permuted operand without a transpose (only for `linear` users, which
        # permute their weight's columns instead): value -> for each flat position of the data, the
        # position in the IR value (see lowering/shape.py `_flatten_into_linear`)
        self.flat_orders: dict[Value, np.ndarray] = {}
        self._views: dict[tuple[Value, Perm | None], Operand] = {}
        self._counter = 0
        self._comment = ""
        self.stats = {"calls": 0, "transposes": 0, "constants": 0}

    # -- naming and writing ------------------------------------------------------------------------

    def fresh(self, prefix: str = "t") -> str:
        self._counter += 1
        return f"{prefix}{self._counter}"

    def set_comment(self, text: str) -> None:
        self._comment = js_comment(text)

    def _line(self, text: str) -> None:
        self.lines.append(f"  {text}" + (f" // {self._comment}" if self._comment else ""))

    def data_type(self, dt: DType | str) -> str:
        """The WebNN data type computing with IR dtype ``dt`` (fp32 is float16 under --precision fp16)."""
        name = dt if isinstance(dt, str) else dt.name
        if name in ("fp32", "fp64") and self.precision == "fp16":
            return "float16"
        try:
            return DATA_TYPES[name]
        except KeyError:
            raise LoweringError(f"data type {name} has no WebNN form") from None

    def _check(self, method: str, operands: dict[str, Operand], outputs: Sequence[tuple[tuple[int, ...], str]]) -> None:
        for key, o in operands.items():
            why = check_operand(method, key, o.dtype, o.rank)
            if why:
                raise LoweringError(why)
        out_key = "outputs" if method == "split" else "output"
        for i, (shape, dtype) in enumerate(outputs):
            key = f"output{i}" if method in ("lstm", "gru", "lstmCell", "gruCell") else out_key
            why = check_operand(method, key, dtype, len(shape))
            if why:
                raise LoweringError(why)
            nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(NUMPY_TYPES[dtype]).itemsize
            if nbytes > max_tensor_bytes():
                raise LoweringError(f"{method}: a {dtype} tensor of shape {list(shape)} is larger than WebNN's "
                                    f"{max_tensor_bytes()} byte limit")

    def _call_text(self, method: str, args: Sequence[Any], options: dict[str, Any]) -> tuple[str, dict[str, Operand]]:
        positional = POSITIONAL.get(method, ("input",))
        operands: dict[str, Operand] = {}
        for i, a in enumerate(args):
            if isinstance(a, Operand):
                operands[positional[i] if i < len(positional) else f"arg{i}"] = a
            elif isinstance(a, (list, tuple)) and a and all(isinstance(x, Operand) for x in a):
                for x in a:
                    operands.setdefault(positional[i] if i < len(positional) else f"arg{i}", x)
        opts = {k: v for k, v in options.items() if v is not None}
        for k, v in opts.items():
            if isinstance(v, Operand):
                operands[k] = v
        parts = [js_value(a) for a in args]
        if opts:
            parts.append(js_value(opts))
        return f"builder.{method}({', '.join(parts)})", operands

    def emit(self, method: str, *args: Any, shape: Sequence[int], dtype: str, perm: Perm | None = None,
             **options: Any) -> Operand:
        """Write ``const tN = builder.method(args, {options})`` and return its operand. A transpose
        that moves only size-1 axes (e.g. NHWC [1, 1, 1, C] after a global pool) keeps the elements'
        order: it is written as a reshape, which costs nothing."""
        if method == "transpose" and isinstance(args[0], Operand):
            x = args[0]
            step = options.get("permutation", list(range(x.rank))[::-1])
            moved = [a for a in step if x.shape[a] != 1]
            if moved == sorted(moved):
                return self.emit("reshape", x, [int(d) for d in shape], shape=shape, dtype=dtype, perm=perm)
            self.stats["transposes"] += 1
        text, operands = self._call_text(method, args, options)
        shape = tuple(int(d) for d in shape)
        self._check(method, operands, [(shape, dtype)])
        name = self.fresh()
        self._line(f"const {name} = {text};")
        self.stats["calls"] += 1
        return Operand(name, shape, dtype, None if is_identity(perm) else tuple(perm))  # type: ignore[arg-type]

    def emit_multi(self, method: str, *args: Any, outputs: Sequence[tuple[Sequence[int], str]],
                   **options: Any) -> list[Operand]:
        """A builder method returning an array of operands (split, lstm, gru, ...)."""
        text, operands = self._call_text(method, args, options)
        outs = [(tuple(int(d) for d in s), t) for s, t in outputs]
        self._check(method, operands, outs)
        names = [self.fresh() for _ in outs]
        self._line(f"const [{', '.join(names)}] = {text};")
        self.stats["calls"] += 1
        return [Operand(n, s, t) for n, (s, t) in zip(names, outs)]

    def raw_line(self, text: str) -> None:
        self._line(text)

    # -- constants -------------------------------------------------------------------------------------

    def constant(self, array: Any, dtype: str | None = None) -> Operand:
        """A constant operand holding ``array`` (converted to ``dtype``, default: the WebNN type of
        its own dtype), written to model.bin."""
        arr = np.asarray(array)
        if dtype is None:
            dtype = self.data_type(_ir_dtype_name(arr))
        arr = _convert(arr, dtype)
        offset = self.weights.add(arr)
        name = self.fresh("c")
        shape = list(arr.shape)
        self.lines.append(f"  const {name} = constant(builder, weights, {js_value(dtype)}, {js_value(shape)}, "
                          f"{offset});")
        self.stats["constants"] += 1
        return Operand(name, tuple(arr.shape), dtype)

    def scalar(self, value: float | int, dtype: str) -> Operand:
        return self.constant(np.asarray(value), dtype)

    # -- IR values -------------------------------------------------------------------------------------

    def bind(self, value: Value, operand: Operand) -> None:
        self._bound[value] = operand
        self._views[(value, operand.perm)] = operand

    def is_bound(self, value: Value) -> bool:
        return value in self._bound

    def value_of(self, value: Value) -> np.ndarray | None:
        """The compile-time value of ``value`` (a constant or a short pure chain), or None."""
        v = compile_time_value(value)
        return None if v is None else np.asarray(v)

    def any(self, value: Value) -> Operand:
        """``value``'s operand in whatever layout it has (constants: the IR's own layout)."""
        bound = self._bound.get(value)
        if bound is not None:
            return bound
        return self.get(value)

    def get(self, value: Value, perm: Sequence[int] | None = None) -> Operand:
        """``value``'s operand with its axes permuted by ``perm`` (None: the IR's own layout)."""
        key_perm = None if perm is None or is_identity(perm) else tuple(perm)
        view = self._views.get((value, key_perm))
        if view is not None:
            return view
        bound = self._bound.get(value)
        if bound is None:
            const = self.value_of(value) if _is_const_like(value) else None
            if const is None:
                if value.producer is not None and value.producer.type == "const":
                    raise LoweringError(f"constant '{value.name}' has no WebNN form")
                raise _Unavailable(value)
            arr = const if key_perm is None else np.transpose(const, key_perm)
            view = self.constant(arr, self.data_type(_value_dtype(value)))
            view = Operand(view.js, view.shape, view.dtype, key_perm)
        else:
            # from the bound layout to the requested one: transpose by inv(bound) then perm
            src = bound.perm if bound.perm is not None else tuple(range(bound.rank))
            want = key_perm if key_perm is not None else tuple(range(bound.rank))
            step = tuple(src.index(w) for w in want)
            view = self.emit("transpose", bound, shape=[bound.shape[s] for s in step], dtype=bound.dtype,
                             perm=key_perm, permutation=list(step))
        self._views[(value, key_perm)] = view
        return view

    def shape(self, value: Value) -> tuple[int, ...]:
        t = value.type
        if not isinstance(t, TensorType) or not is_static_shape(t.shape):
            raise LoweringError(f"'{value.name}' has no static shape ({t}); WebNN graphs are static "
                                "(fix sizes with --input-shape)")
        return tuple(int(d) for d in t.shape)  # type: ignore[union-attr]

    def dtype_of(self, value: Value) -> str:
        return self.data_type(_value_dtype(value))

    param = staticmethod(_param)

    @staticmethod
    def const_param(op: Op, key: str) -> Any:
        return required_param(op, key, " (WebNN graphs are static)")


class _Unavailable(Exception):
    """A value whose producer could not be lowered (already reported there)."""

    def __init__(self, value: Value) -> None:
        super().__init__(value.name)
        self.value = value


def _is_const_like(value: Value) -> bool:
    return value.producer is not None


def _value_dtype(value: Value) -> DType:
    t = value.type
    if not isinstance(t, TensorType):
        raise LoweringError(f"'{value.name}' is a {t}, which WebNN has no form for")
    return t.dtype


def _ir_dtype_name(arr: np.ndarray) -> str:
    kind = {np.dtype(np.float32): "fp32", np.dtype(np.float16): "fp16", np.dtype(np.float64): "fp32",
            np.dtype(np.int32): "int32", np.dtype(np.int64): "int64", np.dtype(np.bool_): "bool",
            np.dtype(np.uint8): "uint8", np.dtype(np.int8): "int8", np.dtype(np.uint32): "uint32",
            np.dtype(np.int16): "int16", np.dtype(np.uint16): "uint16"}.get(arr.dtype)
    if kind is None:
        raise LoweringError(f"a constant of numpy type {arr.dtype} has no WebNN form")
    return kind


def _convert(arr: np.ndarray, dtype: str) -> np.ndarray:
    target = np.dtype(NUMPY_TYPES[dtype])
    if arr.dtype == target:
        return arr
    if target.kind in "iu" and arr.dtype.kind in "iub":
        info = np.iinfo(target)
        if arr.size and (arr.min() < info.min or arr.max() > info.max):
            raise LoweringError(f"a {arr.dtype} constant has values outside the {dtype} range WebNN computes in")
    return arr.astype(target)


__all__ = ["GraphEmitter", "LoweringError", "NCHW_TO_NHWC", "Operand", "Raw", "compose", "invert", "is_identity"]
