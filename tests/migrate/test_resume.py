"""A migration killed with SIGKILL and run again: every model converted exactly once, nothing
half-written, and the report of an uninterrupted run (times aside). Also the whole of
../shared/data/models/ (slow tier)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

import converter
from converter.migration.journal import JOURNAL_DIR
from tests.conftest import MODELS, REPO
from tests.migrate.helpers import (
    FAKE_WORKER,
    SCHEMA,
    converted_records,
    journal,
    report,
    started,
    temporaries,
    tree,
    without_times,
)

# NeuralNetwork models and ML programs of the shared folder, small and large, refusals included;
# "slow" ones wait 1 s in the (otherwise real) worker so that some are in flight when the parent dies.
SUBSET = {
    "real/slow_SqueezeNetFP16.mlmodel": MODELS / "real" / "7485461f_SqueezeNetFP16.mlmodel",
    "real/slow_cpm.mlmodel": MODELS / "real" / "799a4a00_model_cpm.mlmodel",
    "real/songs.mlmodel": MODELS / "real" / "baf6017f_songs.mlmodel",
    "real/dtln2.mlpackage": MODELS / "real" / "a2e9c9a9_DTLN_AEC_128_Part2.mlpackage",
    "builder/gru.mlmodel": MODELS / "builder" / "gru.mlmodel",
    "builder/slow_cnn.mlmodel": MODELS / "builder" / "cnn_conv_pool_fc.mlmodel",
    "builder/mlp.mlmodel": MODELS / "builder" / "regressor_mlp.mlmodel",
    "torch/slow_lstm_nn.mlmodel": MODELS / "torch" / "lstm_nn.mlmodel",
    "torch/mlp_mlprogram.mlpackage": MODELS / "torch" / "mlp_mlprogram.mlpackage",
    "torch/cnn_bn_nn.mlmodel": MODELS / "torch" / "cnn_bn_nn.mlmodel",
}


def _env(markers: Path, workers: str) -> dict[str, str]:
    """``programs``: the fake worker as a program per model ("slow" models wait 1 s first);
    ``forked``: the real worker forked from the fork server."""
    markers.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), "CONVERTER_MIGRATE_MARKERS": str(markers)}
    env.pop("CONVERTER_MIGRATE_WORKER", None)
    if workers == "programs":
        env.update({"FAKE_WORKER_SLOW": "1", "CONVERTER_MIGRATE_WORKER": f"{sys.executable} {FAKE_WORKER}"})
    return env


def _migrate_cmd(src: Path, dst: Path) -> list[str]:
    return [sys.executable, str(REPO / "cli.py"), "migrate", str(src), str(dst), "-j", "2"]


@pytest.mark.slow  # about 30 s each (2 cores, load average 7)
@pytest.mark.parametrize("workers", ["programs", "forked"])
def test_sigkill_of_the_parent_then_rerun(tmp_path: Path, workers: str):
    src = tree(tmp_path / "src", SUBSET)
    markers = tmp_path / "markers"
    env = _env(markers, workers)
    dst = tmp_path / "dst"
    proc = subprocess.Popen(_migrate_cmd(src, dst), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env)
    try:
        lines = [proc.stdout.readline() for _ in range(3)]  # three models finished, others in flight
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
    assert all(line.strip() for line in lines), lines
    time.sleep(3)  # the killed parent's workers die with it (PR_SET_PDEATHSIG, or watching its pid)
    first_run = started(markers)
    done_first = {r["rel"] for r in journal(dst) if r["event"] == "result"}
    assert 3 <= len(done_first) < len(SUBSET), done_first
    assert not (dst / "migration-report.json").exists()  # the parent died before writing it

    rerun = subprocess.run(_migrate_cmd(src, dst), capture_output=True, text=True, env=env, timeout=300)
    assert rerun.returncode == 1, rerun.stderr  # songs is refused
    assert len(rerun.stdout.splitlines()) == len(SUBSET) + 1  # the skipped ones are listed too, then totals
    both = started(markers)
    # what finished in the first run was not started again; every model converted exactly once
    assert all(both[rel] == first_run[rel] for rel in done_first), (first_run, both)
    assert converted_records(dst) == {rel: 1 for rel in SUBSET if rel != "real/songs.mlmodel"}
    # nothing half-written: no temporaries, every package loads
    assert not temporaries(dst)
    for p in dst.rglob("*.mlpackage"):
        converter.load(p)

    # an uninterrupted run gives the same report (times and peaks aside)
    whole = tmp_path / "whole"
    subprocess.run(_migrate_cmd(src, whole), capture_output=True, text=True, env=env, timeout=300)
    assert without_times(report(dst)) == without_times(report(whole))
    assert report(dst)["totals"]["converted"] == len(SUBSET) - 1


@pytest.mark.slow  # 47 s alone on 2 cores, 84 s at load average 7 (with --check; DeepLabV3 about 5 s of it)
def test_the_whole_shared_models_folder(tmp_path: Path):
    dst = tmp_path / "dst"
    rep = converter.migrate(MODELS, dst, jobs=2)
    data = report(dst)
    jsonschema.validate(data, json.loads(SCHEMA.read_text()))
    found = sorted(p.relative_to(MODELS).as_posix() for p in MODELS.rglob("*")
                   if p.suffix in (".mlmodel", ".mlpackage") and ".mlpackage/" not in p.relative_to(MODELS).as_posix()
                   and not any(part.endswith(".mlpackage") for part in p.relative_to(MODELS).parts[:-1]))
    assert [m.source for m in rep.models] == found
    assert rep.complete and rep.totals["models"] == len(found)
    assert rep.totals["timeout"] == rep.totals["memory"] == 0
    by_status = {s: {m.source for m in rep.models if m.status == s} for s in ("converted", "refused", "failed")}
    # the non-neural-network models are refused, never "failed"
    assert {"real/baf6017f_songs.mlmodel", "real/c41255f5_conv_model.mlmodel"} <= by_status["refused"]
    assert len(by_status["converted"]) >= 70, rep.summary()
    for m in rep.models:
        if m.status == "converted":
            assert (dst / m.output).is_dir() and m.ops_after is not None
            assert m.max_error is None or m.max_error <= 0.1, m
        else:
            assert m.output is None or m.status == "failed", m
            assert m.reason, m
    assert not temporaries(dst) and (dst / JOURNAL_DIR / "journal.jsonl").is_file()
