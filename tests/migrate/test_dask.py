"""The same migration on a Dask distributed LocalCluster (two worker processes), one of them
killed with SIGKILL mid-run: the run completes and its report equals the local executor's."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

import converter
from tests.migrate.helpers import CNN, MLP, converted_records, fake_worker_env, report, temporaries, tree, without_times
from tests.migrate.test_resume import SUBSET

distributed = pytest.importorskip("distributed")


@pytest.mark.slow  # about 40 s each (2 cores, load average 10): cluster start, 10 models, a worker restart
@pytest.mark.parametrize("workers", ["programs", "forked"])
def test_dask_local_cluster_with_a_worker_killed(tmp_path: Path, monkeypatch, workers: str):
    """``programs``: daemonic cluster workers start ``python -m converter.migration.worker`` per model
    (here the fake worker, whose "slow" models wait 2 s so that some are in flight at the kill);
    ``forked``: the real worker, forked by a worker factory on each cluster worker."""
    if workers == "programs":
        fake_worker_env(monkeypatch)
        monkeypatch.setenv("FAKE_WORKER_SLOW", "2")
    src = tree(tmp_path / "src", SUBSET)
    local = converter.migrate(src, tmp_path / "local", jobs=2)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        pids = client.run(os.getpid)
        killed: list[int] = []

        def on_result(entry: converter.migration.ModelEntry) -> None:
            if not killed and client.processing() and any(client.processing().values()):
                busy = next(addr for addr, keys in client.processing().items() if keys)
                killed.append(pids[busy])
                os.kill(pids[busy], signal.SIGKILL)

        dst = tmp_path / "dask"
        rep = converter.migrate(src, dst, scheduler=cluster.scheduler_address, on_result=on_result)
    assert killed, "no worker was busy when the first model finished"
    assert rep.complete
    assert without_times(report(dst)) == without_times(report(tmp_path / "local"))
    assert [m.status for m in rep.models] == [m.status for m in local.models]
    assert converted_records(dst) == {rel: 1 for rel in SUBSET if rel != "real/songs.mlmodel"}
    assert not temporaries(dst)
    for p in dst.rglob("*.mlpackage"):
        converter.load(p)


class _RetryingExecutor:
    """What Dask does when the worker holding a finished task's result dies before the client
    fetched it: the task runs again, on another worker, after its output was written."""

    def run(self, work, settings, on_start, on_result) -> None:  # noqa: ANN001 - the Executor protocol
        from converter.migration.executors import run_isolated

        for task, replace in work:
            on_start(task)
            run_isolated(task, replace, settings)  # the lost first run: it wrote the output
            on_result(task, run_isolated(task, replace, settings))


def test_a_task_rerun_after_its_output_was_written_replaces_it(tmp_path: Path, monkeypatch):
    """Without the journal's ownership being passed on, the rerun found its own output "already
    exists" and the model was reported failed (seen in CI with a killed Dask worker)."""
    from converter.migration import engine

    src = tree(tmp_path / "src", {"a/mlp.mlmodel": MLP, "cnn.mlmodel": CNN})
    monkeypatch.setattr(engine, "make_executor", lambda *a, **k: _RetryingExecutor())
    rep = converter.migrate(src, tmp_path / "dst", check=False)
    assert [(m.source, m.status, m.reason) for m in rep.models] == [
        ("a/mlp.mlmodel", "converted", None), ("cnn.mlmodel", "converted", None)]
    assert not temporaries(tmp_path / "dst")
    for p in (tmp_path / "dst").rglob("*.mlpackage"):
        converter.load(p)
