"""Which tests could pin each (kind, subtype) pair that no oracle check pins yet.

Runs the NeuralNetwork tests once (``pytest -n 2``) with the coverage plugin recording, per test,
the (kind, subtype) pairs of the models it loads and the oracles it compared results against
(tests/nn_models/coverage.py), then prints, for every pair of tests/nn_models/oracle_uncovered.txt
grouped by lowering module:

- tests that load the pair and already record an oracle comparison: declaring
  ``@oracle_checks(pair)`` on one of them may be all it takes (check that its comparison really
  involves the pair's layer);
- tests that load the pair but record no oracle comparison: they compare against something else
  (our own interpreter, or numpy not passed through ``compare_with_oracle``).

Usage: python tools/oracle_map.py [--markdown OUT.md] [pytest paths ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def record(paths: list[str]) -> dict[str, dict[str, list[str]]]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "map"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "XDIST"))}
        env.update({"CONVERTER_ORACLE_MAP_OUT": str(out),
                    "PYTHONPATH": os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])})
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", "--no-header",
                        "--tb=no", *paths], cwd=REPO, env=env, capture_output=True, text=True)
        merged: dict[str, dict[str, list[str]]] = {}
        for part in Path(tmp).glob("map.*"):
            merged.update(json.loads(part.read_text()))
        return merged


def main(argv: list[str] | None = None) -> int:
    from converter.frontends.neuralnetwork.registry import load_all
    from tests.nn_models.test_coverage import read_uncovered

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--markdown", type=Path)
    ap.add_argument("paths", nargs="*", default=["tests/nn", "tests/nn_models"])
    args = ap.parse_args(argv)
    tests = record(args.paths)
    lowerings = load_all()
    with_oracle: dict[str, list[str]] = defaultdict(list)
    without: dict[str, list[str]] = defaultdict(list)
    for test, rec in sorted(tests.items()):
        for pair in rec["pairs"]:
            (with_oracle if rec["oracles"] else without)[pair].append(test)
    by_module: dict[str, list[str]] = defaultdict(list)
    for pair in read_uncovered():
        by_module[lowerings[pair.split(".")[0]].__module__.rsplit(".", 1)[-1]].append(pair)
    lines = ["# Uncovered (kind, subtype) pairs and the tests that load them", ""]
    for module in sorted(by_module):
        lines += [f"## layers/{module}.py ({len(by_module[module])})", ""]
        for pair in by_module[module]:
            a, b = with_oracle.get(pair, []), without.get(pair, [])
            lines.append(f"- `{pair}`: {len(a)} test(s) with an oracle comparison, {len(b)} without")
            lines += [f"  - oracle: `{t}`" for t in a[:3]] + [f"  - no oracle: `{t}`" for t in b[:2]]
        lines.append("")
    text = "\n".join(lines)
    if args.markdown:
        args.markdown.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
