"""converter migrate / converter.migrate: statuses, report, journal and reruns, limits, lines as
models finish. The workers run real conversions unless a test says otherwise (fake_worker.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from click.testing import CliRunner

import cli
import converter
from converter.migration.journal import JOURNAL_DIR
from tests.conftest import REPO
from tests.migrate.helpers import (
    CNN,
    CPM,
    DTLN2,
    GRU,
    MLP,
    SCHEMA,
    SONGS,
    converted_records,
    fake_worker_env,
    report,
    started,
    temporaries,
    tree,
)


def test_statuses_and_report_validate_against_the_schema(tmp_path: Path):
    src = tree(tmp_path / "src", {"gru.mlmodel": GRU, "deep/er/mlp.mlmodel": MLP, "trees/songs.mlmodel": SONGS,
                                  "dtln.mlpackage": DTLN2, "bad.mlmodel": b"\x07 not a model",
                                  "notes.txt": b"not copied"})
    dst = tmp_path / "dst"
    rep = converter.migrate(src, dst, target="iOS15", jobs=2)
    statuses = {m.source: m.status for m in rep.models}
    assert statuses == {"bad.mlmodel": "failed", "deep/er/mlp.mlmodel": "converted", "dtln.mlpackage": "refused",
                        "gru.mlmodel": "converted", "trees/songs.mlmodel": "refused"}
    by_source = {m.source: m for m in rep.models}
    assert "not a Core ML model" in by_source["bad.mlmodel"].reason
    assert "treeEnsembleRegressor" in by_source["trees/songs.mlmodel"].reason
    assert "iOS15" in by_source["dtln.mlpackage"].reason
    gru = by_source["gru.mlmodel"]
    assert (gru.output, gru.target) == ("gru.mlpackage", "iOS15")
    assert gru.ops_before >= gru.ops_after > 0 and gru.max_error is not None and gru.max_error <= 1e-5
    assert gru.peak_mib > 0 and gru.seconds > 0
    # what was written: the converted models, nothing else (no notes.txt without --copy-other)
    assert sorted(p.relative_to(dst).as_posix() for p in dst.rglob("*.mlpackage")) == [
        "deep/er/mlp.mlpackage", "gru.mlpackage"]
    assert not (dst / "notes.txt").exists() and not (dst / "trees").exists() and not temporaries(dst)
    assert converter.load(dst / "gru.mlpackage").main.opset == "iOS15"
    data = report(dst)
    jsonschema.validate(data, json.loads(SCHEMA.read_text()))
    assert data["totals"] == {"models": 5, "converted": 2, "refused": 2, "failed": 1, "timeout": 0, "memory": 0,
                              "pending": 0}
    assert data == rep.to_json()
    md = (dst / "migration-report.md").read_text()
    assert "| gru.mlmodel | gru.mlpackage | converted | iOS15 |" in md


def test_a_rerun_converts_only_what_changed(tmp_path: Path, monkeypatch):
    markers = tmp_path / "markers"
    fake_worker_env(monkeypatch, markers)
    src = tree(tmp_path / "src", {"a/gru.mlmodel": GRU, "mlp.mlmodel": MLP, "songs.mlmodel": SONGS})
    dst = tmp_path / "dst"
    first = converter.migrate(src, dst, jobs=2, check=False)
    assert first.totals["converted"] == 2 and first.totals["refused"] == 1
    assert started(markers) == {"a/gru.mlmodel": 1, "mlp.mlmodel": 1, "songs.mlmodel": 1}
    again = converter.migrate(src, dst, jobs=2, check=False)
    assert started(markers) == {"a/gru.mlmodel": 1, "mlp.mlmodel": 1, "songs.mlmodel": 1}  # nothing redone
    assert [m.status for m in again.models] == [m.status for m in first.models]
    # the source changes (another model under the same name): that one is converted again, over the
    # output this migration wrote before
    (src / "mlp.mlmodel").unlink()
    (src / "mlp.mlmodel").symlink_to(CNN)
    third = converter.migrate(src, dst, jobs=2, check=False)
    assert started(markers) == {"a/gru.mlmodel": 1, "mlp.mlmodel": 2, "songs.mlmodel": 1}
    assert {m.source: m.status for m in third.models}["mlp.mlmodel"] == "converted"
    assert converter.load(dst / "mlp.mlpackage").main.outputs[0].name == converter.load(CNN).main.outputs[0].name
    # other options: everything is done again
    converter.migrate(src, dst, jobs=2, check=False, passes="none")
    assert sum(started(markers).values()) == 7


def test_a_users_file_in_the_way_is_kept(tmp_path: Path):
    src = tree(tmp_path / "src", {"gru.mlmodel": GRU, "mlp.mlmodel": MLP})
    dst = tmp_path / "dst"
    (dst / "gru.mlpackage").mkdir(parents=True)
    (dst / "gru.mlpackage" / "mine.txt").write_text("the user's")
    rep = converter.migrate(src, dst, jobs=1, check=False)
    gru = {m.source: m for m in rep.models}["gru.mlmodel"]
    assert gru.status == "failed" and "already exists" in gru.reason
    assert (dst / "gru.mlpackage" / "mine.txt").read_text() == "the user's"
    rep = converter.migrate(src, dst, jobs=1, check=False, overwrite=True)  # not a clean package: still kept
    assert "not replaced, even with --overwrite" in {m.source: m for m in rep.models}["gru.mlmodel"].reason
    assert (dst / "gru.mlpackage" / "mine.txt").read_text() == "the user's"


def test_copy_other_copies_the_rest_and_keeps_what_differs(tmp_path: Path):
    src = tree(tmp_path / "src", {"gru.mlmodel": GRU, "README.md": b"readme", "sub/labels.txt": b"a\nb\n"})
    dst = tmp_path / "dst"
    (dst / "sub").mkdir(parents=True)
    (dst / "sub" / "labels.txt").write_bytes(b"the user's own")
    rep = converter.migrate(src, dst, check=False, copy_other=True)
    assert rep.copied == ["README.md"]
    assert (dst / "README.md").read_bytes() == b"readme"
    assert (dst / "sub" / "labels.txt").read_bytes() == b"the user's own"
    assert any("sub/labels.txt exists in the destination and differs" in e for e in rep.errors)
    rep = converter.migrate(src, dst, check=False, copy_other=True, overwrite=True)
    assert rep.copied == ["README.md", "sub/labels.txt"] and not rep.errors
    assert (dst / "sub" / "labels.txt").read_bytes() == b"a\nb\n"


def test_a_killed_worker_is_one_failed_entry_and_the_run_goes_on(tmp_path: Path, monkeypatch):
    fake_worker_env(monkeypatch)
    src = tree(tmp_path / "src", {"crash.mlmodel": GRU, "gru.mlmodel": GRU, "mlp.mlmodel": MLP})
    rep = converter.migrate(src, tmp_path / "dst", jobs=2, check=False)
    entries = {m.source: m for m in rep.models}
    assert entries["crash.mlmodel"].status == "failed"
    assert entries["crash.mlmodel"].reason == "the worker process was killed by SIGKILL"
    assert entries["gru.mlmodel"].status == entries["mlp.mlmodel"].status == "converted"


def test_a_model_over_the_time_limit_is_stopped_and_reported(tmp_path: Path, monkeypatch):
    fake_worker_env(monkeypatch)
    src = tree(tmp_path / "src", {"hang.mlmodel": GRU, "gru.mlmodel": GRU})
    finished: list[tuple[str, float]] = []
    t0 = time.monotonic()
    rep = converter.migrate(src, tmp_path / "dst", jobs=2, timeout=10, check=False,
                            on_result=lambda e: finished.append((e.source, time.monotonic() - t0)))
    entries = {m.source: m for m in rep.models}
    assert entries["hang.mlmodel"].status == "timeout"
    assert entries["hang.mlmodel"].reason == "stopped after the time limit of 10 s"
    assert entries["gru.mlmodel"].status == "converted"
    # each model is reported as it finishes, not at the end
    assert [name for name, _ in finished] == ["gru.mlmodel", "hang.mlmodel"]
    assert finished[0][1] < finished[1][1] - 0.5, finished
    # a higher limit tries it again; the same limit does not
    fake_again = converter.migrate(src, tmp_path / "dst", jobs=2, timeout=10, check=False)
    assert {m.source: m.status for m in fake_again.models}["hang.mlmodel"] == "timeout"


def test_a_model_over_the_memory_limit_is_reported(tmp_path: Path, monkeypatch):
    fake_worker_env(monkeypatch)
    src = tree(tmp_path / "src", {"oom.mlmodel": GRU, "gru.mlmodel": GRU})
    rep = converter.migrate(src, tmp_path / "dst", jobs=2, check=False, memory_mib=256)
    entries = {m.source: m for m in rep.models}
    assert entries["oom.mlmodel"].status == "memory", entries
    assert entries["oom.mlmodel"].reason == "out of memory (limit 256 MiB)"
    assert entries["gru.mlmodel"].status == "converted"
    assert sorted(p.name for p in (tmp_path / "dst").iterdir() if not p.name.startswith(".")) == [
        "gru.mlpackage", "migration-report.json", "migration-report.md"]


def test_the_journal_survives_a_torn_last_line(tmp_path: Path, monkeypatch):
    markers = tmp_path / "markers"
    fake_worker_env(monkeypatch, markers)
    src = tree(tmp_path / "src", {"gru.mlmodel": GRU, "mlp.mlmodel": MLP})
    dst = tmp_path / "dst"
    converter.migrate(src, dst, jobs=1, check=False)
    path = dst / JOURNAL_DIR / "journal.jsonl"
    data = path.read_bytes()
    path.write_bytes(data[: data.rindex(b'"status"')])  # the last result record torn mid-write
    rep = converter.migrate(src, dst, jobs=1, check=False)
    assert [m.status for m in rep.models] == ["converted", "converted"]
    assert sum(started(markers).values()) == 3  # the model whose record was torn, once more
    assert converted_records(dst) == {"gru.mlmodel": 1, "mlp.mlmodel": 1}  # the torn record does not count


def test_cli_prints_a_line_per_model_and_a_summary(tmp_path: Path):
    src = tree(tmp_path / "src", {"gru.mlmodel": GRU, "songs.mlmodel": SONGS})
    result = CliRunner().invoke(cli.main, ["migrate", str(src), str(tmp_path / "dst"), "-j", "2"])
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert any(line.startswith("converted  gru.mlmodel -> gru.mlpackage (") and " ops, max err " in line
               for line in lines), lines
    assert any(line.startswith("refused    songs.mlmodel (") for line in lines), lines
    assert lines[-1] == f"1 converted, 1 refused, 0 failed (report: {tmp_path / 'dst'}/migration-report.json)"


def test_cli_lines_appear_as_models_finish(tmp_path: Path):
    """A real process: the line of a finished model is on stdout while another model still runs."""
    src = tree(tmp_path / "src", {"gru.mlmodel": GRU, "hang.mlmodel": GRU})
    env = {**os.environ, "PYTHONPATH": str(REPO), "CONVERTER_MIGRATE_WORKER":
           f"{sys.executable} {Path(__file__).with_name('fake_worker.py')}"}
    proc = subprocess.Popen([sys.executable, str(REPO / "cli.py"), "migrate", str(src), str(tmp_path / "dst"),
                             "-j", "2", "--timeout", "60", "--no-check"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = proc.stdout.readline()
        assert first.startswith("converted  gru.mlmodel -> gru.mlpackage"), first
        assert proc.poll() is None  # still running (hang.mlmodel)
        proc.send_signal(2)  # Ctrl-C
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, (out, err)
    assert "stopped: 1 models finished" in err
    rep = report(tmp_path / "dst")
    assert {m["source"]: m["status"] for m in rep["models"]} == {"gru.mlmodel": "converted", "hang.mlmodel": "pending"}
    assert not rep["complete"]


def test_a_forked_worker_killed_from_outside_is_one_failed_entry(tmp_path: Path):
    """The real workers (forked by the worker factory, zygote.py): SIGKILL the one converting
    model_cpm; it is reported, the next model is converted, no temporary is left."""
    import threading

    import psutil

    src = tree(tmp_path / "src", {"cpm.mlmodel": CPM, "gru.mlmodel": GRU})
    me = psutil.Process()
    killed: list[int] = []

    def kill_first_worker() -> None:
        for _ in range(600):
            for server in me.children():
                if "converter.migration.zygote" in " ".join(server.cmdline()):
                    workers = server.children()
                    if workers:
                        workers[0].kill()
                        killed.append(workers[0].pid)
                        return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_first_worker)
    killer.start()
    rep = converter.migrate(src, tmp_path / "dst", jobs=1)  # the largest (cpm) first
    killer.join()
    assert killed
    entries = {m.source: m for m in rep.models}
    assert entries["cpm.mlmodel"].status == "failed", entries
    assert entries["cpm.mlmodel"].reason == "the worker process was killed by SIGKILL"
    assert entries["gru.mlmodel"].status == "converted"
    assert not temporaries(tmp_path / "dst") and not (tmp_path / "dst" / "cpm.mlpackage").exists()


def test_a_script_without_a_main_guard_can_migrate(tmp_path: Path):
    """The workers never import the caller's __main__ again (multiprocessing's fork server did: a
    script like this one then failed in every worker)."""
    src = tree(tmp_path / "src", {"a.mlmodel": GRU, "b.mlmodel": MLP})
    script = tmp_path / "script.py"
    script.write_text("import converter\n"
                      f"r = converter.migrate({str(src)!r}, {str(tmp_path / 'dst')!r}, jobs=2, check=False)\n"
                      "print(r.summary())\n")
    env = {k: v for k, v in os.environ.items() if k != "CONVERTER_MIGRATE_WORKER"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env={**env, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "2 converted, 0 failed\n"
    assert "Traceback" not in done.stderr


def _onnx_with_external_data(path: Path, weight: np.ndarray) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [numpy_helper.from_array(weight, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    (path.parent / (path.name + ".data")).unlink(missing_ok=True)  # onnx appends to an existing one
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=path.name + ".data", size_threshold=0)


def test_an_onnx_models_external_data_is_part_of_its_fingerprint(tmp_path: Path):
    """New weights in NAME.onnx.data (the .onnx file unchanged) make a rerun convert it again."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    model = src / "m.onnx"
    _onnx_with_external_data(model, np.eye(4, dtype=np.float32))
    before = model.read_bytes()
    first = converter.migrate(src, dst, jobs=1)
    assert [m.status for m in first.models] == ["converted"]
    x = {"x": np.arange(4, dtype=np.float32)[None]}
    np.testing.assert_array_equal(converter.run(dst / "m.mlpackage", x)["y"], x["x"])

    (src / "m.onnx.data").write_bytes((2 * np.eye(4, dtype=np.float32)).tobytes())  # new weights, same .onnx
    assert model.read_bytes() == before
    second = converter.migrate(src, dst, jobs=1)
    assert [m.status for m in second.models] == ["converted"]
    assert converted_records(dst) == {"m.onnx": 2}
    np.testing.assert_array_equal(converter.run(dst / "m.mlpackage", x)["y"], 2 * x["x"])
    converter.migrate(src, dst, jobs=1)
    assert converted_records(dst) == {"m.onnx": 2}  # unchanged: not redone


def test_workers_share_the_cores_among_their_onnxruntime_sessions(tmp_path: Path, monkeypatch):
    """With -j N each worker's onnxruntime sessions get cores // N intra-op threads (not one per
    core each, which oversubscribes the machine N times); the worker applies what it is given."""
    pytest.importorskip("onnxruntime")
    from converter.migration import executors, worker
    from converter.migration.tasks import MigrationOptions, plan_tasks
    from converter.runtimes import ort

    seen: list[int | None] = []
    monkeypatch.setattr(executors, "run_isolated",
                        lambda task, replace, settings: seen.append(settings.ort_threads) or {"status": "refused"})
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    src = tree(tmp_path / "src", {"mlp.mlmodel": MLP})
    options = MigrationOptions(runtime="onnxruntime")
    work = [(t, False) for t in plan_tasks(src, tmp_path / "dst", options)]
    for jobs, want in ((1, 8), (2, 4), (3, 2), (16, 1)):
        executors.LocalExecutor(jobs).run(work, executors.WorkerSettings(options), lambda t: None, lambda t, e: None)
        assert seen.pop() == want
    assert executors._request(work[0][0], False, executors.WorkerSettings(options, ort_threads=3))["ort_threads"] == 3

    monkeypatch.setattr(worker, "convert_model", lambda task, options, replace: {"status": "converted"})
    monkeypatch.setattr(ort, "_intra_op_threads", None)
    sigint = signal.getsignal(signal.SIGINT)  # serve ignores SIGINT (the migration handles Ctrl-C)
    try:
        worker.serve({**executors._request(work[0][0], False, executors.WorkerSettings(options, ort_threads=3)),
                      "memory_mib": None})
    finally:
        signal.signal(signal.SIGINT, sigint)
    assert ort.session_options().intra_op_num_threads == 3
