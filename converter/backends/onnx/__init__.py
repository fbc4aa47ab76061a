"""IR -> ONNX: a ``.onnx`` model of one function of the program (default-domain opsets 17..21).

- `program_to_onnx` builds the ModelProto in memory (nothing is written; `converter run --runtime
  onnxruntime` uses it); `save_onnx` writes it atomically.
- Graph inputs and outputs keep the feature names exactly (and their descriptions as doc strings)
  and are typed with their dims; a symbolic IR dim is a ``dim_param`` holding the symbol's name.
  The source's metadata (description, author, license, version, user-defined entries) becomes the
  model's doc string and metadata_props.
- Constants are initializers (raw_data). A model whose serialized size would exceed
  ``external_threshold`` (2 GB, protobuf's limit) keeps its tensors of at least 1 KiB in
  ``<name>.onnx.data`` beside the model (ONNX external data, offsets aligned to 4 KiB).
- Every op that cannot be lowered is listed in one `UnsupportedError`; the program is not modified.
- One function per model: an ONNX model has one graph, and its model-local functions are
  subroutines, not entry points. A program of several functions (iOS18 multifunction models) is
  refused unless ``function`` names the one to export (the others are left out); a one-function
  program exports that function.
- State (iOS18): each state is the graph input ``S`` and the output ``S_out`` (lowering/state.py).
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

#: how a classifier's probability dict is written (`program_to_onnx`)
CLASSIFIER_FORMS = ("tensor", "zipmap")

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
                    check: bool = True, classifier: str = "tensor", function: str | None = None,
                    restore_types: bool = True) -> onnx.ModelProto:
    """The ONNX model of ``program``'s function ``function`` at default-domain ``opset``
    (``function`` None: the program's only function; a program of several is refused);
    ``check``: run the ONNX checker (full check) when the model fits in one protobuf message;
    ``classifier``: how a ``classify`` op's probability dict is written, "tensor" (the
    probabilities in class order, plain ONNX) or "zipmap" (ONNX-ML ZipMap: a sequence of one
    {label: probability} map); ``restore_types``: a feature read from an ONNX model keeps the
    element type it had there (int64, double, bool ...: graph/RESTORED_TYPES), cast at the graph's
    edge to and from the dtype the IR holds it in (False: the IR's types, as the in-memory
    onnxruntime runtime feeds them)."""
    check_opset(opset)
    if classifier not in CLASSIFIER_FORMS:
        raise UnsupportedError(f"classifier form {classifier!r} is not one of {', '.join(CLASSIFIER_FORMS)}")
    fn = program.functions[exported_function(program, function, source)]
    graph, domains = lower_function(fn, opset, source=source, options={"classifier": classifier, "restore_types": restore_types})
    imports = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in sorted(domains.items())]
    model = helper.make_model(graph, opset_imports=imports, producer_name="converter",
                              ir_version=_IR_VERSIONS[opset])
    _copy_metadata(program, model)
    if check and _fits_in_memory(model):
        try:
            onnx.checker.check_model(model, full_check=True)
        except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as err:
            raise ConverterError(f"internal error: the ONNX model written is invalid: {err}", file=source) from err
    return model


def save_onnx(program: Program, path: str | os.PathLike, *, opset: int = DEFAULT_OPSET, overwrite: bool = False,
              durable: bool = False, source: str | None = None, external_threshold: int = TWO_GB,
              classifier: str = "tensor", function: str | None = None) -> Path:
    """Write ``program`` as the ONNX model ``path`` (atomically; nothing is replaced unless
    ``overwrite``); returns ``path``. ``external_threshold``: the serialized size above which the
    tensors go to ``<name>.onnx.data`` (the 2 GB protobuf limit; smaller in tests); ``classifier``,
    ``function``: as `program_to_onnx`."""
    model = program_to_onnx(program, opset=opset, source=source, check=False, classifier=classifier,
                            function=function)
    dest = Path(path)
    save_model_file(model, dest, overwrite=overwrite, durable=durable, external_threshold=external_threshold,
                    source=source)
    return dest


def exported_function(program: Program, function: str | None, source: str | None = None) -> str:
    """The name of the function an ONNX model of ``program`` holds (`UnsupportedError` when
    ``function`` is None and the program has several, or names none of them)."""
    names = list(program.functions)
    if function is None:
        if len(names) == 1:
            return names[0]
        raise UnsupportedError(f"the program has {len(names)} functions ({', '.join(names)}); an ONNX model holds "
                               f"one graph: export them one at a time with function=NAME (converter.save(..., "
                               f"to='onnx', function=NAME))", file=source)
    if function not in program.functions:
        raise UnsupportedError(f"the program has no function {function!r} (it has {', '.join(names)})", file=source)
    return function


def _copy_metadata(program: Program, model: onnx.ModelProto) -> None:
    """The source model's description metadata: shortDescription as the doc string; author,
    license, versionString and the user-defined entries as metadata_props."""
    from ...formats.proto import Model_pb2

    model.doc_string = program.doc_string or ""
    raw = program.meta.get("model_description")
    if not raw:
        return
    d = Model_pb2.ModelDescription()
    d.ParseFromString(raw)
    m = d.metadata
    if m.shortDescription and not model.doc_string:
        model.doc_string = m.shortDescription
    props = {"author": m.author, "license": m.license, "version": m.versionString}
    props.update(sorted(m.userDefined.items()))
    helper.set_model_props(model, {k: v for k, v in props.items() if v})


def _fits_in_memory(model: onnx.ModelProto) -> bool:
    """Whether the model (with its initializers) is below the protobuf message limit."""
    return sum(t.ByteSize() for t in model.graph.initializer) < TWO_GB - (64 << 20)


__all__ = ["CLASSIFIER_FORMS", "DEFAULT_OPSET", "MAX_OPSET", "MIN_OPSET", "check_opset", "exported_function",
           "program_to_onnx", "save_onnx"]
