"""Benchmark: migrate a NeuralNetwork .mlmodel with ~20M fp32 weights to an .mlpackage
(``converter.convert``, which runs the default pass pipeline), next to a plain copy of the same
weight bytes. The phase breakdown (read, load, optimize, save) prints the ops (other than const)
before and after the default pipeline.

The model is a ResNet-style stack (stem conv, then blocks of conv 3x3 + batch norm + ReLU + residual
add, global average pool): with coremltools installed, a MIL program built with coremltools' MIL
builder and converted by ``ct.convert(..., convert_to="neuralnetwork")`` (weights as ``floatValue``,
as coremltools writes them); otherwise the same network written with our protobuf modules. Each
measurement runs in a fresh subprocess; peak memory is that process's VmHWM (ru_maxrss would be
inherited across exec), reported in total and as the increase during the measured work.

    python benchmarks/nn_to_mil.py [--blocks 50] [--channels 224] [--profile]

``--profile`` adds a cProfile of the conversion (top functions by cumulative and own time) and the
peak memory of each phase (read, load, save).
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

from memory import peak_mb, reset_peak, rss_mb  # noqa: E402

# -- the model ---------------------------------------------------------------------------------


def build_with_coremltools(blocks: int, channels: int, path: Path) -> str:
    import logging
    import warnings

    import numpy as np

    warnings.simplefilter("ignore")
    logging.getLogger("coremltools").setLevel(logging.ERROR)
    import coremltools as ct
    from coremltools.converters.mil import Builder as mb

    rng = np.random.default_rng(0)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 3, 32, 32))])
    def prog(image):
        h = mb.conv(x=image, weight=(rng.standard_normal((channels, 3, 3, 3)) * 0.1).astype(np.float32),
                    pad_type="same", name="stem")
        for i in range(blocks):
            w = (rng.standard_normal((channels, channels, 3, 3)) * 0.02).astype(np.float32)
            y = mb.conv(x=h, weight=w, pad_type="same", name=f"block{i}_conv")
            y = mb.batch_norm(x=y, mean=(rng.standard_normal(channels) * 0.1).astype(np.float32),
                              variance=(rng.random(channels) + 0.5).astype(np.float32),
                              gamma=np.ones(channels, np.float32), beta=np.zeros(channels, np.float32),
                              name=f"block{i}_bn")
            y = mb.relu(x=y, name=f"block{i}_relu")
            h = mb.add(x=h, y=y, name=f"block{i}_residual")
        return mb.reduce_mean(x=h, axes=[2, 3], keep_dims=False, name="pool")

    model = ct.convert(prog, convert_to="neuralnetwork", skip_model_load=True)
    model.save(str(path))
    return f"coremltools {ct.__version__} (MIL builder -> ct.convert(convert_to='neuralnetwork'))"


def build_with_protos(blocks: int, channels: int, path: Path) -> str:
    import numpy as np

    from converter.formats.proto import Model_pb2, NeuralNetwork_pb2

    rng = np.random.default_rng(0)
    m = Model_pb2.Model(specificationVersion=4)
    x = m.description.input.add(name="image")
    x.type.multiArrayType.shape.extend([1, 3, 32, 32])
    x.type.multiArrayType.dataType = x.type.multiArrayType.FLOAT32
    m.description.output.add(name="pool").type.multiArrayType.dataType = x.type.multiArrayType.FLOAT32
    nn = m.neuralNetwork
    nn.arrayInputShapeMapping = NeuralNetwork_pb2.EXACT_ARRAY_MAPPING

    def conv(name: str, inp: str, cin: int) -> str:
        c = nn.layers.add(name=name, input=[inp], output=[name]).convolution
        c.outputChannels, c.kernelChannels = channels, cin
        c.kernelSize.extend([3, 3])
        c.stride.extend([1, 1])
        c.same.SetInParent()
        c.weights.floatValue.extend((rng.standard_normal(channels * cin * 9) * 0.02).astype(np.float32))
        return name

    h = conv("stem", "image", 3)
    for i in range(blocks):
        y = conv(f"block{i}_conv", h, channels)
        bn = nn.layers.add(name=f"block{i}_bn", input=[y], output=[f"block{i}_bn"]).batchnorm
        bn.channels, bn.epsilon = channels, 1e-5
        bn.gamma.floatValue.extend(np.ones(channels, np.float32))
        bn.beta.floatValue.extend(np.zeros(channels, np.float32))
        bn.mean.floatValue.extend((rng.standard_normal(channels) * 0.1).astype(np.float32))
        bn.variance.floatValue.extend((rng.random(channels) + 0.5).astype(np.float32))
        nn.layers.add(name=f"block{i}_relu", input=[f"block{i}_bn"], output=[f"block{i}_relu"]).activation.ReLU \
            .SetInParent()
        nn.layers.add(name=f"block{i}_residual", input=[h, f"block{i}_relu"],
                      output=[f"block{i}_residual"]).addBroadcastable.SetInParent()
        h = f"block{i}_residual"
    r = nn.layers.add(name="pool", input=[h], output=["pool"]).reduceMean
    r.axes.extend([2, 3])
    path.write_bytes(m.SerializeToString())
    return "converter's protobuf modules"


def weight_count(path: Path) -> int:
    from converter.formats.proto import Model_pb2

    nn = Model_pb2.Model.FromString(path.read_bytes()).neuralNetwork
    total = 0
    for layer in nn.layers:
        kind = layer.WhichOneof("layer")
        if kind == "convolution":
            total += len(layer.convolution.weights.floatValue) + len(layer.convolution.bias.floatValue)
        elif kind == "batchnorm":
            total += 4 * layer.batchnorm.channels
    return total


# -- one measurement (in a fresh process) ------------------------------------------------------


def task(name: str, work: Path, profile: bool) -> dict:
    t_import = time.perf_counter()
    import converter
    from converter.frontends.neuralnetwork.registry import load_all

    load_all()  # the layer lowerings: imported once per process, not part of the measurement
    converter.optimize(converter.ir.core.Program())  # the pass modules likewise (an empty program: no work)
    import_seconds = time.perf_counter() - t_import
    src = work / "model.mlmodel"
    reset_peak()
    start_rss = rss_mb()
    t0 = time.perf_counter()
    phases: dict[str, dict[str, float]] = {}
    if name == "copy_weights":
        shutil.copyfile(work / "weights.bin", work / "weights_copy.bin")
    elif name == "convert":
        converter.convert(src, out=work / "out.mlpackage")
    elif name == "phases":
        from converter.formats.model_file import read_model_file
        from converter.frontends.neuralnetwork import load_neural_network
        from converter.passes.base import count_ops

        for phase in ("read", "load", "optimize", "save"):
            reset_peak()
            t = time.perf_counter()
            if phase == "read":
                mf = read_model_file(src)
            elif phase == "load":
                prog = load_neural_network(mf)
            elif phase == "optimize":
                before = count_ops(prog)
                stats = converter.optimize(prog, "default")
            else:
                converter.save(prog, work / "phases.mlpackage")
            phases[phase] = {"seconds": time.perf_counter() - t, "peak_mb": peak_mb(), "rss_after_mb": rss_mb()}
            if phase == "optimize":
                after = count_ops(prog)
                phases[phase].update(ops_before=before[0], ops_after=after[0], consts_before=before[1],
                                     consts_after=after[1], rewrites=stats.rewrites())
    elif name == "profile":
        import cProfile
        import io
        import pstats

        pr = cProfile.Profile()
        pr.enable()
        converter.convert(src, out=work / "profiled.mlpackage")
        pr.disable()
        out = io.StringIO()
        stats = pstats.Stats(pr, stream=out)
        stats.sort_stats("cumulative").print_stats(25)
        stats.sort_stats("tottime").print_stats(15)
        return {"task": name, "profile": out.getvalue()}
    else:
        raise ValueError(name)
    seconds = time.perf_counter() - t0
    return {"task": name, "seconds": seconds, "peak_mb": peak_mb(), "start_rss_mb": start_rss, "phases": phases,
            "import_seconds": import_seconds}


def _run(name: str, work: Path, profile: bool) -> dict:
    cmd = [sys.executable, __file__, "--task", name, "--work", str(work)] + (["--profile"] if profile else [])
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{name} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=int, default=50)
    ap.add_argument("--channels", type=int, default=224)
    ap.add_argument("--profile", action="store_true", help="also profile the conversion (time and phases)")
    ap.add_argument("--no-coremltools", action="store_true", help="build the model with our protobuf modules")
    ap.add_argument("--task", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.task:
        print(json.dumps(task(args.task, Path(args.work), args.profile)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        src = work / "model.mlmodel"
        try:
            if args.no_coremltools:
                raise ImportError
            producer = build_with_coremltools(args.blocks, args.channels, src)
        except ImportError:
            producer = build_with_protos(args.blocks, args.channels, src)
        n = weight_count(src)
        wbytes = 4 * n
        with open(work / "weights.bin", "wb") as f:  # the same number of bytes, for the copy baseline
            f.write(os.urandom(wbytes))
        print(f"model: {args.blocks} conv+batchnorm+relu+add blocks, {args.channels} channels, {n / 1e6:.1f}M fp32 "
              f"weights ({wbytes / 1e6:.1f} MB), .mlmodel {src.stat().st_size / 1e6:.1f} MB, built with {producer}")
        results = {name: _run(name, work, False) for name in ("copy_weights", "convert", "phases")}
        for name in ("copy_weights", "convert"):
            r = results[name]
            grow = r["peak_mb"] - r["start_rss_mb"]
            print(f"{name:13s} {r['seconds']:7.3f} s   peak RSS {r['peak_mb']:7.1f} MB ({r['peak_mb'] * 2**20 / wbytes:.2f}x "
                  f"the weight bytes); +{grow:.1f} MB during the task ({grow * 2**20 / wbytes:.2f}x)")
        conv = results["convert"]
        print(f"convert / copy: {conv['seconds'] / results['copy_weights']['seconds']:.1f}x the time "
              f"(not counted: importing converter and its layer lowerings, {conv['import_seconds']:.2f} s once "
              f"per process)")
        for phase, r in results["phases"]["phases"].items():
            print(f"  phase {phase:8s} {r['seconds']:7.3f} s   peak RSS {r['peak_mb']:7.1f} MB, "
                  f"RSS after {r['rss_after_mb']:7.1f} MB")
        opt = results["phases"]["phases"]["optimize"]
        rewrites = ", ".join(f"{k} {v}" for k, v in sorted(opt["rewrites"].items())) or "none"
        print(f"default pipeline: ops (other than const) {opt['ops_before']} -> {opt['ops_after']}, const ops "
              f"{opt['consts_before']} -> {opt['consts_after']}; rewrites: {rewrites}")
        verdict = "meets" if conv["seconds"] < 2.0 and conv["peak_mb"] * 2**20 < 2 * wbytes else "misses"
        print(f"target (< 2 s, peak RSS < 2x the weight bytes): {verdict}")
        if args.profile:
            print(_run("profile", work, True)["profile"])


if __name__ == "__main__":
    main()
