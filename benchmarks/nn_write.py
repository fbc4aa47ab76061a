"""Writing a NeuralNetwork .mlmodel: weights as payloads (protowire_join) vs set through protobuf's API.

    python benchmarks/nn_write.py [--elements 25000000] [--layers 50] [--repeat 3] [--dir /tmp]

The model: ``--layers`` innerProduct layers sharing ``--elements`` fp32 weights. Cases, each in its
own subprocess (its peak RSS is its own; the weight arrays exist before the measurement starts):
"payloads" marks each WeightParams and hands write_mlmodel the arrays; "protobuf API" sets
``floatValue`` from each array and calls the old write path (SerializeToString, then write).
Reported: best wall time of ``--repeat`` runs, peak RSS growth over the state just before, and that
growth as a multiple of the weight bytes (the requirement: a conversion peaks at <= 1.5x of them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory import peak_mb, reset_peak  # noqa: E402

from converter.formats.model_file import write_mlmodel  # noqa: E402
from converter.formats.proto import Model_pb2  # noqa: E402
from converter.formats.protowire_join import mark_payload  # noqa: E402


def _model(arrays: list[np.ndarray], marked: bool) -> tuple[Model_pb2.Model, list[tuple[int, np.ndarray]]]:
    model = Model_pb2.Model(specificationVersion=4)
    payloads = []
    for i, a in enumerate(arrays):
        layer = model.neuralNetwork.layers.add(name=f"fc{i}", input=[f"x{i}"], output=[f"x{i + 1}"])
        layer.innerProduct.inputChannels, layer.innerProduct.outputChannels = a.size, 1
        if marked:
            mark_payload(layer.innerProduct.weights, len(payloads))
            payloads.append((1, a))
        else:
            layer.innerProduct.weights.floatValue.extend(a)
    return model, payloads


def run_case(name: str, n: int, layers: int, d: Path, repeat: int) -> dict:
    arrays = np.array_split(np.arange(n, dtype=np.float32), layers)
    marked = name == "payloads"
    reset_peak()
    before = peak_mb()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        model, payloads = _model(arrays, marked)
        write_mlmodel(d / f"{name}.mlmodel", model, payloads=payloads)
        times.append(time.perf_counter() - t)
        del model, payloads
    return {"seconds": min(times), "rss_growth_mb": peak_mb() - before}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--elements", type=int, default=25_000_000)
    p.add_argument("--layers", type=int, default=50)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--dir", type=Path, default=None, help="where to write (default: a temporary directory)")
    p.add_argument("--case", help=argparse.SUPPRESS)  # internal: run one case in this process
    args = p.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.elements, args.layers, args.dir, args.repeat)))
        return
    mb = args.elements * 4 / (1 << 20)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        print(f"{args.elements:,} fp32 weights ({mb:.0f} MiB) in {args.layers} layers, best of {args.repeat}")
        print(f"{'case':14} {'seconds':>8} {'peak RSS +MiB':>14} {'x weights':>10}")
        for name in ("payloads", "protobuf API"):
            cmd = [sys.executable, __file__, "--case", name, "--elements", str(args.elements),
                   "--layers", str(args.layers), "--repeat", str(args.repeat), "--dir", tmp]
            proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
            if proc.returncode:
                print(f"{name:14} FAILED\n{proc.stderr}")
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            print(f"{name:14} {r['seconds']:8.3f} {r['rss_growth_mb']:14.1f} {r['rss_growth_mb'] / mb:10.2f}")


if __name__ == "__main__":
    main()
