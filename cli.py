"""Command line: ``converter ...``. Parses arguments, calls the library, prints; no logic here."""

from __future__ import annotations

import json
import sys

import click

import converter
from converter.errors import ConverterError


def _fail(e: ConverterError) -> None:
    click.echo(f"error: {e}", err=True)
    sys.exit(2)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(converter.__version__, prog_name="converter")
def main() -> None:
    """Convert neural-network models between Core ML NeuralNetwork, MIL programs and WebNN."""


@main.command("ops")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def ops_cmd(as_json: bool) -> None:
    """List every registered op with its opsets and whether it has a reference kernel."""
    from converter.ir.registry_info import op_table

    rows = op_table()
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    width = max(len(r["op"]) for r in rows)
    for r in rows:
        kernel = "kernel" if r["has_kernel"] else "no kernel"
        origin = "IR-only" if r["ir_only"] else "MIL"
        click.echo(f"{r['op']:<{width}}  {','.join(r['opsets']):<25}  {kernel:<9}  {origin}")
    click.echo(f"{len(rows)} ops")


@main.command("example")
def example_cmd() -> None:
    """Print a small example program in the IR text form, and run it."""
    import numpy as np

    from converter.ir.builder import new_program
    from converter.ir.text import print_program
    from converter.ir.types import Symbol, tensor

    n = Symbol("n", lower=1, upper=16)

    def body(b, x):
        w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
        y = b.linear(x=x, weight=w, bias=np.zeros(3, np.float32))
        return [b.softmax(x=b.relu(x=y), axis=-1, name="probs")]

    prog = new_program({"x": tensor("fp32", [n, 4])}, body)
    click.echo(print_program(prog))
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    out = converter.run(prog, {"x": x})
    for k, v in out.items():
        click.echo(f"{k} = {np.array2string(v, precision=4)}")


if __name__ == "__main__":
    main()
