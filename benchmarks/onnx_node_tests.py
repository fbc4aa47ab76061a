"""ONNX's operator test suite through ONNX -> IR -> interpreter: pass/fail per operator.

    python benchmarks/onnx_node_tests.py [--failures] [-k SUBSTRING] [--write-passing]

Prints one line per op type (cases containing it: pass / fail / error / unsupported), the op
types the frontend does not support with the reason given, the totals, and the time taken.
``--write-passing`` rewrites tests/onnx_frontend/passing_cases.txt (the list the test pins).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.onnx_frontend.node_suite import PASSING_LIST, Summary, all_cases, run_case  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--failures", action="store_true", help="print every non-passing case with its reason")
    ap.add_argument("-k", default="", help="only cases whose name contains this")
    ap.add_argument("--via-mil", action="store_true", help="ONNX -> IR -> .mlpackage -> IR -> interpreter")
    ap.add_argument("--write-passing", action="store_true", help=f"rewrite {PASSING_LIST.relative_to(REPO)}")
    args = ap.parse_args()
    t0 = time.perf_counter()
    cases = [c for c in all_cases() if args.k in c.name]
    t1 = time.perf_counter()
    results = [run_case(c, via_mil=args.via_mil) for c in cases]
    t2 = time.perf_counter()
    per_op: dict[str, Counter] = defaultdict(Counter)
    reasons: dict[str, Counter] = defaultdict(Counter)
    for r in results:
        for op in r.ops:
            per_op[op][r.status] += 1
        if r.status == "unsupported":
            for op in r.ops:
                if op in r.detail:
                    reasons[op][_reason(r.detail, op)] += 1
    print(f"{'op type':<32} {'cases':>5} {'pass':>5} {'fail':>5} {'error':>5} {'unsup':>5}")
    for op in sorted(per_op):
        c = per_op[op]
        print(f"{op:<32} {sum(c.values()):>5} {c['pass']:>5} {c['fail']:>5} {c['error']:>5} {c['unsupported']:>5}")
    print("\nunsupported op types (reason; cases):")
    from converter.frontends.onnx.registry import MAPPINGS

    for op in sorted(reasons):
        if op not in MAPPINGS:
            why, n = reasons[op].most_common(1)[0]
            print(f"  {op}: {why} ({sum(reasons[op].values())})")
    print("\nper family (cases using an op of the family whose ops are all supported: pass / cases):")
    from converter.frontends.onnx.registry import MAPPINGS as _M

    fam_of = {op: ms[0].family for op, ms in _M.items()}
    fams: dict[str, Counter] = defaultdict(Counter)
    for r in results:
        if r.supported:
            for fam in {fam_of[op] for op in r.ops if op in fam_of}:
                fams[fam][r.status] += 1
    for fam in sorted(fams):
        c = fams[fam]
        print(f"  {fam:<12} {c['pass']:>4} / {sum(c.values()):<4} ({100 * c['pass'] / max(sum(c.values()), 1):.1f}%)")
    if args.failures:
        print("\nnot passing:")
        for r in results:
            if r.status != "pass":
                print(f"  [{r.status}] {r.suite}/{r.name} ({', '.join(r.ops)}): {r.detail[:300]}")
    print("\n" + Summary(results).line())
    print(f"collect {t1 - t0:.1f} s, convert + run {t2 - t1:.1f} s ({len(results)} cases)")
    if args.write_passing and not args.via_mil:
        names = sorted(f"{r.suite}/{r.name}" for r in results if r.status == "pass")
        PASSING_LIST.write_text("\n".join(names) + "\n")
        print(f"wrote {len(names)} names to {PASSING_LIST}")


def _reason(detail: str, op: str) -> str:
    """The part of an UnsupportedError message about ``op``."""
    i = detail.find(f"{op} (")
    if i < 0:
        return detail[:160]
    j = detail.find("; nodes", i)
    return detail[i + len(op) + 2: j if j > 0 else i + 160]


if __name__ == "__main__":
    main()
