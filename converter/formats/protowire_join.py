"""Putting large payloads into a serialized protobuf message while writing it (the mirror of protowire).

Protobuf's Python API copies every byte put into a message (setting ``WeightParams.floatValue``
from an array copies it, ``SerializeToString`` copies it again), so a model built with its weights
in it would be held two or three times while it is written. Instead the caller leaves in each
message that should hold a payload a marker (`mark_payload`: the unknown varint field
``MARKER_FIELD`` whose value is the payload's index, as protowire's reader leaves), serializes the
much smaller message, and `joined_segments` splices the payloads in: each marker becomes the field
the caller names, length-delimited, with the payload's bytes, and every enclosing length prefix is
re-encoded. The result is a list of segments (small re-encoded framing, runs of the skeleton, and
the payload buffers themselves, never copied) that a writer streams to a file.

The walk is over the serialized skeleton, with the message's descriptors (like protowire's: only
message fields are descended into), linear in the skeleton's size and nested at most
``MAX_NESTING`` deep.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from ..limits import MAX_NESTING
from .protowire import _I32, _I64, _LEN, _MARKER_KEY, _VARINT, MARKER_FIELD, _encode_varint

__all__ = ["Segment", "joined_segments", "mark_payload"]

#: A piece of the joined message: re-encoded framing (bytes) or a view (of the skeleton or a payload).
Segment = bytes | memoryview

# Runs of the skeleton shorter than this are copied into the framing around them (fewer, larger
# writes); longer runs stay views of the skeleton.
_COPY_BELOW = 1 << 16

_FT = FieldDescriptor
_FIXED_SIZE = {
    _FT.TYPE_FLOAT: 4, _FT.TYPE_FIXED32: 4, _FT.TYPE_SFIXED32: 4,
    _FT.TYPE_DOUBLE: 8, _FT.TYPE_FIXED64: 8, _FT.TYPE_SFIXED64: 8,
}
_NOT_PACKABLE = (_FT.TYPE_STRING, _FT.TYPE_BYTES, _FT.TYPE_MESSAGE, _FT.TYPE_GROUP)


def mark_payload(msg: Message, index: int) -> None:
    """Leave in ``msg`` the marker of payload ``index`` (kept as an unknown field by serialization,
    however deep ``msg`` is nested; `joined_segments` replaces it with the payload)."""
    if index < 0:
        raise ValueError(f"payload index {index} is negative")
    msg.MergeFromString(_MARKER_KEY + _encode_varint(index))


def _payload_problem(fd: FieldDescriptor | None, size: int) -> str | None:
    """Why a payload of ``size`` bytes cannot be the field ``fd`` (length-delimited), or None."""
    if fd is None:
        return "is not a field of"
    if fd.type in (_FT.TYPE_STRING, _FT.TYPE_BYTES, _FT.TYPE_MESSAGE):
        return None
    if not fd.is_repeated or fd.type in _NOT_PACKABLE:
        return "is not a length-delimited field (bytes, string, message or packed repeated scalar) of"
    item = _FIXED_SIZE.get(fd.type)
    if item is not None and size % item:
        return f"holds {item}-byte items, and {size} bytes is not a whole number of them, in"
    return None


def _as_bytes_view(buffer: Any, index: int) -> memoryview:
    """The bytes of payload ``index`` as a flat view (no copy)."""
    view = memoryview(buffer)
    if view.format[:1] in (">", "!"):
        raise ValueError(f"payload {index} is big-endian (format {view.format!r}); protobuf is little-endian")
    if not view.c_contiguous:
        raise ValueError(f"payload {index} is not a C-contiguous buffer")
    return view.cast("B") if view.nbytes else memoryview(b"")  # (cast refuses zeros in the shape)


class _Joiner:
    """Builds the segment list; framing bytes gather in ``pending`` until a view breaks the run."""

    def __init__(self, skeleton: memoryview, payloads: Sequence[tuple[int, Any]]) -> None:
        self.skeleton, self.payloads = skeleton, payloads
        self.views: dict[int, memoryview] = {}
        # bytes (framing; b"" is a length prefix still to fill in) or views (of skeleton or payloads)
        self.items: list[Any] = []
        self.pending = bytearray()

    def copy(self, start: int, stop: int) -> None:
        if stop - start < _COPY_BELOW:
            self.pending += self.skeleton[start:stop]
        else:
            self.view(self.skeleton[start:stop])

    def view(self, v: memoryview) -> None:
        self.flush()
        self.items.append(v)

    def flush(self) -> None:
        if self.pending:
            self.items.append(bytes(self.pending))
            self.pending = bytearray()

    def prefix_slot(self) -> int:
        self.flush()
        self.items.append(b"")
        return len(self.items) - 1

    def payload(self, index: int, descriptor: Descriptor, offset: int) -> tuple[int, int]:
        """(field number, byte size) of payload ``index`` for the marker at ``offset``, after
        checking it."""
        if not 0 <= index < len(self.payloads):
            raise ValueError(f"marker at offset {offset} of the skeleton ({descriptor.full_name}) names payload "
                             f"{index}, but there are {len(self.payloads)} payloads")
        number, buffer = self.payloads[index]
        view = self.views.get(index)
        if view is None:
            view = self.views[index] = _as_bytes_view(buffer, index)
        why = _payload_problem(descriptor.fields_by_number.get(number), len(view))
        if why:
            raise ValueError(f"payload {index}: field number {number} {why} {descriptor.full_name} "
                             f"(the message whose marker names it, at offset {offset} of the skeleton)")
        return number, len(view)

    def join(self, pos: int, end: int, descriptor: Descriptor, depth: int) -> int:
        """Append the message at skeleton[pos:end] with its markers replaced; return its new size."""
        if depth > MAX_NESTING:
            raise ValueError(f"messages nested more than {MAX_NESTING} deep")
        data, fields = self.skeleton, descriptor.fields_by_number
        size, run = 0, pos  # run: start of the skeleton bytes not yet appended
        held: set[int] = set()  # the fields the message holds itself
        put: dict[int, int] = {}  # payload field number -> payload index, of the markers in it
        while pos < end:
            start = pos
            key, pos = _varint(data, pos, end)
            number, wire = key >> 3, key & 7
            if number != MARKER_FIELD:
                held.add(number)
            if wire == _VARINT:
                value, pos = _varint(data, pos, end)
                if number == MARKER_FIELD:
                    self.copy(run, start)
                    size += start - run
                    field, n = self.payload(value, descriptor, start)
                    if field in put:
                        raise ValueError(f"payloads {put[field]} and {value} are both field {field} of one "
                                         f"{descriptor.full_name} (offset {start} of the skeleton)")
                    put[field] = value
                    framing = _encode_varint(field << 3 | _LEN) + _encode_varint(n)
                    self.pending += framing
                    if n:
                        self.view(self.views[value])
                    size += len(framing) + n
                    run = pos
                continue
            if wire == _I64:
                pos += 8
            elif wire == _I32:
                pos += 4
            elif wire == _LEN:
                length, body = _varint(data, pos, end)
                pos = body + length
                if pos > end:
                    raise ValueError(f"truncated field at offset {start} of the skeleton")
                fd = fields.get(number)
                if fd is not None and fd.type == _FT.TYPE_MESSAGE:
                    self.copy(run, start)
                    size += start - run
                    key_bytes = bytes(data[start:_key_end(data, start)])
                    slot = self.prefix_slot()
                    inner = self.join(body, pos, fd.message_type, depth + 1)
                    self.items[slot] = key_bytes + _encode_varint(inner)
                    size += len(self.items[slot]) + inner
                    run = pos
            else:
                raise ValueError(f"wire type {wire} (groups) at offset {start} of the skeleton")
            if pos > end:
                raise ValueError(f"truncated field at offset {start} of the skeleton")
        for field in held.intersection(put):
            raise ValueError(f"payload {put[field]}: {descriptor.full_name} field {field} is set in the message "
                             "itself as well (a payload would be merged with it)")
        self.copy(run, end)
        return size + end - run

    def segments(self) -> list[Segment]:
        """The items with adjacent framing merged (views of the skeleton and payloads kept)."""
        self.flush()
        out: list[Segment] = []
        small: list[bytes] = []
        for item in self.items:
            if isinstance(item, memoryview):
                if small:
                    out.append(b"".join(small))
                    small = []
                out.append(item)
            elif item:
                small.append(item)
        if small:
            out.append(b"".join(small))
        return out


def _varint(data: memoryview, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end:
            raise ValueError(f"truncated varint at offset {pos} of the skeleton")
        if shift > 63:
            raise ValueError(f"overlong varint at offset {pos} of the skeleton")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _key_end(data: memoryview, pos: int) -> int:
    while data[pos] >= 0x80:
        pos += 1
    return pos + 1


def joined_segments(skeleton: bytes | bytearray | memoryview, descriptor: Descriptor,
                    payloads: Sequence[tuple[int, Any]]) -> tuple[int, list[Segment]]:
    """(total size, segments) of the message ``skeleton`` (serialized, of type ``descriptor``) with
    each marker replaced by the field ``payloads[index][0]`` of the message holding it, holding the
    bytes of ``payloads[index][1]`` (any contiguous little-endian buffer: a numpy array, a
    memoryview; it is not copied: the segments hold views of it).

    The payload field is written where the marker was (serialization puts unknown fields, hence
    markers, after the known ones; readers accept fields in any order). Payloads no marker names are
    left out. `ValueError` for a marker naming no payload, a field number that is not a
    length-delimited field of the marker's message (or one it already holds), or a malformed skeleton.
    """
    view = memoryview(skeleton).cast("B")
    joiner = _Joiner(view, payloads)
    total = joiner.join(0, len(view), descriptor, 0)
    return total, joiner.segments()
