"""Benchmark: the reference interpreter vs onnxruntime (converter/runtimes) on the shared models.

For every model of ../shared/data/models (builder/, real/, torch/; .mlmodel and .mlpackage) that
loads and runs: wall time of a first run and of the steady state, per runtime.

- interpreter: ``first`` = one `converter.run` (an Interpreter made and run); ``steady`` = the
  median of ``--repeat`` more runs.
- onnxruntime: ``export`` (IR -> ONNX ModelProto in memory) and ``session`` (InferenceSession
  from the bytes) once (imports done before: they are paid once per process, as in the CLI); ``first`` = export + session + the first run; ``steady`` = the median of
  ``--repeat`` more runs of the same session. A model onnxruntime cannot run shows why (the
  fallback note: the ops ONNX cannot express, ...).

Inputs: the .npz beside a builder model, the stored inputs of a torch model, else random inputs
(`converter.verify.random_feeds`, seed 0). Times exclude loading the model (the same for both).

``--verify`` also times ``converter verify`` on DeepLabV3 (the .mlmodel against its migration to
.mlpackage) end to end in a fresh process per runtime, and by phase in this process.

    python benchmarks/runtime.py [--repeat 3] [--models SUBSTRING] [--verify] [--json OUT.json]

The machine is shared (2 cores): numbers move with its load; run it when it is quiet.

Measured 2026-11-26 on the 2-core machine under heavy load (load average 13-18; every wall time is
inflated about 3x against an idle run): 97 files, 64 run in onnxruntime, 9 fall back (loops,
flexible-length lstm, run-time tensor lists), 24 do not run at all (not neural networks,
malformed, 3a80f611 needs 7-step inputs). Steady state, interpreter -> onnxruntime: DeepLabV3
8,455 -> 792 ms (x11), CPM 4,320 -> 36 ms (x121), SqueezeNetInt8LUT 2,856 -> 32 ms (x90),
hourglass 2,340 -> 55 ms (x42), SqueezeNetFP16 1,293 -> 31 ms (x42); the 55 small models (under
10 ms in the interpreter): median 0.41 -> 0.04 ms, but a first run costs a median 17 ms in
onnxruntime (export + session) against 0.9 ms in the interpreter. DeepLabV3 ``converter verify``
end to end: interpreter 22.5 s, onnxruntime 4.7 s (same load; 1.4 s of CPU time in all).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MODELS = Path(os.environ.get("CONVERTER_SHARED", ROOT.parent / "shared")) / "data" / "models"
DEEPLAB = MODELS / "real" / "9de70cc9_DeepLabV3Int8LUT.mlmodel"


def model_paths() -> list[Path]:
    return sorted([*MODELS.glob("builder/*.mlmodel"), *MODELS.glob("real/*.mlmodel"), *MODELS.glob("real/*.mlpackage"),
                   *MODELS.glob("torch/*.mlmodel"), *MODELS.glob("torch/*.mlpackage")])


def feeds_for(path: Path, prog: Any) -> dict[str, Any]:
    import numpy as np

    from converter.verify import random_feeds

    fn = prog.main
    if path.parent.name == "builder" and path.with_suffix(".npz").exists():
        with np.load(path.with_suffix(".npz")) as data:
            feeds = {k: data[k] for k in data.files}
        if {v.name for v in fn.inputs} == set(feeds):
            return feeds
    if path.parent.name == "torch":
        stem = path.name.split("_nn.")[0].split("_mlprogram")[0].split("_export")[0]
        stored = path.parent / f"{stem}.inputs.npz"
        if stored.exists():
            with np.load(stored) as data:
                return {v.name: data[k] for v, k in zip(fn.inputs, data.files)}
    return random_feeds(fn, 0)


def _timed(f, *args) -> tuple[float, Any]:  # noqa: ANN001
    t = time.perf_counter()
    out = f(*args)
    return time.perf_counter() - t, out


def bench_model(path: Path, repeat: int) -> dict[str, Any]:
    import converter
    from converter.errors import ConverterError
    from converter.runtimes import prepare
    from converter.verify import random_feeds

    row: dict[str, Any] = {"model": f"{path.parent.name}/{path.name}"}
    try:
        prog = converter.load(path)
        feeds = feeds_for(path, prog)
        row["ops"] = sum(op.type != "const" for op in prog.main.walk())
        interp = prepare(prog, runtime="interpreter")
        try:
            row["interp_first"], _ = _timed(interp.run, feeds)
        except ConverterError:  # a stored .npz that does not fit the model: random inputs instead
            feeds = random_feeds(prog.main, 0)
            row["interp_first"], _ = _timed(interp.run, feeds)
        row["interp_steady"] = statistics.median(_timed(interp.run, feeds)[0] for _ in range(repeat))
    except ConverterError as e:
        row["status"] = f"does not run: {str(e)[:90]}"
        return row
    t0 = time.perf_counter()
    ort = prepare(prog, runtime="onnxruntime")
    if ort.runtime != "onnxruntime":
        row["status"] = ort.note
        return row
    row.update(ort.ort.timings)
    ort.run(feeds)
    row["ort_first"] = time.perf_counter() - t0
    if ort.runtime != "onnxruntime":
        row["status"] = ort.note
        return row
    row["ort_steady"] = statistics.median(_timed(ort.run, feeds)[0] for _ in range(repeat))
    row["status"] = "ok"
    return row


def _ms(x: float | None) -> str:
    return "" if x is None else f"{x * 1e3:.1f}"


def print_table(rows: list[dict[str, Any]]) -> None:
    head = ("model", "ops", "interp first ms", "interp steady ms", "ort export ms", "ort session ms",
            "ort first ms", "ort steady ms", "steady x")
    lines = [head]
    for r in rows:
        speed = (f"{r['interp_steady'] / r['ort_steady']:.1f}" if r.get("ort_steady") else "")
        lines.append((r["model"], str(r.get("ops", "")), _ms(r.get("interp_first")), _ms(r.get("interp_steady")),
                      _ms(r.get("export")), _ms(r.get("session")), _ms(r.get("ort_first")), _ms(r.get("ort_steady")),
                      speed))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    for line in lines:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))))
    print()
    for r in rows:
        if r.get("status") != "ok":
            print(f"{r['model']}: {r.get('status')}")


def bench_verify(workdir: Path) -> dict[str, Any]:
    """DeepLabV3 ``converter verify`` end to end per runtime (fresh process), and by phase."""
    import converter
    from converter.ir.interpreter import lookup_function
    from converter.runtimes import prepare
    from converter.verify import random_feeds

    package = workdir / "deeplab.mlpackage"
    converter.convert(DEEPLAB, to="mil", out=package)
    out: dict[str, Any] = {}
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for runtime in ("interpreter", "onnxruntime"):
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "cli", "verify", str(DEEPLAB), str(package), "--runtime", runtime],
                              cwd=ROOT, env=env, capture_output=True, text=True)
        out[f"end_to_end_{runtime}"] = time.perf_counter() - t
        out[f"verdict_{runtime}"] = (proc.stdout.strip().splitlines() or [proc.stderr])[-1]
    phases: dict[str, float] = {}
    for side, path in (("source", DEEPLAB), ("converted", package)):
        phases[f"{side} load"], prog = _timed(converter.load, path)
        feeds = random_feeds(lookup_function(prog), 0)
        phases[f"{side} export+session"], prepared = _timed(lambda p: prepare(p, runtime="onnxruntime"), prog)
        runner = prepared.ort
        phases[f"{side} export"], phases[f"{side} session"] = runner.timings["export"], runner.timings["session"]
        phases[f"{side} run"], _ = _timed(prepared.run, feeds)
        phases[f"{side} interpreter run"], _ = _timed(prepare(prog, runtime="interpreter").run, feeds)
    out["phases"] = phases
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--models", default="", help="only models whose path contains this")
    ap.add_argument("--verify", action="store_true", help="also time `converter verify` on DeepLabV3")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import onnxruntime  # noqa: F401 - imports are not part of a model's first run

    from converter.backends.onnx.lowering import load_all

    load_all()
    rows = [bench_model(p, args.repeat) for p in model_paths() if args.models in str(p)]
    print_table(rows)
    result: dict[str, Any] = {"models": rows}
    if args.verify:
        with tempfile.TemporaryDirectory() as d:
            result["verify"] = v = bench_verify(Path(d))
        print()
        for k, x in v.items():
            if k != "phases":
                print(f"deeplab verify {k}: {x:.2f} s" if isinstance(x, float) else f"deeplab verify {k}: {x}")
        for k, x in v["phases"].items():
            print(f"  {k}: {x:.3f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
