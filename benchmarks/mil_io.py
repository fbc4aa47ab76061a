"""Benchmark: load and save of MIL programs, next to a plain copy/read of the weight file and to
coremltools (when installed). Targets (issue 11): save <= 1.3x a plain copy of the weight file;
load <= 25 us per op at 100k ops, and linear in the op count.

Sources:
  weights  a ResNet-style stack of conv + batch_norm + relu blocks with ~20M fp32 weights, built
           with our builder (``--blocks``, ``--channels``).
  chain    many small ops: benchmarks/mil_to_nn.py's chain (h <- h + relu(conv3x3(h)) on 1x4x8x8,
           each block 3 ops and 3 consts), written with our MIL writer and cached there
           ($CONVERTER_NN_BENCH_CACHE). ``--ops`` counts every op of the program, const included
           (the ops the loader creates): 100,000 ops are 50,000 ops other than const.

Each measurement runs in a fresh subprocess, after the one-time imports, so that its peak RSS is its
own; it is repeated ``--repeat`` times and the best wall time and the best CPU time
(``time.process_time``: this process's user + system time) are reported separately. The machine's
cores are shared, so wall times are noisy and CPU time is the steadier measure; both are shown.
Peak RSS is that of the best-wall run (VmHWM, benchmarks/memory.py).

    python benchmarks/mil_io.py [--blocks 50] [--channels 224] [--ops 10000,30000,100000]
        [--repeat 5] [--no-coremltools] [--profile TASK] [--json OUT.json]

``--profile ours_load|ours_save|chain_load|chain_save`` runs that task once more under cProfile
(with the largest ``--ops`` for the chain) and prints its slowest functions.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory import peak_mb, reset_peak  # noqa: E402

SAVE_TARGET = 1.3  # save / copy of the weight file
LOAD_TARGET_US = 25.0  # per op, at the largest op count
OPS_PER_BLOCK, CONSTS_PER_BLOCK = 3, 3  # mil_to_nn.py's chain: conv, relu, add; weight, bias, pad_type


def build(blocks: int, channels: int) -> Any:
    import numpy as np

    from converter.ir.builder import new_program
    from converter.ir.types import tensor

    rng = np.random.default_rng(0)

    def body(b: Any, x: Any) -> list[Any]:
        h = b.conv(x=x, weight=rng.standard_normal((channels, 3, 3, 3), dtype=np.float32) * 0.1,
                   pad_type="same", name="stem")
        for i in range(blocks):
            w = rng.standard_normal((channels, channels, 3, 3), dtype=np.float32) * 0.02
            y = b.conv(x=h, weight=w, pad_type="same", name=f"block{i}_conv")
            y = b.batch_norm(x=y, mean=rng.standard_normal(channels, dtype=np.float32) * 0.1,
                             variance=rng.random(channels, dtype=np.float32) + 0.5,
                             gamma=np.ones(channels, np.float32), beta=np.zeros(channels, np.float32),
                             name=f"block{i}_bn")
            y = b.relu(x=y, name=f"block{i}_relu")
            h = b.add(x=h, y=y, name=f"block{i}_residual")
        return [b.reduce_mean(x=h, axes=[2, 3], keep_dims=False, name="pool")]

    return new_program({"image": tensor("fp32", [1, 3, 32, 32])}, body)


def chain_package(total_ops: int) -> Path:
    """The chain of about ``total_ops`` ops (const included), built and cached by mil_to_nn.py."""
    from mil_to_nn import chain_package as cached

    blocks = max(1, total_ops // (OPS_PER_BLOCK + CONSTS_PER_BLOCK))
    return cached(blocks * OPS_PER_BLOCK)


# -- one measurement (worker process) ------------------------------------------------------------------


def task(name: str, args: argparse.Namespace, work: Path) -> dict:
    """One measurement, run in this (fresh) process."""
    pkg = Path(args.pkg) if args.pkg else work / "ours.mlpackage"
    weights = pkg / "Data/com.apple.CoreML/weights/weight.bin"
    # Imports are one-time process costs, not part of loading or saving a model: done before timing.
    import converter
    import converter.backends.mil  # noqa: F401
    import converter.frontends.mil  # noqa: F401
    import converter.ir.ops  # noqa: F401

    if name.startswith("coremltools"):
        import coremltools  # noqa: F401
    prog = None
    if name == "ours_save":
        prog = build(args.blocks, args.channels)
    elif name == "chain_save":
        prog = converter.load(pkg)
    result: dict[str, Any] = {}
    reset_peak()
    base = peak_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    if name == "copy_weights":
        shutil.copyfile(weights, work / "copy.bin")
    elif name == "read_weights":
        with open(weights, "rb") as f:
            data = f.read()
        assert len(data) > 0
    elif name == "ours_load":
        prog = converter.load(pkg)
    elif name == "chain_load":
        prog = converter.load(pkg)
    elif name in ("ours_save", "chain_save"):
        converter.save(prog, work / f"saved-{os.getpid()}.mlpackage")
    elif name == "ours_load_save":
        prog = converter.load(pkg)
        converter.save(prog, work / f"resaved-{os.getpid()}.mlpackage")
    elif name == "coremltools_load":
        from coremltools.converters.mil.frontend.milproto.load import load as milproto_load
        from coremltools.proto import Model_pb2

        spec = Model_pb2.Model()
        spec.ParseFromString((pkg / "Data/com.apple.CoreML/model.mlmodel").read_bytes())
        milproto_load(spec, spec.specificationVersion, str(weights.parent))
    elif name == "coremltools_convert_save":
        import coremltools as ct
        from coremltools.converters.mil.frontend.milproto.load import load as milproto_load
        from coremltools.proto import Model_pb2

        spec = Model_pb2.Model()
        spec.ParseFromString((pkg / "Data/com.apple.CoreML/model.mlmodel").read_bytes())
        ct_prog = milproto_load(spec, spec.specificationVersion, str(weights.parent))
        reset_peak()
        base = peak_mb()
        t0, c0 = time.perf_counter(), time.process_time()
        model = ct.convert(ct_prog, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS15,
                           compute_precision=ct.precision.FLOAT32, skip_model_load=True)
        model.save(str(work / f"ct-{os.getpid()}.mlpackage"))
    else:
        raise ValueError(name)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    if prog is not None:
        ops = list(prog.walk())
        result["ops"] = len(ops)
        result["ops_not_const"] = sum(op.type != "const" for op in ops)
        if name == "ours_load":
            assert sum(op.attributes["val"].size for op in ops if op.type == "const") > 0
    result.update(task=name, seconds=seconds, cpu=cpu, peak_mb=peak_mb(), peak_over_start_mb=peak_mb() - base)
    return result


def profile(name: str, args: argparse.Namespace, work: Path) -> None:
    import cProfile
    import pstats

    cProfile.runctx("task(name, args, work)", globals(), {"task": task, "name": name, "args": args, "work": work},
                    str(work / "profile.out"))
    pstats.Stats(str(work / "profile.out")).sort_stats("cumulative").print_stats(30)
    pstats.Stats(str(work / "profile.out")).sort_stats("tottime").print_stats(20)


# -- driver ------------------------------------------------------------------------------------------


def run(name: str, args: argparse.Namespace, work: Path, repeat: int, pkg: Path | None = None) -> dict | None:
    """Best of ``repeat`` fresh processes: the best wall time and the best CPU time, each on its own."""
    runs = []
    for _ in range(repeat):
        cmd = [sys.executable, __file__, "--task", name, "--work", str(work), "--blocks", str(args.blocks),
               "--channels", str(args.channels)] + (["--pkg", str(pkg)] if pkg else [])
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            print(f"{name}: failed\n{out.stderr[-2000:]}")
            return None
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        for p in work.glob("*-*.mlpackage"):
            shutil.rmtree(p)
    best = dict(min(runs, key=lambda r: r["seconds"]))
    best["cpu"] = min(r["cpu"] for r in runs)
    best["runs"] = len(runs)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=int, default=50)
    ap.add_argument("--channels", type=int, default=224)
    ap.add_argument("--ops", default="10000,30000,100000", help="chain sizes, ops including const ('' for none)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-coremltools", action="store_true")
    ap.add_argument("--profile", choices=["ours_load", "ours_save", "chain_load", "chain_save"])
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--task", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    ap.add_argument("--pkg", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.task:
        print(json.dumps(task(args.task, args, Path(args.work))))
        return
    sizes = [int(s) for s in args.ops.split(",") if s.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        import converter

        prog = build(args.blocks, args.channels)
        n_weights = sum(op.attributes["val"].size for op in prog.walk() if op.type == "const")
        converter.save(prog, work / "ours.mlpackage")
        del prog
        if args.profile:
            pkg = chain_package(max(sizes)) if args.profile.startswith("chain") else None
            args.pkg = str(pkg) if pkg else None
            profile(args.profile, args, work)
            return
        wbytes = os.path.getsize(work / "ours.mlpackage/Data/com.apple.CoreML/weights/weight.bin")
        print(f"weights: {args.blocks} conv+batch_norm+relu blocks, {n_weights / 1e6:.1f}M weights, "
              f"weight.bin {wbytes / 1e6:.1f} MB; best of {args.repeat} processes")
        tasks = ["copy_weights", "read_weights", "ours_load", "ours_save", "ours_load_save"]
        ct_tasks = []
        if not args.no_coremltools:
            try:
                import coremltools  # noqa: F401

                ct_tasks = ["coremltools_load", "coremltools_convert_save"]
            except ImportError:
                print("coremltools not installed: skipping its measurements")
        results: dict[str, Any] = {"weight_bytes": wbytes, "weights": n_weights}
        print(f"{'task':26s} {'wall s':>8s} {'cpu s':>8s}   peak RSS MB (increase)")
        for name in tasks + ct_tasks:
            r = run(name, args, work, args.repeat if name in tasks else 1)
            if r is None:
                continue
            results[name] = r
            print(f"{name:26s} {r['seconds']:8.3f} {r['cpu']:8.3f}   {r['peak_mb']:8.1f} "
                  f"(+{r['peak_over_start_mb']:.1f})" + ("" if name in tasks else "   (one run)"))
        if {"ours_load", "read_weights", "ours_save", "copy_weights"} <= set(results):
            for a, b, what in (("ours_save", "copy_weights", "save / copy weight file"),
                               ("ours_load", "read_weights", "load / read weight file")):
                ra, rb = results[a], results[b]
                results[f"{a}_ratio"] = {"wall": ra["seconds"] / rb["seconds"], "cpu": ra["cpu"] / rb["cpu"]}
                print(f"{what}: {ra['seconds'] / rb['seconds']:.2f}x wall, {ra['cpu'] / rb['cpu']:.2f}x cpu"
                      + (f"   (target <= {SAVE_TARGET}x)" if a == "ours_save" else ""))
        if sizes:
            print(f"\nchain (many small ops): load and save, best of {args.repeat} processes; us/op over every "
                  f"op (const included), and over the ops other than const")
            print(f"{'ops':>8s} {'not const':>9s} | {'load wall':>9s} {'load cpu':>8s} {'us/op':>6s} "
                  f"{'(not const)':>11s} {'+MB':>6s} | {'save wall':>9s} {'save cpu':>8s} {'us/op':>6s}")
            chain = results["chain"] = []
            for n in sizes:
                pkg = chain_package(n)
                lo = run("chain_load", args, work, args.repeat, pkg)
                sv = run("chain_save", args, work, args.repeat, pkg)
                if lo is None or sv is None:
                    continue
                row = {"ops": lo["ops"], "ops_not_const": lo["ops_not_const"], "load": lo, "save": sv,
                       "load_us_per_op_cpu": lo["cpu"] / lo["ops"] * 1e6,
                       "load_us_per_op_wall": lo["seconds"] / lo["ops"] * 1e6,
                       "save_us_per_op_cpu": sv["cpu"] / sv["ops"] * 1e6}
                chain.append(row)
                print(f"{lo['ops']:8d} {lo['ops_not_const']:9d} | {lo['seconds']:9.3f} {lo['cpu']:8.3f} "
                      f"{row['load_us_per_op_cpu']:6.1f} {lo['cpu'] / lo['ops_not_const'] * 1e6:11.1f} "
                      f"{lo['peak_over_start_mb']:6.1f} | {sv['seconds']:9.3f} {sv['cpu']:8.3f} "
                      f"{row['save_us_per_op_cpu']:6.1f}")
            if chain:
                last = chain[-1]
                print(f"load at {last['ops']} ops: {last['load_us_per_op_cpu']:.1f} us/op cpu, "
                      f"{last['load_us_per_op_wall']:.1f} wall (target <= {LOAD_TARGET_US}); "
                      f"largest / smallest us/op (linearity): "
                      f"{last['load_us_per_op_cpu'] / chain[0]['load_us_per_op_cpu']:.2f}")
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
