"""Benchmark: re-targeting ML programs with compressed weights between iOS16 and iOS18.

1. DeepLabV3Int8LUT (45 palettized weights, 2.2 MB) read from our iOS16 package and written for
   iOS18, and back; next to writing it for its own opset (no re-targeting). Each task runs in a fresh
   subprocess; peak memory is that process's VmHWM after loading (``reset_peak``), i.e. what the
   save itself adds on top of the loaded program.
2. Scaling: the re-targeting pass alone (clone + rewrite) on programs of N palettized weights,
   to show it is linear (time per op constant as N grows).

    python benchmarks/retarget.py [--sizes 1000 2000 4000 8000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory import peak_mb, reset_peak, rss_mb  # noqa: E402

DEEPLAB = ROOT.parent / "shared/data/models/real/9de70cc9_DeepLabV3Int8LUT.mlmodel"


def save_task(src: str, dst: str, target: str) -> dict:
    import converter

    warnings.simplefilter("ignore")
    t = time.perf_counter()
    prog = converter.load(src)
    load_s = time.perf_counter() - t
    reset_peak()
    start = rss_mb()
    t = time.perf_counter()
    converter.save(prog, dst, target=target)
    return {"load_s": load_s, "save_s": time.perf_counter() - t, "start_rss_mb": start, "peak_mb": peak_mb()}


def scaling_task(n: int) -> dict:
    import numpy as np

    from converter.ir.builder import new_program
    from converter.ir.types import tensor
    from converter.passes.retarget import retarget

    rng = np.random.default_rng(0)
    lut = rng.standard_normal(16).astype(np.float16)

    def body(b, x):
        y = x
        for i in range(n):
            w = b.constexpr_lut_to_dense(indices=b.const(rng.integers(0, 256, 32).astype(np.uint8)), lut=lut,
                                         shape=b.const(np.array([8, 8], np.uint32)), name=f"w{i}")
            y = b.add(x=y, y=w)
        return [y]

    prog = new_program({"x": tensor("fp16", [8, 8])}, body, opset="iOS16")
    t = time.perf_counter()
    out, problems, _ = retarget(prog, "iOS18")
    seconds = time.perf_counter() - t
    assert not problems and sum(op.type == "constexpr_lut_to_dense" for op in out.walk()) == n
    return {"n": n, "ops": sum(1 for _ in prog.walk()), "seconds": seconds}


def _run(*args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--task", *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="*", default=[1000, 2000, 4000, 8000])
    ap.add_argument("--task", nargs="*")
    args = ap.parse_args()
    if args.task:
        kind, *rest = args.task
        result = save_task(*rest) if kind == "save" else scaling_task(int(rest[0]))
        print(json.dumps(result))
        return
    with tempfile.TemporaryDirectory() as tmp:
        p16, p18 = f"{tmp}/16.mlpackage", f"{tmp}/18.mlpackage"
        subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); import converter; "
                        f"converter.save(converter.load({str(DEEPLAB)!r}), {p16!r}, target='iOS16')"], check=True)
        rows = [("iOS16 -> iOS16 (no re-targeting)", _run("save", p16, f"{tmp}/a.mlpackage", "iOS16")),
                ("iOS16 -> iOS18", _run("save", p16, p18, "iOS18")),
                ("iOS18 -> iOS16", _run("save", p18, f"{tmp}/b.mlpackage", "iOS16"))]
        print(f"DeepLabV3Int8LUT ({DEEPLAB.stat().st_size / 2**20:.1f} MB .mlmodel, 45 palettized weights)")
        for name, r in rows:
            print(f"  {name:34s} load {r['load_s']:.3f} s  save {r['save_s']:.3f} s  peak RSS {r['peak_mb']:.1f} MB "
                  f"(+{r['peak_mb'] - r['start_rss_mb']:.1f} MB over the loaded program)")
    print("re-targeting pass alone (clone + rewrite), N palettized weights iOS16 -> iOS18:")
    for n in args.sizes:
        r = _run("scaling", str(n))
        print(f"  N={n:6d} ({r['ops']:6d} ops)  {r['seconds']:.3f} s  {r['seconds'] / r['ops'] * 1e6:.1f} us/op")


if __name__ == "__main__":
    main()
