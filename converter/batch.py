"""Batch migration: convert every model in a folder tree, continuing past failures.

Each ``.mlmodel`` file and ``.mlpackage`` directory under the source folder becomes an
``.mlpackage`` at the same relative place under the output folder. A model that cannot be
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
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .destination import DestinationError, Sources, default_extension, output_format, resolve_model_destination
from .errors import ConversionWarning, ConverterError
from .passes.base import PipelineStats


@dataclass
class Outcome:
    source: Path
    output: Path | None  # the written package (also when only ``check`` failed), else None
    error: ConverterError | None = None
    notes: list[str] = field(default_factory=list)
    #: with ``check``: {source output name: largest absolute difference} (see converter.check.compare)
    differences: dict[str, float] | None = None
    #: what the pass pipeline did (None when the model was not optimized)
    pass_stats: PipelineStats | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def find_models(
    root: Path, *, skip: Path | None = None, onerror: Callable[[OSError], None] | None = None
) -> Iterator[Path]:
    """``.mlmodel`` files and ``.mlpackage`` directories under ``root`` (packages are not entered;
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
            if f.endswith(".mlmodel"):
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


def convert_tree(src: Path, out: Path, **options: Any) -> list[Outcome]:
    """`iter_convert_tree`, as a list."""
    return list(iter_convert_tree(src, out, **options))


def iter_convert_tree(src: Path, out: Path, *, target: str | None = None, to: str | None = None,
                      check: bool = False, overwrite: bool = False, max_loop_iterations: int | None = None,
                      max_tensor_bytes: int | None = None, passes: str = "default",
                      verify: bool = False) -> Iterator[Outcome]:
    """Convert every model under ``src`` to ``out`` (see the module docstring), one outcome at a time.

    ``to``/``target``/``overwrite`` as for `converter.save`; an unknown ``to`` or an ``out`` that is
    not a folder raises before anything is done. Every model is found before the first is written,
    and no destination may be a source, lie inside one or hold one (converter/destination.py), so
    converting a folder into itself rewrites no input. With ``check``, each written model is run
    against its source on random inputs (`converter.check.compare`, bounded by
    ``max_loop_iterations`` and ``max_tensor_bytes`` as `converter.run` is) and
    ``Outcome.differences`` is filled in. Each model is optimized with ``passes`` first (as
    `converter.convert` does; ``verify``: the verifier after every pass).
    """
    from .api import load, optimize, save
    from .ir.clone import clone_program
    from .passes.pipelines import resolve

    resolve(passes)  # an unknown pass is an error before anything is done

    src, out = Path(src), Path(out)
    output_format(to)
    if os.path.lexists(out) and not out.is_dir():
        raise DestinationError("the output of a folder conversion must be a folder", file=str(out))
    if out.suffix.lower() in (".mlpackage", ".mlmodel"):
        raise DestinationError(f"the output of a folder conversion must be a folder, not a model name "
                               f"('{out.suffix}')", file=str(out))

    unlisted: list[Outcome] = []

    def on_error(e: OSError) -> None:
        unlisted.append(Outcome(Path(e.filename or src), None, _os_error(e, src, "cannot list folder")))

    models = list(find_models(src, skip=out, onerror=on_error))
    yield from unlisted
    sources = Sources(models)
    claimed: dict[Path, Path] = {}  # destination (resolved folder) -> the source written there
    for path in models:
        try:
            dest = resolve_model_destination((out / path.relative_to(src)).with_suffix(default_extension(to)), to=to,
                                             sources=sources, overwrite=overwrite, into_folder=False).path
            key = Path(os.path.realpath(dest.parent)) / dest.name
            if key in claimed:
                raise DestinationError(f"also the destination of '{claimed[key]}', converted before", file=str(dest))
            claimed[key] = path
            prog = load(path)
            pipeline = resolve(passes)
            source = clone_program(prog)[0] if check and pipeline else prog
            stats = optimize(prog, pipeline, verify=verify)
        except ConverterError as e:
            yield Outcome(path, None, e)
            continue
        created: list[Path] = []
        try:
            try:
                created = _make_parents(dest.parent)
            except OSError as e:
                raise _os_error(e, dest.parent, "cannot create folder") from None
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConversionWarning)
                try:
                    save(prog, dest, target=target, to=to, overwrite=overwrite)
                except OSError as e:
                    raise _os_error(e, dest, "cannot write") from None
        except ConverterError as e:
            _remove_empty(created)
            yield Outcome(path, None, e)
            continue
        except BaseException:  # an interrupt: no folder left behind for the model in progress either
            _remove_empty(created)
            raise
        notes = list(prog.meta.get("notes", [])) + [str(w.message) for w in caught]
        outcome = Outcome(path, dest, notes=notes, pass_stats=stats)
        if check:
            try:
                outcome.differences = _check(source, path, dest, max_loop_iterations=max_loop_iterations,
                                             max_tensor_bytes=max_tensor_bytes)
            except ConverterError as e:
                outcome.error = e
        yield outcome


def describe_contents(folder: Path) -> str:
    """What ``folder`` holds, in a few words ("it is empty", "it holds 2 files and 1 folder")."""
    files = folders = 0
    for _dirpath, dirnames, filenames in os.walk(folder):
        files += len(filenames)
        folders += len(dirnames)
    if not files and not folders:
        return "it is empty"
    return f"it holds {files} file{'s' * (files != 1)} and {folders} folder{'s' * (folders != 1)}"


def _check(prog, source: Path, dest: Path, **bounds: int | None) -> dict[str, float]:
    from .api import load
    from .check import compare

    return compare(prog, load(dest), source_file=str(source), converted_file=str(dest), **bounds)
