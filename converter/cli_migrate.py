"""``converter migrate SRC_DIR DST_DIR``: the command over `converter.migration.migrate`."""

from __future__ import annotations

import sys

import click

from .cli_output import fail
from .cli_verify import runtime_option
from .errors import ConverterError

__all__ = ["migrate_cmd"]


@click.command("migrate")
@click.argument("src", type=click.Path(exists=True, file_okay=False))
@click.argument("dst", type=click.Path())
@click.option("--to", "fmt", default="mil", show_default=True, type=click.Choice(["mil", "neuralnetwork", "onnx"]),
              help="Output format (as for convert): mil writes NAME.mlpackage, neuralnetwork NAME.mlmodel, onnx "
                   "NAME.onnx (opset 21).")
@click.option("--target", default=None,
              type=click.Choice(["iOS11", "iOS11.2", "iOS12", "iOS13", "iOS14", "iOS15", "iOS16", "iOS17", "iOS18"]),
              help="As for convert: the MIL opset (--to mil) or the oldest iOS (--to neuralnetwork).")
@click.option("--passes", default="default", show_default=True, help="Pass pipeline (as for convert).")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None,
              help="Models converted at a time, each in its own process (default: the number of cores).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=600.0, show_default=True,
              help="Seconds a model may take; a model that takes longer is stopped and reported.")
@click.option("--memory-mib", type=click.IntRange(min=64), default=4096, show_default=True,
              help="Memory a model's worker process may allocate; a model that needs more is reported.")
@click.option("--no-check", is_flag=True, help="Do not run each written model against its source.")
@click.option("--copy-other", is_flag=True, help="Also copy the files that are not models.")
@click.option("--overwrite", is_flag=True,
              help="Replace Core ML models (and, with --copy-other, files) already in DST_DIR that this "
                   "migration did not write.")
@click.option("--executor", default="local", show_default=True, type=click.Choice(["local", "dask"]),
              help="Where the workers run: processes on this machine, or a Dask cluster (converter[dask]).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="A Dask scheduler to run on (e.g. tcp://HOST:8786; implies --executor dask).")
@runtime_option
def migrate_cmd(src: str, dst: str, fmt: str, target: str | None, passes: str, jobs: int | None, timeout: float,
                memory_mib: int, no_check: bool, copy_other: bool, overwrite: bool, executor: str,
                scheduler: str | None, runtime: str) -> None:
    """Convert every model under SRC_DIR to the same place under DST_DIR (NeuralNetwork .mlmodel, ML
    program .mlpackage and ONNX .onnx -> .mlpackage by default), in parallel, and write DST_DIR/migration-report.json and .md.

    Each model is converted in a worker process with a time and memory limit, and checked against
    its source unless --no-check. A journal in DST_DIR/.converter-migrate makes the run resumable:
    rerun the same command after a crash or Ctrl-C and only what is missing (or whose source
    changed) is converted. Exit status: 0 when every model converted, 1 otherwise.
    """
    from .migration import migrate
    from .migration.progress import Progress

    progress = Progress()
    try:
        report = migrate(src, dst, to=fmt, target=target, passes=passes, jobs=jobs, timeout=timeout,
                         memory_mib=memory_mib, check=not no_check, copy_other=copy_other, overwrite=overwrite,
                         executor=executor, scheduler=scheduler, on_start=progress.start,
                         on_result=progress.result, runtime=runtime)
    except ConverterError as e:
        progress.close()
        fail(e)
    except BaseException:  # an interrupt: say what finished; the journal keeps it for a rerun
        progress.close()
        done = sum(e.status != "pending" for e in progress.finished)
        click.echo(f"stopped: {done} models finished (journal kept in {dst}/.converter-migrate; "
                   "run the same command again to go on)", err=True)
        raise
    progress.close()
    for e in report.errors:
        click.echo(f"error: {e}", err=True)
    click.echo(f"{report.summary()} (report: {dst}/migration-report.json)")
    if not report.ok:
        sys.exit(1)
