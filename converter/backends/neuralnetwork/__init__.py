"""IR -> a Core ML NeuralNetwork model (``.mlmodel`` with legacy layers), for devices and tools that
cannot run ML programs (iOS 11-14, macOS 10.13-10.15).

- The program's main function becomes one network (a ``neuralNetworkClassifier`` when it ends in a
  ``classify`` op: its labels and probability blob). Layers use the N-dimensional semantics of
  specification version 4 (EXACT_ARRAY_MAPPING, RANK4_IMAGE_MAPPING); the model's version is the
  lowest that has every layer and feature used. ``target``/``spec_version`` set a device floor: a
  model that would need a later version is refused with every layer that needs it. A floor below
  version 4 (iOS 11/12) writes legacy rank-5 layers instead (rank5/).
- The description keeps the source's features (names, images with their colour space, flexible
  shapes, doc strings, metadata); image preprocessing that a frontend wrote as ops at an image
  input (scale, per-channel bias) becomes the network's ``NeuralNetworkImageScaler`` again.
- Weights are written as their arrays hold them: fp16 as ``float16Value``, the rest as fp32
  ``floatValue``; large ones are spliced into the file from the arrays (never copied twice).
  Compressed weights (constexpr_* ops) are expanded, except where a layer takes them quantized
  (8-bit linear or 1-8 bit lookup-table ``WeightParams``: lowering/quant.py).
- Every op without a NeuralNetwork form is listed in one `UnsupportedError`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ...errors import ConverterError, FormatError, UnsupportedError
from ...formats import description as desc
from ...formats.model_file import write_mlmodel
from ...formats.proto import Model_pb2, NeuralNetwork_pb2
from ...ir.clone import clone_program
from ...ir.core import FeatureInfo, Program
from ...ir.types import StateType, TensorType, int32
from ..features import describe_feature, recorded_metadata
from .emitter import ModelState, NetworkEmitter
from .network import lower_function, refuse_above, write_classifier
from .versions import ND_VERSION, target_version


def prepare_program(program: Program) -> Program:
    """A copy of ``program`` with its compressed weights expanded (the quantized form recorded on
    the ops whose layers keep it) and its constants folded."""
    from ...api import optimize
    from ...passes.canonicalize import Canonicalize
    from ...passes.dce import DeadCodeElimination
    from ...passes.fold_constants import FoldConstants
    from .lowering.quant import annotate_compressed, annotate_fp16

    prog = clone_program(program)[0]
    annotate_compressed(prog.walk())  # the quantized weights layers keep (lowering/quant.py)
    annotate_fp16(prog.walk())  # the fp16 weights they write as float16Value again
    optimize(prog, [FoldConstants(expand_constexpr=True, max_bytes=1 << 31), Canonicalize(), DeadCodeElimination()])
    return prog


def program_to_model(program: Program, *, target: str | None = None, spec_version: int | None = None,
                     source: str | None = None) -> tuple[Model_pb2.Model, list]:
    """The Model proto of ``program`` as a NeuralNetwork, and the weight payloads to splice into it
    when writing (see `NetworkEmitter.weights`)."""
    floor = target_version(target, spec_version)
    prog = prepare_program(program)
    if len(prog.functions) > 1:
        raise UnsupportedError(f"the program has {len(prog.functions)} functions; a NeuralNetwork model has one "
                               f"(convert one function at a time)", file=source)
    fn = prog.main
    if any(isinstance(v.type, StateType) for v in fn.inputs):
        raise UnsupportedError("the program has state inputs (iOS18); NeuralNetwork models have no state", file=source)
    if floor is not None and floor < ND_VERSION:  # iOS 11/12: legacy rank-5 layers, a mode of its own
        from .rank5 import rank5_model

        return rank5_model(prog, floor, source=source)
    model = Model_pb2.Model()
    is_classifier = any(op.type == "classify" for op in fn.block.ops)
    network = model.neuralNetworkClassifier if is_classifier else model.neuralNetwork
    network.arrayInputShapeMapping = NeuralNetwork_pb2.EXACT_ARRAY_MAPPING
    network.imageInputShapeMapping = NeuralNetwork_pb2.RANK4_IMAGE_MAPPING
    state = ModelState(version_cap=floor)
    state.need(ND_VERSION, "N-dimensional array semantics (EXACT_ARRAY_MAPPING)")
    lowered = lower_function(fn, NetworkEmitter(network, state), network)
    if lowered.problems:
        count = f"{len(lowered.problems)} ops have" if len(lowered.problems) > 1 else "1 op has"
        raise UnsupportedError(f"{count} no NeuralNetwork form: " + "; ".join(lowered.problems), file=source)
    d = model.description
    recorded_metadata(prog, d)
    need = state.spec_version
    for v in fn.inputs:
        info = fn.input_info.get(v.name)
        need = max(need, describe_feature(info, v.name, _declared(v.type, info), d.input.add()))
    for v in fn.outputs:
        info = fn.output_info.get(v.name)
        need = max(need, describe_feature(info, v.name, _declared(v.type, info), d.output.add()))
    write_classifier(network, d, lowered.classifier)
    refuse_above(state, need, floor, source)
    model.specificationVersion = need
    model.isUpdatable = False
    return model, state.payloads


#: integer and bool features are declared as INT32 arrays: the layers see every blob as fp32, and
#: INT32 (with FLOAT32 and DOUBLE) is what NeuralNetwork models declare and the frontends read
_AS_INT32 = frozenset({"int8", "uint8", "int16", "uint16", "bool"})


def _declared(t: Any, info: FeatureInfo | None) -> Any:
    """The type a feature is declared with: integers as INT32 (see `_AS_INT32`; the values are
    unchanged), and a scalar as shape [1] (NeuralNetwork arrays have rank >= 1: a declared shape []
    means "any shape", and every blob of the layers has rank >= 1)."""
    recorded = desc.feature_from_bytes(info.feature_type) if info is not None else None
    if not isinstance(t, TensorType) or (recorded is not None and desc.feature_kind(recorded) != "multiArrayType"):
        return t  # an image, a classifier's label (string / int64 feature), ...: as recorded
    if t.dtype.name in _AS_INT32:
        t = t.with_dtype(int32)
    if t.shape is not None and len(t.shape) == 0:
        t = TensorType(t.dtype, (1,))
    return t


def save_neuralnetwork(program: Program, path: str | os.PathLike, *, target: str | None = None,
                       spec_version: int | None = None, durable: bool = False, overwrite: bool = True,
                       source: str | None = None) -> Path:
    """Write ``program`` as a NeuralNetwork ``.mlmodel`` at ``path``, atomically (see the module
    docstring; ``converter.save`` decides whether ``path`` may be replaced)."""
    path = Path(path)
    try:
        model, payloads = program_to_model(program, target=target, spec_version=spec_version, source=source)
        write_mlmodel(path, model, payloads=payloads, durable=durable, overwrite=overwrite)
        return path
    except ConverterError as e:
        e.with_location(file=str(path))
        raise
    except OSError as e:
        raise FormatError(f"cannot write: {e.strerror or e}", file=str(path)) from None


__all__ = ["prepare_program", "program_to_model", "save_neuralnetwork"]
