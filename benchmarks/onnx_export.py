"""Benchmark: the ONNX backend's cost per op and per weight byte.

- chains of N elementwise/activation ops (10k, 30k, 100k): `program_to_onnx` without the checker
  (lowering alone), the ONNX checker's full check, and the serialization, each in microseconds per op;
- a ResNet-style program with ~`--weights-mb` MB of fp32 conv weights: `save_onnx` next to a plain
  copy of the same weight bytes, and with external data (``external_threshold=0``).

    python benchmarks/onnx_export.py [--sizes 10000,30000,100000] [--weights-mb 80]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import onnx  # noqa: E402

from converter.backends.onnx import program_to_onnx, save_onnx  # noqa: E402
from converter.ir.builder import new_program  # noqa: E402
from converter.ir.types import TensorType, fp32  # noqa: E402


def chain(n: int):  # noqa: ANN201
    def body(b, x):  # noqa: ANN001, ANN202
        for i in range(n):
            x = b.relu(x=x) if i % 3 == 0 else b.mul(x=x, y=np.float32(0.5)) if i % 3 == 1 else b.add(x=x, y=x)
        return x
    return new_program([("x", TensorType(fp32, (1, 64)))], body)


def resnet(weights_mb: int):  # noqa: ANN201
    channels = 128
    per_block = channels * channels * 9 * 4
    blocks = max(1, weights_mb * (1 << 20) // per_block)
    rng = np.random.default_rng(0)

    def body(b, x):  # noqa: ANN001, ANN202
        h = b.conv(x=x, weight=rng.standard_normal((channels, 3, 3, 3)).astype(np.float32), pad_type="same")
        for _ in range(blocks):
            w = (rng.standard_normal((channels, channels, 3, 3)) * 0.02).astype(np.float32)
            h = b.relu(x=b.add(x=h, y=b.conv(x=h, weight=w, pad_type="same")))
        return b.reduce_mean(x=h, axes=[2, 3])
    return new_program([("image", TensorType(fp32, (1, 3, 32, 32)))], body), blocks * per_block


def timed(fn):  # noqa: ANN001, ANN201
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,30000,100000")
    ap.add_argument("--weights-mb", type=int, default=80)
    args = ap.parse_args()
    print("ops      lower us/op  check us/op  serialize us/op")
    for n in (int(s) for s in args.sizes.split(",")):
        prog = chain(n)
        model, t_lower = timed(lambda prog=prog: program_to_onnx(prog, check=False))
        _, t_check = timed(lambda model=model: onnx.checker.check_model(model, full_check=True))
        _, t_ser = timed(model.SerializeToString)
        print(f"{n:<8} {t_lower / n * 1e6:11.1f}  {t_check / n * 1e6:11.1f}  {t_ser / n * 1e6:15.2f}")
    prog, nbytes = resnet(args.weights_mb)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        blob = d / "weights.bin"
        blob.write_bytes(np.zeros(nbytes, np.uint8).tobytes())
        _, t_copy = timed(lambda: shutil.copyfile(blob, d / "copy.bin"))
        _, t_save = timed(lambda: save_onnx(prog, d / "m.onnx"))
        _, t_ext = timed(lambda: save_onnx(prog, d / "e.onnx", external_threshold=0))
    print(f"weights {nbytes / 1e6:.0f} MB: save_onnx {t_save:.2f} s ({t_save / t_copy:.1f}x a copy of {t_copy:.3f} s), "
          f"with external data {t_ext:.2f} s")


if __name__ == "__main__":
    main()
