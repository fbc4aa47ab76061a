"""A converted model in memory: `export` writes a program as a Core ML ``Model`` message without
touching the disk, for pipelines that hand the model on (to coremltools, a store, a network).

An ML program is exported with every value immediate (no weight file: the message alone is the
whole model, like a single-file ``.mlmodel``), so it is bounded by protobuf's 2 GiB per message; a
larger model must be saved as a package (`converter.save` to ``NAME.mlpackage``). A NeuralNetwork
model always is one message. WebNN output is a folder of files and is not exported in memory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import UnsupportedError
from .formats.proto import Model_pb2
from .ir.core import Program
from .limits import MAX_MODEL_FILE_BYTES, size_text

#: ``Program.meta`` key: the format `converter.convert` converted to ("mil", "neuralnetwork", "webnn").
CONVERTED_TO = "converted_to"


@dataclass
class ConvertedModel:
    """A program written as a Core ML model, in memory."""

    #: the program it was written from (`converter.run` runs it)
    program: Program
    #: the Core ML ``Model`` message (converter.formats.proto.Model_pb2.Model)
    spec: Model_pb2.Model
    #: "mil" or "neuralnetwork"
    format: str
    target: str | None = None

    def to_bytes(self) -> bytes:
        """The model as the bytes of a ``.mlmodel`` file (complete: no weight file is needed)."""
        return self.spec.SerializeToString()

    def save(self, path: str | os.PathLike, *, overwrite: bool = False, durable: bool = False) -> Path:
        """Write it as `converter.save` would (``NAME.mlpackage`` with a weight file, or ``NAME.mlmodel``);
        nothing is replaced unless ``overwrite``."""
        from .api import save

        return save(self.program, path, to=self.format, target=self.target, overwrite=overwrite, durable=durable)

    def to_coreml(self, **kwargs: Any) -> Any:
        """A coremltools ``MLModel`` of this model (needs coremltools; ``kwargs`` go to ``MLModel``, e.g.
        ``skip_model_load=True`` where Core ML cannot run). coremltools itself keeps an ML program in a
        temporary package on disk, so this is the one step that writes files."""
        import tempfile

        import coremltools as ct
        from coremltools.proto import Model_pb2 as ct_Model_pb2

        spec = ct_Model_pb2.Model()  # coremltools takes only its own message class
        spec.ParseFromString(self.to_bytes())
        if self.format != "mil":
            return ct.models.MLModel(spec, **kwargs)
        with tempfile.TemporaryDirectory() as empty:  # every value is immediate: an empty weights folder
            return ct.models.MLModel(spec, weights_dir=empty, **kwargs)


def export(program: Program, *, to: str | None = None, target: str | None = None,
           spec_version: int | None = None) -> ConvertedModel:
    """``program`` as a Core ML model in memory (see the module docstring). ``to``: "mil" or
    "neuralnetwork" (default: what `converter.convert` converted it to, else "mil"); ``target`` and
    ``spec_version`` as for `converter.save`. The program is not modified."""
    from .destination import output_format

    fmt = output_format(to or program.meta.get(CONVERTED_TO) or "mil")
    if fmt == "webnn":
        raise UnsupportedError("a WebNN model is a folder of files (model.js, model.bin, ...): write it with "
                               "converter.save(program, folder, to='webnn')")
    if fmt == "onnx":
        raise UnsupportedError("export gives Core ML models; the ONNX model in memory is "
                               "converter.backends.onnx.program_to_onnx(program) (an onnx.ModelProto)")
    if fmt == "neuralnetwork":
        from .backends.neuralnetwork import program_to_model
        from .formats.protowire_join import joined_segments

        model, payloads = program_to_model(program, target=target, spec_version=spec_version)
        if payloads:  # large weights travel beside the message: join them into one
            total, segments = joined_segments(model.SerializeToString(), Model_pb2.Model.DESCRIPTOR, payloads)
            _bounded(total)
            model = Model_pb2.Model()
            model.ParseFromString(b"".join(bytes(s) for s in segments))
        return ConvertedModel(program, model, fmt, target)
    if spec_version is not None:
        raise UnsupportedError("spec_version is an option of to='neuralnetwork'")
    from .backends.mil import default_target
    from .backends.mil import program_to_model as mil_program_to_model

    target = target or default_target(program)
    model = mil_program_to_model(program, target=target, store_blob=None)
    _bounded(model.ByteSize())
    return ConvertedModel(program, model, fmt, target)


def _bounded(size: int) -> None:
    if size > MAX_MODEL_FILE_BYTES:
        raise UnsupportedError(f"the model would take {size_text(size)} as one message, more than protobuf's "
                               f"{size_text(MAX_MODEL_FILE_BYTES)}: save it as a package (NAME.mlpackage) instead")
