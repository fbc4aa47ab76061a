"""Convert ONE model, in a process of its own: ``python -m converter.migration.worker``.

The parent (`executors.run_isolated`) either has it forked by a worker factory that has the
converter imported already (zygote.py, which calls `serve`), or starts it as a program of its own: one JSON request on stdin ({"task", "options", "replace", "memory_mib", "parent"}),
one JSON result line on stdout, marked with `RESULT_MARK` (on Dask workers, or with
``CONVERTER_MIGRATE_WORKER``). In the child, the memory limit is set (``RLIMIT_DATA``: heap and anonymous maps;
weight files mapped from disk do not count) and the child asks to be killed when the process
that started it dies (Linux ``PR_SET_PDEATHSIG``), so a ``kill -9`` of a migration leaves no
worker behind.

The result is a report entry without its timing fields: ``status`` (converted, refused for an
`UnsupportedError`, failed for any other error, memory for a `MemoryError`), ``reason``,
``output`` (relative to the destination folder, when a model was written), ``target``,
``ops_before``/``ops_after`` (ops other than ``const``, nested blocks included:
`passes.base.count_ops`), ``max_error`` and ``notes``; ``peak_mib`` (the child's ``ru_maxrss``);
also ``differences`` ({source output: largest difference}) and ``pass_summary``, which the report
leaves out. A written model whose check fails (or cannot run) is "failed", its output kept.

Writing obeys converter/destination.py and is atomic (`converter.save`: a temporary
``.NAME.<hex>.tmp`` beside the destination, renamed into place when complete).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from ..errors import ConversionWarning, ConverterError, UnsupportedError
from .tasks import MigrationOptions, Task

__all__ = ["RESULT_MARK", "check_result", "convert_model"]

RESULT_MARK = "CONVERTER-MIGRATE-RESULT "


def check_result(source_program: Any, written_path: str | os.PathLike, *, source_file: str | None = None,
                 max_loop_iterations: int | None = None, max_tensor_bytes: int | None = None,
                 runtime: str = "interpreter",
                 source_onnx: str | None = None) -> tuple[float, bool, list[str], dict[str, float]]:
    """Verify the written model against the source program (`converter.verify.verify`: the same
    seeded random inputs, each output judged by its dtype's tolerance, features paired by name then
    position): (largest absolute difference over all outputs, the verdict, notes for the outputs
    that fail and for pairings by position, {source output: largest absolute difference}). The
    one place the migration verifies a result, so a migrated model passes exactly when
    ``converter verify SOURCE OUTPUT`` says PASS. ``source_onnx``: the ONNX file the source program
    was read from, which onnxruntime then runs as it is (`verify`)."""
    from ..verify import verify

    report = verify(source_program, written_path, source_file=source_file, converted_file=str(written_path),
                    max_loop_iterations=max_loop_iterations, max_tensor_bytes=max_tensor_bytes, runtime=runtime,
                    source_onnx=source_onnx)
    diffs = {o.name: float(o.max_abs_error) for o in report.outputs}
    worst = max(diffs.values(), default=0.0)
    notes = [f"output '{o.name}': {o.note or 'differs by ' + format(o.max_abs_error, '.3g')} "
             f"({o.mismatched} of {o.elements} elements outside {o.tolerance_text()})" for o in report.failed]
    notes += report.notes
    return float(worst), report.ok, notes, diffs


def _passes(options: MigrationOptions) -> str:
    from ..destination import output_format

    fmt = output_format(options.to)
    return fmt if options.passes == "default" and fmt in ("neuralnetwork", "webnn") else options.passes


def convert_model(task: Task, options: MigrationOptions, *, replace: bool = False) -> dict[str, Any]:
    """Load, optimize, write and (with ``options.check``) verify ``task``'s model; never raises for
    a model's fault (the outcome is the returned entry's status and reason)."""
    from ..api import load, optimize, save
    from ..batch import _make_parents, _os_error, _remove_empty
    from ..destination import output_format, resolve_model_destination
    from ..ir.clone import clone_program
    from ..passes.base import count_ops
    from ..passes.pipelines import resolve
    from ..runtimes.onnx_file import is_onnx_file

    entry: dict[str, Any] = {"status": "failed", "reason": None, "output": None, "target": options.target,
                             "ops_before": None, "ops_after": None, "max_error": None, "notes": [],
                             "differences": None, "pass_summary": None}
    stage = "load"
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConversionWarning)
            prog = load(task.source)
            entry["ops_before"] = count_ops(prog)[0]
            stage = "optimize"
            pipeline = resolve(_passes(options))
            source = clone_program(prog)[0] if options.check and pipeline else prog
            entry["pass_summary"] = optimize(prog, pipeline, verify=options.verify).summary() if pipeline else None
            entry["ops_after"] = count_ops(prog)[0]
            stage = "write"
            dest = resolve_model_destination(task.output, to=options.to, sources=[task.source], overwrite=replace,
                                             into_folder=False).path
            if output_format(options.to) == "mil" and options.target is None:
                from ..backends.mil import default_target

                entry["target"] = default_target(prog)
            try:
                created = _make_parents(dest.parent)
            except OSError as e:
                raise _os_error(e, dest.parent, "cannot create folder") from None
            try:
                save(prog, dest, target=options.target, to=options.to, overwrite=replace)
            except OSError as e:
                _remove_empty(created)
                raise _os_error(e, dest, "cannot write") from None
            except BaseException:
                _remove_empty(created)
                raise
        entry["output"] = task.output_rel
        entry["notes"] = list(prog.meta.get("notes", [])) + [str(w.message) for w in caught]
        entry["status"] = "converted"
        if options.check:
            stage = "check"
            try:
                max_error, passed, notes, entry["differences"] = check_result(
                    source, dest, source_file=str(task.source), max_loop_iterations=options.max_loop_iterations,
                    max_tensor_bytes=options.max_tensor_bytes, runtime=options.runtime,
                    source_onnx=task.source if is_onnx_file(task.source) else None)
            except ConverterError as e:  # e.g. an input no random value can be made for
                entry["status"], entry["reason"] = "failed", f"the check failed: {e}"
            else:
                entry["max_error"] = max_error
                entry["notes"] += notes
                if not passed:
                    entry["status"] = "failed"
                    entry["reason"] = f"the check failed: the written model differs from the source by {max_error:.3g}"
    except UnsupportedError as e:
        entry["status"], entry["reason"] = "refused", str(e)
    except ConverterError as e:
        entry["status"], entry["reason"] = "failed", str(e)
    except MemoryError:
        entry["status"], entry["reason"] = "memory", f"out of memory during {stage}"
    except OSError as e:
        entry["status"], entry["reason"] = "failed", f"{stage}: {e.strerror or e}: {e.filename or task.source}"
    except RecursionError:
        entry["status"], entry["reason"] = "failed", f"{stage}: nesting too deep (RecursionError)"
    except Exception as e:  # noqa: BLE001 - a converter bug is one model's failure, reported
        entry["status"], entry["reason"] = "failed", f"internal error during {stage}: {type(e).__name__}: {e}"
    return entry


def _limit_memory(mib: int | None) -> None:
    if mib:
        limit = mib << 20
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def _die_with_parent(parent: int | None) -> None:
    """Ask Linux to SIGKILL this process when its parent dies; exit now if it is already gone."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # pragma: no cover - no prctl
            pass
    if parent is not None and os.getppid() != parent:
        os._exit(3)


def serve(request: dict[str, Any]) -> dict[str, Any]:
    """The worker's job once started: limit its memory, convert, measure its peak memory. Ctrl-C
    (SIGINT to the terminal's whole process group) is for the migration, which stops its workers."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _limit_memory(request.get("memory_mib"))
    task = Task(**request["task"])
    options = MigrationOptions(**request["options"])
    if options.runtime == "onnxruntime":
        from ..runtimes.ort import set_intra_op_threads

        set_intra_op_threads(request.get("ort_threads"))
    if request.get("markers"):  # tests: one file per conversion started
        (Path(request["markers"]) / f"{os.getpid()}-{time.time_ns()}").write_text(task.rel)
    try:
        entry = convert_model(task, options, replace=bool(request.get("replace")))
    except MemoryError:
        entry = {"status": "memory", "reason": f"out of memory (limit {request.get('memory_mib')} MiB)"}
    entry["peak_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return entry


def main() -> None:
    """``python -m converter.migration.worker``: the request on stdin, the entry on stdout."""
    request = json.loads(sys.stdin.readline())
    _die_with_parent(request.get("parent"))
    entry = serve(request)
    sys.stdout.write(RESULT_MARK + json.dumps(entry) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
