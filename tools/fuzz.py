"""Fuzz the model readers with seeded mutants of the shared models (tests/hostile/mutate.py).

Every mutant goes through what ``converter convert --check`` does (load, save, load the output, run
both on random inputs) in a child process limited to 10 s and 1 GiB (tests/hostile/harness.py). It
must end in success or a converter error; a crash (any other exception), a hang, a child that dies
or an error that says memory ran out is a finding, printed with its seed and mutations and, with
--save, written to a folder. Replay one with ``--replay SEED``.

    python tools/fuzz.py --seconds 1800 --start 100000          # a long run, on one core
    python tools/fuzz.py --replay 123456                        # one mutant again, verbosely
    python tools/fuzz.py --pool onnx --seconds 600              # mutants of onnx's own test models
    python tools/fuzz.py --pool exports --seconds 600           # ... of the shared models written as ONNX
    python tools/fuzz.py --inspect --seconds 600                # also `converter inspect` (text and --json)
"""

from __future__ import annotations

import argparse
import collections
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.hostile.harness import FUZZ_LOOP_LIMIT, FUZZ_TENSOR_BYTES, FUZZ_TIME_LIMIT, Harness, problems  # noqa: E402
from tests.hostile.mutate import exported_onnx_sources, make_mutant, onnx_sources, sources  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0, help="how long to run (default 60)")
    ap.add_argument("--count", type=int, default=None, help="stop after this many mutants")
    ap.add_argument("--start", type=int, default=0, help="first seed (seeds run in order)")
    ap.add_argument("--save", type=Path, default=None, help="write each finding's mutant into this folder")
    ap.add_argument("--replay", type=int, nargs="*", default=None, help="run just these seeds and show the result")
    ap.add_argument("--pool", choices=["shared", "onnx", "exports"], default="shared",
                    help="mutate the shared Core ML models (default), the ONNX models the onnx package ships, or "
                         "the shared models written as ONNX by our backend (exported first, into a temporary folder)")
    ap.add_argument("--inspect", action="store_true",
                    help="also run `converter inspect` and `inspect --json` on each mutant (exit 0 or one error line)")
    args = ap.parse_args()

    exports = tempfile.TemporaryDirectory(prefix="fuzz-exports-")
    pool = {"shared": sources, "onnx": onnx_sources,
            "exports": lambda: exported_onnx_sources(Path(exports.name))}[args.pool]()
    counts: collections.Counter[str] = collections.Counter()
    findings = []
    seeds = iter(args.replay) if args.replay is not None else iter(range(args.start, sys.maxsize))
    end = time.monotonic() + args.seconds
    with Harness() as h, tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        for n, seed in enumerate(seeds):
            if args.replay is None and (time.monotonic() > end or (args.count is not None and n >= args.count)):
                break
            m = make_mutant(seed, pool)
            folder = Path(tmp) / str(seed)
            folder.mkdir()
            path = m.write(folder)
            r = h.library(path, time_limit=FUZZ_TIME_LIMIT, loop_limit=FUZZ_LOOP_LIMIT,
                          tensor_limit=FUZZ_TENSOR_BYTES)
            key = r.outcome if r.outcome != "error" else f"error at {r.step}: {r.error_type}"
            counts[key] += 1
            results = [("convert --check", r)]
            if args.inspect:
                results += [(" ".join(cmd[:-1]), h.cli(*cmd, time_limit=FUZZ_TIME_LIMIT))
                            for cmd in (["inspect", path], ["inspect", "--json", path])]
                for what, ri in results[1:]:
                    counts[f"{what}: {ri.outcome}"] += 1
            if args.replay is not None:
                print(m.describe())
                for what, ri in results:
                    print("  ", what, ri.describe())
            wrong = [(what, ri) for what, ri in results if problems(ri)]
            if wrong:
                findings.append((m.describe(), [ri.describe() for _, ri in wrong]))
                for what, ri in wrong:
                    print(f"FINDING {m.describe()} ({what})\n    {'; '.join(problems(ri))}: {ri.describe()[:2000]}",
                          flush=True)
                if args.save is not None:
                    dst = args.save / str(seed)
                    dst.mkdir(parents=True, exist_ok=True)
                    m.write(dst)
            shutil.rmtree(folder, ignore_errors=True)
            if n % 1000 == 999:
                print(f"... {n + 1} mutants (seeds {args.start}..{seed}), {len(findings)} findings", flush=True)
    total = sum(v for k, v in counts.items() if not k.startswith("inspect"))  # one convert --check per mutant
    print(f"{total} mutants, {len(findings)} findings")
    for k, v in counts.most_common():
        print(f"  {v:7}  {k}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
