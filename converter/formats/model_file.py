"""Reading and writing Core ML model files: a bare ``.mlmodel`` or an ``.mlpackage`` directory."""

from __future__ import annotations

import mmap
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from google.protobuf.message import DecodeError

from ..errors import FormatError, UnsupportedError
from ..ir.types import TensorType
from ..limits import MAX_MODEL_FILE_BYTES
from .atomic import atomic_write_bytes, atomic_write_segments
from .blob import BlobReader
from .files import open_regular
from .milproto import static_size
from .package import MODEL_PATH_PREFIX, WEIGHTS_ITEM_NAME, MLPackage, is_mlpackage, read_package
from .package import _resolve_inside as resolve_inside
from .proto import Model_pb2, NeuralNetwork_pb2
from .protowire import WireError, split_payloads
from .protowire_join import joined_segments


@dataclass
class ModelFile:
    """A parsed model and where it came from (for weight files and error messages)."""

    path: Path
    model: Model_pb2.Model
    package: MLPackage | None = None
    _readers: dict[Path, BlobReader] = field(default_factory=dict, repr=False)
    _resolved: dict[str, Path] = field(default_factory=dict, repr=False)  # blob file name -> checked path
    # NeuralNetwork weights left in the mapped file: (WeightParams field number, bytes), by the index
    # that the marker in the WeightParams holds (see protowire; weights.decode reads them)
    payloads: list[tuple[int, memoryview]] = field(default_factory=list, repr=False)
    #: a model given in memory (`model_file_from_message`): the folder its ``@model_path/weights/``
    #: blob files are in, if any; ``path`` is then a label such as ``<bytes>``
    weights_dir: Path | None = None
    in_memory: bool = False

    @property
    def model_path(self) -> Path:
        return self.package.model_path if self.package is not None else self.path

    def load_blob(self, file_name: str, offset: int, t: TensorType) -> np.ndarray:
        """The (zero-copy) array a ``blobFileValue`` refers to, checked against its declared type."""
        if self.package is None and self.weights_dir is None:
            why = ("the model was given in memory without its weights folder: load(..., weights_dir=...) names it "
                   "(a coremltools MLModel has it as its weights_dir)") if self.in_memory else \
                "a bare .mlmodel has no weights directory"
            raise FormatError(
                f"value refers to weight file {file_name!r}, but {why}",
                file=str(self.path),
                field="blobFileValue",
            )
        size = static_size(t)
        if size == "non-static":
            raise FormatError(f"weight of non-static type {t}", file=str(self.model_path), field="blobFileValue")
        blob_path = self._resolved.get(file_name)
        if blob_path is None:
            blob_path = self._resolved[file_name] = (self.package.resolve_blob_file(file_name) if self.package
                                                     else self._resolve_in_weights_dir(file_name))
        reader = self._readers.get(blob_path)
        if reader is None:
            try:
                present = os.path.lexists(blob_path)
            except OSError as e:  # e.g. no permission to look into the weights directory
                raise FormatError(f"weight file {file_name!r}: cannot read: {e.strerror or e}",
                                  file=str(self.model_path), field="blobFileValue.fileName") from None
            if not present:
                raise FormatError(f"weight file {file_name!r} is missing ({blob_path})", file=str(self.model_path),
                                  field="blobFileValue.fileName")
            reader = self._readers[blob_path] = BlobReader(blob_path)
        if isinstance(size, str):
            raise FormatError(f"weight of type {t}: {size}", file=str(self.model_path), field="blobFileValue")
        shape, count = size
        return reader.read(offset, expected_dtype=t.dtype.name, expected_count=count).reshape(shape)


    def _resolve_in_weights_dir(self, file_name: str) -> Path:
        """``@model_path/weights/NAME`` of a model given in memory: NAME inside ``weights_dir``."""
        assert self.weights_dir is not None
        prefix = MODEL_PATH_PREFIX + WEIGHTS_ITEM_NAME + "/"

        def error(message: str) -> FormatError:
            return FormatError(f"blob file name {file_name!r}: {message}", file=str(self.path),
                               field="blobFileValue.fileName")

        if not isinstance(file_name, str) or not file_name.startswith(prefix):
            raise error(f"must start with '{prefix}' (the weights folder given)")
        root = Path(os.path.realpath(self.weights_dir))
        return resolve_inside(root, root, file_name[len(prefix):], error)


def model_file_from_message(model: Model_pb2.Model, label: str, *,
                            weights_dir: str | os.PathLike | None = None) -> ModelFile:
    """A model given in memory (a parsed ``Model`` message) as a `ModelFile`: nothing is read from
    disk but the blob files of an ML program, from ``weights_dir``. ``label`` names it in errors."""
    return ModelFile(Path(label), model, weights_dir=None if weights_dir is None else Path(weights_dir),
                     in_memory=True)


def parse_model_bytes(data: bytes, path: Path) -> Model_pb2.Model:
    model = Model_pb2.Model()
    try:
        model.ParseFromString(data)
    except DecodeError as e:
        raise FormatError(f"not a Core ML model (protobuf decoding failed: {e})", file=str(path)) from None
    if model.specificationVersion <= 0 and model.WhichOneof("Type") is None:
        raise FormatError("not a Core ML model (no specification version and no model type)", file=str(path))
    return model


# WeightParams fields whose bytes stay in the mapped file: floatValue (packed fp32) and float16Value,
# when large enough to matter. Weights are then views of the file: parsing copies only the rest.
_WEIGHT_PARAMS = NeuralNetwork_pb2.WeightParams.DESCRIPTOR
_PAYLOAD_MIN_BYTES = 4096


def _is_weight_payload(descriptor: object, number: int, length: int) -> bool:
    return descriptor is _WEIGHT_PARAMS and length >= _PAYLOAD_MIN_BYTES and (
        (number == 1 and length % 4 == 0) or (number == 2 and length % 2 == 0))


# A file the payload walk cannot split (malformed, or too many fields) is small enough below this
# to be handed whole to protobuf's parser, which then says what is wrong (or reads it after all).
_PARSE_WHOLE_MAX_BYTES = 64 << 20


def _read_bare(f: BinaryIO, path: Path) -> tuple[Model_pb2.Model, list[tuple[int, memoryview]]]:
    """The model without its large weights, which stay in the file, mapped (views, not copies);
    ``f`` is a regular file (`open_regular`)."""
    size = os.fstat(f.fileno()).st_size
    try:
        skeleton, found = split_payloads(f.fileno(), size, Model_pb2.Model.DESCRIPTOR, _is_weight_payload,
                                       within=(_WEIGHT_PARAMS,))
    except WireError as e:  # not well-formed: let protobuf's parser say what is wrong, when that is cheap
        if size > _PARSE_WHOLE_MAX_BYTES:
            raise FormatError(f"not a Core ML model (protobuf decoding failed: {e})", file=str(path)) from None
        return parse_model_bytes(f.read(), path), []
    model = parse_model_bytes(skeleton, path)
    if not found:
        return model, []
    view = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
    return model, [(number, view[start:start + n]) for number, start, n in found]


def _read_model_proto(path: Path) -> tuple[Model_pb2.Model, list[tuple[int, memoryview]]]:
    """A model file (bare, or a package's root model): a regular file of at most 2 GiB."""
    with open_regular(path, max_bytes=MAX_MODEL_FILE_BYTES, what="model file") as f:
        return _read_bare(f, path)


def read_model_file(path: str | os.PathLike) -> ModelFile:
    """Parse a ``.mlmodel`` file or an ``.mlpackage`` directory (weights stay on disk, mapped: the
    blob files of a package, and the large NeuralNetwork weights of a bare file)."""
    p = Path(path)
    try:
        if not p.exists() and not p.is_symlink():
            raise FormatError("no such file or directory", file=str(p))
        if p.is_dir():
            if not is_mlpackage(p):
                raise FormatError("directory is not an .mlpackage (no Manifest.json)", file=str(p))
            pkg = read_package(p)
            model, payloads = _read_model_proto(pkg.model_path)
            return ModelFile(p, model, pkg, payloads=payloads)
        model, payloads = _read_model_proto(p)
        return ModelFile(p, model, payloads=payloads)
    except OSError as e:  # no permission, an I/O error, ...: name the file it happened to
        raise FormatError(f"cannot read: {e.strerror or e}", file=str(e.filename or p)) from None


def write_mlmodel(path: str | os.PathLike, model: Model_pb2.Model, *,
                  payloads: Sequence[tuple[int, Any]] = (), durable: bool = False, overwrite: bool = True) -> None:
    """Write a bare ``.mlmodel`` atomically (fsynced too when ``durable``; replacing an existing
    file only when ``overwrite``). ``payloads``: (field number, buffer) that the markers left in
    ``model`` (`protowire_join.mark_payload`) stand for; each buffer is written from where it is,
    never copied (see protowire_join)."""
    skeleton = model.SerializeToString()
    if not payloads:
        atomic_write_bytes(Path(path), skeleton, durable=durable, overwrite=overwrite)
        return
    total, segments = joined_segments(skeleton, Model_pb2.Model.DESCRIPTOR, payloads)
    if total > MAX_MODEL_FILE_BYTES:  # protobuf (and so Core ML) reads messages of at most 2 GiB
        raise UnsupportedError(f"the model would be {total} bytes; a .mlmodel holds at most {MAX_MODEL_FILE_BYTES}",
                               file=str(path))
    del skeleton  # the segments hold what they need of it
    atomic_write_segments(Path(path), segments, durable=durable, overwrite=overwrite)
