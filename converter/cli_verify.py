"""``converter verify``, and the report printing ``convert --check`` shares with it (cli.py registers
the command). Parses options, calls `converter.verify.verify`, prints; no checking logic here."""

from __future__ import annotations

import json
import sys

import click

from .cli_output import fail as _fail
from .errors import ConverterError, printable
from .verify import VerifyReport

RUNTIME_HELP = ("What runs the models: onnxruntime (native speed; needs converter[ort]; a model with ops ONNX cannot "
                "express runs in the interpreter, with a note), the interpreter (the reference), or auto: "
                "onnxruntime when installed, else the interpreter.")


def runtime_option(f):  # noqa: ANN001, ANN201 - a click decorator
    """``--runtime auto|onnxruntime|interpreter`` (default auto), shared by run, verify, convert --check, migrate."""
    return click.option("--runtime", default="auto", show_default=True,
                        type=click.Choice(["auto", "onnxruntime", "interpreter"]), help=RUNTIME_HELP)(f)


def progress(line: str) -> None:
    """Say on stderr which model starts running (a deep model takes tens of seconds)."""
    click.echo(printable(line), err=True)


def print_report(report: VerifyReport, *, as_json: bool = False) -> None:
    """The table (or the JSON document) and the verdict, on stdout; names from models escaped."""
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=1))
        return
    for line in report.table():
        click.echo(printable(line))
    click.echo(printable(report.verdict()))


@click.command("verify")
@click.argument("source", type=click.Path(exists=True))
@click.argument("converted", type=click.Path(exists=True))
@click.option("--inputs", "inputs_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="An .npz file with one array per input of SOURCE (default: random inputs that respect each "
                   "input's type and range).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random inputs.")
@click.option("--rtol", type=click.FloatRange(min=0), default=None,
              help="Relative tolerance (of the output's largest magnitude) for every float output "
                   "(default by dtype: fp32 1e-4, fp16 1e-2).")
@click.option("--atol", type=click.FloatRange(min=0), default=None,
              help="Absolute tolerance for every float output (default by dtype: fp32 1e-5, fp16 1e-3).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (docs/schemas/verify.schema.json).")
@click.option("--max-loop-iterations", type=click.IntRange(min=1), default=None,
              help="Stop the models' loops after this many iterations in all, with an error.")
@click.option("--max-tensor-mib", type=click.IntRange(min=1), default=None,
              help="Refuse to make a tensor larger than this many MiB, with an error.")
@runtime_option
def verify_cmd(source: str, converted: str, inputs_path: str | None, seed: int, rtol: float | None,
               atol: float | None, as_json: bool, max_loop_iterations: int | None, max_tensor_mib: int | None,
               runtime: str) -> None:
    """Run SOURCE and CONVERTED on the same inputs and judge each output against a tolerance chosen by
    its dtype (integers and labels exactly). Features are paired by name, then by position (with a
    note). Both run with --runtime (a model onnxruntime cannot run runs in the interpreter; the report
    notes it). Exit status: 0 when every output is within tolerance, 1 when one is not, 2 on an error."""
    import warnings

    from .errors import InputWarning
    from .verify import verify

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", InputWarning)
            report = verify(source, converted, inputs=inputs_path, seed=seed, rtol=rtol, atol=atol,
                            max_loop_iterations=max_loop_iterations,
                            max_tensor_bytes=None if max_tensor_mib is None else max_tensor_mib << 20,
                            progress=progress, runtime=runtime)
        for message in dict.fromkeys(str(w.message) for w in caught):  # once, though both models warn
            click.echo(printable(f"warning: {message}"), err=True)
    except ConverterError as e:
        _fail(e)
    print_report(report, as_json=as_json)
    if not report.ok:
        sys.exit(1)
