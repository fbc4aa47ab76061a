"""``converter convert FOLDER -o OUT`` runs on the migration engine (in this process, no journal):
each model's line is printed as soon as that model is done, before the next one is loaded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import converter.api
from converter.batch import convert_tree
from tests.conftest import REPO
from tests.migrate.helpers import CPM, GRU, MLP, SONGS, tree


def test_each_outcome_comes_before_the_next_model_is_loaded(tmp_path: Path, monkeypatch):
    src = tree(tmp_path / "src", {"a.mlmodel": GRU, "b.mlmodel": SONGS, "c.mlmodel": MLP})
    events: list[str] = []
    load = converter.api.load

    def recording_load(path):  # noqa: ANN001, ANN202
        events.append(f"load {Path(path).name}")
        return load(path)

    monkeypatch.setattr(converter.api, "load", recording_load)
    outcomes = convert_tree(src, tmp_path / "out", on_outcome=lambda o: events.append(f"done {o.source.name}"))
    assert events == ["load a.mlmodel", "done a.mlmodel", "load b.mlmodel", "done b.mlmodel", "load c.mlmodel",
                      "done c.mlmodel"]
    assert [o.ok for o in outcomes] == [True, False, True]


@pytest.mark.slow  # 11 s at load average 11 on 2 cores (model_cpm converted and checked)
def test_the_cli_prints_each_line_while_the_next_model_converts(tmp_path: Path):
    """A real process: the first model's line is on stdout while the second (model_cpm, 1,241 ops, a few
    seconds with --check) is still being converted."""
    src = tree(tmp_path / "src", {"a.mlmodel": GRU, "b.mlmodel": CPM})
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, str(REPO / "cli.py"), "convert", str(src), "-o", str(out), "--check"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        first = proc.stdout.readline()
        running = proc.poll() is None
        out_rest, _err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert first == f"ok      {src / 'a.mlmodel'} -> {out / 'a.mlpackage'}\n", first
    assert running
    assert proc.returncode == 0 and out_rest.endswith("2 converted, 0 failed\n"), out_rest
