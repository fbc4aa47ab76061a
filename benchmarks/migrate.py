"""Benchmark: `converter migrate` throughput, 1 vs 2 worker processes, and a 2-worker Dask LocalCluster.

The source folder holds N (default 200) symlinks to NeuralNetwork models of ../shared/data/models
(no copies): a fixed mix of small models (builder/, torch/; tens of ops, kilobytes) and large ones
(real/: SqueezeNet, CPM, Hourglass, DeepLabV3; hundreds to 1,400 ops, megabytes), cycled. Each
configuration migrates the folder into a fresh destination and reports wall time, models/second
and the speed-up over ``-j 1``. Every model runs in a worker process of its own (start-up included:
that is what a migration costs). ``--check`` also runs each written model against its source
(then DeepLabV3 dominates).

    python benchmarks/migrate.py [--models 200] [--check] [--no-dask] [--json OUT.json]

Run it on a quiet machine: the speed-up from 1 to 2 workers needs two idle cores. ``worker
seconds`` (the sum of the models' times) growing from -j 1 to -j 2 means the workers were waiting
for a core, not for each other.

Measured 2026-11-26 on the 2-core machine, idle (load average 0.01), check off:
-j 1 21.5 s (9.3 models/s); -j 2 10.9 s (18.3 models/s, x1.97); Dask LocalCluster with 2 workers
12.3 s (16.2 models/s, x1.74); worker seconds 20.9 / 21.0 / 21.6 (the workers never waited).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MODELS = Path(os.environ.get("CONVERTER_SHARED", ROOT.parent / "shared")) / "data" / "models"

SMALL = ["builder/gru.mlmodel", "builder/regressor_mlp.mlmodel", "builder/cnn_conv_pool_fc.mlmodel",
         "builder/lstm_bidirectional.mlmodel", "builder/activations_all.mlmodel", "builder/shape_spatial_ops.mlmodel",
         "builder/cnn_conv_pool_fc_lut4.mlmodel", "torch/mlp_nn.mlmodel", "torch/lstm_nn.mlmodel",
         "torch/cnn_bn_nn.mlmodel", "torch/transformer_encoder_layer_nn.mlmodel", "real/c3284a54_MNIST.mlmodel"]
LARGE = ["real/7485461f_SqueezeNetFP16.mlmodel", "real/8dbda0d2_SqueezeNetInt8LUT.mlmodel",
         "real/799a4a00_model_cpm.mlmodel", "real/9f7cf8e5_model_hourglass.mlmodel",
         "real/9de70cc9_DeepLabV3Int8LUT.mlmodel"]


def make_source(root: Path, n: int) -> Path:
    """``n`` symlinks, cycling through SMALL + LARGE, 20 per folder."""
    mix = SMALL + LARGE
    for i in range(n):
        rel = mix[i % len(mix)]
        link = root / f"batch{i // 20:02d}" / f"{i:03d}_{Path(rel).name}"
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(MODELS / rel)
    return root


def run(src: Path, dst: Path, *, check: bool, **kw) -> dict:
    import converter

    t0 = time.perf_counter()
    rep = converter.migrate(src, dst, check=check, **kw)
    wall = time.perf_counter() - t0
    assert rep.complete, rep.summary()
    cpu = sum(m.seconds or 0 for m in rep.models)
    return {"wall_s": round(wall, 2), "models_per_s": round(len(rep.models) / wall, 2),
            "worker_s_sum": round(cpu, 1), "totals": rep.summary()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=200)
    ap.add_argument("--check", action="store_true", help="verify each written model (slower)")
    ap.add_argument("--no-dask", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="migrate-bench-") as tmp:
        src = make_source(Path(tmp) / "src", args.models)
        print(f"{args.models} models ({len(SMALL)} small and {len(LARGE)} large kinds, cycled), "
              f"check={'on' if args.check else 'off'}, load average {os.getloadavg()[0]:.2f}")
        configs = [("local -j 1", {"jobs": 1}), ("local -j 2", {"jobs": 2})]
        if not args.no_dask:
            try:
                import distributed  # noqa: F401

                configs.append(("dask LocalCluster, 2 workers", {"executor": "dask", "jobs": 2}))
            except ImportError:
                print("(distributed not installed: no Dask run)")
        for i, (name, kw) in enumerate(configs):
            results[name] = run(src, Path(tmp) / f"dst{i}", check=args.check, **kw)
            base = results["local -j 1"]["wall_s"]
            r = results[name]
            r["speedup_vs_j1"] = round(base / r["wall_s"], 2)
            print(f"{name:<30} {r['wall_s']:8.1f} s  {r['models_per_s']:6.2f} models/s  x{r['speedup_vs_j1']:.2f}  "
                  f"(worker seconds {r['worker_s_sum']}; {r['totals']})", flush=True)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
