"""Where an output goes, and whether writing there is allowed: the one place that decides.

Used by the command line (one model, a folder of models, ``run -o``) and the library
(`converter.save`, `converter.convert`), so that they all follow the same rules:

- The format follows from ``to`` and the extension: for MIL, ``NAME.mlpackage`` is a package and
  ``NAME.mlmodel`` a single file; ONNX writes ``NAME.onnx``. An existing folder that is not named like a model (``.`` too)
  means "into this folder", the model named after its source. Any other extension is refused,
  naming the ones that can be written.
- Nothing is replaced unless asked (``overwrite``), and even then only a Core ML model file, an
  ONNX model file, or a Core ML package that holds nothing but its manifest's items: never an arbitrary file or folder,
  never a package the user has put other files into.
- The sources are never written: the destination may not be a source, lie inside one, or hold
  one. Paths are compared by device and inode, so symlinks, ``..``, hard links, bind mounts and
  case-insensitive file systems cannot hide a source.

The checks run before anything is written, and the final rename re-checks that nothing appeared
meanwhile (`converter.formats.atomic.replace_path` with ``overwrite=False``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .errors import ConverterError, UnsupportedError

__all__ = [
    "DestinationError",
    "ModelDestination",
    "Sources",
    "default_extension",
    "output_format",
    "resolve_arrays_destination",
    "resolve_model_destination",
]

#: What each output format writes, by extension: True for a single file, False for a package folder.
_EXTENSIONS: dict[str, dict[str, bool]] = {"mil": {".mlpackage": False, ".mlmodel": True},
                                           "neuralnetwork": {".mlmodel": True}, "onnx": {".onnx": True}}
#: The extension of a model written "into a folder".
_FOLDER_DEFAULT = {"mil": ".mlpackage", "neuralnetwork": ".mlmodel", "onnx": ".onnx"}
#: Model file extensions (what a folder must not be named like to mean "into this folder").
_MODEL_SUFFIXES = (".mlpackage", ".mlmodel", ".onnx")
#: Files the operating system leaves in folders (Finder); not the user's data.
_SYSTEM_FILES = frozenset({".DS_Store"})
_ASK = "replace it with --overwrite (overwrite=True in Python)"


class DestinationError(ConverterError):
    """An output cannot go where it was asked to: it exists, it would touch a source, or its name
    does not say what to write."""


@dataclass(frozen=True)
class ModelDestination:
    path: Path  # where the model is written
    single_file: bool  # a bare .mlmodel rather than a package folder
    replaces: bool  # an existing Core ML model there is replaced (only with overwrite)


def output_format(to: str | None) -> str:
    """The output format ``to`` names ("mil" when None); `UnsupportedError` if none."""
    fmt = (to or "mil").lower() if isinstance(to, (str, type(None))) else None
    if fmt in ("mil", "mlprogram", "mlpackage"):
        return "mil"
    if fmt == "webnn":
        return "webnn"
    if fmt in ("neuralnetwork", "nn"):
        return "neuralnetwork"
    if fmt == "onnx":
        return "onnx"
    raise UnsupportedError(f"unknown output format '{to}' (supported: mil, neuralnetwork, onnx, webnn)")


def default_extension(to: str | None) -> str:
    """The extension of a model of format ``to`` written without a name of its own (folder runs)."""
    return _FOLDER_DEFAULT[output_format(to)]


def _identity(path: str | os.PathLike) -> tuple[int, int] | None:
    """(device, inode) of what ``path`` names, symlinks followed; None if nothing is there."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _entry(path: Path) -> Path:
    """The directory entry a write to ``path`` replaces: its folder resolved, its own name kept."""
    return Path(os.path.realpath(path.parent)) / path.name


class Sources:
    """The files being read (models, inputs), which no output may replace, enter or hold."""

    def __init__(self, paths: Iterable[str | os.PathLike]) -> None:
        self.paths = [Path(p) for p in paths]
        self._sources: dict[tuple[int, int], Path] = {}  # identity -> source
        self._holders: dict[tuple[int, int], Path] = {}  # identity of every folder above a source
        for p in self.paths:
            ident = _identity(p)
            if ident is None:
                continue
            self._sources.setdefault(ident, p)
            for folder in Path(os.path.realpath(p)).parents:
                folder_ident = _identity(folder)
                if folder_ident is not None:
                    self._holders.setdefault(folder_ident, p)

    def conflict(self, dest: Path) -> str | None:
        """Why writing ``dest`` would touch a source (None if it would not)."""
        entry = _entry(dest)
        for i, here in enumerate((entry, *entry.parents)):
            source = self._sources.get(_identity(here))
            if source is not None:
                if i == 0:
                    return f"the output would replace the source '{source}'"
                return f"the output would lie inside the source '{source}'"
        if os.path.lexists(entry):
            source = self._holders.get(_identity(entry))
            if source is not None:
                return f"the output would replace a folder holding the source '{source}'"
        return None

    def check(self, dest: Path) -> None:
        why = self.conflict(dest)
        if why is not None:
            raise DestinationError(f"{why}; choose another destination", file=str(dest))


def _model_stem(source: str | os.PathLike) -> str:
    name = Path(os.path.abspath(source)).name  # "." and trailing slashes name the folder itself
    for suffix in _MODEL_SUFFIXES:
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return Path(name).stem or name


def _is_plain_folder(path: Path) -> bool:
    """An existing folder that is not named like a model: "into this folder"."""
    return path.is_dir() and path.suffix.lower() not in _MODEL_SUFFIXES


def resolve_model_destination(
    out: str | os.PathLike,
    *,
    to: str | None = None,
    sources: Sources | Iterable[str | os.PathLike] = (),
    overwrite: bool = False,
    into_folder: bool = True,
) -> ModelDestination:
    """Where to write a model asked to go to ``out`` (see the module docstring), or `DestinationError`.

    ``sources``: the model(s) being read; an "into this folder" model is named after the first.
    ``into_folder=False`` takes ``out`` as the model's own name even when it is an existing folder
    (folder mode builds each name itself).
    """
    fmt = output_format(to)
    protected = sources if isinstance(sources, Sources) else Sources(sources)
    out = Path(out)
    if fmt == "webnn":
        return _webnn_destination(out, protected, overwrite)
    extensions = _EXTENSIONS[fmt]
    if into_folder and _is_plain_folder(out):
        if not protected.paths:
            raise DestinationError(
                f"is a folder: name the model to write in it ({' or '.join('NAME' + e for e in extensions)})",
                file=str(out))
        out = out / (_model_stem(protected.paths[0]) + _FOLDER_DEFAULT[fmt])
    protected.check(out)
    suffix = out.suffix.lower()
    if suffix not in extensions:
        what = f"extension '{out.suffix}'" if out.suffix else "no extension"
        kinds = " or ".join(f"{e} ({'a single file' if single else 'a package folder'})"
                            for e, single in extensions.items())
        raise DestinationError(f"{what}: --to {fmt} writes {kinds}, or into an existing folder", file=str(out))
    single_file = extensions[suffix]
    exists = os.path.lexists(out)
    if exists:
        if not overwrite:
            raise DestinationError(f"already exists; {_ASK}", file=str(out))
        why = _not_replaceable_model(out, single_file)
        if why is not None:
            raise DestinationError(f"already exists and is not replaced, even with --overwrite: {why}",
                                   file=str(out))
    return ModelDestination(out, single_file, exists)


#: The files a WebNN output folder holds (all of them written by the WebNN backend).
WEBNN_FILES = ("model.js", "model.bin", "model.d.ts", "index.html")


def _webnn_destination(out: Path, protected: Sources, overwrite: bool) -> ModelDestination:
    """A WebNN model is a folder of `WEBNN_FILES`: a new one, an existing empty one, or (with
    ``overwrite``) one holding nothing but those files."""
    protected.check(out)
    if not os.path.lexists(out):
        return ModelDestination(out, False, False)
    if out.is_symlink() or not out.is_dir():
        raise DestinationError("exists and is not a folder; --to webnn writes a folder (model.js, model.bin, ...)",
                               file=str(out))
    present = sorted(p.name for p in out.iterdir() if p.name not in _SYSTEM_FILES)
    if not present:
        return ModelDestination(out, False, False)
    if not overwrite:
        raise DestinationError(f"already exists and is not empty; {_ASK}", file=str(out))
    extra = [name for name in present if name not in WEBNN_FILES or not (out / name).is_file()]
    if extra:
        more = f" and {len(extra) - 3} more" if len(extra) > 3 else ""
        raise DestinationError("already exists and is not replaced, even with --overwrite: it holds files a WebNN "
                               f"conversion does not write ({', '.join(extra[:3])}{more}); move them out first",
                               file=str(out))
    return ModelDestination(out, False, True)


def _not_replaceable_model(path: Path, single_file: bool) -> str | None:
    """Why the existing ``path`` is not a Core ML model we may replace (None if it is one)."""
    try:
        st = os.stat(path)
    except OSError as e:
        return f"cannot be examined ({e.strerror or e})"
    if single_file:
        if not stat.S_ISREG(st.st_mode):
            return "it is a folder, not a Core ML model file" if stat.S_ISDIR(st.st_mode) else "it is not a regular file"
        if path.suffix.lower() == ".onnx":
            return _not_an_onnx_model(path)
        from .formats.model_file import read_model_file

        try:
            read_model_file(path)
        except ConverterError as e:
            return f"it does not read as a Core ML model ({e.message})"
        return None
    if not stat.S_ISDIR(st.st_mode):
        return "it is a file, not a Core ML package folder"
    return _not_a_clean_package(path)


def _not_an_onnx_model(path: Path) -> str | None:
    """Why the file ``path`` is not an ONNX model we may replace (None if it is one)."""
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # noqa: BLE001 - protobuf raises several kinds
        return f"it does not read as an ONNX model ({e})"
    if not model.graph.node and not model.graph.output:
        return "it does not read as an ONNX model (no graph)"
    return None


def _not_a_clean_package(path: Path) -> str | None:
    """Why the folder ``path`` is not a Core ML package holding only its manifest's items."""
    from .formats.package import DATA_DIR_NAME, MANIFEST_NAME, is_mlpackage, read_package

    if not is_mlpackage(path):
        return f"it is a folder without {MANIFEST_NAME}, not a Core ML package"
    try:
        package = read_package(path)
    except ConverterError as e:
        return f"it is not a valid Core ML package ({e.message})"
    items = [PurePosixPath(DATA_DIR_NAME, item.path) for item in package.items.values()]
    folders = {parent for item in items for parent in item.parents}
    def belongs(rel: PurePosixPath) -> bool:  # an item, or inside an item folder
        return any(rel == item or item in rel.parents for item in items)

    extra: list[str] = []
    for dirpath, dirnames, filenames in os.walk(path):
        here = PurePosixPath(Path(dirpath).relative_to(path).as_posix())
        for name in list(dirnames):
            rel = here / name
            if rel in folders and not belongs(rel) and not os.path.islink(os.path.join(dirpath, name)):
                continue  # a folder on the way to an item: look inside
            dirnames.remove(name)
            if not belongs(rel):
                extra.append(rel.as_posix())
        for name in filenames:
            rel = here / name
            if not (belongs(rel) or rel == PurePosixPath(MANIFEST_NAME) or name in _SYSTEM_FILES):
                extra.append(rel.as_posix())
    extra.sort()
    if extra:
        more = f" and {len(extra) - 3} more" if len(extra) > 3 else ""
        return (f"it holds files that are not part of the package ({', '.join(extra[:3])}{more}); "
                "move them out first")
    return None


_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")


def resolve_arrays_destination(out: str | os.PathLike, *, sources: Iterable[str | os.PathLike] = (),
                               overwrite: bool = False) -> Path:
    """Where ``run -o`` writes its .npz: not a source (model or inputs), not an existing file unless
    ``overwrite``, and then only an .npz file (a zip archive)."""
    out = Path(out)
    Sources(sources).check(out)
    if not os.path.lexists(out):
        return out
    if not overwrite:
        raise DestinationError(f"already exists; {_ASK}", file=str(out))
    try:
        if not stat.S_ISREG(os.stat(out).st_mode):
            why = "it is not a regular file"
        else:
            with open(out, "rb") as f:
                why = None if f.read(4) in _ZIP_MAGICS else "it is not an .npz file"
    except OSError as e:
        why = f"cannot be examined ({e.strerror or e})"
    if why is not None:
        raise DestinationError(f"already exists and is not replaced, even with --overwrite: {why}", file=str(out))
    return out
