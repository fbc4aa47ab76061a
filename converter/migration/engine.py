"""`migrate`: convert every model under a folder into a mirrored folder, resumably, in parallel.

The steps, each in a module of its own: find the models and plan one task each (tasks.py), skip
what the journal says is done (journal.py), hand the rest to an executor (executors.py: local
processes or a Dask cluster) which converts each in a worker process (worker.py), record each
result in the journal as it arrives and tell the caller (``on_result``), and write the report
(report.py) built from the journal, also when the run is interrupted.

Files: nothing under the source folder is written. Under the destination folder a model is
written atomically (converter/destination.py; a temporary ``.NAME.<12 hex>.tmp`` beside it,
renamed when complete) and a temporary left by a killed worker or a killed run is removed before
the model is converted again; the journal lives in ``DST_DIR/.converter-migrate/``. A file that
is in the way and was not written by this migration (per the journal) is never replaced unless
``overwrite``, and then only if it is a Core ML model (destination rules).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..batch import MODEL_FILE_SUFFIXES, _os_error
from ..destination import DestinationError, Sources, output_format, resolve_model_destination
from ..errors import ConverterError, UnsupportedError, printable
from ..formats.atomic import create_temp_beside, replace_path
from .executors import WorkerSettings, make_executor
from .journal import JOURNAL_DIR, Journal, NoJournal
from .report import REPORT_JSON, REPORT_MD, MigrationReport, ModelEntry, entry_from_record, from_journal
from .tasks import MigrationOptions, Task, plan_tasks, remove_temporaries

__all__ = ["migrate"]

DEFAULT_TIMEOUT = 600.0
DEFAULT_MEMORY_MIB = 4096


def migrate(src: str | os.PathLike, dst: str | os.PathLike, *, to: str = "mil", target: str | None = None,
            passes: str = "default", jobs: int | None = None, timeout: float | None = DEFAULT_TIMEOUT,
            memory_mib: int | None = DEFAULT_MEMORY_MIB, check: bool = True, copy_other: bool = False,
            overwrite: bool = False, executor: str = "local", scheduler: str | None = None,
            on_start: Callable[[int, int], None] | None = None,
            on_result: Callable[[ModelEntry], None] | None = None, verify: bool = False,
            max_loop_iterations: int | None = None, max_tensor_bytes: int | None = None, runtime: str = "interpreter",
            journal: bool = True) -> MigrationReport:
    """Convert every model under ``src`` to the same relative place under ``dst``; returns the report
    (also written to ``dst``/migration-report.json and .md).

    ``to``/``target``/``passes`` as for `converter.convert` (NeuralNetwork ``.mlmodel`` and ONNX
    ``.onnx`` -> ``.mlpackage`` for MIL; ``to="onnx"`` writes ``.onnx``). ``jobs`` worker processes at a time (default: the number of cores);
    each model gets ``timeout`` seconds and ``memory_mib`` MiB (None: no limit). ``check``: run
    each written model against its source. ``copy_other``: copy the other files too.
    ``executor="dask"`` or a ``scheduler`` address runs the models on a Dask cluster. A rerun
    converts only the models not done yet or whose source changed (the journal).
    ``on_start(to_do, total)`` is called once the work is planned; ``on_result`` with each
    model's entry as it finishes (also for the models a rerun skips, first). ``verify``: the IR
    verifier after every pass; ``max_loop_iterations``/``max_tensor_bytes`` bound the check's runs;
    ``runtime`` runs them ("interpreter", "onnxruntime" or "auto": converter/runtimes).

    ``journal=False`` is ``converter convert FOLDER -o OUT``: no journal, no report files, nothing
    skipped, and OUT is created only for the models written (it may be the source folder itself;
    the sources are protected by the destination rules). ``executor="inline"`` converts in this
    process, one model after the other, without limits.
    """
    from ..passes.pipelines import resolve
    from ..runtimes import resolve as resolve_runtime

    src, dst = Path(src), Path(dst)
    fmt = output_format(to)
    if fmt == "webnn":
        raise UnsupportedError("converting a folder of models to WebNN is not supported yet: convert them one by one",
                               file=str(src))
    resolve(fmt if passes == "default" and fmt == "neuralnetwork" else passes)  # unknown passes: now
    _check_folders(src, dst, same_allowed=not journal)
    options = MigrationOptions(to=fmt, target=target, passes=passes, check=check, verify=verify,
                               max_loop_iterations=max_loop_iterations, max_tensor_bytes=max_tensor_bytes,
                               runtime=resolve_runtime(runtime) if check else "interpreter")
    settings = WorkerSettings(options, timeout, memory_mib)
    limits = {"timeout": timeout, "memory_mib": memory_mib}
    runner = make_executor(executor, jobs=jobs, scheduler=scheduler)

    errors: list[str] = []
    tasks = plan_tasks(src, dst, options,
                       on_unlisted=lambda e: errors.append(str(_os_error(e, src, "cannot list folder"))))
    if journal:
        dst.mkdir(parents=True, exist_ok=True)
    log = Journal(dst) if journal else NoJournal()
    results: dict[str, dict[str, Any]] = {}
    copied: list[str] = []
    try:
        log.append("run", options=options.key(), pid=os.getpid(), **limits)
        if copy_other:
            copied = _copy_other(src, dst, overwrite=overwrite, errors=errors)
        key = options.key()
        todo: list[tuple[Task, bool]] = []
        sources = Sources(t.source for t in tasks)
        claimed: dict[str, str] = {}
        for t in tasks:
            replace = overwrite or log.wrote(t)
            why = _blocked(t, sources, claimed)
            if why is None and (rec := log.done(t, key, timeout=timeout, memory_mib=memory_mib)) is not None:
                results[t.rel] = rec
            elif why is not None or (why := _in_the_way(t, options, replace)) is not None:
                results[t.rel] = {"status": "failed", "reason": why}  # not journaled: found again on a rerun
            else:
                remove_temporaries(Path(t.output))
                # Its start is journaled before a worker gets it, and from then on the output is this
                # journal's to replace: a Dask task rerun after the worker that wrote it died before
                # its result reached us must not find its own output "in the way".
                todo.append((t, replace or journal))
                continue
            if on_result is not None:
                on_result(entry_from_record(t, results[t.rel]))
        if on_start is not None:
            on_start(len(todo), len(tasks))

        def started(task: Task) -> None:
            log.append("start", rel=task.rel, fingerprint=task.fingerprint, options=key, output_path=task.output)

        def finished(task: Task, entry: dict[str, Any]) -> None:
            rec = log.append("result", rel=task.rel, fingerprint=task.fingerprint, options=key, **limits, **entry,
                             output_path=task.output if entry.get("output") else None)
            results[task.rel] = rec
            if entry.get("status") != "converted":
                remove_temporaries(Path(task.output))
            if on_result is not None:
                on_result(entry_from_record(task, rec))

        runner.run(todo, settings, started, finished)
    finally:
        report = from_journal(src.absolute(), dst.absolute(), tasks, results, options, limits, copied, errors)
        try:
            if journal:
                report.write(dst)
        finally:
            log.close()
    return report


def _check_folders(src: Path, dst: Path, *, same_allowed: bool) -> None:
    from ..formats.package import is_mlpackage

    if not src.is_dir() or is_mlpackage(src):
        raise ConverterError("the source of a folder conversion must be a folder of models", file=str(src))
    if os.path.lexists(dst) and not dst.is_dir():
        raise DestinationError("the output of a folder conversion must be a folder", file=str(dst))
    if dst.suffix.lower() in (".mlpackage", ".mlmodel", ".onnx"):
        raise DestinationError(f"the output of a folder conversion must be a folder, not a model name "
                               f"('{dst.suffix}')", file=str(dst))
    if not same_allowed and os.path.realpath(src) == os.path.realpath(dst):
        raise DestinationError("the destination is the source folder; choose another folder", file=str(dst))


def _blocked(task: Task, sources: Sources, claimed: dict[str, str]) -> str | None:
    """Why ``task`` cannot be written at all (its output would touch a source, or another model
    of the run goes there), or None."""
    why = sources.conflict(Path(task.output))
    if why is not None:
        return str(DestinationError(f"{why}; choose another destination", file=task.output))
    if task.output_rel in claimed:
        return str(DestinationError(f"also the destination of '{claimed[task.output_rel]}', converted before",
                                    file=task.output))
    claimed[task.output_rel] = task.source
    return None


def _in_the_way(task: Task, options: MigrationOptions, replace: bool) -> str | None:
    """Why ``task``'s destination may not be written (something is there that may not be replaced,
    converter/destination.py), or None; the worker checks again before writing."""
    try:
        resolve_model_destination(task.output, to=options.to, sources=[task.source], overwrite=replace,
                                  into_folder=False)
    except ConverterError as e:
        return str(e)
    return None


def _copy_other(src: Path, dst: Path, *, overwrite: bool, errors: list[str]) -> list[str]:
    """Copy every file under ``src`` that is not part of a model to the same place under ``dst``
    (atomically; an existing different file is replaced only with ``overwrite``)."""
    copied = []
    skip = {os.path.realpath(dst)}
    for dirpath, dirnames, filenames in os.walk(src):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not d.endswith(".mlpackage") and d != JOURNAL_DIR
                             and os.path.realpath(here / d) not in skip)
        for name in sorted(filenames):
            if name.endswith(MODEL_FILE_SUFFIXES) or (here == src and name in (REPORT_JSON, REPORT_MD)):
                continue
            rel = (here / name).relative_to(src)
            target = dst / rel
            try:
                if os.path.lexists(target):
                    if _same_file_contents(here / name, target):
                        copied.append(rel.as_posix())
                        continue
                    if not overwrite:
                        errors.append(printable(f"not copied: {rel.as_posix()} exists in the destination and "
                                                "differs (--overwrite replaces it)"))
                        continue
                target.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = create_temp_beside(target)
                os.close(fd)
                try:
                    shutil.copyfile(here / name, tmp)
                    shutil.copymode(here / name, tmp)
                    replace_path(tmp, target, overwrite=overwrite)
                except BaseException:
                    tmp.unlink(missing_ok=True)
                    raise
                copied.append(rel.as_posix())
            except OSError as e:
                errors.append(printable(f"not copied: {rel.as_posix()}: {e.strerror or e}"))
    return copied


def _same_file_contents(a: Path, b: Path) -> bool:
    try:
        if not b.is_file() or a.stat().st_size != b.stat().st_size:
            return False
        with open(a, "rb") as fa, open(b, "rb") as fb:
            while True:
                ca, cb = fa.read(1 << 20), fb.read(1 << 20)
                if ca != cb:
                    return False
                if not ca:
                    return True
    except OSError:
        return False
