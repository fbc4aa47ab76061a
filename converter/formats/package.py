"""``.mlpackage`` directories: reading Manifest.json, writing whole packages atomically.

Layout::

    Model.mlpackage/
      Manifest.json
      Data/com.apple.CoreML/model.mlmodel        the Model proto (the root model item)
      Data/com.apple.CoreML/weights/weight.bin   blob file(s) referenced as "@model_path/weights/..."

Manifest.json holds ``fileFormatVersion`` ("major.minor.patch"; we read 1.x.y and reject newer
majors), ``itemInfoEntries`` (identifier -> {path, name, author, description}; ``path`` relative
to ``Data/``) and ``rootModelIdentifier``. A manifest is untrusted input: every item path must stay
inside the package (no absolute paths, no ``..``, no symlink resolving outside), else `FormatError`
naming the manifest and the entry.

Item ``author`` is not attribution: Apple's ModelPackage stores an item at ``Data/<author>/<name>``
and tools look items up by (name, author) -- coremltools finds the weights directory with
``findItemByNameAuthor("weights", "com.apple.CoreML")``. Packages we write therefore register
their items under ``com.apple.CoreML`` like every Core ML producer does; our authorship belongs in
the model's metadata (``Model.description.metadata``), not in the manifest.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from converter.errors import FormatError
from converter.formats.atomic import atomic_write_bytes, fsync_tree, replace_path, temp_name_beside
from converter.formats.files import file_kind, open_regular
from converter.limits import MAX_MANIFEST_BYTES, MAX_MANIFEST_ITEMS, MAX_MODEL_FILE_BYTES

__all__ = [
    "COREML_AUTHOR",
    "FILE_FORMAT_VERSION",
    "MANIFEST_NAME",
    "MODEL_ITEM_PATH",
    "WEIGHT_FILE_REF",
    "WEIGHTS_ITEM_PATH",
    "MLPackage",
    "PackageItem",
    "atomic_write_bytes",
    "is_mlpackage",
    "read_package",
    "write_package",
]

MANIFEST_NAME = "Manifest.json"
DATA_DIR_NAME = "Data"
FILE_FORMAT_VERSION = "1.0.0"
SUPPORTED_MAJOR_VERSION = 1
COREML_AUTHOR = "com.apple.CoreML"
MODEL_ITEM_NAME = "model.mlmodel"
WEIGHTS_ITEM_NAME = "weights"
MODEL_ITEM_PATH = f"{COREML_AUTHOR}/{MODEL_ITEM_NAME}"
WEIGHTS_ITEM_PATH = f"{COREML_AUTHOR}/{WEIGHTS_ITEM_NAME}"
WEIGHT_FILE_NAME = "weight.bin"
MODEL_PATH_PREFIX = "@model_path/"
#: What a MIL program's ``blobFileValue.fileName`` says for the package's weight file.
WEIGHT_FILE_REF = f"{MODEL_PATH_PREFIX}{WEIGHTS_ITEM_NAME}/{WEIGHT_FILE_NAME}"

_VERSION_RE = re.compile(r"(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True)
class PackageItem:
    identifier: str
    path: str  # as written in the manifest, relative to Data/
    name: str
    author: str
    description: str
    location: Path  # the item on disk, symlinks resolved (always inside the package)


@dataclass(frozen=True)
class MLPackage:
    """A validated package: every item lies inside ``path``; the root model item exists."""

    path: Path  # the package directory, symlinks resolved
    manifest_path: Path
    file_format_version: str
    items: dict[str, PackageItem]
    root_identifier: str

    @property
    def root_item(self) -> PackageItem:
        return self.items[self.root_identifier]

    @property
    def model_path(self) -> Path:
        """The root model's ``.mlmodel`` file."""
        return self.root_item.location

    @property
    def weights_dir(self) -> Path | None:
        """The weights directory item (name "weights", author com.apple.CoreML), if registered."""
        for item in self.items.values():
            if item.name == WEIGHTS_ITEM_NAME and item.author == COREML_AUTHOR and item.location.is_dir():
                return item.location
        return None

    def read_model_bytes(self) -> bytes:
        try:
            with open_regular(self.model_path, max_bytes=MAX_MODEL_FILE_BYTES, what="model file") as f:
                return f.read()
        except OSError as e:
            raise FormatError(f"cannot read: {e.strerror or e}", file=str(self.model_path)) from None

    def resolve_blob_file(self, file_name: str) -> Path:
        """The file a ``blobFileValue.fileName`` such as ``@model_path/weights/weight.bin`` names.

        ``@model_path`` is the directory holding the root model file. The result must lie inside
        the package; anything else raises `FormatError` naming the model file.
        """

        def error(message: str) -> FormatError:
            return FormatError(
                f"blob file name {file_name!r}: {message}", file=str(self.model_path), field="blobFileValue.fileName"
            )

        if not isinstance(file_name, str) or not file_name.startswith(MODEL_PATH_PREFIX):
            raise error(f"must start with '{MODEL_PATH_PREFIX}'")
        return _resolve_inside(self.path, self.model_path.parent, file_name[len(MODEL_PATH_PREFIX) :], error)


def is_mlpackage(path: str | os.PathLike) -> bool:
    """True for a directory with a Manifest.json (what a package looks like, valid or not: a
    Manifest.json that is not a regular file is reported when the package is read)."""
    p = Path(path)
    return p.is_dir() and os.path.lexists(p / MANIFEST_NAME)


def _resolve_inside(root: Path, base: Path, rel: str, error: Callable[[str], FormatError]) -> Path:
    """``base / rel`` with symlinks resolved, provided it stays inside ``root`` (already resolved)."""
    if not rel:
        raise error("empty path")
    if "\x00" in rel or "\\" in rel:
        raise error("path contains a NUL or backslash character")
    if PurePosixPath(rel).is_absolute() or PureWindowsPath(rel).drive:
        raise error("absolute path escapes the package")
    if ".." in PurePosixPath(rel).parts:
        raise error("'..' in path escapes the package")
    real = Path(os.path.realpath(base / rel))
    if real != root and root not in real.parents:
        raise error(f"resolves to {real}, outside the package (symlink)")
    return real


def _string(entry: dict, key: str, error: Callable[[str], FormatError], *, required: bool) -> str:
    value = entry.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise error(f"'{key}' must be a string, got {type(value).__name__}")
    return value


def _entry_error(
    error: Callable[[str, str | None], FormatError], identifier: str, rel: str | None = None
) -> Callable[[str], FormatError]:
    """Errors about one manifest entry (or its path), with the entry as the field."""
    field = f"itemInfoEntries.{identifier}"
    if rel is None:
        return lambda message: error(f"item {identifier!r}: {message}", field)
    return lambda message: error(f"item {identifier!r}: path {rel!r}: {message}", field + ".path")


def read_package(path: str | os.PathLike) -> MLPackage:
    """Parse and validate an ``.mlpackage`` directory's manifest."""
    try:
        return _read_package(Path(path))
    except OSError as e:  # no permission, an I/O error, ...: name the file it happened to
        raise FormatError(f"cannot read: {e.strerror or e}", file=str(e.filename or path)) from None


def _read_package(given: Path) -> MLPackage:
    if not given.is_dir():
        raise FormatError("not an .mlpackage directory", file=str(given))
    root = Path(os.path.realpath(given))
    manifest_path = root / MANIFEST_NAME
    mfile = str(given / MANIFEST_NAME)

    def error(message: str, field: str | None = None) -> FormatError:
        return FormatError(message, file=mfile, field=field)

    if not os.path.lexists(manifest_path):
        raise error("missing Manifest.json")
    if root not in Path(os.path.realpath(manifest_path)).parents:
        raise error("Manifest.json resolves outside the package (symlink)")
    with open_regular(given / MANIFEST_NAME, max_bytes=MAX_MANIFEST_BYTES, what="Manifest.json") as f:
        raw = f.read()
    manifest = _parse_json(raw, mfile)
    if not isinstance(manifest, dict):
        raise error(f"top level must be a JSON object, got {type(manifest).__name__}")

    version = manifest.get("fileFormatVersion")
    m = _VERSION_RE.fullmatch(version) if isinstance(version, str) else None
    if m is None:
        raise error(f"fileFormatVersion must be 'major.minor.patch', got {version!r}", "fileFormatVersion")
    if int(m.group(1)) > SUPPORTED_MAJOR_VERSION:
        raise error(
            f"fileFormatVersion {version} is newer than this converter reads (major version "
            f"{SUPPORTED_MAJOR_VERSION}, {FILE_FORMAT_VERSION})",
            "fileFormatVersion",
        )

    entries = manifest.get("itemInfoEntries", {})
    if not isinstance(entries, dict):
        raise error("must be a JSON object", "itemInfoEntries")
    if len(entries) > MAX_MANIFEST_ITEMS:
        raise error(f"{len(entries)} items, more than the {MAX_MANIFEST_ITEMS} a package can list", "itemInfoEntries")
    data_dir = root / DATA_DIR_NAME
    items: dict[str, PackageItem] = {}
    for identifier, entry in entries.items():
        entry_error = _entry_error(error, identifier)
        if not isinstance(entry, dict):
            raise entry_error("must be a JSON object")
        rel = _string(entry, "path", entry_error, required=True)
        location = _resolve_inside(root, data_dir, rel, _entry_error(error, identifier, rel))
        items[identifier] = PackageItem(
            identifier=identifier,
            path=rel,
            name=_string(entry, "name", entry_error, required=False),
            author=_string(entry, "author", entry_error, required=False),
            description=_string(entry, "description", entry_error, required=False),
            location=location,
        )

    root_id = manifest.get("rootModelIdentifier")
    if not isinstance(root_id, str) or root_id not in items:
        raise error(f"rootModelIdentifier {root_id!r} names no item of itemInfoEntries", "rootModelIdentifier")
    # Only the root model must exist here. Other items may be absent: git and many zip tools drop
    # the empty weights directory of a package without blob weights. A value that refers to a
    # weight file in a missing item is refused where it is read (ModelFile.load_blob).
    root_item = items[root_id]
    if not os.path.exists(root_item.location):
        raise _entry_error(error, root_id, root_item.path)(f"{DATA_DIR_NAME}/{root_item.path} does not exist")
    root_mode = os.stat(root_item.location).st_mode
    if not stat.S_ISREG(root_mode):
        raise error(f"root model item {root_item.path!r} is not a regular file: it is {file_kind(root_mode)}",
                    "rootModelIdentifier")
    return MLPackage(root, manifest_path, version, items, root_id)


def _parse_json(raw: bytes, mfile: str) -> Any:
    """The manifest's JSON value; `FormatError` for anything the json module refuses, including
    nesting too deep for it (RecursionError) and integers too long to convert (ValueError)."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise FormatError(
            f"invalid JSON: {e.msg} (line {e.lineno}, column {e.colno})", file=mfile, offset=e.pos
        ) from None
    except UnicodeDecodeError as e:
        raise FormatError(f"invalid JSON: not UTF-8 ({e.reason})", file=mfile, offset=e.start) from None
    except RecursionError:
        raise FormatError("invalid JSON: nested too deeply", file=mfile) from None
    except ValueError as e:  # e.g. an integer of thousands of digits (its advice on limits is not the user's)
        raise FormatError(f"invalid JSON: {str(e).split(';')[0]}", file=mfile) from None


def _item(path: str, name: str, description: str) -> dict[str, str]:
    return {"author": COREML_AUTHOR, "description": description, "name": name, "path": path}


def write_package(
    dest: str | os.PathLike,
    model_bytes: bytes | Callable[[], bytes],
    write_weights: Callable[[Path], Any] | None = None,
    *,
    overwrite: bool = True,
    durable: bool = True,
) -> Path:
    """Build a complete ``.mlpackage`` beside ``dest`` and rename it into place.

    ``write_weights(weights_dir)``, when given, fills ``Data/com.apple.CoreML/weights/`` (e.g.
    with a `BlobWriter` on ``weights_dir / "weight.bin"``) and registers that directory in the
    manifest. ``model_bytes`` is the serialized Model proto, or a callable producing it; the
    callable runs after ``write_weights``, so the proto can carry the blob offsets the writer
    returned. If anything fails, the temporary package is deleted and an existing ``dest`` is
    left as it was; it is replaced only after the new package is complete (and fsynced when
    ``durable``), and only when ``overwrite``. Returns ``dest``.
    """
    dest = Path(dest)
    if not overwrite and os.path.lexists(dest):
        raise FileExistsError(f"{dest} already exists")
    tmp = temp_name_beside(dest)
    tmp.mkdir()
    try:
        coreml_dir = tmp / DATA_DIR_NAME / COREML_AUTHOR
        coreml_dir.parent.mkdir()  # one mkdir each (parents=True tries the deepest first)
        coreml_dir.mkdir()
        entries: dict[str, dict[str, str]] = {}
        if write_weights is not None:
            weights_dir = coreml_dir / WEIGHTS_ITEM_NAME
            weights_dir.mkdir()
            write_weights(weights_dir)
            entries[_new_identifier()] = _item(WEIGHTS_ITEM_PATH, WEIGHTS_ITEM_NAME, "CoreML Model Weights")
        data = model_bytes() if callable(model_bytes) else model_bytes
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"model_bytes must be bytes, got {type(data).__name__}")
        (coreml_dir / MODEL_ITEM_NAME).write_bytes(data)
        root_id = _new_identifier()
        entries[root_id] = _item(MODEL_ITEM_PATH, MODEL_ITEM_NAME, "CoreML Model Specification")
        manifest = {
            "fileFormatVersion": FILE_FORMAT_VERSION,
            "itemInfoEntries": entries,
            "rootModelIdentifier": root_id,
        }
        (tmp / MANIFEST_NAME).write_text(json.dumps(manifest, indent=4, sort_keys=True) + "\n", encoding="utf-8")
        if durable:
            fsync_tree(tmp)
        replace_path(tmp, dest, overwrite=overwrite, durable=durable)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def _new_identifier() -> str:
    return str(uuid.uuid4()).upper()
