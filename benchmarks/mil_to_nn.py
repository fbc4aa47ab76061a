"""Benchmark (issue 10): MIL program -> NeuralNetwork .mlmodel, ours next to coremltools'.

Sources (ML program packages both tools read):
  resnet34  the ~20M-weight ResNet-style program: torchvision's ResNet-34 layout (width 64, 1000
            classes, random seeded weights) traced and converted by coremltools to an fp32 iOS15 ML
            program, built and cached by benchmarks/webnn.py (``source``).
  chain     a long chain of small-channel blocks, ``--ops`` ops other than const (default 12,000):
            input x: 1x4x8x8; each block h <- h + relu(conv3x3(h, W_i, b_i, "same")) with its own
            seeded weights (4 -> 4 channels), 3 ops per block (conv with its bias, relu, add).
            Written with our IR builder and MIL writer into $CONVERTER_NN_BENCH_CACHE (default
            <tmp>/converter-nn-bench), keyed by the building code and the op count.

Each tool converts in its own worker process (benchmarks/webnn.py ``run_conversion``: best time of
``--repeat`` processes, highest peak; one-time costs such as imports are paid first by converting a
one-conv program the same way):
  coremltools  its MIL proto loader reads the package, ``ct.convert(prog, convert_to="neuralnetwork",
               skip_model_load=True)`` (its default pass pipeline, then its NeuralNetwork backend),
               the spec's bytes written as the .mlmodel; the three phases are timed apart.
  ours         ``converter.convert(pkg, to="neuralnetwork", out=X.mlmodel)``. Until our backend exists
               this prints "not available: <reason>" (an UnsupportedError, e.g. the unknown format).
Peak memory: the worker's peak RSS (VmHWM, benchmarks/memory.py), and its increase during the
conversion. Targets: ours >= 12x faster than coremltools on both sources; our peak memory <= 1.5x the
weight bytes (the package's weight.bin; judged on the increase as well as on the whole process,
whose imports alone are ~100 MiB: on the chain's ~2 MB of weights only the increase can meet it).

    python benchmarks/mil_to_nn.py [--sources resnet34,chain] [--ops 12000] [--repeat 5]
        [--chain-repeat 1] [--timeout 3600] [--profile] [--json OUT.json]

``--profile``: one more worker of ours under cProfile (its times are not used), its slowest
functions listed.

coremltools converts MIL -> NeuralNetwork at about 100 ops/s here, so the chain takes minutes per
process: ``--chain-repeat`` (default 1) is its number of processes, ``--repeat`` the ResNet's.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import webnn  # noqa: E402
from memory import peak_mb, reset_peak  # noqa: E402

CACHE = Path(os.environ.get("CONVERTER_NN_BENCH_CACHE", Path(tempfile.gettempdir()) / "converter-nn-bench"))
SOURCES = ("resnet34", "chain")
TOOLS = ("coremltools", "ours")
CHAIN_CHANNELS, CHAIN_SIDE, OPS_PER_BLOCK = 4, 8, 3
SPEEDUP_TARGET, MEMORY_TARGET = 12.0, 1.5


# -- sources ------------------------------------------------------------------------------------------


def chain_program(ops: int) -> Any:
    """The chain source (module docstring) with ``ops`` ops other than const (rounded down to whole
    blocks, at least one)."""
    import numpy as np

    from converter.ir.builder import new_program
    from converter.ir.types import tensor

    rng = np.random.default_rng(0)
    c = CHAIN_CHANNELS

    def body(b: Any, x: Any) -> list[Any]:
        h = x
        for _ in range(max(1, ops // OPS_PER_BLOCK)):
            w = (rng.standard_normal((c, c, 3, 3)) * 0.1).astype(np.float32)
            bias = (rng.standard_normal(c) * 0.1).astype(np.float32)
            h = b.add(x=h, y=b.relu(x=b.conv(x=h, weight=w, bias=bias, pad_type="same")))
        return [h]

    return new_program({"x": tensor("fp32", [1, c, CHAIN_SIDE, CHAIN_SIDE])}, body)


def chain_package(ops: int, cache: Path = CACHE) -> Path:
    """The chain source's .mlpackage, built on first use."""
    import converter

    key = hashlib.sha256(inspect.getsource(chain_program).encode()
                         + f"{CHAIN_CHANNELS} {CHAIN_SIDE} {OPS_PER_BLOCK} {ops}".encode()).hexdigest()[:16]
    pkg = cache / key / "chain.mlpackage"
    if not pkg.is_dir():
        pkg.parent.mkdir(parents=True, exist_ok=True)
        print(f"building chain ({ops} ops) into {pkg} ...", flush=True)
        converter.save(chain_program(ops), pkg)
    return pkg


def source_package(name: str, ops: int) -> Path:
    if name == "resnet34":
        return webnn.source(webnn.MODELS["resnet34"]) / "model.mlpackage"
    return chain_package(ops)


def op_count(pkg: Path) -> int:
    """Ops other than const of the package's program, as our loader reads it."""
    import converter

    return sum(op.type != "const" for op in converter.load(pkg).walk())


# -- conversions (worker processes) ---------------------------------------------------------------------


def unavailable_reason(error: BaseException) -> str | None:
    """A "not available" reason when ``error`` says our converter cannot (yet) write a NeuralNetwork
    model of this program (an UnsupportedError: the unknown format, an op without a lowering); None
    for any other failure, which is reported as one."""
    from converter.errors import UnsupportedError

    return f"{type(error).__name__}: {error}" if isinstance(error, UnsupportedError) else None


def coremltools_convert(pkg: Path, out: Path) -> dict[str, float]:
    """coremltools' conversion of ``pkg`` to the NeuralNetwork ``out``; seconds per phase."""
    import coremltools as ct

    from tests.mil.helpers import CoremltoolsLoader

    t0 = time.perf_counter()
    prog = CoremltoolsLoader().load(pkg)
    t1 = time.perf_counter()
    model = ct.convert(prog, convert_to="neuralnetwork", skip_model_load=True)
    t2 = time.perf_counter()
    out.write_bytes(model.get_spec().SerializeToString())
    return {"load_s": t1 - t0, "convert_s": t2 - t1, "save_s": time.perf_counter() - t2}


def ours_convert(pkg: Path, out: Path) -> dict[str, float]:
    import converter

    converter.convert(pkg, to="neuralnetwork", out=out)
    return {}


def layer_count(path: Path) -> int:
    from converter.formats.proto import Model_pb2

    spec = Model_pb2.Model()
    spec.ParseFromString(path.read_bytes())
    return len(spec.neuralNetwork.layers)


def conversion_worker(tool: str, pkg: Path, profile: bool = False) -> dict[str, Any]:
    """One conversion of ``pkg`` by ``tool`` in this (fresh) process: seconds, CPU seconds, peak RSS
    (with ``profile``, under cProfile, and the functions that took the most cumulative time)."""
    import cProfile
    import pstats

    webnn._quiet()
    import converter

    convert = coremltools_convert if tool == "coremltools" else ours_convert
    with tempfile.TemporaryDirectory(dir=pkg.parent.parent) as tmp:
        warm = converter.save(webnn.warmup_program(), Path(tmp) / "warmup.mlpackage")
        try:
            convert(warm, Path(tmp) / "warmup.mlmodel")
        except Exception:
            pass  # the real conversion below reports it
        reset_peak()
        base = peak_mb()
        out = Path(tmp) / "out.mlmodel"
        profiler = cProfile.Profile() if profile else None
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            if profiler:
                profiler.enable()
            phases = convert(pkg, out)
        except Exception as e:  # reported, not raised: the parent prints it in its table
            reason = unavailable_reason(e) if tool == "ours" else None
            return {"unavailable": reason} if reason else {"error": f"{type(e).__name__}: {e}"}
        finally:
            if profiler:
                profiler.disable()
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        record = {"seconds": seconds, "cpu_s": cpu, "peak_mb": peak_mb(), "increase_mb": peak_mb() - base,
                  "written_bytes": out.stat().st_size, "layers": layer_count(out), **phases}
    if profiler:
        stats = pstats.Stats(profiler)
        top = sorted(stats.stats.items(), key=lambda kv: -kv[1][3])[:webnn.PROFILE_TOP]  # type: ignore[attr-defined]
        record["profile"] = [f"{cum:7.3f} s cumulative, {tot:7.3f} s own  {Path(file).name}:{line} {name}"
                             for (file, line, name), (_, _, tot, cum, _) in top]
    return record


def measure(name: str, pkg: Path, repeat: int, timeout: float, profile: bool = False) -> dict[str, Any]:
    record: dict[str, Any] = {"source": name, "package": str(pkg), "ops": op_count(pkg),
                              "weight_bytes": webnn.weight_bytes(pkg), "repeat": repeat}
    for tool in TOOLS:
        record[tool] = webnn.run_conversion(tool, pkg, repeat, timeout, profile=profile and tool == "ours",
                                            script=Path(__file__))
    record.update(verdicts(record))
    return record


def verdicts(record: dict[str, Any]) -> dict[str, Any]:
    """Speed-up of ours over coremltools and our peak memory over the weight bytes, where measured."""
    theirs, ours = record["coremltools"], record["ours"]
    out: dict[str, Any] = {}
    if "seconds" in theirs and "seconds" in ours:
        out["speedup"] = theirs["seconds"] / ours["seconds"]
    if "seconds" in ours:
        weights_mb = record["weight_bytes"] / 2**20
        out["peak_over_weights"] = ours["peak_mb"] / weights_mb
        out["increase_over_weights"] = ours["increase_mb"] / weights_mb
    return out


# -- report -------------------------------------------------------------------------------------------


def report_lines(record: dict[str, Any]) -> list[str]:
    ops, wb = record["ops"], record["weight_bytes"]
    lines = [f"  {record['source']}: {ops:,} ops other than const, weights {wb / 1e6:.1f} MB "
             f"(best of {record['repeat']} process{'es' if record['repeat'] > 1 else ''})"]
    for tool in TOOLS:
        r = record[tool]
        if "unavailable" in r:
            lines.append(f"    {tool:11s} not available: {r['unavailable']}")
        elif "error" in r:
            lines.append(f"    {tool:11s} FAILED: {r['error']}")
        else:
            phases = ", ".join(f"{k[:-2]} {r[k]:.2f} s" for k in ("load_s", "convert_s", "save_s") if k in r)
            lines.append(f"    {tool:11s} {r['seconds']:8.2f} s (CPU {r['cpu_s']:.2f} s; {ops / r['seconds']:,.0f} ops/s"
                         f"{'; ' + phases if phases else ''})  peak RSS {r['peak_mb']:7.1f} MiB "
                         f"(+{r['increase_mb']:.1f} during the conversion)  {r['layers']:,} layers, "
                         f"{r['written_bytes'] / 1e6:.1f} MB")
    ok = lambda good: "ok" if good else "MISSED"  # noqa: E731
    if "speedup" in record:
        lines.append(f"    speed-up ours vs coremltools {record['speedup']:.1f}x "
                     f"(target >= {SPEEDUP_TARGET:g}x: {ok(record['speedup'] >= SPEEDUP_TARGET)})")
    if "peak_over_weights" in record:
        lines.append(f"    our peak / weight bytes {record['peak_over_weights']:.2f}x whole process "
                     f"({ok(record['peak_over_weights'] <= MEMORY_TARGET)}), {record['increase_over_weights']:.2f}x "
                     f"increase ({ok(record['increase_over_weights'] <= MEMORY_TARGET)}); target <= {MEMORY_TARGET:g}x")
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sources", type=webnn._csv(SOURCES), default=list(SOURCES), help="comma-separated")
    ap.add_argument("--ops", type=int, default=12_000, help="ops other than const of the chain source")
    ap.add_argument("--repeat", type=int, default=5, help="worker processes per conversion of resnet34 (best time)")
    ap.add_argument("--chain-repeat", type=int, default=1, help="worker processes per conversion of the chain")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per worker process")
    ap.add_argument("--json", type=Path, help="also write every record here")
    ap.add_argument("--worker", choices=TOOLS, help=argparse.SUPPRESS)
    ap.add_argument("--profile", action="store_true", help="one more worker of ours under cProfile")
    ap.add_argument("path", nargs="?", type=Path, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        print(json.dumps(conversion_worker(args.worker, args.path, args.profile)), flush=True)
        return
    webnn._quiet()
    import coremltools as ct

    report: dict[str, Any] = {"load_average_1min": os.getloadavg()[0], "cpus": os.cpu_count(),
                              "coremltools": ct.__version__, "records": []}
    print(f"MIL -> NeuralNetwork, coremltools {ct.__version__}; load average (1 min) "
          f"{report['load_average_1min']:.2f} on {report['cpus']} CPUs")
    for name in args.sources:
        pkg = source_package(name, args.ops)
        repeat = args.chain_repeat if name == "chain" else args.repeat
        record = measure(name, pkg, repeat, args.timeout, args.profile)
        report["records"].append(record)
        print("\n".join(report_lines(record)), flush=True)
        for line in record["ours"].get("profile", []):
            print(f"      {line}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
