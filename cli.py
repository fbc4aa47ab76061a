"""Command line: ``converter ...``. Parses arguments, calls the library, prints; no logic here."""

from __future__ import annotations

import json
import sys

import click

import converter
from converter.errors import ConverterError
from converter.limits import DEFAULT_MAX_LOOP_ITERATIONS, DEFAULT_MAX_TENSOR_BYTES


def _fail(e: ConverterError) -> None:
    click.echo(f"error: {e}", err=True)
    sys.exit(2)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(converter.__version__, prog_name="converter")
def main() -> None:
    """Convert Core ML NeuralNetwork models and ML programs to ML programs (MIL)."""


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


_LOOP_HELP = ("Stop the model's loops after this many iterations in all, with an error (the interpreter's "
              f"bound against loops that never end; default {DEFAULT_MAX_LOOP_ITERATIONS}).")
_TENSOR_HELP = ("Refuse to make a tensor larger than this many MiB, with an error (the interpreter's bound "
                f"against models whose sizes would exhaust memory; default {DEFAULT_MAX_TENSOR_BYTES >> 20}).")


def _mib(n: int | None) -> int | None:
    return None if n is None else n << 20


@main.command("run")
@click.argument("model", type=click.Path(exists=True))
@click.option("--inputs", "inputs_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="An .npz file with one array per model input (keyed by input name).")
@click.option("-o", "--output", "output_path", type=click.Path(dir_okay=False),
              help="Write the outputs to this .npz file (printed when omitted).")
@click.option("--function", default=None, help="Function to run (default: the model's default function).")
@click.option("--max-loop-iterations", type=click.IntRange(min=1), default=None, help=_LOOP_HELP)
@click.option("--max-tensor-mib", type=click.IntRange(min=1), default=None, help=_TENSOR_HELP)
def run_cmd(model: str, inputs_path: str, output_path: str | None, function: str | None,
            max_loop_iterations: int | None, max_tensor_mib: int | None) -> None:
    """Run MODEL with the reference interpreter on the arrays in an .npz file."""
    import numpy as np

    try:
        prog = converter.load(model)
        feeds = _read_feeds(inputs_path)
        out = converter.run(prog, feeds, function=function, max_loop_iterations=max_loop_iterations,
                            max_tensor_bytes=_mib(max_tensor_mib))
    except ConverterError as e:
        _fail(e)
    arrays = {k: v for k, v in out.items() if isinstance(v, np.ndarray)}
    for k, v in out.items():
        if isinstance(v, dict):  # classifier probabilities: stored as labels + values
            arrays[f"{k}.labels"] = np.array([str(x) for x in v])
            arrays[f"{k}.values"] = np.array(list(v.values()), np.float64)
    if output_path:
        import io

        from converter.formats.atomic import atomic_write_bytes

        buf = io.BytesIO()
        np.savez(buf, **arrays)
        try:
            atomic_write_bytes(output_path, buf.getvalue())
        except OSError as e:
            _fail(ConverterError(f"cannot write: {e.strerror or e}", file=output_path))
        click.echo(f"wrote {len(arrays)} arrays to {output_path}")
    else:
        for k, v in out.items():
            click.echo(f"{k} = {v if isinstance(v, dict) else np.array2string(np.asarray(v), precision=6)}")


_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")  # a zip archive (.npz): first member, or empty


def _read_feeds(path: str) -> dict:
    """{name: array} from an .npz file; `FormatError` naming the file for anything else."""
    import io
    import zipfile
    import zlib

    import numpy as np

    from converter.errors import FormatError

    def error(message: str, field: str | None = None) -> FormatError:
        return FormatError(message, file=path, field=field)

    hint = "save the inputs with numpy.savez(path, name=array, ...), one array per model input"
    bad = (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error)
    try:
        with open(path, "rb") as f:
            src = f if f.seekable() else io.BytesIO(f.read())  # a pipe: read once
            magic = src.read(6)
            src.seek(0)
            if magic.startswith(_NPY_MAGIC):
                raise error(f"a single .npy array, not an .npz file of named inputs: {hint}")
            if not magic.startswith(_ZIP_MAGICS):
                raise error(f"not an .npz file (not a zip archive): {hint}")
            try:
                data = np.load(src, allow_pickle=False)
            except bad as e:
                raise error(f"not a readable .npz file: {e}") from None
            if not isinstance(data, np.lib.npyio.NpzFile):  # pragma: no cover - the magic was checked
                raise error(f"not an .npz file: {hint}")
            with data:
                feeds = {}
                for k in data.files:
                    try:
                        feeds[k] = data[k]
                    except bad as e:
                        raise error(f"cannot read array '{k}': {e}", field=k) from None
    except OSError as e:
        raise error(f"cannot read: {e.strerror or e}") from None
    return feeds


@main.command("convert")
@click.argument("src", type=click.Path(exists=True))
@click.option("-o", "--output", "output_path", required=True, type=click.Path(),
              help="Where to write the converted model (.mlpackage, or .mlmodel for a single file).")
@click.option("--to", "fmt", default="mil", show_default=True, type=click.Choice(["mil"]),
              help="Output format.")
@click.option("--target", default=None, type=click.Choice(["iOS15", "iOS16", "iOS17", "iOS18"]),
              help="MIL opset (default: the lowest that has every op used).")
@click.option("--check", is_flag=True,
              help="Run the source and the written model on the same random inputs; print the largest "
                   "difference per output.")
@click.option("--max-loop-iterations", type=click.IntRange(min=1), default=None, help=_LOOP_HELP + " With --check.")
@click.option("--max-tensor-mib", type=click.IntRange(min=1), default=None, help=_TENSOR_HELP + " With --check.")
def convert_cmd(src: str, output_path: str, fmt: str, target: str | None, check: bool,
                max_loop_iterations: int | None, max_tensor_mib: int | None) -> None:
    """Convert the model SRC (.mlmodel or .mlpackage) and write it to -o.

    When SRC is a folder (not an .mlpackage), every model under it is converted to an .mlpackage at
    the same relative place under the -o folder; failures are listed and the rest go on.
    """
    import warnings
    from pathlib import Path

    from converter.check import compare
    from converter.formats.package import is_mlpackage

    if Path(src).is_dir() and not is_mlpackage(src):
        _convert_folder(Path(src), Path(output_path), target, fmt, check)
        return
    try:
        prog = converter.load(src)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", converter.ConversionWarning)
            converter.save(prog, output_path, target=target, to=fmt)
        for note in prog.meta.get("notes", []) + [str(w.message) for w in caught]:
            click.echo(f"note: {note}", err=True)
        click.echo(f"wrote {output_path}")
        if check:
            diffs = compare(prog, converter.load(output_path), source_file=src, converted_file=output_path,
                            max_loop_iterations=max_loop_iterations, max_tensor_bytes=_mib(max_tensor_mib))
            for name, d in diffs.items():
                click.echo(f"  {name}: largest difference {d:.3g}")
            click.echo(f"largest output difference: {max(diffs.values(), default=0.0):.3g}")
    except ConverterError as e:
        _fail(e)


def _convert_folder(src, out, target: str | None, fmt: str, check: bool) -> None:
    from converter.batch import convert_tree

    try:
        outcomes = convert_tree(src, out, target=target, to=fmt, check=check)
    except ConverterError as e:
        _fail(e)
    for o in outcomes:
        if o.ok:
            click.echo(f"ok      {o.source} -> {o.output}")
            for note in o.notes:
                click.echo(f"        note: {note}")
        elif o.output is not None:
            click.echo(f"failed  {o.source}: written to {o.output}, but the check failed: {o.error}")
        else:
            click.echo(f"failed  {o.source}: {o.error}")
        if o.differences is not None:
            click.echo(f"        largest output difference: {max(o.differences.values(), default=0.0):.3g}")
    failed = sum(not o.ok for o in outcomes)
    click.echo(f"{len(outcomes) - failed} converted, {failed} failed")
    if failed:
        sys.exit(1)


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
