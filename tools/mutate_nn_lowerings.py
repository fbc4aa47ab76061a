"""Mutation check of the NeuralNetwork layer lowerings: swapping any two parameters of a layer must
make a test fail.

Each mutant (tools/nn_mutants.py) is what a lowering computes when it reads one parameter where it
should read another (two sibling fields of one proto type, two elements of a short repeated field,
the first two inputs of a non-commutative layer). Two phases, both in long-lived pytest workers
(tools/nn_mutation_plugin.py), split over ``--workers`` processes:

1. record: every test of ``--tests`` runs once; the plugin records, per test, the layers the
   lowerings were handed and which mutants change them. A mutant that changes no recorded layer is
   *equivalent* for these tests (counted, not run); tests that fail unmutated are not used.
2. mutate: each remaining mutant runs the tests in which it changes a layer, fastest first, until
   one fails (*killed*); a mutant no test kills is a *survivor*.

A survivor listed in ``tools/nn_mutation_equivalents.txt`` (``<mutant id>  # why it cannot change a
result``) is reported as accepted, not as a survivor. Exit status 1 when there are survivors.

Usage: python tools/mutate_nn_lowerings.py [--kinds K,K] [--tests PATH ...] [--workers 2]
           [--json OUT.json] [--markdown OUT.md] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools.nn_mutants import COMMUTATIVE  # noqa: E402

DEFAULT_TESTS = ("tests/nn", "tests/nn_models")
# The tool's own tests run the tool: never inside it (the full check would start itself again).
OWN_TESTS = "tests/nn_models/test_mutation_check.py"
EQUIVALENTS = REPO / "tools" / "nn_mutation_equivalents.txt"


def read_equivalents(path: Path = EQUIVALENTS) -> dict[str, str]:
    """{mutant id: reason} of survivors accepted as equivalent."""
    out: dict[str, str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                mid, _, why = line.partition("  #")
                out[mid.strip()] = why.strip()
    return out


# -- workers ---------------------------------------------------------------------------------------


def _run_workers(mode: str, workdir: Path, tests: list[str], workers: int, timeout: float,
                 pytest_args: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "XDIST"))}
    env.update({"CONVERTER_MUTATION": "1", "NN_MUTATION_DIR": str(workdir), "NN_MUTATION_MODE": mode,
                "NN_MUTATION_TIMEOUT": str(timeout), "PYTHONHASHSEED": "0",
                "PYTHONPATH": os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])})
    procs = []
    for w in range(workers):
        log = open(workdir / f"worker-{mode}-{w}.log", "w")
        cmd = [sys.executable, "-m", "pytest", "-p", "tools.nn_mutation_plugin", "-p", "no:cacheprovider",
               "-p", "no:xdist", "-q", "--no-header", "-W", "ignore", f"--basetemp={workdir / f'tmp-{mode}-{w}'}",
               f"--ignore={OWN_TESTS}", *pytest_args, *tests]
        procs.append((subprocess.Popen(cmd, cwd=REPO, env={**env, "NN_MUTATION_WORKER": str(w)}, stdout=log,
                                       stderr=subprocess.STDOUT), log))
    for proc, log in procs:
        proc.wait()
        log.close()


def _results(workdir: Path, mode: str) -> list[dict[str, Any]]:
    out = []
    for path in sorted(workdir.glob(f"results-{mode}-*.jsonl")):
        out += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return out


def _check_workers(workdir: Path, mode: str, done: int, expected: int | None) -> None:
    if expected is not None and done >= expected:
        return
    logs = "".join(p.read_text()[-3000:] for p in sorted(workdir.glob(f"worker-{mode}-*.log")))
    if expected is None and done:
        return
    raise SystemExit(f"{mode} workers finished {done} of {expected if expected is not None else '?'} tasks; "
                     f"their output ends with:\n{logs}")


# -- the two phases --------------------------------------------------------------------------------


def record(workdir: Path, tests: list[str], workers: int, timeout: float, pytest_args: list[str]) -> list[dict]:
    _run_workers("record", workdir, tests, workers, timeout, pytest_args)
    rows = _results(workdir, "record")
    _check_workers(workdir, "record", len(rows), None)
    return rows


def plan(rows: list[dict], kinds: set[str] | None) -> tuple[dict[str, dict], dict[str, list[str]], dict[str, Any]]:
    """({mutant id: mutant json}, {mutant id: tests that see it, fastest first}, per-kind tallies)."""
    seconds = {r["test"]: r["seconds"] for r in rows}
    usable = {r["test"] for r in rows if r["passed"]}
    generated: dict[str, dict] = {}
    effective: dict[str, set[str]] = defaultdict(set)
    loaded_by: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        for k in r["kinds"]:
            loaded_by[k].add(r["test"])
        for mid, m in r["generated"].items():
            if kinds is None or m["kind"] in kinds:
                generated[mid] = m
        for mid in r["effective"]:
            if mid in generated and r["test"] in usable:
                effective[mid].add(r["test"])
    order = {mid: sorted(t, key=lambda n: (seconds[n], n)) for mid, t in effective.items()}
    tally: dict[str, Any] = {
        "loaded_by": {k: sorted(v) for k, v in loaded_by.items() if kinds is None or k in kinds},
        "failing_unmutated": sorted(r["test"] for r in rows if not r["passed"] and r["kinds"]),
    }
    return generated, order, tally


def mutate(workdir: Path, generated: dict[str, dict], order: dict[str, list[str]], tests: list[str],
           workers: int, timeout: float, pytest_args: list[str]) -> list[dict]:
    # the cheapest first test first: killed mutants cost little; interleaving kinds spreads the slow ones
    ids = sorted(order, key=lambda m: (generated[m]["kind"], m))
    tasks = [{"mutant": generated[m], "tests": order[m]} for m in ids]
    (workdir / "tasks.json").write_text(json.dumps(tasks))
    results: list[dict] = []
    for _ in range(3):  # a worker that died (a crash in native code) leaves tasks: start again
        _run_workers("mutate", workdir, tests, workers, timeout, pytest_args)
        results = _results(workdir, "mutate")
        claimed = {int(p.name[1:]) for p in (workdir / "claims").glob("m*")}
        if len(claimed) == len(tasks):
            break
    finished = {r["id"] for r in results}
    for t in tasks:  # claimed but never finished: the worker died running it
        m = t["mutant"]
        mid = _mutant_id(m)
        if mid not in finished:
            results.append({"id": mid, "status": "crashed", "ran": [], "why": "the worker process died"})
    return results


def _mutant_id(m: dict) -> str:
    from tools.nn_mutants import Mutant

    return Mutant.from_json(m).id


# -- report ----------------------------------------------------------------------------------------


def family_module(kind: str) -> str:
    from converter.frontends.neuralnetwork.registry import load_all

    lower = load_all().get(kind)
    return lower.__module__.rsplit(".", 1)[-1] if lower is not None else "(no lowering)"


def summarize(generated: dict[str, dict], order: dict[str, list[str]], results: list[dict],
              tally: dict[str, Any], seconds: dict[str, float], kinds: set[str] | None) -> dict[str, Any]:
    accepted = read_equivalents()
    by_id = {r["id"]: r for r in results}
    per_kind: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    survivors, accepted_rows = [], []
    for mid, m in generated.items():
        k = per_kind[m["kind"]]
        k["generated"] += 1
        if mid not in order:
            k["equivalent"] += 1
            continue
        r = by_id.get(mid, {"status": "not run"})
        status = r["status"]
        if status == "survived" and mid in accepted:
            status = "accepted"
            accepted_rows.append({"id": mid, "kind": m["kind"], "why": accepted[mid]})
        k[status] += 1
        if status == "survived":
            survivors.append({"id": mid, "kind": m["kind"], "module": family_module(m["kind"]),
                              "family": m["family"], "tests_run": r.get("ran", []),
                              "unusable": r.get("unusable", [])})
    totals: dict[str, int] = defaultdict(int)
    for k in per_kind.values():
        for key, n in k.items():
            totals[key] += n
    kinds_seen = set(tally["loaded_by"])
    no_mutants = sorted(kinds_seen - set(per_kind))
    return {
        "kinds": sorted(kinds) if kinds else "all",
        "kinds_without_tests": sorted((kinds or set()) - kinds_seen),
        "kinds_without_mutants": no_mutants,
        "tests_per_kind": {k: len(v) for k, v in sorted(tally["loaded_by"].items())},
        "totals": dict(totals),
        "per_kind": {k: dict(v) for k, v in sorted(per_kind.items())},
        "survivors": sorted(survivors, key=lambda s: (s["module"], s["kind"], s["id"])),
        "accepted_equivalent": accepted_rows,
        "killed": {r["id"]: {"by": r.get("by"), "why": r.get("why")} for r in results if r["status"] == "killed"},
        "crashed": [r["id"] for r in results if r["status"] == "crashed"],
        "failing_unmutated": tally["failing_unmutated"],
        "commutative_kinds": COMMUTATIVE,
        "seconds": seconds,
    }


def markdown(report: dict[str, Any]) -> str:
    t = report["totals"]
    s = report["seconds"]
    lines = [
        "# Mutation check of the NeuralNetwork layer lowerings", "",
        f"Kinds: {report['kinds'] if report['kinds'] == 'all' else ', '.join(report['kinds'])}", "",
        f"- mutants generated: {t.get('generated', 0)}",
        f"- equivalent (change no layer the tests load): {t.get('equivalent', 0)}",
        f"- run: {t.get('generated', 0) - t.get('equivalent', 0)}: killed {t.get('killed', 0)}, "
        f"survivors {t.get('survived', 0)}, accepted equivalent {t.get('accepted', 0)}, "
        f"crashed {t.get('crashed', 0)}",
        f"- time: record {s['record']:.0f} s, mutate {s['mutate']:.0f} s, total {s['total']:.0f} s", "",
    ]
    if report["kinds_without_tests"]:
        lines += [f"Kinds no test loads: {', '.join(report['kinds_without_tests'])}", ""]
    if report["kinds_without_mutants"]:
        lines += [f"Kinds the tests load whose layers have no two swappable parameters "
                  f"({len(report['kinds_without_mutants'])}): {', '.join(report['kinds_without_mutants'])}", ""]
    by_module: dict[str, list[dict]] = defaultdict(list)
    for sv in report["survivors"]:
        by_module[sv["module"]].append(sv)
    lines += ["## Survivors by layer family module", ""]
    if not by_module:
        lines.append("None.")
    for module in sorted(by_module):
        rows = by_module[module]
        lines += [f"### layers/{module}.py ({len(rows)})", ""]
        for sv in rows:
            ran = sv["tests_run"]
            shown = ", ".join(f"`{n}`" for n in ran[:3]) + (f" (+{len(ran) - 3} more)" if len(ran) > 3 else "")
            lines.append(f"- `{sv['id']}` ({sv['family']}): {len(ran)} test(s) ran: {shown}")
        lines.append("")
    lines += ["## Per kind", "",
              "| kind | tests loading it | generated | equivalent | killed | survived | accepted | crashed |",
              "|---|---|---|---|---|---|---|---|"]
    for kind, k in report["per_kind"].items():
        lines.append(f"| {kind} | {report['tests_per_kind'].get(kind, 0)} | {k.get('generated', 0)} | "
                     f"{k.get('equivalent', 0)} | {k.get('killed', 0)} | {k.get('survived', 0)} | "
                     f"{k.get('accepted', 0)} | {k.get('crashed', 0)} |")
    if report["failing_unmutated"]:
        lines += ["", "Tests that failed unmutated (not used): " + ", ".join(report["failing_unmutated"])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kinds", help="comma-separated layer kinds to mutate (default: all)")
    ap.add_argument("--tests", nargs="+", default=list(DEFAULT_TESTS), help="test paths to run (pytest arguments)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds one test may run")
    ap.add_argument("--json", type=Path, help="write the report as JSON here")
    ap.add_argument("--markdown", type=Path, help="write the report as markdown here")
    ap.add_argument("--keep", type=Path, help="work in this directory and keep it (default: a temporary one)")
    ap.add_argument("--pytest-arg", action="append", default=[], help="extra pytest argument (e.g. -k EXPR)")
    args = ap.parse_args(argv)
    kinds = {k.strip() for k in args.kinds.split(",") if k.strip()} if args.kinds else None
    if kinds:
        from converter.frontends.neuralnetwork.registry import load_all

        unknown = sorted(kinds - set(load_all()))
        if unknown:
            ap.error(f"no lowering for kinds {unknown}")
    with tempfile.TemporaryDirectory(prefix="nn_mutation_") as tmp:
        workdir = args.keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        rows = record(workdir, args.tests, args.workers, args.timeout, args.pytest_arg)
        t_record = time.perf_counter() - start
        generated, order, tally = plan(rows, kinds)
        results = mutate(workdir, generated, order, args.tests, args.workers, args.timeout, args.pytest_arg) \
            if order else []
        total = time.perf_counter() - start
        report = summarize(generated, order, results, tally,
                           {"record": t_record, "mutate": total - t_record, "total": total}, kinds)
    text = markdown(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    if args.markdown:
        args.markdown.write_text(text)
    print(text if len(text) < 20000 else text[:20000] + "\n... (see --markdown)")
    return 1 if report["survivors"] or report["crashed"] else 0


if __name__ == "__main__":
    sys.exit(main())
