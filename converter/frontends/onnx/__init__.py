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
    """True for a path ending in ``.onnx`` or an ``onnx.ModelProto``."""
    if isinstance(source, (str, os.PathLike)):
        return Path(source).name.lower().endswith(ONNX_SUFFIX)
    return type(source).__name__ == "ModelProto" and type(source).__module__.startswith("onnx")


def load_onnx(source: Any, *, base_dir: str | os.PathLike | None = None) -> Program:
    """Read an ONNX model into the IR. ``source``: a path, the model's bytes or an
    ``onnx.ModelProto`` (never modified). External data files are looked up beside the model
    file (or in ``base_dir``). Raises FormatError for a malformed model and UnsupportedError
    listing every op type the converter cannot take."""
    from .model_file import read_model
    from .to_ir import graph_to_program

    return graph_to_program(read_model(source, base_dir))


__all__ = ["ONNX_SUFFIX", "is_onnx_source", "load_onnx"]
