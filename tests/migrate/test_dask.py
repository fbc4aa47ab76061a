"""The same migration on a Dask distributed LocalCluster (two worker processes), one of them
killed with SIGKILL mid-run: the run completes and its report equals the local executor's."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

import converter
from tests.migrate.helpers import converted_records, fake_worker_env, report, temporaries, tree, without_times
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
