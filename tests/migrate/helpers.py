"""Helpers of the migration tests: source trees of symlinks to shared models, the fake worker,
journal and report readers."""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections import Counter
from pathlib import Path

from converter.migration.journal import JOURNAL_DIR, read_records
from tests.conftest import MODELS, REPO

FAKE_WORKER = Path(__file__).with_name("fake_worker.py")
SCHEMA = REPO / "docs" / "schemas" / "migration-report.schema.json"

GRU = MODELS / "builder" / "gru.mlmodel"
MLP = MODELS / "builder" / "regressor_mlp.mlmodel"
CNN = MODELS / "builder" / "cnn_conv_pool_fc.mlmodel"
SONGS = MODELS / "real" / "baf6017f_songs.mlmodel"  # a tree ensemble: refused
DTLN2 = MODELS / "real" / "a2e9c9a9_DTLN_AEC_128_Part2.mlpackage"  # an iOS16 program: refused by --target iOS15
DEEPLAB = MODELS / "real" / "9de70cc9_DeepLabV3Int8LUT.mlmodel"
CPM = MODELS / "real" / "799a4a00_model_cpm.mlmodel"  # 1,241 ops: a few seconds to convert and check


def tree(root: Path, files: dict[str, Path | bytes]) -> Path:
    """A source folder of symlinks to shared models (never copies) and small files of bytes."""
    for rel, what in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(what, bytes):
            p.write_bytes(what)
        else:
            p.symlink_to(what)
    return root


def fake_worker_env(monkeypatch, markers: Path | None = None) -> None:  # noqa: ANN001 - pytest fixture
    """Run the workers through tests/migrate/fake_worker.py (names with hang/crash/slow misbehave)."""
    monkeypatch.setenv("CONVERTER_MIGRATE_WORKER", shlex.join([sys.executable, str(FAKE_WORKER)]))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    if markers is not None:
        markers.mkdir(exist_ok=True)
        monkeypatch.setenv("CONVERTER_MIGRATE_MARKERS", str(markers))


def journal(dst: Path) -> list[dict]:
    return read_records(dst / JOURNAL_DIR / "journal.jsonl")


def converted_records(dst: Path) -> Counter[str]:
    return Counter(r["rel"] for r in journal(dst) if r["event"] == "result" and r["status"] == "converted")


def started(markers: Path) -> Counter[str]:
    """How many times each model was handed to a worker process (the worker's start markers)."""
    return Counter(p.read_text() for p in markers.iterdir())


def report(dst: Path) -> dict:
    return json.loads((dst / "migration-report.json").read_text())


def without_times(rep: dict) -> dict:
    """The report without what differs from run to run: times, memory peaks and the folder names."""
    models = [{k: v for k, v in m.items() if k not in ("seconds", "peak_mib")} for m in rep["models"]]
    return {**{k: v for k, v in rep.items() if k not in ("source", "destination")}, "models": models}


def temporaries(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob(".*") if p.name.endswith((".tmp", ".old")))
