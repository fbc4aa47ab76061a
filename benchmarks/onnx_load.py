"""Loading an ONNX model: time and peak memory of `load_onnx` for weights inline and external.

    python benchmarks/onnx_load.py [--layers 40] [--channels 256] [--dir /tmp]

Writes a stack of 3x3 convolutions (``layers`` x ``channels``^2 x 9 fp32 weights) as one .onnx
file with the weights inline, and again with them in an external data file, then loads each in a
fresh subprocess and reports wall time and the growth of resident memory while the program is
held (Linux /proc; weights are views of the mapped file: they cost nothing until read).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_MEASURE = """
import os, sys, time
sys.path.insert(0, {repo!r})
from converter.frontends.onnx import load_onnx
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6
before = rss()
t = time.perf_counter()
prog = load_onnx({path!r})
dt = time.perf_counter() - t
print(dt, rss() - before)
"""


def write_models(folder: Path, layers: int, channels: int) -> tuple[Path, Path, int]:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(layers):
        inits.append(numpy_helper.from_array(rng.random((channels, channels, 3, 3), np.float32), f"w{i}"))
        nodes.append(helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
        prev = f"r{i}"
    graph = helper.make_graph(nodes, "stack", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                             ["N", channels, 16, 16])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    inline, external = folder / "inline.onnx", folder / "external.onnx"
    onnx.save(model, inline)
    onnx.save_model(model, external, save_as_external_data=True, location="external.onnx.data")
    return inline, external, layers * channels * channels * 9 * 4


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=40)
    ap.add_argument("--channels", type=int, default=256)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        inline, external, nbytes = write_models(Path(tmp), args.layers, args.channels)
        print(f"{args.layers} conv layers, {nbytes / 1e6:.1f} MB of fp32 weights")
        for label, path in (("inline", inline), ("external data", external)):
            out = subprocess.run([sys.executable, "-c", _MEASURE.format(repo=str(REPO), path=str(path))],
                                 check=True, capture_output=True, text=True).stdout.split()
            print(f"  {label:<14} load {float(out[0]):6.2f} s   RSS growth {float(out[1]):7.1f} MB")


if __name__ == "__main__":
    main()
