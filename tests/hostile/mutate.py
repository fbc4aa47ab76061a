"""Seeded mutations of the shared models (../shared/data/models), for fuzzing the readers.

``make_mutant(seed)`` picks a source model, one of its parts (a bare ``.mlmodel``; or a package's
``model.mlmodel``, ``Manifest.json`` or ``weight.bin``) and one to three mutations, all from
``random.Random(seed)``: the same seed (with the same shared models) gives the same mutant, so a
failure is replayed from its seed alone (``python tools/fuzz.py --replay SEED``).

Mutations:
- bytes, any part: truncation, bit flips, byte insertions (random bytes or runs of 0x00/0xFF),
  deletions, overwrites with "interesting" bytes;
- protobuf parts, walking the wire format with the Core ML descriptors: a varint set to a huge or
  negative value, a length prefix changed, a repeated field emptied, a field duplicated, a float or
  double set to inf/nan/huge, packed data or a string rewritten (enclosing lengths are fixed up, so
  the mutant still parses where the change allows);
- Manifest.json: a value replaced by another type, a huge number, a hostile path, a deep nesting;
  a key deleted;
- weight.bin: a header or blob metadata field (count, version, sentinel, dtype, size, offset,
  padding) set to an edge value.
"""

from __future__ import annotations

import json
import random
import shutil
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from converter.formats.proto import Model_pb2
from tests.conftest import MODELS

# Models whose unmutated conversion and check take over half a second (interpreting full-size
# image networks): fuzzing them costs too much time per case.
SLOW = {"real/7485461f_SqueezeNetFP16.mlmodel", "real/799a4a00_model_cpm.mlmodel",
        "real/8dbda0d2_SqueezeNetInt8LUT.mlmodel", "real/9de70cc9_DeepLabV3Int8LUT.mlmodel",
        "real/9f7cf8e5_model_hourglass.mlmodel"}
PACKAGE_PARTS = ("Data/com.apple.CoreML/model.mlmodel", "Manifest.json", "Data/com.apple.CoreML/weights/weight.bin")


def sources() -> list[str]:
    """The shared models mutants are made from (paths relative to the models folder), sorted."""
    found = [p for d in ("builder", "real", "torch") for p in (MODELS / d).glob("*")
             if p.suffix in (".mlmodel", ".mlpackage")]
    return sorted(str(p.relative_to(MODELS)) for p in found if str(p.relative_to(MODELS)) not in SLOW)


#: ONNX sources are named ``onnx:`` + their path below the onnx package's own test models
ONNX_PREFIX = "onnx:"


def onnx_data() -> Path:
    import onnx

    return Path(onnx.__file__).parent / "backend" / "test" / "data"


def onnx_sources() -> list[str]:
    """The model files the ``onnx`` package ships for its backend tests (pytorch-converted,
    pytorch-operator, simple: 140 small models written by ONNX's authors), as ``onnx:`` names."""
    root = onnx_data()
    return sorted(ONNX_PREFIX + str(p.relative_to(root)) for d in ("pytorch-converted", "pytorch-operator", "simple")
                  for p in (root / d).glob("*/model.onnx"))


def exported_onnx_sources(folder: Path) -> list[str]:
    """The shared models (but the slow ones) written as ONNX into ``folder`` by our own backend,
    as absolute paths: larger graphs than onnx's test models, with If/Loop, quantized weights
    and classifiers. Models the backend refuses are left out."""
    import warnings

    import converter
    from converter.errors import ConverterError

    out = []
    for rel in sources():
        dst = folder / (rel.replace("/", "__").rsplit(".", 1)[0] + ".onnx")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                converter.convert(MODELS / rel, to="onnx", out=dst)
        except ConverterError:
            continue
        out.append(str(dst))
    return out


def source_path(source: str) -> Path:
    if source.startswith(ONNX_PREFIX):
        return onnx_data() / source[len(ONNX_PREFIX):]
    return MODELS / source  # an absolute path stays itself


# -- protobuf wire format ---------------------------------------------------------------------------

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("bad varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def encode_varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative numbers: 64-bit two's complement, as protobuf writes them
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@dataclass
class WireField:
    number: int
    wire: int
    start: int  # of the key
    body: int  # of the value (after the length prefix for LEN fields)
    end: int
    parents: tuple[tuple[int, int, int], ...]  # enclosing LEN fields: (key end, body, end)
    descriptor: FieldDescriptor | None
    message: tuple[int, int]  # the (body, end) of the message holding this field


def walk(data: bytes, descriptor: Descriptor, *, limit: int = 50_000) -> list[WireField]:
    """The fields of a serialized message, nested known messages included (best effort: stops at
    the first malformed spot, and after ``limit`` fields)."""
    out: list[WireField] = []
    stack = [(0, len(data), descriptor, ())]
    while stack and len(out) < limit:
        pos, end, desc, parents = stack.pop()
        try:
            while pos < end and len(out) < limit:
                start = pos
                key, pos = _varint(data, pos)
                number, wire = key >> 3, key & 7
                body = pos
                if wire == _VARINT:
                    _, pos = _varint(data, pos)
                elif wire == _I64:
                    pos += 8
                elif wire == _I32:
                    pos += 4
                elif wire == _LEN:
                    n, body = _varint(data, pos)
                    key_end, pos = pos, body + n
                else:
                    break
                if pos > end:
                    break
                fd = desc.fields_by_number.get(number) if desc is not None else None
                msg = parents[-1][1:] if parents else (0, len(data))
                out.append(WireField(number, wire, start, body, pos, parents, fd, msg))
                if wire == _LEN and fd is not None and fd.type == FieldDescriptor.TYPE_MESSAGE:
                    stack.append((body, pos, fd.message_type, parents + ((key_end, body, pos),)))
        except ValueError:
            continue
    return out


def splice(data: bytes, f: WireField, new: bytes, *, start: int | None = None, end: int | None = None) -> bytes:
    """``data`` with ``data[start:end]`` (default: the whole field ``f``) replaced by ``new``, and the
    length prefixes of the messages enclosing ``f`` fixed up."""
    start = f.start if start is None else start
    end = f.end if end is None else end
    out = data[:start] + new + data[end:]
    delta = len(new) - (end - start)
    for key_end, body, pend in reversed(f.parents):
        prefix = encode_varint(pend - body + delta)
        out = out[:key_end] + prefix + out[body:]
        delta += len(prefix) - (body - key_end)
    return out


_INTS = [0, 1, -1, 2, 63, 64, 65, 100, 255, 256, 1000, 65535, 65536, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**40,
         2**53, 2**62, 2**63 - 1, -(2**31), -(2**63), 10**12, -733]
_FLOATS = [float("inf"), float("-inf"), float("nan"), 3.4e38, -3.4e38, 1e-45, 0.0, -0.0, 1e30, -1.0, 65536.0]


def _proto_mutation(data: bytes, rng: random.Random, descriptor: Descriptor | None = None) -> tuple[bytes, str] | None:
    fields = walk(data, descriptor or Model_pb2.Model.DESCRIPTOR)
    if not fields:
        return None
    kind = rng.choice(["varint", "varint", "varint", "length", "empty", "duplicate", "float", "packed", "string",
                       "drop"])
    if kind == "varint":
        pool = [f for f in fields if f.wire == _VARINT]
        if not pool:
            return None
        f = rng.choice(pool)
        old, _ = _varint(data, f.body)
        value = rng.choice(_INTS + [old + 1, old - 1, old * 1000, rng.getrandbits(64)])
        return splice(data, f, data[f.start:f.body] + encode_varint(value)), \
            f"field {_name(f)} @{f.start}: varint {old} -> {value}"
    if kind == "length":
        pool = [f for f in fields if f.wire == _LEN]
        if not pool:
            return None
        f = rng.choice(pool)
        _, after_key = _varint(data, f.start)
        old = f.end - f.body
        new = rng.choice([0, 1, old - 1, old + 1, old + rng.randint(2, 100), old * 2, 2**31, 2**63 - 1])
        out = data[:after_key] + encode_varint(max(new, 0)) + data[f.body:]
        return out, f"field {_name(f)} @{f.start}: length {old} -> {new} (content unchanged)"
    if kind in ("empty", "drop"):
        f = rng.choice(fields)
        same = [g for g in fields if g.message == f.message and g.number == f.number] if kind == "empty" else [f]
        same.sort(key=lambda g: g.start)
        kept = b"".join(data[a.end:b.start] for a, b in zip(same, same[1:]))  # what lies between them
        return splice(data, f, kept, start=same[0].start, end=same[-1].end), \
            f"field {_name(f)}: {len(same)} occurrence(s) removed"
    if kind == "duplicate":
        f = rng.choice(fields)
        times = rng.choice([1, 2, 50])
        chunk = data[f.start:f.end]
        return splice(data, f, chunk * (times + 1)), f"field {_name(f)} @{f.start}: repeated {times} more time(s)"
    if kind == "float":
        pool = [f for f in fields if f.wire in (_I32, _I64)]
        if not pool:
            return None
        f = rng.choice(pool)
        v = rng.choice(_FLOATS)
        raw = struct.pack("<f" if f.wire == _I32 else "<d", v)
        return splice(data, f, raw, start=f.body, end=f.end), f"field {_name(f)} @{f.start}: float -> {v}"
    if kind == "packed":
        pool = [f for f in fields if f.wire == _LEN and (f.descriptor is None or
                                                         f.descriptor.type != FieldDescriptor.TYPE_MESSAGE)]
        if not pool:
            return None
        f = rng.choice(pool)
        content = bytearray(data[f.body:f.end])
        how = rng.choice(["cut", "odd", "nan", "int"])
        if how == "cut" or not content:
            content = content[: rng.randint(0, len(content))]
        elif how == "odd":
            content = content[:-1] if len(content) % 2 == 0 else content + b"\x00"
        else:
            at = rng.randrange(0, max(1, len(content) - 3))
            word = struct.pack("<f", rng.choice(_FLOATS)) if how == "nan" else \
                struct.pack("<I", rng.choice(_INTS) & 0xFFFFFFFF)
            content[at:at + 4] = word
        new = data[f.start:f.body - len(encode_varint(f.end - f.body))] + encode_varint(len(content)) + bytes(content)
        return splice(data, f, new), f"field {_name(f)} @{f.start}: payload {how} ({f.end - f.body} -> {len(content)} bytes)"
    pool = [f for f in fields if f.descriptor is not None and f.descriptor.type == FieldDescriptor.TYPE_STRING]
    if not pool:
        return None
    f = rng.choice(pool)
    text = rng.choice([b"", b"\x00", b"../../../etc/passwd", b"\xff\xfe", b"a" * 10000, b"\x1b]0;x\x07\n",
                       b"@model_path/weights/../../x", b"main", b"iOS99", b"CoreML99"])
    key = data[f.start:f.body - len(encode_varint(f.end - f.body))]
    return splice(data, f, key + encode_varint(len(text)) + text), f"field {_name(f)} @{f.start}: string -> {text[:20]!r}"


def _name(f: WireField) -> str:
    return f.descriptor.full_name if f.descriptor is not None else f"#{f.number}"


# -- JSON ------------------------------------------------------------------------------------------

_JSON_VALUES: list[object] = [None, 0, -1, 10**30, 1e308, "", "../../x", "/etc/passwd", [], {}, "x" * 10000, True,
                              "2.0.0", "99999999999999999999.0.0", "com.apple.CoreML/weights",
                              "com.apple.CoreML/model.mlmodel", "Manifest.json", "."]


_NEST = "\x00nest\x00"


def _json_paths(node: object, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _json_paths(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _json_paths(v, path + (i,))
    return out


def _json_mutation(data: bytes, rng: random.Random) -> tuple[bytes, str] | None:
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return None
    paths = [p for p in _json_paths(doc) if p]
    if not paths:
        return None
    path = rng.choice(paths)
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    how = rng.choice(["value", "value", "delete", "nest", "many"])
    if how == "delete":
        del parent[path[-1]]
        what = "deleted"
    elif how == "nest":  # spliced into the text: too deep for the json module to write
        depth = rng.choice([10, 100, 5000])
        parent[path[-1]] = _NEST
        what = f"nested {depth} deep"
        text = json.dumps(doc).replace(json.dumps(_NEST), "[" * depth + "]" * depth)
        return text.encode(), f"Manifest {'/'.join(map(str, path))}: {what}"
    elif how == "many" and isinstance(parent, dict):
        first = next(iter(parent.values()))
        for i in range(rng.choice([10, 1000])):
            parent[f"extra{i}"] = first
        what = "many copies of an entry"
    else:
        value = rng.choice(_JSON_VALUES)
        parent[path[-1]] = value
        what = f"-> {str(value)[:20]!r}"
    return json.dumps(doc).encode(), f"Manifest {'/'.join(map(str, path))}: {what}"


# -- weight blobs ----------------------------------------------------------------------------------


def _blob_mutation(data: bytes, rng: random.Random) -> tuple[bytes, str] | None:
    if len(data) < 64:
        return None
    records = [o for o in range(64, len(data) - 63, 64) if data[o:o + 4] == b"\xef\xbe\xad\xde"]
    fields = [(0, "I", "count"), (4, "I", "version")]
    for o in records:
        fields += [(o, "I", f"blob@{o}.sentinel"), (o + 4, "I", f"blob@{o}.dtype"), (o + 8, "Q", f"blob@{o}.size"),
                   (o + 16, "Q", f"blob@{o}.offset"), (o + 24, "Q", f"blob@{o}.padding_bits")]
    at, fmt, name = rng.choice(fields)
    bits = 32 if fmt == "I" else 64
    value = rng.choice([v for v in _INTS if 0 <= v < 2**bits] + [len(data), len(data) + 64, rng.getrandbits(bits)])
    out = bytearray(data)
    out[at:at + struct.calcsize(fmt)] = struct.pack("<" + fmt, value)
    return bytes(out), f"weight.bin {name} -> {value}"


# -- bytes -------------------------------------------------------------------------------------------


def _byte_mutation(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    n = len(data)
    how = rng.choice(["truncate", "flip", "flip", "insert", "run", "delete", "overwrite"])
    if how == "truncate" or n == 0:
        cut = rng.randint(0, max(0, n - 1))
        return data[:cut], f"truncated to {cut} of {n} bytes"
    if how == "flip":
        out = bytearray(data)
        spots = [rng.randrange(n) for _ in range(rng.randint(1, 8))]
        for s in spots:
            out[s] ^= 1 << rng.randrange(8)
        return bytes(out), f"bits flipped at {spots}"
    at = rng.randint(0, n)
    if how == "insert":
        chunk = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 16)))
        return data[:at] + chunk + data[at:], f"{len(chunk)} random bytes inserted at {at}"
    if how == "run":
        size = rng.choice([1, 16, 4096, 1 << 20])
        fill = rng.choice([b"\x00", b"\xff", b"\x80"])
        return data[:at] + fill * size + data[at:], f"{size} x {fill!r} inserted at {at}"
    if how == "delete":
        size = rng.randint(1, 64)
        return data[:at] + data[at + size:], f"{size} bytes deleted at {at}"
    word = rng.choice([b"\xff\xff\xff\xff\xff\xff\xff\xff\x7f", b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",
                       b"\x00\x00\x80\x7f", b"\x00\x00\xc0\x7f", b"\xef\xbe\xad\xde"])
    out = bytearray(data)
    out[at:at + len(word)] = word
    return bytes(out), f"{word.hex()} written at {at}"


def _onnx_mutation(data: bytes, rng: random.Random) -> tuple[bytes, str] | None:
    import onnx

    return _proto_mutation(data, rng, onnx.ModelProto.DESCRIPTOR)


_STRUCTURED: dict[str, Callable[[bytes, random.Random], tuple[bytes, str] | None]] = {
    "proto": _proto_mutation, "json": _json_mutation, "blob": _blob_mutation, "onnx": _onnx_mutation}


def mutate(data: bytes, kind: str, rng: random.Random) -> tuple[bytes, list[str]]:
    """``data`` (a part of ``kind`` proto/json/blob/onnx) with one to three mutations, and what they were."""
    steps = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        done = _STRUCTURED[kind](data, rng) if rng.random() < 0.7 else None
        data, what = done if done is not None else _byte_mutation(data, rng)
        steps.append(what)
    return data, steps


# -- mutants ---------------------------------------------------------------------------------------


@dataclass
class Mutant:
    seed: int
    source: str  # relative to the models folder, or an `onnx:` name (onnx_sources)
    part: str  # "" for a bare .mlmodel, else the path inside the package
    steps: list[str] = field(default_factory=list)
    data: bytes = b""

    def describe(self) -> str:
        where = f"{self.source}/{self.part}" if self.part else self.source
        return f"seed {self.seed}: {where}: " + "; ".join(self.steps)

    def write(self, folder: Path) -> Path:
        """The mutant model below ``folder`` (a package is copied, then its part replaced)."""
        src = source_path(self.source)
        dst = folder / (src.parent.name + ".onnx" if self.source.startswith(ONNX_PREFIX) else src.name)
        for data in src.parent.glob(src.name + ".data") if src.suffix == ".onnx" else ():
            shutil.copyfile(data, folder / (dst.name + ".data"))  # external data (not mutated)
        if self.part:
            shutil.copytree(src, dst, copy_function=shutil.copyfile)  # not the shared files' read-only modes
            for p in [dst, *dst.rglob("*")]:
                p.chmod(0o755 if p.is_dir() else 0o644)
            (dst / self.part).write_bytes(self.data)
        else:
            dst.write_bytes(self.data)
        return dst


def make_mutant(seed: int, pool: list[str] | None = None) -> Mutant:
    rng = random.Random(seed)
    pool = pool if pool is not None else sources()
    source = rng.choice(pool)
    src = source_path(source)
    part = ""
    if src.is_dir():
        part = rng.choice([p for p in PACKAGE_PARTS if (src / p).is_file()])
    raw = (src / part).read_bytes() if part else src.read_bytes()
    kind = ("json" if part.endswith(".json") else "blob" if part.endswith(".bin")
            else "onnx" if source.startswith(ONNX_PREFIX) or source.endswith(".onnx") else "proto")
    data, steps = mutate(raw, kind, rng)
    return Mutant(seed, source, part, steps, data)
