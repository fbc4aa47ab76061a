"""What a migration has to do: one task per model found under the source folder.

A task names the model by its path relative to the source folder (the key of everything else:
journal, report), where its result goes (the same relative place under the destination folder,
with the extension of the output format: ``.mlmodel`` -> ``.mlpackage`` for MIL), and a
fingerprint of the source, so that a rerun redoes a model only when it changed.

Fingerprint (cheap, and sensitive to what matters): for every regular file of the model (the
``.mlmodel`` or ``.onnx`` file, or each file of an ``.mlpackage`` folder) its relative name, size and
``st_mtime_ns``, plus a BLAKE2b hash of the model description: the whole ``.mlmodel`` or ``.onnx``
file (it holds the weights too), or a package's ``Manifest.json`` and ``.mlmodel`` spec files.
A package's weight files (``weight.bin``, possibly gigabytes) count by size and time only, and so
do the external data files an ONNX model names (``NAME.onnx.data``, found by reading the model only
when its bytes mention a ``location``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from ..batch import find_models
from ..destination import default_extension, output_format

__all__ = ["MigrationOptions", "Task", "fingerprint", "plan_tasks", "remove_temporaries"]

_HASHED_SUFFIXES = (".mlmodel", ".json", ".onnx")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class MigrationOptions:
    """The options that decide what a result is: a journal record counts for a rerun only when
    they are equal (the limits do not change a result; see `journal.Journal.done`)."""

    to: str = "mil"
    target: str | None = None
    passes: str = "default"
    check: bool = True
    verify: bool = False  # the IR verifier after every pass
    max_loop_iterations: int | None = None  # bounds of the check's runs (as for converter.run)
    max_tensor_bytes: int | None = None
    runtime: str = "interpreter"  # what runs the check (converter/runtimes; "auto" resolved before)

    def key(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


@dataclass(frozen=True)
class Task:
    rel: str  # the source, relative to the source folder (POSIX separators): the task's name
    source: str  # absolute path of the source model
    output_rel: str  # the output, relative to the destination folder
    output: str  # absolute path of the output
    fingerprint: str
    size: int  # bytes of the model's files (larger models are started first)


_LOCATION = b"location"  # the key of an ONNX tensor's external data entry


def _hash_file(h: hashlib.blake2b, path: Path) -> bool:
    """Hash the file's bytes into ``h``; whether they contain ``location`` (ONNX external data)."""
    seen, tail = False, b""
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
            if not seen:
                seen = _LOCATION in tail + chunk[:len(_LOCATION) - 1] or _LOCATION in chunk
                tail = chunk[-(len(_LOCATION) - 1):]
    return seen


def _onnx_external_files(model: Path) -> list[Path]:
    """The external data files the ONNX model at ``model`` names (none if it does not read)."""
    from ..errors import ConverterError
    from ..frontends.onnx.model_file import external_data_locations, read_model

    try:
        return [model.parent / loc for loc in external_data_locations(read_model(model).model)]
    except (ConverterError, OSError):
        return []  # the worker reports what is wrong with it


def fingerprint(model: Path) -> tuple[str, int]:
    """(fingerprint, total size in bytes) of a model file or package (see the module docstring)."""
    h = hashlib.blake2b(digest_size=16)
    files = [model] if model.is_file() else sorted(p for p in model.rglob("*") if p.is_file())
    total = 0
    for p in files:
        st = p.stat()
        total += st.st_size
        rel = p.relative_to(model).as_posix() if p != model else ""
        h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
        if p.name.endswith(_HASHED_SUFFIXES) and _hash_file(h, p) and p == model and p.suffix == ".onnx":
            for data in _onnx_external_files(model):
                try:
                    st = data.stat()
                except OSError as e:
                    h.update(f"external:{data.name}\0missing:{e.errno}\0".encode())
                    continue
                total += st.st_size
                h.update(f"external:{data.relative_to(model.parent).as_posix()}\0{st.st_size}\0"
                         f"{st.st_mtime_ns}\0".encode())
    return h.hexdigest(), total


def output_rel(rel: str, to: str) -> str:
    """Where the model at ``rel`` goes, relative to the destination folder."""
    p = Path(rel)
    return p.with_suffix(default_extension(to)).as_posix()


def plan_tasks(src: Path, dst: Path, options: MigrationOptions, on_unlisted=None) -> list[Task]:  # noqa: ANN001
    """One task per model under ``src`` (``dst`` is not searched, it may lie inside ``src``),
    in the order of `batch.find_models`. ``on_unlisted`` receives the OSError of a folder that
    cannot be listed."""
    output_format(options.to)  # an unknown format is an error before anything is done
    tasks = []
    for path in find_models(src, skip=dst, onerror=on_unlisted):
        rel = path.relative_to(src).as_posix()
        out_rel = output_rel(rel, options.to)
        try:
            fp, size = fingerprint(path)
        except OSError as e:  # unreadable: the worker reports it as a failure
            fp, size = f"unreadable:{e.errno}", 0
        tasks.append(Task(rel, str(path.absolute()), out_rel, str((dst / out_rel).absolute()), fp, size))
    return tasks


def remove_temporaries(dest: Path) -> list[Path]:
    """Remove the temporaries the atomic writers leave beside ``dest`` when killed
    (``.NAME.<12 hex>.tmp`` and ``.old``, converter/formats/atomic.py); returns them."""
    pattern = re.compile(rf"^\.{re.escape(dest.name)}\.[0-9a-f]{{12}}\.(tmp|old)$")
    removed = []
    try:
        names = os.listdir(dest.parent)
    except OSError:
        return removed
    for name in names:
        if pattern.match(name):
            p = dest.parent / name
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
            removed.append(p)
    return removed
