"""Issue 8, "Done when": a test per rule shows it firing and at least one near miss it must refuse,
with the reason. This runs the rule tests (every test module of tests/passes that uses
tests/passes/helpers.py) in a subprocess with CONVERTER_RULE_EVIDENCE set, so that every
``assert_rewrites`` records the rules it saw fire and every ``assert_refuses`` the rules whose
refusal held the expected reason, and requires both for every rule of every registered pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from converter.passes.pipelines import all_rules

HERE = Path(__file__).parent


def _rule_test_modules() -> list[str]:
    me = Path(__file__).name
    return sorted(str(p) for p in HERE.glob("test_*.py")
                  if p.name != me and ("assert_rewrites" in p.read_text() or "assert_refuses" in p.read_text()))


@pytest.mark.slow  # reruns the rule tests (~1 min of CPU)
def test_every_rule_is_shown_firing_and_refusing(tmp_path: Path) -> None:
    evidence = tmp_path / "evidence.jsonl"
    env = dict(os.environ, CONVERTER_RULE_EVIDENCE=str(evidence))
    root = HERE.parent.parent
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                        "-x", *_rule_test_modules()], cwd=root, env=env, capture_output=True, text=True,
                       timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    seen: dict[str, set[str]] = {"fires": set(), "refuses": set()}
    for line in evidence.read_text().splitlines():
        record = json.loads(line)
        seen[record["kind"]].update(record["rules"])
    rules = set(all_rules())
    missing = {kind: sorted(rules - got) for kind, got in seen.items() if rules - got}
    assert not missing, f"rules never shown (by assert_rewrites / assert_refuses): {missing}"
