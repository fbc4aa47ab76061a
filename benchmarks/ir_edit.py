"""Benchmark: the cost of one IR edit (insert, remove, replace an op at a random position) as the
block grows. Each edit creates its own Builder, as a rewrite pass does, so the measure includes
naming the new op. Time per edit should stay flat from 10k to 100k ops.

    python benchmarks/ir_edit.py [--sizes 10000 30000 100000] [--edits 3000] [--seed 0]

Uses only the IR's public API (Builder(block, insert_before=op), Block.remove_op,
Value.replace_all_uses_with), so it also runs against older checkouts for comparison
(PYTHONPATH=/path/to/checkout).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from converter.ir.builder import Builder, new_program  # noqa: E402
from converter.ir.types import tensor  # noqa: E402
from converter.ir.verify import verify  # noqa: E402


def chain(n: int):
    """x -> relu -> relu -> ... (n ops) in one block."""

    def body(b, x):
        for i in range(n):
            x = b.relu(x=x, name=f"op{i}")
        return [x]

    return new_program({"x": tensor("fp32", [4])}, body)


def edit(block, ops: list, rng: random.Random, kind: str) -> None:
    """One edit around a random live op of the chain; ``ops`` holds candidates (stale ones skipped)."""
    while True:
        i = rng.randrange(len(ops))
        op = ops[i]
        if op.block is block:
            break
        ops[i] = ops[-1]
        ops.pop()
    src = op.inputs["x"]
    if kind == "insert":  # a new op between op and its input
        new = Builder(block, insert_before=op).sigmoid(x=src, name="ins")
        op.set_input("x", new)
        ops.append(new.producer)
    elif kind == "remove":  # bypass op and drop it
        op.outputs[0].replace_all_uses_with(src)
        block.remove_op(op)
    else:  # replace op by another
        new = Builder(block, insert_before=op).tanh(x=src, name=op.name)
        op.outputs[0].replace_all_uses_with(new)
        block.remove_op(op)
        ops.append(new.producer)


def measure(n: int, edits: int, seed: int) -> dict:
    t0 = time.perf_counter()
    prog = chain(n)
    build = time.perf_counter() - t0
    block = prog.main.block
    ops = list(block.ops)
    rng = random.Random(seed)
    kinds = [rng.choice(["insert", "remove", "replace"]) for _ in range(edits)]
    t0 = time.perf_counter()
    for kind in kinds:
        edit(block, ops, rng, kind)
    spent = time.perf_counter() - t0
    verify(prog, check_types=False)
    return {"ops": n, "build_us_per_op": build / n * 1e6, "edits": edits, "us_per_edit": spent / edits * 1e6,
            "final_ops": len(block.ops)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 30_000, 100_000])
    ap.add_argument("--edits", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(f"{'ops':>8} {'build us/op':>12} {'edits':>6} {'us/edit':>9}")
    for n in args.sizes:
        r = measure(n, args.edits, args.seed)
        print(f"{r['ops']:>8} {r['build_us_per_op']:>12.1f} {r['edits']:>6} {r['us_per_edit']:>9.1f}")


if __name__ == "__main__":
    main()
