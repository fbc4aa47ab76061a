"""Subtypes of the NeuralNetwork layer kinds, derived from the spec's proto, and the subtypes a
layer has.

A layer kind's subtypes are the variants its params message can select:

- every member of a oneof: ``activation.scaledTanh``, ``padding.reflection``, ``pooling.same``;
- every value of an enum field: ``unary.type=RSQRT``, ``pooling.type=L2``,
  ``convolution.same.asymmetryMode=TOP_LEFT_HEAVY``;

in the params message and in every message nested in it (a repeated message field counts as one:
``gru.activations.sigmoidHard`` is a sigmoidHard in any position of gru's activations). Weight
blobs and nested networks are not looked into. A kind without subtypes is one pair by itself
(``innerProduct``). ``PAIRS`` is every pair the coverage test requires an oracle check of:
everything the proto allows minus ``EXCLUDED``, what the spec itself rules out (with the spec's
words) or what the converter refuses by design.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from converter.formats.proto import NeuralNetwork_pb2

OPAQUE = {"CoreML.Specification.WeightParams", "CoreML.Specification.NeuralNetwork"}
LAYER_ONEOF = NeuralNetwork_pb2.NeuralNetworkLayer.DESCRIPTOR.oneofs_by_name["layer"]

# An enum field that only means something when another field of its message has a given value:
# (kind, field path) -> (other field, value, the spec's words). Elsewhere it is no subtype.
ONLY_WHEN: dict[tuple[str, str], tuple[str, str, str]] = {
    ("upsample", "linearUpsampleMode"): (
        "mode", "BILINEAR",
        "UpsampleLayerParams: \"LinearUpsampleMode specifies the behavior for linear upsampling. Only valid "
        "when Interpolation Mode is BILINEAR.\""),
}

_RECURRENT_ACTIVATIONS = {"linear", "sigmoid", "tanh", "ReLU", "scaledTanh", "sigmoidHard"}
_RECURRENT_WORDS = ("the spec (NeuralNetwork.proto, Recurrent Layers): \"The following activations are supported "
                    "with recurrent layers: Linear, Sigmoid, Tanh, ReLU, Scaled Hyperbolic Tangent: alpha * "
                    "tanh(beta * x) [...], Hard Sigmoid: min(max(alpha * x + beta, 0), 1) [...]\"")
_RECURRENT_FIELDS = {"simpleRecurrent": ("activation",), "gru": ("activations",),
                     "uniDirectionalLSTM": ("activations",),
                     "biDirectionalLSTM": ("activationsForwardLSTM", "activationsBackwardLSTM")}


def _walk_descriptor(d: Descriptor, path: str, seen: frozenset[str]) -> Iterator[str]:
    for o in d.oneofs:
        for f in o.fields:
            yield f"{path}{f.name}"
    for f in d.fields:
        if f.enum_type is not None:
            for v in f.enum_type.values:
                yield f"{path}{f.name}={v.name}"
        elif f.message_type is not None and f.message_type.full_name not in OPAQUE | seen:
            yield from _walk_descriptor(f.message_type, f"{path}{f.name}.", seen | {f.message_type.full_name})


def kind_subtypes(kind: str) -> tuple[str, ...]:
    """Every subtype the proto allows for ``kind`` (without the ``kind.`` prefix)."""
    d = LAYER_ONEOF.fields[[f.name for f in LAYER_ONEOF.fields].index(kind)].message_type
    return tuple(dict.fromkeys(_walk_descriptor(d, "", frozenset({d.full_name}))))


def _excluded() -> dict[str, str]:
    out = {"custom": "custom layers run the app's own code: the converter refuses them (UnsupportedError)"}
    out.update({f"custom.{s}": out["custom"] for s in kind_subtypes("custom")})
    for kind, fields in _RECURRENT_FIELDS.items():
        for field in fields:
            for sub in kind_subtypes(kind):
                head, _, member = sub.partition(".")
                if head == field and "." not in member and member not in _RECURRENT_ACTIVATIONS:
                    out[f"{kind}.{sub}"] = _RECURRENT_WORDS
    return out


EXCLUDED: dict[str, str] = _excluded()


def _all_pairs() -> tuple[str, ...]:
    pairs = []
    for f in LAYER_ONEOF.fields:
        subs = kind_subtypes(f.name)
        pairs += [f"{f.name}.{s}" for s in subs] if subs else [f.name]
    return tuple(p for p in pairs if p not in EXCLUDED)


PAIRS: tuple[str, ...] = _all_pairs()


def unknown_pairs(pairs: Any) -> list[str]:
    """Those of ``pairs`` that are no pair of the spec (or that the spec excludes)."""
    return sorted(set(pairs) - set(PAIRS))


# -- the pairs of a layer ----------------------------------------------------------------------------


def _enum_name(f: FieldDescriptor, number: int) -> str:
    v = f.enum_type.values_by_number.get(number)
    return v.name if v is not None else str(number)


def _walk_message(kind: str, msg: Any, path: str, out: set[str]) -> None:
    d = msg.DESCRIPTOR
    in_oneof = {f.name for o in d.oneofs for f in o.fields}
    for o in d.oneofs:
        member = msg.WhichOneof(o.name)
        if member:
            out.add(f"{path}{member}")
    for f in d.fields:
        if f.enum_type is not None:
            cond = ONLY_WHEN.get((kind, f"{path}{f.name}"))
            if cond and _enum_name(d.fields_by_name[cond[0]], getattr(msg, cond[0])) != cond[1]:
                continue
            values = getattr(msg, f.name)
            for number in values if f.is_repeated else [values]:
                out.add(f"{path}{f.name}={_enum_name(f, number)}")
        elif f.message_type is not None and f.message_type.full_name not in OPAQUE:
            if f.is_repeated:
                for sub in getattr(msg, f.name):
                    _walk_message(kind, sub, f"{path}{f.name}.", out)
            elif f.name not in in_oneof or msg.HasField(f.name):
                # an unset message outside a oneof reads as its defaults (so do its enums)
                _walk_message(kind, getattr(msg, f.name), f"{path}{f.name}.", out)


def layer_pairs(layer: Any) -> set[str]:
    """The pairs of one layer: its kind, and ``kind.subtype`` for each subtype it has."""
    kind = layer.WhichOneof("layer")
    if not kind:
        return set()
    subs: set[str] = set()
    _walk_message(kind, getattr(layer, kind), "", subs)
    return {kind} | {f"{kind}.{s}" for s in subs}
