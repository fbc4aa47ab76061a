"""Parameter-swap mutants of NeuralNetwork layers, for tools/mutate_nn_lowerings.py.

A mutant is what a lowering would compute if it read one parameter where it should read another:
it is applied to a copy of the layer that the lowering is handed (never to the caller's message,
so a test's oracle sees the original). Three families:

- ``fields``: two sibling fields of one message swap values: the layer's params message and every
  message nested in it (oneof members, repeated elements), when both have the same proto type and
  label (and the same enum or message type). WeightParams are swapped whole, not looked into (their
  encodings are weights.py's business); nested networks (branch, loop) are not looked into either
  (their layers are lowered through the same dispatch and get mutants of their own).
- ``elements``: two elements of a repeated field of length 2 to 4 swap (kernelSize [kh, kw],
  strides, border amounts, axes, the activations of a recurrent layer), except in fields that name
  a set (``ORDERLESS``, with the spec's words).
- ``inputs``: the layer's first two inputs swap, for kinds whose result depends on their order
  (``COMMUTATIVE`` lists the others, with the reason).

Mutants come from the layers the tests load (``layer_mutants``): a mutant that changes none of them
is equivalent for these tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from google.protobuf.descriptor import FieldDescriptor

# Message types not looked into: a weight blob (its fields are encodings of one array, read by
# weights.py, not by a lowering) and a nested network (its layers are mutated on their own).
OPAQUE = {"CoreML.Specification.WeightParams", "CoreML.Specification.NeuralNetwork"}
MAX_ELEMENTS = 4  # repeated fields of 2..4 elements get element swaps

# Kinds with two or more inputs whose result does not depend on the order of the inputs, per the
# spec's formula: swapping inputs cannot change a correct lowering's result, so it is no mutant.
COMMUTATIVE: dict[str, str] = {
    "add": "sum of the inputs (with the spec's broadcasting, symmetric)",
    "multiply": "product of the inputs (with the spec's broadcasting, symmetric)",
    "average": "mean of the inputs",
    "max": "elementwise maximum of the inputs",
    "min": "elementwise minimum of the inputs",
    "addBroadcastable": "x + y with numpy broadcasting (symmetric)",
    "multiplyBroadcastable": "x * y with numpy broadcasting (symmetric)",
    "maxBroadcastable": "max(x, y) with numpy broadcasting (symmetric)",
    "minBroadcastable": "min(x, y) with numpy broadcasting (symmetric)",
    "equal": "x == y is symmetric",
    "notEqual": "x != y is symmetric",
    "logicalAnd": "x AND y is symmetric",
    "logicalOr": "x OR y is symmetric",
    "logicalXor": "x XOR y is symmetric",
    "dot": "the dot product and the cosine similarity of two vectors are symmetric",
}

# Repeated fields that name a set: the order of their elements means nothing (the spec's words),
# so swapping two elements is no mutant. (kind, field) -> reason.
_REDUCE_ND = ("reduceSum", "reduceMean", "reduceProd", "reduceL1", "reduceL2", "reduceMax", "reduceMin",
              "reduceSumSquare", "reduceLogSum", "reduceLogSumExp")
ORDERLESS: dict[tuple[str, str], str] = {
    **{(k, "axes"): "Reduce*LayerParams: \"axes: dimensions along which to perform reduction\" (a set of axes)"
       for k in _REDUCE_ND},
    ("squeeze", "axes"): "SqueezeLayerParams: \"decreases the rank of the input tensor by removing unit "
                         "dimensions\": axes names the set of dimensions removed",
    ("expandDims", "axes"): "ExpandDimsLayerParams: \"increases the rank of the input tensor by adding unit "
                            "dimensions\": axes names the set of output positions that are new",
}

Step = str | int  # a field name, or an index into the repeated field named before it


@dataclass(frozen=True)
class Mutant:
    """One swap. ``fields``: fields ``a`` and ``b`` of the message at ``path``; ``elements``:
    elements ``a`` and ``b`` of the repeated field at ``path``; ``inputs``: inputs 0 and 1."""

    kind: str
    family: str
    path: tuple[Step, ...]
    a: str | int
    b: str | int

    @property
    def id(self) -> str:
        where = format_path(self.path)
        if self.family == "fields":
            prefix = f"{where}." if where else ""
            return f"{self.kind}: {prefix}{self.a} <-> {prefix}{self.b}"
        if self.family == "elements":
            return f"{self.kind}: {where}[{self.a}] <-> {where}[{self.b}]"
        return f"{self.kind}: input[{self.a}] <-> input[{self.b}]"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "family": self.family, "path": list(self.path), "a": self.a, "b": self.b}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Mutant:
        return cls(d["kind"], d["family"], tuple(d["path"]), d["a"], d["b"])


def format_path(path: tuple[Step, ...]) -> str:
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else step)
    return out


# -- field values and their comparison ---------------------------------------------------------------


def _signature(fd: FieldDescriptor) -> tuple:
    """Fields with equal signatures can hold each other's values."""
    sub = fd.enum_type.full_name if fd.enum_type else fd.message_type.full_name if fd.message_type else ""
    return fd.type, _repeated(fd), sub


def _repeated(fd: FieldDescriptor) -> bool:
    return bool(fd.is_repeated)


def _item(x: Any) -> Any:
    return x.SerializeToString(deterministic=True) if hasattr(x, "SerializeToString") else x


def _value(msg: Any, fd: FieldDescriptor) -> Any:
    """A comparable form of the field's value (presence included where the field has it)."""
    v = getattr(msg, fd.name)
    if _repeated(fd):
        return tuple(_item(x) for x in v)
    if fd.has_presence:
        return msg.HasField(fd.name), _item(v)
    return v


def _copy(x: Any) -> Any:
    if hasattr(x, "CopyFrom"):
        c = type(x)()
        c.CopyFrom(x)
        return c
    return x


def _set_repeated(field: Any, items: list[Any]) -> None:
    del field[:]
    for x in items:
        if hasattr(x, "CopyFrom"):
            field.add().CopyFrom(x)
        else:
            field.append(x)


def _swap_fields(msg: Any, a: str, b: str) -> None:
    fa, fb = msg.DESCRIPTOR.fields_by_name[a], msg.DESCRIPTOR.fields_by_name[b]
    if _repeated(fa):
        va, vb = [_copy(x) for x in getattr(msg, a)], [_copy(x) for x in getattr(msg, b)]
        _set_repeated(getattr(msg, a), vb)
        _set_repeated(getattr(msg, b), va)
        return
    if not (fa.has_presence and fb.has_presence):
        va, vb = getattr(msg, a), getattr(msg, b)
        setattr(msg, a, vb)
        setattr(msg, b, va)
        return
    has_a, has_b = msg.HasField(a), msg.HasField(b)
    va, vb = _copy(getattr(msg, a)), _copy(getattr(msg, b))
    msg.ClearField(a)
    msg.ClearField(b)
    for name, has, value in ((a, has_b, vb), (b, has_a, va)):  # in one oneof only one is set
        if not has:
            continue
        if fa.message_type is not None:
            getattr(msg, name).CopyFrom(value)
        else:
            setattr(msg, name, value)


def _swap_elements(field: Any, i: int, j: int) -> None:
    items = [_copy(x) for x in field]
    items[i], items[j] = items[j], items[i]
    _set_repeated(field, items)


# -- enumeration --------------------------------------------------------------------------------------


def _message_mutants(kind: str, msg: Any, path: tuple[Step, ...]) -> Iterator[tuple[Mutant, bool]]:
    fields = msg.DESCRIPTOR.fields
    for fa, fb in combinations(fields, 2):
        if _signature(fa) == _signature(fb):
            yield Mutant(kind, "fields", path, fa.name, fb.name), _value(msg, fa) != _value(msg, fb)
    for fd in fields:
        value = getattr(msg, fd.name)
        orderless = not path and (kind, fd.name) in ORDERLESS
        if _repeated(fd) and 2 <= len(value) <= MAX_ELEMENTS and not orderless:
            for i, j in combinations(range(len(value)), 2):
                yield Mutant(kind, "elements", (*path, fd.name), i, j), _item(value[i]) != _item(value[j])
        if fd.message_type is None or fd.message_type.full_name in OPAQUE:
            continue
        if _repeated(fd):
            for i, sub in enumerate(value):
                yield from _message_mutants(kind, sub, (*path, fd.name, i))
        elif msg.HasField(fd.name):  # an unset message holds defaults only: every swap in it is a no-op
            yield from _message_mutants(kind, value, (*path, fd.name))


def layer_mutants(layer: Any) -> Iterator[tuple[Mutant, bool]]:
    """Every mutant of ``layer`` (a NeuralNetworkLayer), with whether it changes the layer."""
    kind = layer.WhichOneof("layer")
    if not kind:
        return
    yield from _message_mutants(kind, getattr(layer, kind), ())
    if len(layer.input) >= 2 and kind not in COMMUTATIVE:
        yield Mutant(kind, "inputs", (), 0, 1), layer.input[0] != layer.input[1]


# -- application --------------------------------------------------------------------------------------


def _walk(msg: Any, steps: tuple[Step, ...]) -> Any:
    for step in steps:
        msg = msg[step] if isinstance(step, int) else getattr(msg, step)
    return msg


def changes(mutant: Mutant, layer: Any) -> bool:
    """Whether ``mutant`` changes ``layer`` (False also when the layer lacks its path)."""
    if layer.WhichOneof("layer") != mutant.kind:
        return False
    if mutant.family == "inputs":
        return len(layer.input) >= 2 and layer.input[0] != layer.input[1]
    try:
        if mutant.family == "fields":
            msg = _walk(getattr(layer, mutant.kind), mutant.path)
            d = msg.DESCRIPTOR.fields_by_name
            return _value(msg, d[str(mutant.a)]) != _value(msg, d[str(mutant.b)])
        field = _walk(getattr(layer, mutant.kind), mutant.path)
        i, j = int(mutant.a), int(mutant.b)
        return max(i, j) < len(field) and _item(field[i]) != _item(field[j])
    except (IndexError, KeyError, AttributeError):
        return False


def mutated(mutant: Mutant, layer: Any) -> Any:
    """A mutated copy of ``layer`` (which is left as it is)."""
    out = type(layer)()
    out.CopyFrom(layer)
    if mutant.family == "inputs":
        names = list(out.input)
        names[0], names[1] = names[1], names[0]
        del out.input[:]
        out.input.extend(names)
    elif mutant.family == "fields":
        _swap_fields(_walk(getattr(out, mutant.kind), mutant.path), str(mutant.a), str(mutant.b))
    else:
        _swap_elements(_walk(getattr(out, mutant.kind), mutant.path), int(mutant.a), int(mutant.b))
    return out
