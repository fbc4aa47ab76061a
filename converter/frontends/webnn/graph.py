"""Read a WebNN graph file (docs/webnn-graph-format.md) into checked, plain Python structures.

The file is untrusted: every operand reference, argument name, option key, dtype, shape and weight
offset is checked here, so that the IR mapping only ever sees a well-formed graph and a broken
file is refused with one `FormatError` naming the file, the operator and what is wrong. Weights
stay in the ``.bin`` file: constants are read-only views of a memory map, never copies.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import FormatError
from ...limits import DEFAULT_MAX_TENSOR_BYTES, MAX_MODEL_FILE_BYTES, shape_problem
from .signatures import Signature, data_types, signatures

FORMAT_NAME = "converter.webnn-graph"
FORMAT_VERSION = 1
#: The suffix of graph files `converter.load` recognises.
GRAPH_SUFFIX = ".webnn.json"

#: numpy storage of each WebNN data type.
NUMPY_DTYPES = {
    "float32": np.dtype("<f4"), "float16": np.dtype("<f2"), "int32": np.dtype("<i4"), "uint32": np.dtype("<u4"),
    "int64": np.dtype("<i8"), "uint64": np.dtype("<u8"), "int8": np.dtype("i1"), "uint8": np.dtype("u1"),
}
_SPECIAL_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


@dataclass(frozen=True)
class Descriptor:
    """An ``MLOperandDescriptor``: WebNN data type and static shape."""

    data_type: str
    shape: tuple[int, ...]


@dataclass
class GraphInput:
    id: str
    name: str
    desc: Descriptor


@dataclass
class Operator:
    """One builder call: ``args`` holds the positional arguments by name and ``options``."""

    index: int
    method: str
    args: dict[str, Any]
    options: dict[str, Any]
    outputs: list[str]
    label: str | None = None
    #: The output descriptors the recorder inferred from the spec (None in hand-written files).
    descriptors: list[Descriptor] | None = None

    @property
    def where(self) -> str:
        return self.label or f"#{self.index} {self.method}"


@dataclass
class Graph:
    path: str
    inputs: list[GraphInput] = field(default_factory=list)
    constants: dict[str, tuple[Descriptor, np.ndarray]] = field(default_factory=dict)
    operators: list[Operator] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)


class _Reader:
    def __init__(self, path: str, doc: Any, bin_path: Path | None) -> None:
        self.path = path
        self.doc = doc
        self.bin_path = bin_path
        self._bin: np.ndarray | None = None
        self.defined: set[str] = set()

    def fail(self, message: str, *, op: Operator | None = None, field_: str | None = None) -> FormatError:
        if op is not None:
            return FormatError(message, file=self.path, op=op.where, op_type=op.method, field=field_)
        return FormatError(message, file=self.path, field=field_)

    # -- pieces --------------------------------------------------------------------------------

    def descriptor(self, raw: Any, where: str) -> Descriptor:
        if not isinstance(raw, dict) or set(raw) - {"dataType", "shape"} or "dataType" not in raw or "shape" not in raw:
            raise self.fail("a descriptor must be {dataType, shape} (the old 'dimensions' is not accepted)", field_=where)
        dt, shape = raw["dataType"], raw["shape"]
        if dt not in data_types():
            raise self.fail(f"unknown dataType {dt!r} (one of {', '.join(data_types())})", field_=where)
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
            raise self.fail("shape must be a list of integers", field_=where)
        problem = shape_problem(shape)
        if problem is None and any(d == 0 for d in shape):
            problem = "WebNN dimensions must be positive"
        if problem:
            raise self.fail(f"bad shape {shape}: {problem}", field_=where)
        return Descriptor(dt, tuple(shape))

    def new_id(self, oid: Any, where: str) -> str:
        if not isinstance(oid, str) or not oid:
            raise self.fail(f"operand id {oid!r} is not a non-empty string", field_=where)
        if oid in self.defined:
            raise self.fail(f"operand id {oid!r} is defined twice", field_=where)
        self.defined.add(oid)
        return oid

    def bin(self) -> np.ndarray:
        if self._bin is None:
            if self.bin_path is None:
                raise self.fail("a constant has an offset but the file names no 'weights' file")
            try:
                size = os.path.getsize(self.bin_path)
                self._bin = (np.memmap(self.bin_path, dtype=np.uint8, mode="r") if size
                             else np.zeros(0, np.uint8))
            except OSError as e:
                raise self.fail(f"cannot read the weights file '{self.bin_path}': {e.strerror or e}") from None
        return self._bin

    def constant_data(self, raw: dict, desc: Descriptor, where: str) -> np.ndarray:
        dt = NUMPY_DTYPES[desc.data_type]
        count = math.prod(desc.shape)
        nbytes = count * dt.itemsize
        if "offset" in raw:
            off, length = raw.get("offset"), raw.get("byteLength")
            if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (off, length)):
                raise self.fail("offset and byteLength must be non-negative integers", field_=where)
            if length != nbytes:
                raise self.fail(f"byteLength {length} is not the {nbytes} bytes of a {desc.data_type} "
                                f"tensor of shape {list(desc.shape)}", field_=where)
            blob = self.bin()
            if off + length > blob.size:
                raise self.fail(f"bytes {off}..{off + length} are beyond the end of the weights file "
                                f"({blob.size} bytes)", field_=where)
            if off % dt.itemsize:
                raise self.fail(f"offset {off} is not aligned to {dt.itemsize} bytes", field_=where)
            return blob[off:off + length].view(dt).reshape(desc.shape)
        data = raw.get("data")
        if nbytes > DEFAULT_MAX_TENSOR_BYTES:
            raise self.fail(f"an inline constant of {nbytes} bytes is too large (put it in the weights file)",
                            field_=where)
        return self.inline(data, desc, where)

    def inline(self, data: Any, desc: Descriptor, where: str) -> np.ndarray:
        dt = NUMPY_DTYPES[desc.data_type]
        count = math.prod(desc.shape)
        scalar = not isinstance(data, list)
        items = [data] if scalar else data
        if not scalar and len(items) != count:
            raise self.fail(f"{len(items)} values for a tensor of {count} elements", field_=where)
        values: list[Any] = []
        for v in items:
            if isinstance(v, str):
                if v in _SPECIAL_FLOATS and dt.kind == "f":
                    v = _SPECIAL_FLOATS[v]
                else:
                    try:
                        v = int(v)  # a BigInt written as a decimal string
                    except ValueError:
                        raise self.fail(f"value {v!r} is not a number", field_=where) from None
            elif not isinstance(v, (int, float)) or isinstance(v, bool):
                raise self.fail(f"value {v!r} is not a number", field_=where)
            values.append(v)
        try:
            arr = np.array(values, dtype=np.float64 if dt.kind == "f" else object)
            arr = arr.astype(dt) if dt.kind == "f" else np.array([int(v) for v in values], dtype=dt)
        except (OverflowError, ValueError, TypeError) as e:
            raise self.fail(f"values do not fit {desc.data_type}: {e}", field_=where) from None
        if scalar:
            return np.full(desc.shape, arr[0], dtype=dt)
        return arr.reshape(desc.shape)

    # -- whole file ----------------------------------------------------------------------------

    def read(self) -> Graph:
        doc = self.doc
        if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
            raise self.fail(f"not a WebNN graph file (its 'format' is not {FORMAT_NAME!r})")
        if doc.get("version") != FORMAT_VERSION:
            raise self.fail(f"version {doc.get('version')!r} is not supported (this reader reads {FORMAT_VERSION})")
        extra = set(doc) - {"format", "version", "weights", "inputs", "constants", "operators", "outputs"}
        if extra:
            raise self.fail(f"unknown top-level keys {sorted(extra)}")
        g = Graph(self.path)
        for key in ("inputs", "constants"):
            if not isinstance(doc.get(key, {}), dict):
                raise self.fail(f"'{key}' must be an object", field_=key)
        for oid, raw in doc.get("inputs", {}).items():
            where = f"inputs.{oid}"
            self.new_id(oid, where)
            if not isinstance(raw, dict) or set(raw) - {"name", "descriptor"}:
                raise self.fail("an input is {name, descriptor}", field_=where)
            name = raw.get("name", oid)
            if not isinstance(name, str) or not name:
                raise self.fail("an input name must be a non-empty string", field_=where)
            if any(i.name == name for i in g.inputs):
                raise self.fail(f"two inputs are named {name!r}", field_=where)
            g.inputs.append(GraphInput(oid, name, self.descriptor(raw.get("descriptor"), where)))
        for oid, raw in doc.get("constants", {}).items():
            where = f"constants.{oid}"
            self.new_id(oid, where)
            if not isinstance(raw, dict) or set(raw) - {"descriptor", "offset", "byteLength", "data"} \
                    or ("offset" in raw) == ("data" in raw):
                raise self.fail("a constant is {descriptor, offset, byteLength} or {descriptor, data}", field_=where)
            desc = self.descriptor(raw.get("descriptor"), where)
            g.constants[oid] = (desc, self.constant_data(raw, desc, where))
        ops = doc.get("operators", [])
        if not isinstance(ops, list):
            raise self.fail("'operators' must be a list")
        table = signatures()
        for i, raw in enumerate(ops):
            g.operators.append(self.operator(i, raw, table))
        outs = doc.get("outputs")
        if not isinstance(outs, dict) or not outs:
            raise self.fail("'outputs' must map at least one output name to an operand id", field_="outputs")
        for name, oid in outs.items():
            if not isinstance(oid, str) or oid not in self.defined:
                raise self.fail(f"output {name!r} names operand {oid!r}, which nothing defines", field_="outputs")
            if not name:
                raise self.fail("an output name must be a non-empty string", field_="outputs")
            if any(i.name == name for i in g.inputs):
                raise self.fail(f"output {name!r} has the name of an input", field_="outputs")
        g.outputs = dict(outs)
        return g

    def operator(self, index: int, raw: Any, table: dict[str, Signature]) -> Operator:
        if not isinstance(raw, dict) or set(raw) - {"name", "arguments", "outputs", "descriptors"}:
            raise self.fail(f"operator #{index} must be {{name, arguments, outputs, descriptors?}}",
                            field_=f"operators[{index}]")
        method = raw.get("name")
        sig = table.get(method) if isinstance(method, str) else None
        if sig is None:
            raise self.fail(f"operator #{index}: unknown WebNN operation {method!r}", field_=f"operators[{index}]")
        op = Operator(index, method, {}, {}, [])
        args = raw.get("arguments", [])
        if not isinstance(args, list) or not all(isinstance(a, dict) and len(a) == 1 for a in args):
            raise self.fail("arguments must be a list of one-key objects", op=op)
        names = [next(iter(a)) for a in args]
        values = [next(iter(a.values())) for a in args]
        if names and names[-1] == "options":
            options = values.pop()
            names.pop()
            if not isinstance(options, dict):
                raise self.fail("options must be an object", op=op, field_="options")
        else:
            options = {}
        expected = [n for n, _ in sig.args]
        if names != expected:
            raise self.fail(f"arguments are {names}, expected {expected}", op=op)
        for (name, kind), value in zip(sig.args, values):
            op.args[name] = self.value(op, name, kind, value)
        for key, value in options.items():
            if key == "label":
                if not isinstance(value, str):
                    raise self.fail("label must be a string", op=op, field_="label")
                op.label = value
                continue
            if key not in sig.options:
                raise self.fail(f"unknown option {key!r} (known: {', '.join(sorted(sig.options))})", op=op, field_=key)
            op.options[key] = self.value(op, key, sig.options[key], value)
        outs = raw.get("outputs")
        outs = [outs] if isinstance(outs, str) else outs
        if not isinstance(outs, list) or not outs:
            raise self.fail("outputs must be an operand id or a list of them", op=op, field_="outputs")
        op.outputs = [self.new_id(o, f"operators[{index}].outputs") for o in outs]
        if "descriptors" in raw:
            descs = raw["descriptors"]
            if not isinstance(descs, list) or len(descs) != len(op.outputs):
                raise self.fail("descriptors must list one descriptor per output", op=op, field_="descriptors")
            op.descriptors = [self.descriptor(d, f"operators[{index}].descriptors") for d in descs]
        return op

    def value(self, op: Operator, name: str, kind: Any, value: Any) -> Any:
        """Check one argument against its kind; operands stay ids (resolved by the IR mapping)."""
        def bad(what: str) -> FormatError:
            return self.fail(f"{name}: {what}, got {value!r}"[:300], op=op, field_=name)

        def is_uint(v: Any) -> bool:
            return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 0xFFFFFFFF

        if kind == "operand":
            if not isinstance(value, str) or value not in self.defined:
                raise bad("not an operand defined before this operator")
            return value
        if kind == "operands":
            if not isinstance(value, list) or not value or not all(isinstance(v, str) and v in self.defined for v in value):
                raise bad("not a non-empty list of operands defined before this operator")
            return list(value)
        if isinstance(kind, list):
            if value not in kind:
                raise bad(f"not one of {kind}")
            return value
        if kind == "uint":
            if not is_uint(value):
                raise bad("not an unsigned 32-bit integer")
            return value
        if kind == "uints":
            if not isinstance(value, list) or not all(is_uint(v) for v in value):
                raise bad("not a list of unsigned 32-bit integers")
            return list(value)
        if kind == "splits":
            if is_uint(value) or (isinstance(value, list) and all(is_uint(v) for v in value)):
                return value
            raise bad("not an unsigned integer or a list of them")
        if kind == "int":
            if not isinstance(value, int) or isinstance(value, bool) or abs(value) > 0x7FFFFFFF:
                raise bad("not a 32-bit integer")
            return value
        if kind in ("float", "number"):
            if isinstance(value, str) and value in _SPECIAL_FLOATS:
                return _SPECIAL_FLOATS[value]
            if kind == "number" and isinstance(value, str):
                try:
                    return int(value)
                except ValueError:
                    raise bad("not a number") from None
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise bad("not a number")
            return value
        if kind == "floats":
            if not isinstance(value, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
                raise bad("not a list of numbers")
            return [float(v) for v in value]
        if kind == "bool":
            if not isinstance(value, bool):
                raise bad("not a boolean")
            return value
        if kind == "dataType":
            if value not in data_types():
                raise bad(f"not one of {list(data_types())}")
            return value
        if kind == "activations":
            if not isinstance(value, list) or not all(v in ("relu", "sigmoid", "tanh") for v in value):
                raise bad("not a list of 'relu' | 'sigmoid' | 'tanh'")
            return list(value)
        raise AssertionError(f"ops.json kind {kind!r}")


def read_graph(path: str | os.PathLike) -> Graph:
    """Read and check a graph file; its weights file (``weights``) is relative to the graph file."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_MODEL_FILE_BYTES:
            raise FormatError(f"the graph file is {size} bytes, more than the {MAX_MODEL_FILE_BYTES} allowed",
                              file=str(path))
        with open(path, "rb") as f:
            doc = json.loads(f.read())
    except OSError as e:
        raise FormatError(f"cannot read the graph file: {e.strerror or e}", file=str(path)) from None
    except (ValueError, RecursionError) as e:
        raise FormatError(f"not valid JSON: {e}", file=str(path)) from None
    return graph_from_dict(doc, str(path), base=path.parent)


def graph_from_dict(doc: Any, path: str, base: Path | None = None) -> Graph:
    """Check an already parsed graph document (``base``: the folder its weights file is in)."""
    bin_path = None
    if isinstance(doc, dict) and "weights" in doc:
        w = doc["weights"]
        if not isinstance(w, str) or not w or "/" in w or "\\" in w or w in (".", ".."):
            raise FormatError("'weights' must be a file name beside the graph file", file=path, field="weights")
        bin_path = (base or Path(".")) / w
    return _Reader(path, doc, bin_path).read()
