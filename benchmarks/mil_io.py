"""Benchmark: load and save of a MIL program with ~20M fp32 weights, next to the same work done by
coremltools (when installed) and next to a plain copy/read of the weight file.

The program is a ResNet-style stack of conv + batch_norm + relu blocks built with our builder.
Each measurement runs in a fresh subprocess so peak RSS is the measurement's own.

    python benchmarks/mil_io.py [--blocks 50] [--channels 224]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory import peak_mb, reset_peak  # noqa: E402


def build(blocks: int, channels: int):
    import numpy as np

    from converter.ir.builder import new_program
    from converter.ir.types import tensor

    rng = np.random.default_rng(0)

    def body(b, x):
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






def task(name: str, args: argparse.Namespace, work: Path) -> dict:
    """One measurement, run in this (fresh) process."""
    pkg = work / "ours.mlpackage"
    weights = pkg / "Data/com.apple.CoreML/weights/weight.bin"
    # Imports are one-time process costs, not part of loading or saving a model: done before timing.
    import converter  # noqa: F401
    import converter.backends.mil  # noqa: F401
    import converter.frontends.mil  # noqa: F401
    import converter.ir.ops  # noqa: F401

    if name.startswith("coremltools"):
        import coremltools  # noqa: F401
    reset_peak()
    base = peak_mb()
    t0 = time.perf_counter()
    if name == "copy_weights":
        shutil.copyfile(weights, work / "copy.bin")
    elif name == "read_weights":
        with open(weights, "rb") as f:
            data = f.read()
        assert len(data) > 0
    elif name == "ours_load":
        import converter

        prog = converter.load(pkg)
        n = sum(op.attributes["val"].size for op in prog.walk() if op.type == "const")
        assert n > 0
    elif name == "ours_save":
        import converter

        prog = build(args.blocks, args.channels)
        reset_peak()
        base = peak_mb()
        t0 = time.perf_counter()
        converter.save(prog, work / "saved.mlpackage")
    elif name == "ours_load_save":
        import converter

        prog = converter.load(pkg)
        converter.save(prog, work / "resaved.mlpackage")
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
        prog = milproto_load(spec, spec.specificationVersion, str(weights.parent))
        reset_peak()
        base = peak_mb()
        t0 = time.perf_counter()
        model = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS15,
                           compute_precision=ct.precision.FLOAT32, skip_model_load=True)
        model.save(str(work / "ct.mlpackage"))
    else:
        raise ValueError(name)
    seconds = time.perf_counter() - t0
    return {"task": name, "seconds": seconds, "peak_mb": peak_mb(), "peak_over_start_mb": peak_mb() - base}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--blocks", type=int, default=50)
    ap.add_argument("--channels", type=int, default=224)
    ap.add_argument("--task", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.task:
        print(json.dumps(task(args.task, args, Path(args.work))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        import converter

        prog = build(args.blocks, args.channels)
        n_weights = sum(op.attributes["val"].size for op in prog.walk() if op.type == "const")
        converter.save(prog, work / "ours.mlpackage")
        del prog
        wbytes = os.path.getsize(work / "ours.mlpackage/Data/com.apple.CoreML/weights/weight.bin")
        print(f"program: {args.blocks} conv+batch_norm+relu blocks, {n_weights / 1e6:.1f}M weights, "
              f"weight.bin {wbytes / 1e6:.1f} MB")
        tasks = ["copy_weights", "read_weights", "ours_load", "ours_save", "ours_load_save"]
        try:
            import coremltools  # noqa: F401

            tasks += ["coremltools_load", "coremltools_convert_save"]
        except ImportError:
            print("coremltools not installed: skipping its measurements")
        results = {}
        for name in tasks:
            out = subprocess.run([sys.executable, __file__, "--task", name, "--work", str(work),
                                  "--blocks", str(args.blocks), "--channels", str(args.channels)],
                                 capture_output=True, text=True)
            if out.returncode != 0:
                print(f"{name}: failed\n{out.stderr[-2000:]}")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            results[name] = r
            print(f"{name:26s} {r['seconds']:8.3f} s   peak RSS {r['peak_mb']:8.1f} MB "
                  f"(+{r['peak_over_start_mb']:.1f} MB during the task)")
        if {"ours_load", "read_weights", "ours_save", "copy_weights"} <= set(results):
            print(f"load / read weight file: {results['ours_load']['seconds'] / results['read_weights']['seconds']:.2f}x")
            print(f"save / copy weight file: {results['ours_save']['seconds'] / results['copy_weights']['seconds']:.2f}x")
            for k in ("ours_load", "ours_save"):
                print(f"{k} peak RSS / weight bytes: {results[k]['peak_mb'] * 1e6 / 1.048576 / wbytes:.2f}x "
                      f"(increase during the task: {results[k]['peak_over_start_mb'] * 1.048576e6 / wbytes:.2f}x)")


if __name__ == "__main__":
    main()
