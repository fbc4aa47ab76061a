"""``converter inspect MODEL``: what a model is (converter/inspect.py gathers, inspect_text.py
prints), as text or ``--json``; ``--ir`` prints the IR text, ``--graph`` draws the dataflow graph
(converter/dataflow_graph.py)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .cli_output import fail as _fail
from .cli_output import say
from .errors import ConverterError, UnsupportedError


def _say(text: str, *, err: bool = False) -> None:
    for line in text.splitlines() or [""]:
        say(line, err=err)


@click.command("inspect")
@click.argument("model", type=click.Path())
@click.option("--json", "as_json", is_flag=True,
              help="Print the report as JSON (schema: docs/schemas/inspect.schema.json).")
@click.option("--ir", "show_ir", is_flag=True,
              help="Print the program in the IR text form instead (converter.ir.text: it parses back).")
@click.option("--graph", "graph_path", type=click.Path(dir_okay=False), default=None,
              help="Also write the dataflow graph: OUT.dot (Graphviz source), OUT.svg or OUT.html (a static "
                   "page with the report and the drawing; drawn by Graphviz when the graphviz package is "
                   "installed, else by a simple layered layout).")
@click.option("--function", "function", default=None,
              help="The function --ir and --graph show (default: the model's default function; --ir without "
                   "--function prints the whole program).")
@click.option("--overwrite", is_flag=True, help="Replace an existing file at --graph.")
def inspect_cmd(model: str, as_json: bool, show_ir: bool, graph_path: str | None, function: str | None,
                overwrite: bool) -> None:
    """Describe MODEL (.mlmodel, .mlpackage, .onnx or WebNN graph) without converting it: format, version,
    functions and opsets, inputs and outputs as an app passes and gets them, classifier labels, op
    and layer counts, parameters by dtype (as stored and decompressed) and metadata."""
    from .inspect import inspect_model

    try:
        if as_json and show_ir:
            raise UnsupportedError("--json and --ir print different things: choose one")
        if graph_path is not None:
            _check_graph_path(graph_path, overwrite)
        summary = inspect_model(model)
        prog = summary.program
        if (show_ir or graph_path) and prog is None:
            raise UnsupportedError(f"--ir and --graph need the model read into the IR: {summary.refusal}", file=model)
        fn = None
        if prog is not None and (function is not None or graph_path):
            name = function or prog.default_function
            if name not in prog.functions:
                raise UnsupportedError(f"no function '{name}' (the model has {', '.join(prog.functions)})",
                                       file=model)
            fn = prog.functions[name]
        if graph_path is not None:
            _write_graph(fn, graph_path, summary, overwrite)
    except ConverterError as e:
        _fail(e)
    if show_ir:
        click.echo(_ir_text(prog, fn if function is not None else None), nl=False)
    elif as_json:
        click.echo(json.dumps(summary.to_json(), indent=1))  # ASCII: no raw control or bidi character
    else:
        _say(summary.text())
    if graph_path is not None:  # on stderr when stdout is for a program (JSON, IR text)
        _say(f"wrote {graph_path}", err=as_json or show_ir)


def _ir_text(prog, fn) -> str:  # noqa: ANN001 - Program, Function | None
    """The IR text of the whole program, or of the one function ``fn``."""
    from .ir.core import Program
    from .ir.text import print_program

    if fn is None:
        return print_program(prog)
    one = Program()
    one.functions[fn.name] = fn  # a view for printing: fn is not moved (its block keeps its function)
    one.default_function = fn.name
    return print_program(one)


def _check_graph_path(path: str, overwrite: bool) -> None:
    from .dataflow_graph import GRAPH_FORMATS
    from .destination import DestinationError

    p = Path(path)
    if p.suffix.lower() not in GRAPH_FORMATS:
        raise UnsupportedError(f"--graph writes {', '.join(GRAPH_FORMATS)} files, not '{p.suffix or 'no extension'}'",
                               file=path)
    if p.is_symlink() or p.exists():
        if not overwrite:
            raise DestinationError("exists: replace it with --overwrite", file=path)
        if not p.is_file():
            raise DestinationError("exists and is not a regular file", file=path)


def _write_graph(fn, path: str, summary, overwrite: bool) -> None:  # noqa: ANN001 - Function, ModelSummary
    from .dataflow_graph import dataflow_graph, render
    from .formats.atomic import atomic_write_bytes

    g = dataflow_graph(fn)
    title = Path(summary.file).name if summary.file else fn.name
    text = render(g, Path(path).suffix, title=title, summary=summary.text())
    try:
        atomic_write_bytes(path, text.encode("utf-8"), durable=False, overwrite=overwrite)
    except FileExistsError:
        from .destination import DestinationError

        raise DestinationError("exists: replace it with --overwrite", file=path) from None
    except OSError as e:
        raise ConverterError(f"cannot write: {e.strerror or e}", file=path) from None
