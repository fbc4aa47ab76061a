"""Taking large payloads out of a serialized protobuf message before parsing it.

Protobuf's parser copies every byte of a message into its own memory, and the Python API gives
no view of a repeated scalar field, only copies. In a NeuralNetwork ``.mlmodel`` nearly every byte
is a weight (``WeightParams.floatValue`` / ``float16Value``), so parsing the file and decoding its
weights would hold them two or three times. ``split_payloads`` re-encodes a message without the
fields the caller picks (walking the wire format with the message's descriptors: nested messages
are re-encoded, everything else is copied as is) and leaves in the place of each one a marker, an
unknown field whose value is the payload's index; it returns where each payload is in the file,
so that the caller can map it. ``payload_indices`` reads the markers back from the parsed message.
Given the message types payloads can belong to (``within``), the walk enters only messages that
can hold one: the rest (a whole MIL program, for instance) is copied in one read.

The walk reads the file through ``os.pread`` in small windows, never touching the payloads' pages
(touching one byte of a mapped file maps its whole page-cache folio, up to megabytes). It is bounded
like protobuf's own parser (field number 0 is invalid; messages nest at most 100 deep) and in work:
a file of millions of tiny fields (a hostile one: a run of zero bytes, a scalar repeated a million
times) stops the walk after ``MAX_FIELDS`` fields with a `WireError`, instead of walking for minutes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from ..limits import MAX_NESTING

# The marker's field number: the largest protobuf allows, used by no Core ML message.
MARKER_FIELD = (1 << 29) - 1
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_MARKER_KEY = bytes([0xF8, 0xFF, 0xFF, 0xFF, 0x0F])  # (MARKER_FIELD << 3) | _VARINT as a varint
_WINDOW = 1 << 16
#: Fields walked in one file, at most (a quarter of a second of walking): the shared real models
#: hold at most 12,301 (weights are one packed field each); a file with more is read by protobuf's
#: parser instead (when small enough: model_file).
MAX_FIELDS = 200_000

# decides whether to take a length-delimited, non-message field out: (message, field number, length)
Take = Callable[[Descriptor, int, int], bool]


class WireError(ValueError):
    """The bytes are not a well-formed encoding of the message (the caller falls back to parsing)."""


class _File:
    """Positioned reads of a file through a small window."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size = fd, size
        self.base, self.window = 0, b""
        self.fields_left = MAX_FIELDS

    def read(self, pos: int, n: int) -> bytes:
        if pos + n > self.size:
            raise WireError("truncated message")
        if n > _WINDOW:
            return os.pread(self.fd, n, pos)
        if not (self.base <= pos and pos + n <= self.base + len(self.window)):
            self.base, self.window = pos, os.pread(self.fd, min(_WINDOW, self.size - pos), pos)
        return self.window[pos - self.base:pos - self.base + n]

    def varint(self, pos: int) -> tuple[int, int]:
        value = shift = 0
        while True:
            if shift > 63:
                raise WireError("overlong varint")
            byte = self.read(pos, 1)[0]
            pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value, pos
            shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def split_payloads(fd: int, size: int, descriptor: Descriptor, take: Take,
                   within: Iterable[Descriptor] | None = None) -> tuple[bytes, list[tuple[int, int, int]]]:
    """(the message in the file without the payloads ``take`` picks, [(field number, offset, length)]
    of those payloads, in marker index order).

    ``within``: the message types payloads can be fields of (None: any). Nested messages that can
    hold none of them (at any depth) are copied as they are instead of walked: a MIL program, whose
    weights are in blob files, then costs one read instead of a walk of its ~10 fields per op."""
    payloads: list[tuple[int, int, int]] = []
    descend = None if within is None else _containers(descriptor, frozenset(within))
    return bytes(_split(_File(fd, size), 0, size, descriptor, take, payloads, 0, descend)), payloads


_CONTAINERS: dict[tuple[Descriptor, frozenset[Descriptor]], frozenset[Descriptor]] = {}


def _containers(root: Descriptor, targets: frozenset[Descriptor]) -> frozenset[Descriptor]:
    """The message types reachable from ``root`` that are, or can (at any depth) hold, a ``targets`` message."""
    key = (root, targets)
    got = _CONTAINERS.get(key)
    if got is not None:
        return got
    children: dict[Descriptor, list[Descriptor]] = {}
    todo = [root]
    while todo:
        d = todo.pop()
        if d in children:
            continue
        children[d] = [fd.message_type for fd in d.fields if fd.type == FieldDescriptor.TYPE_MESSAGE]
        todo.extend(children[d])
    found = set(targets) & set(children)
    changed = True
    while changed:  # fixed point over the (possibly cyclic) graph of message types
        changed = False
        for d, kids in children.items():
            if d not in found and any(k in found for k in kids):
                found.add(d)
                changed = True
    got = _CONTAINERS[key] = frozenset(found)
    return got


def _split(f: _File, pos: int, end: int, descriptor: Descriptor, take: Take,
           payloads: list[tuple[int, int, int]], depth: int, descend: frozenset[Descriptor] | None) -> bytearray:
    if depth > MAX_NESTING:
        raise WireError(f"messages nested more than {MAX_NESTING} deep")
    # first the fields' extents: (number, start, end of key, start of body or None, end)
    entries = []
    while pos < end:
        start = pos
        f.fields_left -= 1
        if f.fields_left < 0:
            raise WireError(f"more than {MAX_FIELDS} fields")
        key, pos = f.varint(pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise WireError(f"field number 0 at offset {start}")
        body = None
        if wire == _VARINT:
            _, pos = f.varint(pos)
        elif wire == _I64:
            pos += 8
        elif wire == _I32:
            pos += 4
        elif wire == _LEN:
            length, body = f.varint(pos)
            key_end, pos = pos, body + length
            entries.append((number, start, key_end, body, pos))
        else:
            raise WireError(f"wire type {wire} (groups) is not used by Core ML messages")
        if pos > end:
            raise WireError("truncated field")
        if body is None:
            entries.append((number, start, pos, None, pos))
    # a field stored more than once is merged by the parser: it stays in place
    seen: dict[int, int] = {}
    for number, *_ in entries:
        seen[number] = seen.get(number, 0) + 1
    out = bytearray()
    fields = descriptor.fields_by_number
    for number, start, key_end, body, stop in entries:
        fd = fields.get(number) if body is not None else None
        if fd is not None and fd.type == FieldDescriptor.TYPE_MESSAGE and (
                descend is None or fd.message_type in descend):
            inner = _split(f, body, stop, fd.message_type, take, payloads, depth + 1, descend)
            out += f.read(start, key_end - start)
            out += _encode_varint(len(inner))
            out += inner
        elif fd is not None and seen[number] == 1 and take(descriptor, number, stop - body):
            out += _MARKER_KEY + _encode_varint(len(payloads))
            payloads.append((number, body, stop - body))
        else:
            out += f.read(start, stop - start)
    return out


def payload_indices(msg: Message) -> list[int]:
    """The indices of the payloads taken out of ``msg`` (none for a message parsed as is)."""
    from google.protobuf.unknown_fields import UnknownFieldSet

    return [int(f.data) for f in UnknownFieldSet(msg) if f.field_number == MARKER_FIELD and f.wire_type == _VARINT]
