"""Reading and writing Core ML model files: a bare ``.mlmodel`` or an ``.mlpackage`` directory."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from google.protobuf.message import DecodeError

from ..errors import FormatError
from ..ir.types import TensorType, is_static_shape
from .atomic import atomic_write_bytes
from .blob import BlobReader
from .package import MLPackage, is_mlpackage, read_package
from .proto import Model_pb2


@dataclass
class ModelFile:
    """A parsed model and where it came from (for weight files and error messages)."""

    path: Path
    model: Model_pb2.Model
    package: MLPackage | None = None
    _readers: dict[Path, BlobReader] = field(default_factory=dict, repr=False)
    _resolved: dict[str, Path] = field(default_factory=dict, repr=False)  # blob file name -> checked path

    @property
    def model_path(self) -> Path:
        return self.package.model_path if self.package is not None else self.path

    def load_blob(self, file_name: str, offset: int, t: TensorType) -> np.ndarray:
        """The (zero-copy) array a ``blobFileValue`` refers to, checked against its declared type."""
        if self.package is None:
            raise FormatError(
                f"value refers to weight file {file_name!r}, but a bare .mlmodel has no weights directory",
                file=str(self.path),
                field="blobFileValue",
            )
        if not is_static_shape(t.shape):
            raise FormatError(f"weight of non-static type {t}", file=str(self.model_path), field="blobFileValue")
        blob_path = self._resolved.get(file_name)
        if blob_path is None:
            blob_path = self._resolved[file_name] = self.package.resolve_blob_file(file_name)
        reader = self._readers.get(blob_path)
        if reader is None:
            if not blob_path.is_file():
                raise FormatError(f"weight file {file_name!r} is missing ({blob_path})", file=str(self.model_path),
                                  field="blobFileValue.fileName")
            reader = self._readers[blob_path] = BlobReader(blob_path)
        shape = tuple(int(d) for d in t.shape)
        count = int(np.prod(shape)) if shape else 1
        return reader.read(offset, expected_dtype=t.dtype.name, expected_count=count).reshape(shape)


def parse_model_bytes(data: bytes, path: Path) -> Model_pb2.Model:
    model = Model_pb2.Model()
    try:
        model.ParseFromString(data)
    except DecodeError as e:
        raise FormatError(f"not a Core ML model (protobuf decoding failed: {e})", file=str(path)) from None
    if model.specificationVersion <= 0 and model.WhichOneof("Type") is None:
        raise FormatError("not a Core ML model (no specification version and no model type)", file=str(path))
    return model


def read_model_file(path: str | os.PathLike) -> ModelFile:
    """Parse a ``.mlmodel`` file or an ``.mlpackage`` directory (weights stay on disk, mapped)."""
    p = Path(path)
    if not p.exists():
        raise FormatError("no such file or directory", file=str(p))
    if p.is_dir():
        if not is_mlpackage(p):
            raise FormatError("directory is not an .mlpackage (no Manifest.json)", file=str(p))
        pkg = read_package(p)
        return ModelFile(p, parse_model_bytes(pkg.read_model_bytes(), pkg.model_path), pkg)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise FormatError(f"cannot read: {e.strerror}", file=str(p)) from None
    return ModelFile(p, parse_model_bytes(data, p))


def write_mlmodel(path: str | os.PathLike, model: Model_pb2.Model, *, durable: bool = False) -> None:
    """Write a bare ``.mlmodel`` atomically (fsynced too when ``durable``)."""
    atomic_write_bytes(Path(path), model.SerializeToString(), durable=durable)
