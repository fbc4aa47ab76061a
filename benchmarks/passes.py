"""Benchmark: the default pass pipeline on synthetic programs of 10k, 30k and 100k ops; time per op
must stay flat (the passes are linear: worklists, use-lists, one rebuild per edited block).

The pipeline is the default one plus the benchmark's rule load (benchmarks/rule_load.py: dummy
rewrite passes whose rules never fire, standing in for the rule sets other branches add), unless
``--no-load``. Three shapes, all full of work for every pass:
- chain: x -> [mul by 1, add 0, reshape to the same shape, relu, reshape to [-1] and back] repeated:
  each unit gives canonicalize 4 rewrites (mul_one, add_zero, reshape_same_shape, reshape_chain)
  and its constants are duplicates of the previous unit's (cse);
- wide: 1 input feeding N/4 independent branches relu(x * c + 0), summed pairwise by a tree of adds:
  the branches are identical two by two (cse merges them, then the adds above them), and every
  branch has an add 0 (canonicalize);
- nested: the chain's units inside ``cond`` branches (10 units per branch, each cond reading the
  previous one's result), so every pass works in nested blocks as much as at the top level;
- units: the conv-bn-relu / linear-gelu units of benchmarks/passes_vs_coremltools.py (the program
  coremltools runs there): ops that survive today's pipeline, so the rule load sees them all.

Each (shape, size) runs in a fresh process; the program is built there first (not timed). Reported:
ops before/after (other than const), the pipeline's wall time and the process's CPU time (the
machine may be shared: CPU time is what to compare across sizes), microseconds per op (ops and
constants) and per op other than const, per pass too (wall).

    python benchmarks/passes.py [--sizes 10000 30000 100000] [--shapes chain wide nested] [--no-load]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def chain(n_ops: int):
    import numpy as np

    from converter.ir.builder import new_program
    from converter.ir.types import tensor

    units = max(1, n_ops // 12)  # 6 ops and 6 consts per unit

    def body(b, x):
        for _ in range(units):
            y = b.mul(x=x, y=np.float32(1))
            y = b.add(x=y, y=np.float32(0))
            y = b.reshape(x=y, shape=np.array([4, 8], np.int32))
            y = b.relu(x=y)
            y = b.reshape(x=b.reshape(x=y, shape=np.array([-1], np.int32)), shape=np.array([4, 8], np.int32))
            x = y
        return [x]

    return new_program({"x": tensor("fp32", [4, 8])}, body)


def nested(n_ops: int):
    import numpy as np

    from converter.ir.builder import new_program
    from converter.ir.types import tensor

    per_branch = 10  # chain units per cond branch
    conds = max(1, n_ops // (2 * per_branch * 12 + 4))

    def units(b, x, k):
        for _ in range(k):
            y = b.mul(x=x, y=np.float32(1))
            y = b.add(x=y, y=np.float32(0))
            y = b.reshape(x=y, shape=np.array([4, 8], np.int32))
            y = b.relu(x=y)
            x = b.reshape(x=b.reshape(x=y, shape=np.array([-1], np.int32)), shape=np.array([4, 8], np.int32))
        return x

    def body(b, x, p):
        for _ in range(conds):
            (x,) = b.cond(p, lambda t, x=x: [units(t, x, per_branch)],
                          lambda f, x=x: [units(f, f.mul(x=x, y=np.float32(-1)), per_branch)])
        return [x]

    return new_program({"x": tensor("fp32", [4, 8]), "p": tensor("bool", [])}, body)


def wide(n_ops: int):
    import numpy as np

    from converter.ir.builder import new_program
    from converter.ir.types import tensor

    branches = max(2, n_ops // 7)  # 3 ops, 2 consts and about one add of the tree per branch

    def body(b, x):
        outs = []
        for i in range(branches):
            c = np.full((8,), 1.0 + (i // 2), np.float32)  # branches 2k and 2k+1 are the same
            outs.append(b.relu(x=b.add(x=b.mul(x=x, y=c), y=np.float32(0))))
        while len(outs) > 1:
            outs = [b.add(x=outs[i], y=outs[i + 1]) if i + 1 < len(outs) else outs[i] for i in range(0, len(outs), 2)]
        return outs

    return new_program({"x": tensor("fp32", [8])}, body)


def units(n_ops: int):
    from passes_vs_coremltools import synthetic_program

    return synthetic_program(n_ops)


SHAPES = {"chain": chain, "wide": wide, "nested": nested, "units": units}


def task(shape: str, n: int, load: bool) -> dict:
    from rule_load import loaded_pipeline

    import converter
    from converter.passes.base import count_ops

    t = time.perf_counter()
    prog = SHAPES[shape](n)
    build_s = time.perf_counter() - t
    ops, consts = count_ops(prog)
    converter.optimize(converter.ir.core.Program())  # the pass modules imported before the timing
    cpu = time.process_time()
    stats = converter.optimize(prog, loaded_pipeline() if load else "default")
    cpu = time.process_time() - cpu
    total = ops + consts
    per_pass: dict[str, float] = {}
    for p in stats.passes:
        per_pass[p.name] = per_pass.get(p.name, 0.0) + p.seconds
    return {"shape": shape, "ops": ops, "consts": consts, "ops_after": stats.passes[-1].ops_after,
            "consts_after": stats.passes[-1].consts_after, "build_s": build_s, "pipeline_s": stats.seconds,
            "cpu_s": cpu, "us_per_op": 1e6 * stats.seconds / total, "cpu_us_per_op": 1e6 * cpu / total,
            "cpu_us_per_nonconst_op": 1e6 * cpu / ops, "rounds": stats.iterations,
            "rewrites": stats.rewrites(),
            "per_pass_us_per_op": {k: 1e6 * v / total for k, v in per_pass.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 30_000, 100_000])
    ap.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    ap.add_argument("--no-load", action="store_true", help="the default pipeline alone, without the dummy rules")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--task", nargs=2, metavar=("SHAPE", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.task:
        print(json.dumps(task(args.task[0], int(args.task[1]), not args.no_load)))
        return
    from rule_load import RULE_PASSES, rule_count

    print("pipeline: default" + ("" if args.no_load else
                                 f" + {RULE_PASSES} dummy rewrite passes, {rule_count()} rules that never fire"))
    results = []
    print(f"{'shape':<6} {'ops+consts':>11} {'after':>13} {'wall s':>7} {'cpu s':>7} {'cpu us/op':>9} "
          f"{'(non-const)':>11}  per pass (wall us/op)")
    for shape in args.shapes:
        for n in args.sizes:
            cmd = [sys.executable, __file__, "--task", shape, str(n)] + (["--no-load"] if args.no_load else [])
            out = subprocess.run(cmd, capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            results.append(r)
            passes = ", ".join(f"{k} {v:.1f}" for k, v in r["per_pass_us_per_op"].items())
            print(f"{shape:<6} {r['ops'] + r['consts']:>11} {r['ops_after']:>6}+{r['consts_after']:<6} "
                  f"{r['pipeline_s']:>7.2f} {r['cpu_s']:>7.2f} {r['cpu_us_per_op']:>9.1f} "
                  f"{r['cpu_us_per_nonconst_op']:>11.1f}  {passes}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
