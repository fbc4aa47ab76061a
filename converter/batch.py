"""Batch migration: convert every model in a folder tree, continuing past failures.

Each ``.mlmodel`` file, ``.mlpackage`` directory and ``.onnx`` file under the source folder becomes
an ``.mlpackage`` (or the format asked for) at the same relative place under the output folder. A model that cannot be
converted (it does not load, a folder cannot be created, writing fails, ``check`` fails) is
reported with its error and the rest go on; nothing partial is written for it, and no folder is
left behind for a model that was not written. A folder that cannot be listed is reported too.
The output folder is never searched for models (it may lie inside the source folder).

Each destination obeys converter/destination.py: an existing one is replaced only with
``overwrite`` (and only if it is a clean Core ML package), and none may be a source model, lie
inside one or hold one, so that converting a folder into itself never rewrites an input. Two
sources with one destination (``a.mlmodel`` and ``a.mlpackage``): the second is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ConverterError

#: Model files a folder conversion picks up (``.mlpackage`` folders too).
MODEL_FILE_SUFFIXES = (".mlmodel", ".onnx")


@dataclass
class Outcome:
    source: Path
    output: Path | None  # the written package (also when only ``check`` failed), else None
    error: ConverterError | None = None
    notes: list[str] = field(default_factory=list)
    #: with ``check``: {source output name: largest absolute difference} (see converter.check.compare)
    differences: dict[str, float] | None = None
    #: what the pass pipeline did, in one line (None when the model was not optimized)
    pass_summary: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def find_models(
    root: Path, *, skip: Path | None = None, onerror: Callable[[OSError], None] | None = None
) -> Iterator[Path]:
    """``.mlmodel`` and ``.onnx`` files and ``.mlpackage`` directories under ``root`` (packages are not entered;
    nor is ``skip``). ``onerror`` receives the OSError of a folder that cannot be listed."""
    skip_real = os.path.realpath(skip) if skip is not None else None
    for dirpath, dirnames, filenames in os.walk(root, onerror=onerror):
        here = Path(dirpath)
        if skip_real is not None:
            dirnames[:] = [d for d in dirnames if os.path.realpath(here / d) != skip_real]
        for d in sorted(dirnames):
            if d.endswith(".mlpackage"):
                yield here / d
        dirnames[:] = sorted(d for d in dirnames if not d.endswith(".mlpackage"))
        for f in sorted(filenames):
            if f.endswith(MODEL_FILE_SUFFIXES):
                yield here / f


def _os_error(e: OSError, path: Path, what: str) -> ConverterError:
    return ConverterError(f"{what}: {e.strerror or e}", file=str(e.filename or path))


def _make_parents(folder: Path) -> list[Path]:
    """``mkdir -p folder``; returns the folders it created, deepest first."""
    missing = []
    p = folder
    while not p.is_dir() and p != p.parent:
        missing.append(p)
        p = p.parent
    folder.mkdir(parents=True, exist_ok=True)
    return missing


def _remove_empty(folders: list[Path]) -> None:
    for d in folders:  # deepest first
        try:
            d.rmdir()
        except OSError:  # not empty (another model went there) or already gone
            return


def convert_tree(src: Path, out: Path, *, target: str | None = None, to: str | None = None,
                 check: bool = False, overwrite: bool = False, max_loop_iterations: int | None = None,
                 max_tensor_bytes: int | None = None, passes: str = "default", verify: bool = False,
                 on_outcome: Callable[[Outcome], None] | None = None, executor: str = "inline",
                 jobs: int | None = None, runtime: str = "interpreter") -> list[Outcome]:
    """Convert every model under ``src`` to ``out`` (see the module docstring); one outcome per
    model (and first, one per folder that could not be listed), each also passed to ``on_outcome``
    as soon as that model is done (the folders last).

    The engine of ``converter migrate`` (converter/migration) without its journal and report:
    ``executor="inline"`` converts in this process one model after the other; "local" in ``jobs``
    worker processes. ``to``/``target``/``overwrite`` as for `converter.save`; an unknown ``to``
    or an ``out`` that is not a folder raises before anything is done. Every model is found before
    the first is written, and no destination may be a source, lie inside one or hold one
    (converter/destination.py), so converting a folder into itself rewrites no input. With
    ``check``, each written model is run against its source on random inputs (by ``runtime``: converter/runtimes)
    (`converter.check.compare`, bounded by ``max_loop_iterations`` and ``max_tensor_bytes`` as
    `converter.run` is) and ``Outcome.differences`` is filled in. Each model is optimized with
    ``passes`` first (as `converter.convert` does; ``verify``: the verifier after every pass).
    """
    from .migration.engine import migrate

    src, out = Path(src), Path(out)
    outcomes: list[Outcome] = []

    def to_outcome(entry) -> None:  # noqa: ANN001 - a migration.ModelEntry
        error = None if entry.status == "converted" else ConverterError(entry.reason or entry.status)
        o = Outcome(src / entry.source, out / entry.output if entry.output else None, error, list(entry.notes),
                    entry.differences, entry.pass_summary)
        outcomes.append(o)
        if on_outcome is not None:
            on_outcome(o)

    report = migrate(src, out, to=to or "mil", target=target, passes=passes, check=check, overwrite=overwrite,
                     verify=verify, max_loop_iterations=max_loop_iterations, max_tensor_bytes=max_tensor_bytes,
                     runtime=runtime, journal=False, executor=executor, jobs=jobs, on_result=to_outcome)
    unlisted = [Outcome(src, None, ConverterError(e)) for e in report.errors]  # known only now: reported last
    if on_outcome is not None:
        for o in unlisted:
            on_outcome(o)
    return unlisted + outcomes


def describe_contents(folder: Path) -> str:
    """What ``folder`` holds, in a few words ("it is empty", "it holds 2 files and 1 folder")."""
    files = folders = 0
    for _dirpath, dirnames, filenames in os.walk(folder):
        files += len(filenames)
        folders += len(dirnames)
    if not files and not folders:
        return "it is empty"
    return f"it holds {files} file{'s' * (files != 1)} and {folders} folder{'s' * (folders != 1)}"
