"""IR -> ONNX: a ``.onnx`` model of the program's main function (default-domain opsets 17..21).

- `program_to_onnx` builds the ModelProto in memory (nothing is written; `converter run --runtime
  onnxruntime` uses it); `save_onnx` writes it atomically.
- Graph inputs and outputs keep the feature names exactly and are typed with their dims; a symbolic
  IR dim is a ``dim_param`` holding the symbol's name.
- Constants are initializers (raw_data). A model whose serialized size would exceed
  ``external_threshold`` (2 GB, protobuf's limit) keeps its tensors of at least 1 KiB in
  ``<name>.onnx.data`` beside the model (ONNX external data, offsets aligned to 4 KiB).
- Every op that cannot be lowered is listed in one `UnsupportedError`; the program is not modified.
- The model passes ``onnx.checker.check_model(full_check=True)`` (checked before anything is
  written: a model the checker refuses is an internal error, never a file).

How each IR op is written: converter/backends/onnx/lowering (``converter ops`` shows it).
"""

from __future__ import annotations

import os
from pathlib import Path

import onnx
from onnx import helper

from ...errors import ConverterError, UnsupportedError
from ...ir.core import Program
from .external import save_model_file
from .graph import lower_function
from .lowering.registry import DEFAULT_OPSET, MAX_OPSET, MIN_OPSET

#: protobuf cannot serialize a message of 2 GiB or more
TWO_GB = 2**31 - 1

#: The ONNX IR version written for each opset (the lowest that carries it: what onnxruntime reads)
_IR_VERSIONS = {17: 8, 18: 8, 19: 9, 20: 9, 21: 10}


def check_opset(opset: int) -> int:
    """``opset`` if the backend writes it, else `UnsupportedError`."""
    if not isinstance(opset, int) or isinstance(opset, bool) or not MIN_OPSET <= opset <= MAX_OPSET:
        raise UnsupportedError(f"ONNX opset {opset!r} is not written (one of {MIN_OPSET}..{MAX_OPSET})")
    return opset


def program_to_onnx(program: Program, *, opset: int = DEFAULT_OPSET, source: str | None = None,
                    check: bool = True) -> onnx.ModelProto:
    """The ONNX model of ``program``'s main function at default-domain ``opset``; ``check``: run
    the ONNX checker (full check) when the model fits in one protobuf message."""
    check_opset(opset)
    fn = program.main
    graph, domains = lower_function(fn, opset, source=source)
    imports = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in sorted(domains.items())]
    model = helper.make_model(graph, opset_imports=imports, producer_name="converter",
                              ir_version=_IR_VERSIONS[opset])
    if program.doc_string:
        model.doc_string = program.doc_string
    if check and _fits_in_memory(model):
        try:
            onnx.checker.check_model(model, full_check=True)
        except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as err:
            raise ConverterError(f"internal error: the ONNX model written is invalid: {err}", file=source) from err
    return model


def save_onnx(program: Program, path: str | os.PathLike, *, opset: int = DEFAULT_OPSET, overwrite: bool = False,
              durable: bool = False, source: str | None = None, external_threshold: int = TWO_GB) -> Path:
    """Write ``program`` as the ONNX model ``path`` (atomically; nothing is replaced unless
    ``overwrite``); returns ``path``. ``external_threshold``: the serialized size above which the
    tensors go to ``<name>.onnx.data`` (the 2 GB protobuf limit; smaller in tests)."""
    model = program_to_onnx(program, opset=opset, source=source, check=False)
    dest = Path(path)
    save_model_file(model, dest, overwrite=overwrite, durable=durable, external_threshold=external_threshold,
                    source=source)
    return dest


def _fits_in_memory(model: onnx.ModelProto) -> bool:
    """Whether the model (with its initializers) is below the protobuf message limit."""
    return sum(t.ByteSize() for t in model.graph.initializer) < TWO_GB - (64 << 20)


__all__ = ["DEFAULT_OPSET", "MAX_OPSET", "MIN_OPSET", "check_opset", "program_to_onnx", "save_onnx"]
