"""Command line: ``converter ...``. Parses arguments, calls the library, prints (escaping what comes
from model files and file names), and turns SIGINT/SIGTERM into a clean exit; no conversion logic here."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
from collections.abc import Iterator

import click

import converter
from converter import cli_verify as _cli_verify
from converter.cli_inspect import inspect_cmd
from converter.cli_output import fail as _fail
from converter.cli_output import say as _say
from converter.errors import ConverterError
from converter.limits import DEFAULT_MAX_LOOP_ITERATIONS, DEFAULT_MAX_TENSOR_BYTES


class _Interrupted(BaseException):
    """SIGINT or SIGTERM: unwinds like KeyboardInterrupt, so every temporary is removed on the way."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _interrupt(signum: int, _frame: object) -> None:
    for s in (signal.SIGINT, signal.SIGTERM):  # one interrupt is enough; let the cleanup finish
        signal.signal(s, signal.SIG_IGN)
    raise _Interrupted(signum)


@contextlib.contextmanager
def _exit_on_interrupt() -> Iterator[None]:
    """SIGINT and SIGTERM stop the command cleanly: temporaries removed, exit 128 + signal number."""
    import threading

    if threading.current_thread() is not threading.main_thread():  # only the main thread gets signals
        yield
        return
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    # a signal ignored on purpose (a background job) stays ignored; None: a handler not set from Python
    saved = {s: h for s, h in saved.items() if h is not None and h != signal.SIG_IGN}
    for s in saved:
        signal.signal(s, _interrupt)
    try:
        yield
    except (_Interrupted, KeyboardInterrupt) as e:
        signum = e.signum if isinstance(e, _Interrupted) else signal.SIGINT
        click.echo(f"interrupted ({signal.Signals(signum).name}): nothing partial was written", err=True)
        sys.exit(128 + signum)
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


class _Main(click.Group):
    def invoke(self, ctx: click.Context) -> object:
        with _exit_on_interrupt():
            return super().invoke(ctx)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(converter.__version__, prog_name="converter")
def main() -> None:
    """Convert Core ML NeuralNetwork models, ML programs, ONNX models and WebNN graphs to ML programs
    (MIL), NeuralNetwork models, ONNX or WebNN."""


main.add_command(inspect_cmd)
from converter.cli_migrate import migrate_cmd  # noqa: E402 - registered after the group exists

main.add_command(migrate_cmd)


@main.command("ops")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def ops_cmd(as_json: bool) -> None:
    """List every registered op with its opsets, whether it has a reference kernel, and its WebNN,
    NeuralNetwork and ONNX forms (direct, decomposed or unsupported; --json gives the note or the reason)."""
    from converter.ir.registry_info import op_table

    rows = op_table()
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    width = max(len(r["op"]) for r in rows)
    click.echo(f"{'op':<{width}}  {'opsets':<25}  {'kernel':<9}  {'origin':<7}  {'WebNN form':<18}  "
               f"{'NeuralNetwork form':<26}  ONNX form")
    for r in rows:
        kernel = "kernel" if r["has_kernel"] else "no kernel"
        origin = "IR-only" if r["ir_only"] else "MIL"
        click.echo(f"{r['op']:<{width}}  {','.join(r['opsets']):<25}  {kernel:<9}  {origin:<7}  "
                   f"webnn: {r['webnn']['status']:<11}  neuralnetwork: {r['neuralnetwork']['status']:<11}  "
                   f"onnx: {r['onnx']['status']}")
    click.echo(f"{len(rows)} ops")


_LOOP_HELP = ("Stop the model's loops after this many iterations in all, with an error (the interpreter's "
              f"bound against loops that never end; default {DEFAULT_MAX_LOOP_ITERATIONS}).")
_TENSOR_HELP = ("Refuse to make a tensor larger than this many MiB, with an error (the interpreter's bound "
                f"against models whose sizes would exhaust memory; default {DEFAULT_MAX_TENSOR_BYTES >> 20}).")


def _mib(n: int | None) -> int | None:
    return None if n is None else n << 20


@main.command("run")
@click.argument("model", type=click.Path(exists=True))
@click.option("--inputs", "inputs_path", default=None, type=click.Path(exists=True, dir_okay=False),
              help="An .npz file with one array per model input (keyed by input name).")
@click.option("--random", "random_inputs", is_flag=True,
              help="Run on random inputs that respect each input's type and range (as `verify` makes them).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the --random inputs.")
@click.option("-o", "--output", "output_path", type=click.Path(dir_okay=False),
              help="Write the outputs to this .npz file (printed when omitted).")
@click.option("--overwrite", is_flag=True, help="Replace an existing .npz file at -o.")
@click.option("--function", default=None, help="Function to run (default: the model's default function).")
@click.option("--max-loop-iterations", type=click.IntRange(min=1), default=None, help=_LOOP_HELP)
@click.option("--max-tensor-mib", type=click.IntRange(min=1), default=None, help=_TENSOR_HELP)
@_cli_verify.runtime_option
def run_cmd(model: str, inputs_path: str | None, random_inputs: bool, seed: int, output_path: str | None,
            overwrite: bool, function: str | None, max_loop_iterations: int | None, max_tensor_mib: int | None,
            runtime: str) -> None:
    """Run MODEL on the arrays in an .npz file (--inputs) or on random inputs (--random), with
    onnxruntime or the reference interpreter (--runtime; a model onnxruntime cannot run runs in the
    interpreter, with a note saying which ops). A float array given for an image input is warned
    about (images take uint8 pixels)."""
    import warnings

    import numpy as np

    from converter.destination import resolve_arrays_destination
    from converter.errors import InputWarning, RuntimeFallbackWarning
    from converter.ir.interpreter import lookup_function
    from converter.verify import random_feeds

    try:
        if (inputs_path is None) == (not random_inputs):
            raise converter.UnsupportedError("give the inputs: --inputs FILE.npz, or --random (not both)")
        if output_path:
            resolve_arrays_destination(output_path, sources=[model] + ([inputs_path] if inputs_path else []),
                                       overwrite=overwrite)
        prog = converter.load(model)
        if random_inputs:
            feeds = random_feeds(lookup_function(prog, function), seed, max_tensor_bytes=_mib(max_tensor_mib))
        else:
            feeds = _read_feeds(inputs_path)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", InputWarning)
            warnings.simplefilter("always", RuntimeFallbackWarning)
            try:
                out = converter.run(prog, feeds, function=function, max_loop_iterations=max_loop_iterations,
                                    max_tensor_bytes=_mib(max_tensor_mib), runtime=runtime)
            except ConverterError as e:
                raise e.with_location(file=model) from None
        for w in {str(w.message): w for w in caught}.values():  # once, though a fallback runs the model twice
            kind = "note" if issubclass(w.category, RuntimeFallbackWarning) else "warning"
            _say(f"{kind}: {w.message}", err=True)
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
            atomic_write_bytes(output_path, buf.getvalue(), overwrite=overwrite)
        except OSError as e:
            _fail(ConverterError(f"cannot write: {e.strerror or e}", file=output_path))
        _say(f"wrote {len(arrays)} arrays to {output_path}")
    else:
        for k, v in out.items():
            _say(f"{k} = {v if isinstance(v, dict) else np.array2string(np.asarray(v), precision=6)}")


def _read_feeds(path: str) -> dict:
    """{name: array} from an .npz file; `FormatError` naming the file for anything else."""
    from converter.npz import read_arrays

    return read_arrays(path)


_PASSES_HELP = ("Optimization passes: a pipeline (default, none, webnn, neuralnetwork) or a comma-separated list "
                "of pass or rule names (canonicalize, cse, dead_code, add_zero, ...).")


def _pass_options(f):  # noqa: ANN001, ANN202 - a click decorator
    f = click.option("--verify", "verify", is_flag=True,
                     help="Run the IR verifier after every pass (slower; names the pass that broke the program).")(f)
    f = click.option("--pass-stats", "pass_stats", is_flag=True,
                     help="Print, per pass: ops before and after, rewrites by rule, time.")(f)
    f = click.option("--passes", "passes", default="default", show_default=True, help=_PASSES_HELP)(f)
    return f


def _resolve_passes(passes: str) -> list:
    from converter.passes.pipelines import resolve

    return resolve(passes)


@main.command("convert")
@click.argument("src", type=click.Path(exists=True))
@click.option("-o", "--output", "output_path", required=True, type=click.Path(),
              help="Where to write: NAME.mlpackage (a package), NAME.mlmodel (a single file), NAME.onnx (--to onnx), or an "
                   "existing "
                   "folder to write into (named after SRC). For a folder SRC: the output folder.")
@click.option("--to", "fmt", default="mil", show_default=True,
              type=click.Choice(["mil", "neuralnetwork", "webnn", "onnx"]),
              help="Output format: mil (an ML program), neuralnetwork (a .mlmodel with legacy NeuralNetwork layers, "
                   "for iOS 11-14), webnn (a folder with model.js, model.bin, model.d.ts and a demo page index.html) "
                   "or onnx (a .onnx model).")
@click.option("--target", default=None,
              type=click.Choice(["iOS11", "iOS11.2", "iOS12", "iOS13", "iOS14", "iOS15", "iOS16", "iOS17", "iOS18"]),
              help="--to mil: the MIL opset iOS15..iOS18 (default: the lowest that has every op used). --to "
                   "neuralnetwork: the oldest iOS the model must run on, iOS11..iOS14 (default: the lowest "
                   "specification version that has every layer used).")
@click.option("--spec-version", type=click.IntRange(1, 5), default=None,
              help="--to neuralnetwork: the highest specification version the model may need (as --target).")
@click.option("--onnx-opset", type=click.IntRange(17, 21), default=None,
              help="--to onnx: the ONNX opset (default domain) to write, 17..21 (default 21).")
@click.option("--onnx-classifier", default=None, type=click.Choice(["tensor", "zipmap"]),
              help="--to onnx: a classifier's probabilities as a tensor in class order (default) or an ONNX-ML "
                   "ZipMap {label: probability}.")
@click.option("--layout", default=None, type=click.Choice(["nchw", "nhwc"]),
              help="--to webnn: the layout inside the graph (inputs and outputs keep their shapes); default nhwc, "
                   "the layout Chromium's WebNN prefers.")
@click.option("--precision", default="fp32", show_default=True, type=click.Choice(["fp32", "fp16"]),
              help="--to webnn: compute in float32, or store weights and compute in float16.")
@click.option("--input-shape", "input_shapes", multiple=True, metavar="NAME=D1,D2,...",
              help="--to webnn: fix a flexible input's shape (WebNN graphs are static; default: the shape the model "
                   "declares). Repeat for several inputs.")
@click.option("--check", is_flag=True,
              help="Run the source and the written model on the same random inputs; print per output the "
                   "largest error against a tolerance chosen by dtype, and a verdict (as `converter verify`; "
                   "exit status 1 when an output is outside its tolerance).")
@click.option("--overwrite", is_flag=True,
              help="Replace an existing Core ML model at the destination (never any other file or folder, "
                   "never the source).")
@click.option("--max-loop-iterations", type=click.IntRange(min=1), default=None, help=_LOOP_HELP + " With --check.")
@click.option("--max-tensor-mib", type=click.IntRange(min=1), default=None, help=_TENSOR_HELP + " With --check.")
@_cli_verify.runtime_option
@_pass_options
def convert_cmd(src: str, output_path: str, fmt: str, target: str | None, spec_version: int | None,
                onnx_opset: int | None, onnx_classifier: str | None, layout: str | None, precision: str,
                input_shapes: tuple[str, ...], check: bool, overwrite: bool, max_loop_iterations: int | None,
                max_tensor_mib: int | None, runtime: str, passes: str, pass_stats: bool, verify: bool) -> None:
    """Convert the model SRC (.mlmodel, .mlpackage or .onnx) and write it to -o.

    The default pass pipeline runs before writing (--passes none writes the program as read);
    for --to webnn it is the webnn pipeline, and -o names the folder to write.
    When SRC is a folder (not an .mlpackage), every model under it is converted to an .mlpackage at
    the same relative place under the -o folder; failures are listed and the rest go on.
    """
    from pathlib import Path

    from converter.formats.package import is_mlpackage

    webnn_options: dict = {}
    try:
        if fmt == "webnn":
            if passes == "default":
                passes = "webnn"
            if check:
                raise converter.UnsupportedError("--check runs both models in Python; a WebNN model runs in a browser "
                                                 "(see the demo page index.html it comes with)")
            webnn_options = {"layout": layout or "nhwc", "precision": precision,
                             "input_shapes": _input_shapes(input_shapes)}
        elif input_shapes or layout is not None or precision != "fp32":
            raise converter.UnsupportedError("--layout, --precision and --input-shape are options of --to webnn")
        if fmt == "neuralnetwork":
            if passes == "default":
                passes = "neuralnetwork"
            if spec_version is not None:
                webnn_options = {"spec_version": spec_version}
        elif spec_version is not None:
            raise converter.UnsupportedError("--spec-version is an option of --to neuralnetwork")
        if fmt == "onnx":
            if onnx_opset is not None:
                webnn_options = {"opset": onnx_opset}
            if onnx_classifier is not None:
                webnn_options["classifier"] = onnx_classifier
        elif onnx_opset is not None or onnx_classifier is not None:
            given = "--onnx-opset" if onnx_opset is not None else "--onnx-classifier"
            raise converter.UnsupportedError(f"{given} is an option of --to onnx")
        _check_target(fmt, target)
        pipeline = _resolve_passes(passes)
    except ConverterError as e:
        _fail(e)
    if Path(src).is_dir() and not is_mlpackage(src):
        if fmt == "webnn":
            _fail(converter.UnsupportedError("converting a folder of models to WebNN is not supported yet: convert "
                                             "them one by one", file=src))
        if onnx_opset is not None or onnx_classifier is not None:
            _fail(converter.UnsupportedError("--onnx-opset and --onnx-classifier apply to one model; a folder is "
                                             "converted with the defaults", file=src))
        _convert_folder(Path(src), Path(output_path), target, fmt, check, overwrite, passes=passes, verify=verify,
                        pass_stats=pass_stats, runtime=runtime, max_loop_iterations=max_loop_iterations,
                        max_tensor_bytes=_mib(max_tensor_mib))
        return
    _convert_one(src, output_path, fmt=fmt, target=target, check=check, overwrite=overwrite, pipeline=pipeline,
                 pass_stats=pass_stats, verify=verify, max_loop_iterations=max_loop_iterations,
                 max_tensor_mib=max_tensor_mib, webnn_options=webnn_options, runtime=runtime)


def _check_target(fmt: str, target: str | None) -> None:
    """--target names a MIL opset for --to mil and a device floor for --to neuralnetwork."""
    if target is None:
        return
    nn_targets = ("iOS11", "iOS11.2", "iOS12", "iOS13", "iOS14")
    if fmt == "neuralnetwork" and target not in nn_targets:
        raise converter.UnsupportedError(f"--target {target}: --to neuralnetwork takes {', '.join(nn_targets)} (every "
                                         "NeuralNetwork model also runs on later systems)")
    if fmt == "mil" and target in nn_targets:
        raise converter.UnsupportedError(f"--target {target}: ML programs need iOS15 or later (--to neuralnetwork "
                                         "writes models for older systems)")
    if fmt == "webnn":
        raise converter.UnsupportedError("--target is not an option of --to webnn")
    if fmt == "onnx":
        raise converter.UnsupportedError("--target is not an option of --to onnx (see --onnx-opset)")


def _input_shapes(specs: tuple[str, ...]) -> dict[str, list[int]]:
    """``NAME=1,3,224,224`` options as {name: sizes} (the name may hold '='; the last one splits)."""
    shapes: dict[str, list[int]] = {}
    for spec in specs:
        name, sep, dims = spec.rpartition("=")
        try:
            sizes = [int(d) for d in dims.replace("x", ",").split(",") if d.strip()]
        except ValueError:
            sizes = []
        if not sep or not name or not sizes or any(d < 1 for d in sizes):
            raise converter.UnsupportedError(f"--input-shape {spec!r}: expected NAME=D1,D2,... with positive sizes")
        if name in shapes:
            raise converter.UnsupportedError(f"--input-shape names input {name!r} twice")
        shapes[name] = sizes
    return shapes


def _convert_one(src: str, output_path: str | None, *, fmt: str, target: str | None, check: bool, overwrite: bool,
                 pipeline: list, pass_stats: bool, verify: bool, max_loop_iterations: int | None = None,
                 max_tensor_mib: int | None = None, explain_op: str | None = None,
                 summary: bool = False, webnn_options: dict | None = None, runtime: str = "auto") -> None:
    """Load, optimize, (explain), write, (check): the one-model path of ``convert`` and ``optimize``."""
    import warnings

    from converter.cli_verify import print_report, progress
    from converter.destination import resolve_model_destination
    from converter.ir.clone import clone_program
    from converter.runtimes.onnx_file import is_onnx_file

    try:
        dest = None
        if output_path is not None:
            dest = resolve_model_destination(output_path, to=fmt, sources=[src], overwrite=overwrite).path
        prog = converter.load(src)
        source = clone_program(prog)[0] if (check or explain_op) and pipeline else prog
        stats = converter.optimize(prog, pipeline, verify=verify)
        if pass_stats:
            click.echo(stats.format())
        elif summary:
            click.echo(stats.summary())
        if explain_op is not None:
            _explain(explain_op, prog, source, pipeline)
        if dest is None:
            return
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", converter.ConversionWarning)
            converter.save(prog, dest, target=target, to=fmt, overwrite=overwrite, **(webnn_options or {}))
        for note in prog.meta.get("notes", []) + [str(w.message) for w in caught]:
            _say(f"note: {note}", err=True)
        _say(f"wrote {dest}")
        if check:
            from converter.verify import verify

            report = verify(source, dest, source_file=src, converted_file=str(dest), progress=progress,
                            max_loop_iterations=max_loop_iterations, max_tensor_bytes=_mib(max_tensor_mib),
                            runtime=runtime, source_onnx=src if is_onnx_file(src) else None)
    except ConverterError as e:
        _fail(e)
    if check:
        print_report(report)
        if not report.ok:
            sys.exit(1)


def _explain(op_name: str, optimized, source, pipeline: list) -> None:  # noqa: ANN001 - Programs
    from converter.passes.pipelines import rules_of
    from converter.passes.rewrite import explain_op, find_ops, format_explanations

    rules = rules_of(pipeline)
    ops, where = find_ops(optimized, op_name), " (after the passes)"
    if not ops:
        ops, where = find_ops(source, op_name), " (before the passes; it is not in the optimized program)"
    if not ops:
        raise ConverterError(f"no op named '{op_name}' (nor an op with a result of that name)", op=op_name)
    for op in ops:
        found = explain_op(op, rules)
        if found:
            for line in format_explanations(op_name, found, where).splitlines():
                _say(line)
        else:
            _say(f"{op.type} '{op.name}'{where}: no rule of these passes is rooted at {op.type}")


@main.command("optimize")
@click.argument("model", type=click.Path(exists=True, file_okay=True, dir_okay=True))
@click.option("-o", "--output", "output_path", default=None, type=click.Path(),
              help="Where to write the optimized model (as for convert). Without -o nothing is written: the "
                   "statistics (or the explanation) are printed.")
@click.option("--to", "fmt", default="mil", show_default=True, type=click.Choice(["mil"]), help="Output format.")
@click.option("--target", default=None, type=click.Choice(["iOS15", "iOS16", "iOS17", "iOS18"]),
              help="MIL opset (default: the lowest that has every op used).")
@click.option("--overwrite", is_flag=True, help="Replace an existing Core ML model at the destination.")
@click.option("--explain", "explain_op", default=None, metavar="OP",
              help="For the op named OP: each rule rooted at its type, and whether it fires or why not.")
@_pass_options
def optimize_cmd(model: str, output_path: str | None, fmt: str, target: str | None, overwrite: bool,
                 explain_op: str | None, passes: str, pass_stats: bool, verify: bool) -> None:
    """Optimize MODEL with a pass pipeline (convert's passes, without converting a folder); print a summary."""
    try:
        pipeline = _resolve_passes(passes)
    except ConverterError as e:
        _fail(e)
    _convert_one(model, output_path, fmt=fmt, target=target, check=False, overwrite=overwrite, pipeline=pipeline,
                 pass_stats=pass_stats, verify=verify, explain_op=explain_op, summary=True)


def _convert_folder(src, out, target: str | None, fmt: str, check: bool, overwrite: bool, *, passes: str,
                    verify: bool, pass_stats: bool, runtime: str = "auto", **bounds: int | None) -> None:
    """Every model under ``src``, one line each as it finishes (converter.batch over the migration engine)."""
    from converter.batch import convert_tree, describe_contents
    from converter.formats.package import MANIFEST_NAME

    if src.suffix.lower() == ".mlpackage":  # named like a model, so not taken for a folder of models
        _fail(ConverterError(f"not a Core ML package: it has no {MANIFEST_NAME} ({describe_contents(src)})",
                             file=str(src)), code=1)

    def say(o) -> None:  # noqa: ANN001 - a batch.Outcome
        if o.ok:
            _say(f"ok      {o.source} -> {o.output}")
            if pass_stats and o.pass_summary is not None:
                _say(f"        passes: {o.pass_summary}")
            for note in o.notes:
                _say(f"        note: {note}")
        elif o.output is not None:
            _say(f"failed  {o.source}: written to {o.output}, but {o.error}")
        else:
            _say(f"failed  {o.source}: {o.error}")
        if o.differences is not None:
            click.echo(f"        largest output difference: {max(o.differences.values(), default=0.0):.3g}")

    try:
        outcomes = convert_tree(src, out, target=target, to=fmt, check=check, overwrite=overwrite, passes=passes,
                                verify=verify, on_outcome=say, runtime=runtime, **bounds)
    except ConverterError as e:
        _fail(e)
    converted = sum(o.ok for o in outcomes)
    failed = len(outcomes) - converted
    if not outcomes:
        _fail(ConverterError(f"no model to convert (no .mlmodel or .onnx file, no .mlpackage folder): "
                             f"{describe_contents(src)}",
                             file=str(src)), code=1)
    click.echo(f"{converted} converted, {failed} failed")
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


main.add_command(_cli_verify.verify_cmd)

if __name__ == "__main__":
    main()
