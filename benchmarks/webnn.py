"""Benchmark: the WebNN backend (issue 9): conversion cost, and speed in a real browser's WebNN next to
ONNX Runtime Web running the same torch model.

Models (tests/optimize/torch_models.py ResNet: torchvision's layout with basic blocks; random weights
seeded, batch norms with random statistics, eval mode):
  small     ResNet-34 layout at width 16, 10 classes, input x: 1x3x64x64 (1.3M weights)
  resnet18  ResNet-18 (width 64, 1000 classes, torchvision's ResNet-18 layout), x: 1x3x224x224 (11.7M)
  resnet34  ResNet-34 (width 64, 1000 classes), x: 1x3x224x224 (21.8M): the "~20M-weight ResNet-style
            model" of the conversion-cost target
Each is traced and converted by coremltools to an fp32 ML program (``ct.convert(convert_to="mlprogram")``,
iOS15, FLOAT32, its default pass pipeline: what a coremltools user gets) and exported to ONNX by
``torch.onnx.export`` (TorchScript exporter, opset 17), with torch's output on a fixed random input.
Built once into $CONVERTER_WEBNN_BENCH_CACHE (default <tmp>/converter-webnn-bench), keyed by the
building code and the torch/coremltools versions.

1. Conversion cost (``--no-conversion`` skips it): ``converter.convert(pkg, to="webnn", out=DIR)`` next
   to ``converter.convert(pkg, to="mil", out=X.mlpackage)`` (the same program saved as .mlpackage), each
   run in its own worker process (best time of ``--repeat`` processes, highest peak; imports and other
   one-time costs are paid before the timing by converting a one-conv program the same way). Peak
   memory is the process's peak RSS (VmHWM), and its increase during the conversion. Targets, judged
   on resnet34: webnn time <= 1.5x mil time; peak memory <= 1.5x the weight bytes (the package's
   weight.bin). ``--profile``: one more worker under cProfile, its slowest functions listed.
2. In the browser, ours (``--no-browser`` skips 2 and 3, ``--no-ours`` this one): the package converted with
   ``converter.convert(pkg, to="webnn", out=DIR, layout=L, precision=P)`` for L in nchw/nhwc and P in
   fp32/fp16, then in a fresh tab of Chromium 153 (WebNN on CPU: LiteRT/XNNPACK), timed in the page with
   performance.now(): import model.js, createContext, load() (fetch model.bin and build; ``--via build``
   fetches first and times build() apart), first run() (creates the graph's tensors, writes,
   dispatches, reads); time to first result = their sum. Then ``--warmup`` and ``--runs`` calls of run()
   (which reuses the tensors): median (and mean, from one timer around the loop: performance.now() is
   coarsened to 0.1 ms in a page that is not cross-origin isolated); then dispatch alone (tensors made
   once; write the input, dispatch, read the outputs back): median. The first result is checked against
   torch's output (max abs error / max(1, max |torch|)).
   ``--pages N`` repeats each page load N times (fresh tabs) and reports the median of each number.
3. ONNX Runtime Web (npm onnxruntime-web, pinned in package.json; bundle ort.min.mjs and its wasm
   served from node_modules) in the same browser, WebNN execution provider
   (``executionProviders: [{name: 'webnn', deviceType: 'cpu'}]``), on the ONNX export
   (``--no-ort`` skips it): runtime instantiation = import ort.min.mjs + a first session of a one-op
   model (Relu), which loads and compiles ORT's wasm and starts the WebNN EP (a second one-op session is
   timed too: the one-op model's own share); then the session of the model (created from its URL),
   the first run, and the median of ``--runs`` runs after ``--warmup``. Whether ORT really ran in WebNN
   (not its wasm CPU fallback) is checked from inside the page: every MLGraphBuilder method, build(),
   createContext() and dispatch() is counted (builder ops made while the session was created, graphs
   built, dispatches per run), and (``--ort-placement``) from ORT's own verbose log of node placement;
   ``--ort-wasm`` also runs ORT's wasm EP (its own CPU kernels) as the control: no WebNN calls there.
Targets (issue 9): our median inference <= ORT-Web's WebNN EP; our time to first result (import
model.js, fetch weights, build, first dispatch; here also createContext) <= 1/4 of ORT-Web's (runtime +
session + first run). Measured by the issue's author with ORT-Web here: about 650-700 ms to instantiate
the runtime, then 41 / 579 ms session creation, 16.5 / 57 ms first run, 1.89 / 40.5 ms median (small /
resnet18).

    python benchmarks/webnn.py [--models small,resnet18,resnet34] [--no-conversion] [--no-browser]
        [--no-ours] [--no-ort] [--layouts nchw,nhwc] [--precisions fp32,fp16] [--runs 50] [--warmup 5] [--pages 1]
        [--repeat 5] [--profile] [--ort-placement] [--ort-wasm] [--json OUT.json]

Needs node and ``npm ci`` for the browser parts. The machine is shared: numbers move with its load
(the 1-minute load average is printed and recorded).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import inspect
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory import peak_mb, reset_peak  # noqa: E402

PAGE = Path(__file__).resolve().parent / "webnn" / "bench.html"
ORT_DIST = ROOT / "node_modules" / "onnxruntime-web" / "dist"
CACHE = Path(os.environ.get("CONVERTER_WEBNN_BENCH_CACHE", Path(tempfile.gettempdir()) / "converter-webnn-bench"))
INPUT, OUTPUT = "x", "output_0"
ONNX_OPSET = 17
TARGET_MODEL = "resnet34"  # the ~20M-weight model of the conversion-cost targets
PROFILE_TOP = 15
TIMER_RESOLUTION_MS = 0.1  # performance.now() in a page that is not cross-origin isolated
ISSUE_ORT = {  # ORT-Web numbers quoted in issue 9 (ms)
    "small": {"runtime_ms": "650-700", "session_ms": 41, "first_run_ms": 16.5, "median_run_ms": 1.89},
    "resnet18": {"runtime_ms": "650-700", "session_ms": 579, "first_run_ms": 57, "median_run_ms": 40.5},
}


@dataclass(frozen=True)
class ModelSpec:
    name: str
    what: str
    layers: tuple[int, ...]
    width: int
    classes: int
    side: int

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (1, 3, self.side, self.side)


MODELS = {m.name: m for m in (
    ModelSpec("small", "ResNet-34 layout, width 16, 10 classes", (3, 4, 6, 3), 16, 10, 64),
    ModelSpec("resnet18", "ResNet-18, width 64, 1000 classes", (2, 2, 2, 2), 64, 1000, 224),
    ModelSpec("resnet34", "ResNet-34, width 64, 1000 classes", (3, 4, 6, 3), 64, 1000, 224),
)}


# -- sources: torch -> coremltools ML program, torch -> ONNX -------------------------------------------


def _quiet() -> None:
    os.environ.setdefault("TQDM_DISABLE", "1")
    warnings.simplefilter("ignore")
    import logging

    logging.getLogger("coremltools").setLevel(logging.ERROR)


def torch_module(spec: ModelSpec) -> Any:
    """The seeded torch model of ``spec``, in eval mode."""
    import torch

    from tests.optimize.torch_models import ResNet, randomize_batch_norms

    torch.manual_seed(0)
    module = ResNet(spec.layers, spec.width, spec.classes)
    randomize_batch_norms(module, torch.Generator().manual_seed(1))
    return module.eval()


def export_onnx(module: Any, example: Any, path: Path) -> None:
    """``torch.onnx.export`` of ``module`` with the input named ``x`` and the output ``output_0``
    (TorchScript exporter: the dynamo one needs onnxscript)."""
    import torch

    with torch.no_grad():
        torch.onnx.export(module, (example,), str(path), dynamo=False, opset_version=ONNX_OPSET,
                          input_names=[INPUT], output_names=[OUTPUT])


def write_tiny_onnx(path: Path) -> None:
    """A one-op ONNX model (Relu on float32[1, 8]): its first session starts ORT-Web's runtime."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "tiny",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", ONNX_OPSET)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def _build_source(spec: ModelSpec, folder: Path) -> None:
    """Writes model.mlpackage, model.onnx, tiny.onnx, input.bin (float32 x), torch_output.npy and
    meta.json into ``folder`` (built beside it, renamed into place)."""
    _quiet()
    import coremltools as ct
    import numpy as np
    import torch

    module = torch_module(spec)
    x = np.random.default_rng(0).standard_normal(spec.shape).astype(np.float32)
    example = torch.from_numpy(x)
    with torch.no_grad():
        traced = torch.jit.trace(module, example)
        ref = module(example).numpy()
    work = Path(tempfile.mkdtemp(prefix=f".{spec.name}-", dir=folder.parent))
    try:
        model = ct.convert(traced, convert_to="mlprogram", inputs=[ct.TensorType(name=INPUT, shape=x.shape)],
                           outputs=[ct.TensorType(name=OUTPUT)], minimum_deployment_target=ct.target.iOS15,
                           compute_precision=ct.precision.FLOAT32, skip_model_load=True)
        model.save(str(work / "model.mlpackage"))
        export_onnx(module, example, work / "model.onnx")
        write_tiny_onnx(work / "tiny.onnx")
        (work / "input.bin").write_bytes(x.tobytes())
        np.save(work / "torch_output.npy", ref)
        params = sum(p.numel() for p in module.parameters())
        (work / "meta.json").write_text(json.dumps({"model": spec.name, "what": spec.what, "shape": spec.shape,
                                                    "parameters": params}))
        os.rename(work, folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _cache_key() -> str:
    import coremltools as ct
    import torch

    h = hashlib.sha256()
    for fn in (torch_module, export_onnx, write_tiny_onnx, _build_source):
        h.update(inspect.getsource(fn).encode())
    h.update(repr(sorted(MODELS.items())).encode())
    h.update((ROOT / "tests" / "optimize" / "torch_models.py").read_bytes())
    h.update(f"torch {torch.__version__} coremltools {ct.__version__}".encode())
    return h.hexdigest()[:16]


def source(spec: ModelSpec, cache: Path = CACHE) -> Path:
    """The folder of ``spec``'s built files, building them on first use."""
    folder = cache / _cache_key() / spec.name
    if not folder.is_dir():
        folder.parent.mkdir(parents=True, exist_ok=True)
        print(f"building {spec.name} (torch -> coremltools, torch -> ONNX) into {folder} ...", flush=True)
        _build_source(spec, folder)
    return folder


def weight_bytes(package: Path) -> int:
    return (package / "Data" / "com.apple.CoreML" / "weights" / "weight.bin").stat().st_size


# -- conversion cost (worker processes) -----------------------------------------------------------------

# Raised by a converter without the WebNN backend or without its options yet.
_UNAVAILABLE = re.compile(r"unknown output format|unexpected keyword argument '(layout|precision)'")


def unavailable_reason(error: BaseException) -> str | None:
    """A "backend not available" reason when ``error`` says the converter has no WebNN backend (or not
    its layout/precision options) yet; None for any other failure."""
    text = f"{type(error).__name__}: {error}"
    return text if _UNAVAILABLE.search(text) else None


def convert_webnn(pkg: Path, out: Path, layout: str | None = None, precision: str | None = None) -> None:
    import converter

    options = {k: v for k, v in (("layout", layout), ("precision", precision)) if v is not None}
    converter.convert(pkg, to="webnn", out=out, **options)


def warmup_program() -> Any:
    """conv + batch_norm + relu on a 1x3x8x8 input: touches the code paths of the ResNets."""
    import numpy as np

    from converter.ir.builder import new_program
    from converter.ir.types import tensor

    def body(b: Any, x: Any) -> list[Any]:
        y = b.conv(x=x, weight=np.ones((4, 3, 3, 3), np.float32), pad_type="same")
        y = b.batch_norm(x=y, mean=np.zeros(4, np.float32), variance=np.ones(4, np.float32),
                         gamma=np.ones(4, np.float32), beta=np.zeros(4, np.float32), epsilon=1e-5)
        return [b.relu(x=y)]

    return new_program({"x": tensor("fp32", [1, 3, 8, 8])}, body)


def conversion_worker(tool: str, pkg: Path, profile: bool = False) -> dict[str, Any]:
    """One conversion of ``pkg`` in this (fresh) process: seconds and peak RSS (with ``profile``,
    under cProfile, and the functions that took the most cumulative time)."""
    import cProfile
    import pstats

    import converter

    suffix = ".mlpackage" if tool == "mil" else ""  # webnn writes a folder

    def convert(src: Path, out: Path) -> None:
        if tool == "mil":
            converter.convert(src, to="mil", out=out)
        else:
            convert_webnn(src, out)

    with tempfile.TemporaryDirectory(dir=pkg.parent.parent) as tmp:
        # One-time costs (imports, some of them lazy inside load/save) are not part of a conversion:
        # a one-conv program goes through the same conversion first.
        converter.save(warmup_program(), Path(tmp) / "warmup.mlpackage")
        try:
            convert(Path(tmp) / "warmup.mlpackage", Path(tmp) / f"warmup-out{suffix}")
        except Exception:
            pass  # the real conversion below reports it
        reset_peak()
        base = peak_mb()
        profiler = cProfile.Profile() if profile else None
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            if profiler:
                profiler.enable()
            convert(pkg, Path(tmp) / f"out{suffix}")
        except Exception as e:  # reported, not raised: the parent prints it in its table
            reason = unavailable_reason(e)
            return {"unavailable": reason} if reason else {"error": f"{type(e).__name__}: {e}"}
        finally:
            if profiler:
                profiler.disable()
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        written = sum(f.stat().st_size for f in (Path(tmp) / f"out{suffix}").rglob("*") if f.is_file())
    record = {"seconds": seconds, "cpu_s": cpu, "peak_mb": peak_mb(), "increase_mb": peak_mb() - base,
              "written_bytes": written}
    if profiler:
        stats = pstats.Stats(profiler)
        top = sorted(stats.stats.items(), key=lambda kv: -kv[1][3])[:PROFILE_TOP]  # type: ignore[attr-defined]
        record["profile"] = [f"{cum:7.3f} s cumulative, {tot:7.3f} s own  {Path(file).name}:{line} {name}"
                             for (file, line, name), (_, _, tot, cum, _) in top]
    return record


def run_conversion(tool: str, pkg: Path, repeat: int, timeout: float, profile: bool = False,
                   script: Path = Path(__file__)) -> dict[str, Any]:
    """Best of ``repeat`` worker processes (time: lowest; peak: highest); with ``profile``, one more
    process under cProfile (its times are not used). A worker is ``script --worker TOOL PKG
    [--profile]`` printing its record as one JSON line (another benchmark's script may serve)."""
    runs = []
    for i in range(repeat + profile):
        cmd = [sys.executable, str(script), "--worker", tool, str(pkg)] + (["--profile"] if i == repeat else [])
        env = dict(os.environ, TQDM_DISABLE="1", PYTHONWARNINGS="ignore")
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:.0f} s"}
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        if proc.returncode != 0 or not lines:
            tail = " | ".join((proc.stderr or "").strip().splitlines()[-3:])
            return {"error": tail or f"exit {proc.returncode}"}
        record = json.loads(lines[-1])
        if "seconds" not in record:
            return record
        runs.append(record)
    profiled = runs.pop() if profile else {}
    best = min(runs, key=lambda r: r["seconds"])
    return {**best, "peak_mb": max(r["peak_mb"] for r in runs), "increase_mb": max(r["increase_mb"] for r in runs),
            "all_seconds": [r["seconds"] for r in runs], **({"profile": profiled["profile"]} if profiled else {})}


def conversion_cost(spec: ModelSpec, folder: Path, repeat: int, timeout: float, profile: bool) -> dict[str, Any]:
    pkg = folder / "model.mlpackage"
    record = {"model": spec.name, "weight_bytes": weight_bytes(pkg),
              "mil": run_conversion("mil", pkg, repeat, timeout, profile),
              "webnn": run_conversion("webnn", pkg, repeat, timeout, profile)}
    mil, webnn = record["mil"], record["webnn"]
    if "seconds" in mil and "seconds" in webnn:
        wb_mb = record["weight_bytes"] / 2**20
        record.update(time_ratio=webnn["seconds"] / mil["seconds"], peak_over_weights=webnn["peak_mb"] / wb_mb,
                      increase_over_weights=webnn["increase_mb"] / wb_mb)
    return record


# -- in the browser ---------------------------------------------------------------------------------------


def max_error(output_b64: str, reference: Any) -> dict[str, Any]:
    """Max abs difference of a page's first output from torch's, and that relative to max(1, max|ref|)."""
    import numpy as np

    got = np.frombuffer(base64.b64decode(output_b64), dtype=np.float32)
    if got.size != reference.size:
        return {"max_abs": float("nan"), "scaled": float("nan"), "note": f"{got.size} values, torch has {reference.size}"}
    diff = float(np.max(np.abs(got.reshape(reference.shape).astype(np.float64) - reference)))
    return {"max_abs": diff, "scaled": diff / max(1.0, float(np.max(np.abs(reference))))}


def _page_query(spec: ModelSpec, kind: str, runs: int, warmup: int, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "input": INPUT, "shape": json.dumps(list(spec.shape)), "runs": runs, "warmup": warmup,
            "device": "cpu", **extra}


def bench_ours(browser: Any, spec: ModelSpec, folder: Path, work: Path, layout: str, precision: str,
               runs: int, warmup: int, pages: int, timeout: float, via: str = "load") -> dict[str, Any]:
    """Convert ``spec``'s package with these options and time it in ``pages`` fresh tabs."""
    out = work / f"{spec.name}-{layout}-{precision}"
    record: dict[str, Any] = {"model": spec.name, "layout": layout, "precision": precision}
    t0 = time.perf_counter()
    try:
        convert_webnn(folder / "model.mlpackage", out, layout, precision)
    except Exception as e:
        reason = unavailable_reason(e)
        return {**record, **({"unavailable": reason} if reason else {"error": f"conversion: {type(e).__name__}: {e}"})}
    record["convert_s"] = time.perf_counter() - t0
    return {**record, "via": via, **time_ours(browser, spec, out, folder, runs, warmup, pages, timeout, via)}


def time_ours(browser: Any, spec: ModelSpec, model: Path, folder: Path, runs: int, warmup: int, pages: int,
              timeout: float, via: str = "load") -> dict[str, Any]:
    """Time the WebNN module in ``model`` (model.js, model.bin) in ``pages`` fresh tabs, fed with
    ``folder``/input.bin; its first output is compared with ``folder``/torch_output.npy."""
    import numpy as np

    from tests.webnn.browser_client import BrowserError

    results = []
    for _ in range(pages):
        try:
            page = browser.open_page(PAGE, mounts={"model": model, "data": folder},
                                     query=_page_query(spec, "ours", runs, warmup, via=via), timeout_s=timeout)
        except BrowserError as e:
            return {"error": str(e)}
        results.append(dict(page.result))
    record = summarize(results)
    record["error_vs_torch"] = max_error(record.pop("output"), np.load(folder / "torch_output.npy"))
    return record


def summarize(pages: list[dict[str, Any]]) -> dict[str, Any]:
    """One record for several page loads of the same measurement: each number is the median over
    the pages (their values are kept under ``per_page``); everything else is the first page's."""
    first = dict(pages[0])
    first["pages"] = len(pages)
    if len(pages) > 1:
        per_page = {}
        for key, value in pages[0].items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and all(p.get(key) is not None for p in pages):
                per_page[key] = [p[key] for p in pages]
                if len(set(per_page[key])) > 1:
                    first[key] = statistics.median(per_page[key])
        first["per_page"] = per_page
    return first


def bench_ort(browser: Any, spec: ModelSpec, folder: Path, runs: int, warmup: int, pages: int, timeout: float,
              placement: bool, ep: str = "webnn") -> dict[str, Any]:
    """ORT-Web with execution provider ``ep`` (webnn, or wasm as the control) on the ONNX export, in
    ``pages`` fresh tabs (and, with ``placement``, once more with ORT's verbose log to read where it
    placed the nodes)."""
    import numpy as np

    from tests.webnn.browser_client import BrowserError

    record: dict[str, Any] = {"model": spec.name, "ep": ep, "onnx_nodes": onnx_op_counts(folder / "model.onnx")}
    results, console = [], []
    for _ in range(pages):
        try:
            page = browser.open_page(PAGE, mounts={"model": folder, "data": folder, "ort": ORT_DIST},
                                     query=_page_query(spec, "ort", runs, warmup, ep=ep), timeout_s=timeout)
        except BrowserError as e:
            return {**record, "error": str(e)}
        results.append(dict(page.result))
        console += page.console
    record.update(summarize(results))
    record["error_vs_torch"] = max_error(record.pop("output"), np.load(folder / "torch_output.npy"))
    record["ort_console"] = [line for line in console if "webnn" in line.lower()][:20]
    if placement:
        try:
            page = browser.open_page(PAGE, mounts={"model": folder, "data": folder, "ort": ORT_DIST},
                                     query=_page_query(spec, "ort", 1, 0, log=0, ep=ep), timeout_s=timeout)
            record["placement_log"] = ort_placement_log(page.console)
        except BrowserError as e:
            record["placement_log"] = [f"error: {e}"]
    return record


def ort_placement_log(console: list[str]) -> list[str]:
    """What ORT's verbose log says of the model's session (the page's last session): the WebNN EP's
    capability line (partitions, nodes supported) and where the nodes were placed."""
    capability = [line.split("GetCapability, ", 1)[1] for line in console if "GetCapability, " in line]
    placed = [line.split("VerifyEachNodeIsAssignedToAnEp]", 1)[1].strip() for line in console
              if "VerifyEachNodeIsAssignedToAnEp]" in line and "Node placements" not in line]
    return capability[-1:] + placed[-1:]


def onnx_op_counts(path: Path) -> dict[str, int]:
    import onnx

    counts: dict[str, int] = {}
    for node in onnx.load(str(path), load_external_data=False).graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts


def ort_uses_webnn(record: dict[str, Any]) -> str:
    """Why the numbers are (or are not) ORT-Web running in WebNN, from the page's WebNN call counts."""
    calls = record.get("webnn_calls", {})
    ops = calls.get("builderOps", {})
    convs = record["onnx_nodes"].get("Conv", 0)
    graphs = calls.get("build", 0)
    per_run = record.get("dispatches_per_run", 0)
    yes = ops.get("conv2d", 0) == convs and graphs >= 1 and per_run >= 1
    return (f"{'yes' if yes else 'NO'}: {graphs} WebNN graph(s) built for the session, conv2d {ops.get('conv2d', 0)} "
            f"of {convs} ONNX Conv, {per_run:g} dispatch(es) per run")


# -- report ---------------------------------------------------------------------------------------------


def _ms(x: Any) -> str:
    return "-" if x is None else f"{x:,.1f}" if x >= 10 else f"{x:.2f}"


def conversion_lines(rec: dict[str, Any]) -> list[str]:
    wb = rec["weight_bytes"]
    lines = [f"  {rec['model']}: weights {wb / 1e6:.1f} MB"]
    for tool in ("mil", "webnn"):
        r = rec[tool]
        if "unavailable" in r:
            lines.append(f"    {tool:5s} backend not available: {r['unavailable']}")
        elif "error" in r:
            lines.append(f"    {tool:5s} FAILED: {r['error']}")
        else:
            lines.append(f"    {tool:5s} {r['seconds']:7.3f} s (CPU {r['cpu_s']:.3f} s)  peak RSS {r['peak_mb']:7.1f} MiB "
                         f"(+{r['increase_mb']:.1f} MiB during the conversion)  wrote {r['written_bytes'] / 1e6:.1f} MB")
    if "time_ratio" in rec:
        ratios = (f"webnn / mil time {rec['time_ratio']:.2f}x; webnn peak RSS / weight bytes {rec['peak_over_weights']:.2f}x "
                  f"(whole process), {rec['increase_over_weights']:.2f}x (increase during the conversion)")
        if rec["model"] == TARGET_MODEL:
            ok = lambda good: "ok" if good else "MISSED"  # noqa: E731
            ratios += (f"\n    targets <= 1.5x: time {ok(rec['time_ratio'] <= 1.5)}; peak memory "
                       f"{ok(rec['peak_over_weights'] <= 1.5)} for the whole process, "
                       f"{ok(rec['increase_over_weights'] <= 1.5)} for the increase")
        lines.append("    " + ratios)
    for tool in ("mil", "webnn"):
        for entry in rec[tool].get("profile", []):
            lines.append(f"    {tool} profile: {entry}")
    return lines


def ours_lines(records: list[dict[str, Any]]) -> list[str]:
    head = (f"  {'model':9s} {'layout':6s} {'prec':5s} {'import':>7s} {'context':>7s} {'fetch':>7s} {'build':>8s} {'load':>8s} "
            f"{'compile':>8s} {'1st run':>8s} {'TTFR':>8s} {'med run':>8s} {'med disp':>8s} {'transp':>6s} "
            f"{'err/max(1,|ref|)':>16s}")
    lines = [head]
    for r in records:
        label = f"  {r['model']:9s} {r['layout']:6s} {r['precision']:5s}"
        if "unavailable" in r:
            lines.append(f"{label} backend not available: {r['unavailable']}")
        elif "error" in r:
            lines.append(f"{label} FAILED: {r['error'][:300]}")
        else:
            transposes = r["webnn_calls"]["builderOps"].get("transpose", 0)
            lines.append(f"{label} {_ms(r['import_ms']):>7s} {_ms(r['context_ms']):>7s} {_ms(r['fetch_ms']):>7s} "
                         f"{_ms(r['build_ms']):>8s} {_ms(r['load_ms']):>8s} {_ms(r['compile_ms']):>8s} {_ms(r['first_run_ms']):>8s} "
                         f"{_ms(r['time_to_first_result_ms']):>8s} "
                         f"{_ms(r['median_run_ms']):>8s} {_ms(r['median_dispatch_ms']):>8s} {transposes:>6d} "
                         f"{r['error_vs_torch']['scaled']:>16.2e}")
    return lines


def ort_lines(records: list[dict[str, Any]]) -> list[str]:
    head = (f"  {'model':9s} {'EP':5s} {'import':>7s} {'init':>7s} {'runtime':>8s} {'session':>8s} {'1st run':>8s} {'TTFR':>8s} "
            f"{'median':>8s} {'err/max(1,|ref|)':>16s}  issue's numbers")
    lines = [head]
    for r in records:
        if "error" in r:
            lines.append(f"  {r['model']:9s} {r['ep']:5s} FAILED: {r['error'][:300]}")
            continue
        issue = ISSUE_ORT.get(r["model"]) if r["ep"] == "webnn" else None
        quoted = (f"runtime {issue['runtime_ms']}, session {issue['session_ms']}, 1st {issue['first_run_ms']}, "
                  f"median {issue['median_run_ms']}") if issue else "-"
        lines.append(f"  {r['model']:9s} {r['ep']:5s} {_ms(r['import_ms']):>7s} {_ms(r['init_ms']):>7s} {_ms(r['runtime_ms']):>8s} "
                     f"{_ms(r['session_ms']):>8s} {_ms(r['first_run_ms']):>8s} {_ms(r['time_to_first_result_ms']):>8s} "
                     f"{_ms(r['median_run_ms']):>8s} {r['error_vs_torch']['scaled']:>16.2e}  {quoted}")
        lines.append(f"  {'':15s} of the session, WebNN build(): {_ms(r['compile_ms'])} ms; "
                     f"one-op session (its share of init) {_ms(r['tiny_session_ms'])} ms; wasm threads "
                     f"{r['wasm_threads']} (crossOriginIsolated {r['cross_origin_isolated']}); runs in WebNN: "
                     f"{ort_uses_webnn(r)}")
        for line in r.get("placement_log", []):
            lines.append(f"  {'':15s} ORT log: {line}")
    return lines


def comparison_lines(ours: list[dict[str, Any]], ort: list[dict[str, Any]]) -> list[str]:
    lines = []
    by_model = {r["model"]: r for r in ort if "error" not in r and r["ep"] == "webnn"}
    for r in ours:
        theirs = by_model.get(r["model"])
        if theirs is None or "median_run_ms" not in r:
            continue
        ok = lambda good: "ok" if good else "MISSED"  # noqa: E731
        quarter = theirs["time_to_first_result_ms"] / 4
        ours_med, their_med = r["median_run_ms"], theirs["median_run_ms"]
        if abs(ours_med - their_med) <= TIMER_RESOLUTION_MS + 1e-6:  # within one tick of the timer: the means decide
            verdict = (f"{ok(r['mean_run_ms'] <= theirs['mean_run_ms'])}: medians within the timer's "
                       f"{TIMER_RESOLUTION_MS} ms, means {_ms(r['mean_run_ms'])} vs {_ms(theirs['mean_run_ms'])}")
        else:
            verdict = ok(ours_med <= their_med)
        lines.append(f"  {r['model']:9s} {r['layout']:6s} {r['precision']:5s} median {_ms(ours_med)} vs ORT-Web "
                     f"{_ms(their_med)} ms ({verdict}); "
                     f"time to first result {_ms(r['time_to_first_result_ms'])} vs ORT-Web/4 {_ms(quarter)} ms "
                     f"({ok(r['time_to_first_result_ms'] <= quarter)})")
    return lines


# -- main -----------------------------------------------------------------------------------------------


def _csv(choices: tuple[str, ...]) -> Any:
    def parse(text: str) -> list[str]:
        items = [t.strip() for t in text.split(",") if t.strip()]
        bad = [t for t in items if t not in choices]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"choose from {', '.join(choices)} (got {text!r})")
        return items

    return parse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=_csv(tuple(MODELS)), default=list(MODELS), help="comma-separated")
    ap.add_argument("--layouts", type=_csv(("nchw", "nhwc")), default=["nchw", "nhwc"])
    ap.add_argument("--precisions", type=_csv(("fp32", "fp16")), default=["fp32", "fp16"])
    ap.add_argument("--no-conversion", action="store_true", help="skip the conversion cost")
    ap.add_argument("--no-browser", action="store_true", help="skip everything in the browser")
    ap.add_argument("--no-ours", action="store_true", help="skip our models in the browser")
    ap.add_argument("--no-ort", action="store_true", help="skip ONNX Runtime Web")
    ap.add_argument("--ort-placement", action="store_true",
                    help="one more ORT-Web page per model with ORT's verbose log, to show where nodes were placed")
    ap.add_argument("--ort-wasm", action="store_true",
                    help="also ORT-Web's wasm execution provider (its own CPU kernels): the control for the WebNN check")
    ap.add_argument("--via", choices=["load", "build"], default="load",
                    help="ours: load(context) (what a page does), or fetch then build(context, weights), timed apart")
    ap.add_argument("--runs", type=int, default=50, help="timed runs per page (after --warmup)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--pages", type=int, default=1,
                    help="fresh tabs per measurement (numbers: the median over them)")
    ap.add_argument("--repeat", type=int, default=5, help="worker processes per conversion (best time)")
    ap.add_argument("--profile", action="store_true",
                    help="one more worker per conversion under cProfile: the functions that took the longest")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per conversion or page")
    ap.add_argument("--json", type=Path, help="also write every record here")
    ap.add_argument("--worker", choices=["mil", "webnn"], help=argparse.SUPPRESS)
    ap.add_argument("path", nargs="?", type=Path, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        print(json.dumps(conversion_worker(args.worker, args.path, args.profile)), flush=True)
        return
    _quiet()
    report: dict[str, Any] = {"load_average_1min": os.getloadavg()[0], "cpus": os.cpu_count(),
                              "models": {}, "conversion": [], "ours": [], "ort": []}
    specs = [MODELS[m] for m in args.models]
    folders = {s.name: source(s) for s in specs}
    for s in specs:
        meta = json.loads((folders[s.name] / "meta.json").read_text())
        report["models"][s.name] = meta
        print(f"{s.name}: {s.what}, input {'x'.join(map(str, s.shape))}, {meta['parameters'] / 1e6:.1f}M weights")
    print(f"load average (1 min) {report['load_average_1min']:.2f} on {report['cpus']} CPUs")

    if not args.no_conversion:
        print(f"\n== conversion cost (best of {args.repeat} worker processes each)")
        for s in specs:
            rec = conversion_cost(s, folders[s.name], args.repeat, args.timeout, args.profile)
            report["conversion"].append(rec)
            print("\n".join(conversion_lines(rec)), flush=True)

    if not args.no_browser:
        from tests.webnn.browser_client import WebnnBrowser, missing_requirements

        missing = missing_requirements()
        if missing is None and not args.no_ort and not (ORT_DIST / "ort.min.mjs").is_file():
            missing = "npm package onnxruntime-web is not installed (run `npm ci` in the repository)"
        if missing:
            print(f"\nbrowser parts skipped: {missing}")
            report["browser_skipped"] = missing
        else:
            with WebnnBrowser() as browser, tempfile.TemporaryDirectory(prefix="webnn-bench-") as tmp:
                report["browser_version"] = browser.version
                pages = "one fresh tab each" if args.pages == 1 else f"median of {args.pages} fresh tabs each"
                print(f"\n== in the browser ({browser.version}, WebNN cpu): ours, ms ({pages}); {args.runs} runs after "
                      f"{args.warmup} warm-up; TTFR = import + context + load (fetch model.bin and build: "
                      f"{'load(), fetch and build not timed apart' if args.via == 'load' else 'timed apart'}) + first run; "
                      f"compile = the part spent in MLGraphBuilder.build(); transp = transpose ops in the graph", flush=True)
                print(ours_lines([])[0] if not args.no_ours else "  (skipped: --no-ours)")
                for s in specs if not args.no_ours else []:
                    for layout in args.layouts:
                        for precision in args.precisions:
                            rec = bench_ours(browser, s, folders[s.name], Path(tmp), layout, precision, args.runs,
                                             args.warmup, args.pages, args.timeout, args.via)
                            report["ours"].append(rec)
                            print(ours_lines([rec])[1], flush=True)
                if not args.no_ort:
                    print(f"\n== ONNX Runtime Web {_ort_version()} (WebNN EP, cpu), same browser, ms ({pages}); runtime = import "
                          f"+ init (first session, one-op model); TTFR = runtime + session + first run", flush=True)
                    print(ort_lines([])[0])
                    for s in specs:
                        for ep in ("webnn", "wasm") if args.ort_wasm else ("webnn",):
                            rec = bench_ort(browser, s, folders[s.name], args.runs, args.warmup, args.pages,
                                            args.timeout, args.ort_placement, ep)
                            report["ort"].append(rec)
                            print("\n".join(ort_lines([rec])[1:]), flush=True)
                    compared = comparison_lines(report["ours"], report["ort"])
                    if compared:
                        print("\n== targets: our median <= ORT-Web's; our TTFR <= ORT-Web's TTFR / 4")
                        print("\n".join(compared))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


def _ort_version() -> str:
    try:
        return json.loads((ORT_DIST.parent / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return "?"


if __name__ == "__main__":
    main()
