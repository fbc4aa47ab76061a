"""ONNX frontend: an ONNX model (path, bytes or ``onnx.ModelProto``) -> the IR.

Layout: `model_file` reads the protobuf, external data and initializers (zero-copy where the data
allows) and runs onnx's shape inference; `context` holds what a mapping sees and the one dtype
policy (int64 -> int32, fp64 -> fp32, ...); `registry` is the op type -> mapping table with the
schema versions each mapping handles; `ops` lists the ``ops_<family>`` modules that fill it;
`to_ir` drives the conversion. See docs in each module.

Adding ops (one family = one ``ops_<family>.py`` module, one line in `ops`)::

    @onnx_op("Softmax", versions=(13, 13))      # the op schema since_versions this handles
    def softmax(ctx: Ctx, node: Node) -> list[Value]:
        x = ctx.input(0, FLOATS)                 # IR value, cast up to a dtype the IR op takes
        axis = ctx.attr("axis")                  # attribute, the schema default when absent
        ...                                      # ctx.const_input(i): compile-time numpy (int64 kept)
        return [ctx.b.softmax(x=x, axis=axis)]   # one entry per ONNX output (Value, ndarray or None)

Errors: ``raise ctx.unsupported("why")`` for a valid node the IR cannot express,
``raise ctx.format_error("why")`` for a malformed one (both name the file and node). The driver
casts results to the ONNX output dtype; a mapping never handles int64/fp64 itself. Test: the
node suite (tests/onnx_frontend/node_suite.py, ``python benchmarks/onnx_node_tests.py -k NAME
--failures``) and onnxruntime on chosen inputs where ONNX and MIL differ.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ...ir.core import Program

#: File suffix `converter.load` reads as ONNX.
ONNX_SUFFIX = ".onnx"


def is_onnx_source(source: Any) -> bool:
    """True for a path ending in ``.onnx``, an ``onnx.ModelProto``, or the bytes of one
    (`looks_like_onnx`)."""
    if isinstance(source, (str, os.PathLike)):
        return Path(source).name.lower().endswith(ONNX_SUFFIX)
    if isinstance(source, (bytes, bytearray, memoryview)):
        return looks_like_onnx(source)
    return type(source).__name__ == "ModelProto" and type(source).__module__.startswith("onnx")


def looks_like_onnx(data: bytes | bytearray | memoryview) -> bool:
    """Whether serialized bytes are an ONNX ModelProto rather than a Core ML Model, from their
    top-level field numbers alone (nothing is parsed): a ModelProto has its graph (7) and opset
    imports (8), fields a Core ML Model does not have (its fields are 1, 2, 10 and 200 up)."""
    view = memoryview(data).cast("B")
    pos, seen = 0, set()
    try:
        while pos < len(view):
            key, pos = _varint(view, pos)
            number, wire = key >> 3, key & 7
            seen.add(number)
            if wire == 0:
                _, pos = _varint(view, pos)
            elif wire == 2:
                n, pos = _varint(view, pos)
                pos += n
            elif wire in (1, 5):
                pos += 8 if wire == 1 else 4
            else:
                return False
    except IndexError:
        return False
    return pos == len(view) and {7, 8} <= seen and max(seen) <= 20


def _varint(view: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = view[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise IndexError("varint too long")


def load_onnx(source: Any, *, base_dir: str | os.PathLike | None = None) -> Program:
    """Read an ONNX model into the IR. ``source``: a path, the model's bytes or an
    ``onnx.ModelProto`` (never modified). External data files are looked up beside the model
    file (or in ``base_dir``). Raises FormatError for a malformed model and UnsupportedError
    listing every op type the converter cannot take."""
    from .model_file import read_model
    from .to_ir import graph_to_program

    return graph_to_program(read_model(source, base_dir))


__all__ = ["ONNX_SUFFIX", "is_onnx_source", "load_onnx", "looks_like_onnx"]
