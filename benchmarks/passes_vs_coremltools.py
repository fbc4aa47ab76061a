"""Benchmark: our default pass pipeline next to coremltools' on the same MIL programs (issue 8, speed).

Programs (all ML program packages that both tools read):
1. ``resnet34``: the raw program coremltools makes of a ResNet-34-layout torch model with
   ``pass_pipeline=ct.PassPipeline.EMPTY`` (tests/optimize/sources.py; 130 ops other than const,
   673 with them).
2. Synthetic programs of about 10k, 30k and 100k ops (other than const): a chain of units
   conv -> batch_norm -> relu -> transpose -> reshape -> matmul -> add -> gelu (tanh form, written
   out as 8 ops) -> reshape -> transpose, 17 ops per unit, every unit with its own weights and its
   own scalar constants, so conv/batch-norm fusion, matmul+add -> linear, gelu fusion and constant
   de-duplication all have work on every unit. Written once with our builder and MIL writer.

coremltools: its MIL proto loader reads the package, then ``PassPipelineManager.apply_pipeline``
runs ``PassPipeline.DEFAULT`` in the form ``ct.convert(compute_precision=FLOAT32)`` uses (without
add_fp16_cast / add_int16_cast), then the ``backend_mlprogram`` pipeline (tests/optimize/
coremltools_passes.py; what this yields is checked to equal ``ct.convert``'s DEFAULT output).
Ours: ``converter.load`` then ``converter.optimize(prog, pipeline="default")``, and the same with
the rule load of benchmarks/rule_load.py added (dummy rewrite passes of rules rooted at common op
types that never fire: the matcher's cost per op once the other branches' rule sets are in); the
speed-up is given for both. Each tool runs in its own subprocess
(fresh imports, its own peak memory) with a timeout; a tool that times out is reported with the
pass it was in. Loading is timed apart from the passes. Time per op = pass time / ops other than
const of the input program.

    python benchmarks/passes_vs_coremltools.py [--sizes 10000 30000 100000] [--timeout 3600]
        [--repeat 5] [--top 5] [--coremltools-max-ops N] [--json OUT.json]

``--repeat`` applies to the ResNet program only (best of N, each on a freshly loaded program); the
synthetic programs run once. Wall and CPU time of the process are both reported: on a shared
machine the CPU time is the fairer comparison. The built programs are cached in $CONVERTER_OPTIMIZE_CACHE (default
/tmp/converter-optimize-sources).
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory import peak_mb, reset_peak  # noqa: E402

OPS_PER_UNIT = 17
CHANNELS, SIDE = 8, 4

# -- the synthetic programs ------------------------------------------------------------------------


def synthetic_program(ops: int) -> Any:
    """A chain of ceil(ops / 17) conv-bn-relu / linear-gelu units (see the module docstring)."""
    import numpy as np

    from converter.ir.builder import new_program
    from converter.ir.types import tensor

    rng = np.random.default_rng(0)
    c, s = CHANNELS, SIDE

    def f32(x: Any) -> Any:
        return np.asarray(x, dtype=np.float32)

    def unit(b: Any, h: Any) -> Any:
        y = b.conv(x=h, weight=f32(rng.standard_normal((c, c, 3, 3)) * 0.05), pad_type="same")
        y = b.batch_norm(x=y, mean=f32(rng.standard_normal(c) * 0.1), variance=f32(rng.random(c) + 0.5),
                         gamma=f32(rng.random(c) + 0.5), beta=f32(rng.standard_normal(c) * 0.1), epsilon=1e-5)
        y = b.relu(x=y)
        t = b.reshape(x=b.transpose(x=y, perm=[0, 2, 3, 1]), shape=[s * s, c])
        t = b.add(x=b.matmul(x=t, y=f32(rng.standard_normal((c, c)) * 0.1)), y=f32(rng.standard_normal(c) * 0.1))
        # gelu, tanh form: 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
        inner = b.mul(x=b.add(x=t, y=b.mul(x=b.pow(x=t, y=3.0), y=0.044715)), y=math.sqrt(2 / math.pi))
        g = b.mul(x=b.mul(x=t, y=0.5), y=b.add(x=b.tanh(x=inner), y=1.0))
        return b.transpose(x=b.reshape(x=g, shape=[1, s, s, c]), perm=[0, 3, 1, 2])

    def body(b: Any, x: Any) -> list[Any]:
        h = x
        for _ in range(math.ceil(ops / OPS_PER_UNIT)):
            h = unit(b, h)
        return [h]

    return new_program({"x": tensor("fp32", [1, c, s, s])}, body)


def synthetic_package(ops: int, cache: Path) -> Path:
    """The synthetic program of ``ops`` ops written as an .mlpackage, built once per version of
    ``synthetic_program``."""
    import converter

    key = hashlib.sha256(f"{inspect.getsource(synthetic_program)} {CHANNELS} {SIDE} {OPS_PER_UNIT}".encode()).hexdigest()[:16]
    path = cache / f"synthetic-{key}" / f"ops{ops}.mlpackage"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        converter.save(synthetic_program(ops), path)
    return path


# -- workers (one subprocess per tool and program) -------------------------------------------------


def emit(**record: Any) -> None:
    print(json.dumps(record), flush=True)


def coremltools_worker(path: Path, repeat: int) -> None:
    from coremltools.converters.mil.mil.passes.pass_pipeline import PassPipelineManager

    from tests.optimize.coremltools_passes import PassTimer, default_pipelines
    from tests.optimize.counting import ct_load, ct_op_count, ct_op_histogram

    best: dict[str, Any] | None = None
    for _ in range(repeat):
        t = time.perf_counter()
        prog = ct_load(path)
        load_s = time.perf_counter() - t
        before, total = ct_op_count(prog), sum(ct_op_histogram(prog, consts=True).values())
        emit(event="loaded", load_s=load_s, ops=before, ops_with_consts=total)
        reset_peak()
        times, by_pass = [], {}
        started = time.perf_counter()

        def progress(name: str, s: float, e: float, started: float = started) -> None:
            emit(event="pass", name=name, s=e - s, at=e - started)

        cpu = 0.0
        for pipeline in default_pipelines():
            with PassTimer(progress) as timer:
                t, c = time.perf_counter(), time.process_time()
                PassPipelineManager.apply_pipeline(prog, pipeline)
                times.append(time.perf_counter() - t)
                cpu += time.process_time() - c
            for name, s, e in timer.records:
                by_pass[name] = by_pass.get(name, 0.0) + (e - s)
        run = {"load_s": load_s, "ops_before": before, "ops_with_consts": total, "main_s": times[0],
               "backend_s": times[1], "cpu_s": cpu, "ops_after": ct_op_count(prog), "peak_mb": peak_mb(),
               "by_pass": by_pass}
        if best is None or run["main_s"] + run["backend_s"] < best["main_s"] + best["backend_s"]:
            best = run
    emit(event="done", **best)


def converter_worker(path: Path, repeat: int) -> None:
    """Our default pipeline, and the same with the rule load (benchmarks/rule_load.py: dummy rules
    that never fire, standing in for the rule sets of the branches not merged yet), each on a
    freshly loaded program, best of ``repeat``."""
    from rule_load import loaded_pipeline

    import converter
    from tests.optimize.counting import op_count, op_histogram

    converter.optimize(converter.ir.core.Program())  # the pass modules imported before the timing
    best: dict[str, Any] | None = None
    for _ in range(repeat):
        run: dict[str, Any] = {"available": True}
        for key, pipeline in (("optimize_s", lambda: "default"), ("loaded_s", loaded_pipeline)):
            t = time.perf_counter()
            prog = converter.load(path)
            load_s = time.perf_counter() - t
            before, total = op_count(prog), sum(op_histogram(prog, consts=True).values())
            if key == "optimize_s":
                emit(event="loaded", load_s=load_s, ops=before, ops_with_consts=total)
            reset_peak()
            passes = pipeline()
            t, cpu = time.perf_counter(), time.process_time()
            stats = converter.optimize(prog, passes)
            run[key] = time.perf_counter() - t
            run[key.replace("_s", "_cpu_s")] = time.process_time() - cpu
            if key == "optimize_s":
                run.update(load_s=load_s, ops_before=before, ops_with_consts=total, ops_after=op_count(prog),
                           peak_mb=peak_mb(), rounds=stats.iterations)
            else:
                run.update(loaded_passes=sum(1 for p in stats.passes if not p.skipped),
                           loaded_rounds=stats.iterations)
        if best is None or run["loaded_s"] < best["loaded_s"]:
            best = run
    emit(event="done", **best)


def run_worker(tool: str, path: Path, repeat: int, timeout: float) -> dict[str, Any]:
    """The worker's final record, or {"timeout": ..., "last_pass": ...} when it ran out of time."""
    env = dict(os.environ, TQDM_DISABLE="1", PYTHONWARNINGS="ignore")
    cmd = [sys.executable, __file__, "--worker", tool, str(path), "--repeat", str(repeat)]
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        out, failed = proc.stdout, proc.returncode != 0
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        passes = [r for r in records if r["event"] == "pass"]
        loaded = next((r for r in records if r["event"] == "loaded"), {})
        return {"timeout": timeout, "wall_s": time.perf_counter() - t, "ops_before": loaded.get("ops"),
                "load_s": loaded.get("load_s"), "passes_done": len(passes),
                "last_pass": passes[-1]["name"] if passes else None,
                "slowest_passes": sorted(((r["s"], r["name"]) for r in passes), reverse=True)[:5]}
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    done = [r for r in records if r["event"] == "done"]
    if failed or not done:
        tail = (proc.stderr or "").strip().splitlines()[-5:]
        return {"error": " | ".join(tail) or f"exit {proc.returncode}"}
    return done[-1]


# -- report ----------------------------------------------------------------------------------------


def per_op_us(seconds: float, ops: int) -> str:
    return f"{seconds / ops * 1e6:,.0f}"


def describe(label: str, ct: dict[str, Any], ours: dict[str, Any], top: int) -> list[str]:
    lines = [f"== {label}"]
    ops = ct.get("ops_before") or ours.get("ops_before")
    if "timeout" in ct:
        lines.append(f"  coremltools: TIMED OUT after {ct['timeout']:.0f} s (load {ct['load_s'] or 0:.1f} s, "
                     f"{ct['passes_done']} passes done, last finished: {ct['last_pass']}); slowest passes: "
                     + ", ".join(f"{n} {s:.1f} s" for s, n in ct["slowest_passes"]))
    elif "error" in ct:
        lines.append(f"  coremltools: {'' if ct['error'].startswith('not run') else 'FAILED: '}{ct['error']}")
    else:
        total = ct["main_s"] + ct["backend_s"]
        lines.append(f"  coremltools: {ct['ops_before']} ops ({ct['ops_with_consts']} with consts) -> {ct['ops_after']}; "
                     f"default {ct['main_s']:.3f} s + backend {ct['backend_s']:.3f} s = {total:.3f} s "
                     f"({per_op_us(total, ops)} us/op; CPU {ct.get('cpu_s', float('nan')):.3f} s); load {ct['load_s']:.2f} s; "
                     f"peak {ct['peak_mb']:.0f} MiB")
        passes = sum(ct["by_pass"].values())
        slowest = sorted(ct["by_pass"].items(), key=lambda kv: -kv[1])[:top]
        lines.append(f"    in passes {passes:.3f} s, re-validation between passes {total - passes:.3f} s; slowest: "
                     + ", ".join(f"{n.split('::')[-1]} {s:.3f}" for n, s in slowest))
    if "error" in ours:
        lines.append(f"  ours: FAILED: {ours['error']}")
    elif "timeout" in ours:
        lines.append(f"  ours: TIMED OUT after {ours['timeout']:.0f} s")
    else:
        lines.append(f"  ours: {ours['ops_before']} ops -> {ours['ops_after']}; default pipeline {ours['optimize_s']:.3f} s "
                     f"({per_op_us(ours['optimize_s'], ops)} us/op, CPU {ours['optimize_cpu_s']:.3f} s = "
                     f"{per_op_us(ours['optimize_cpu_s'], ops)} us/op; {ours['rounds']} rounds); load {ours['load_s']:.2f} s; "
                     f"peak {ours['peak_mb']:.0f} MiB")
        lines.append(f"  ours + rule load ({rule_load_text()}): {ours['loaded_s']:.3f} s "
                     f"({per_op_us(ours['loaded_s'], ops)} us/op, CPU {ours['loaded_cpu_s']:.3f} s = "
                     f"{per_op_us(ours['loaded_cpu_s'], ops)} us/op; {ours['loaded_passes']} pass runs in "
                     f"{ours['loaded_rounds']} rounds)")
        if "main_s" in ct:
            theirs = ct["main_s"] + ct["backend_s"]
            lines.append(f"  speed-up (coremltools / ours), wall: {theirs / ours['optimize_s']:.1f}x with the default "
                         f"pipeline, {theirs / ours['loaded_s']:.1f}x with the rule load")
            if "cpu_s" in ct:
                lines.append(f"  speed-up, CPU time: {ct['cpu_s'] / ours['optimize_cpu_s']:.1f}x with the default pipeline, "
                             f"{ct['cpu_s'] / ours['loaded_cpu_s']:.1f}x with the rule load")
    return lines


def rule_load_text() -> str:
    from rule_load import RULE_PASSES, rule_count

    return f"{RULE_PASSES} dummy rewrite passes, {rule_count()} rules that never fire"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="*", default=[10_000, 30_000, 100_000])
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per tool and program")
    ap.add_argument("--repeat", type=int, default=5, help="runs of the ResNet program (best is reported)")
    ap.add_argument("--top", type=int, default=5, help="slowest coremltools passes listed")
    ap.add_argument("--no-resnet", action="store_true")
    ap.add_argument("--coremltools-max-ops", type=int, default=None, metavar="N",
                    help="run coremltools only on programs of at most N ops (its time grows quadratically: "
                         "~11 min at 30k ops, hours at 100k)")
    ap.add_argument("--json", type=Path, help="also write every record here")
    ap.add_argument("--worker", choices=["coremltools", "converter"], help=argparse.SUPPRESS)
    ap.add_argument("path", nargs="?", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        (coremltools_worker if args.worker == "coremltools" else converter_worker)(args.path, args.repeat)
        return

    os.environ.setdefault("TQDM_DISABLE", "1")  # before tqdm is imported (coremltools' progress bars)
    from tests.optimize.sources import DEFAULT_CACHE, RESNET, build_sources

    programs: list[tuple[str, Path, int]] = []
    if not args.no_resnet:
        programs.append((f"{RESNET} (coremltools EMPTY pipeline)", build_sources([RESNET])[RESNET].empty, args.repeat))
    for n in args.sizes:
        programs.append((f"synthetic ~{n} ops", synthetic_package(n, DEFAULT_CACHE), 1))
    records = []
    for (label, path, repeat), n in zip(programs, ([0] if not args.no_resnet else []) + list(args.sizes)):
        if args.coremltools_max_ops is not None and n > args.coremltools_max_ops:
            ct = {"error": f"not run (--coremltools-max-ops {args.coremltools_max_ops})"}
        else:
            ct = run_worker("coremltools", path, repeat, args.timeout)
        ours = run_worker("converter", path, repeat, args.timeout)
        records.append({"program": label, "path": str(path), "coremltools": ct, "ours": ours})
        print("\n".join(describe(label, ct, ours, args.top)), flush=True)
    if args.json:
        args.json.write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
