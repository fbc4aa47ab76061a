"""Issue 7: SIGINT and SIGTERM in the middle of a write remove every temporary, leave the
destination as it was, and exit 130 / 143, for one model and for a folder.

The CLI runs in a subprocess (signals are process-wide) through a driver that replaces the weight
blob writer's ``write`` by one that says "ready" through a file and then blocks, so the signal
arrives at a known point: the temporary package and its temporary weight file exist."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.helpers import digest, temporaries
from tests.conftest import MODELS, REPO

DRIVER = """
import signal, sys, time
from pathlib import Path

signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, even under a background runner

import converter.formats.blob as blob

ready = Path(sys.argv[1])

def blocking_write(self, array, dtype_name):
    ready.write_text(str(self._tmp))
    while True:
        time.sleep(0.01)

blob.BlobWriter.write = blocking_write

import cli

sys.argv = ["converter", *sys.argv[2:]]
cli.main()
"""

SOURCE = MODELS / "torch" / "mlp_nn.mlmodel"  # its weights go to a weight blob


def _interrupt_cli(tmp_path: Path, signum: int, *args: object) -> subprocess.CompletedProcess:
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    ready = tmp_path / "ready"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, str(driver), str(ready), *map(str, args)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the write never started"
            time.sleep(0.02)
        assert Path(ready.read_text()).exists()  # the temporary weight file, inside the temporary package
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    ready.unlink()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


SIGNALS = [pytest.param(signal.SIGINT, 130, id="SIGINT"), pytest.param(signal.SIGTERM, 143, id="SIGTERM")]


@pytest.mark.parametrize(("signum", "code"), SIGNALS)
def test_interrupted_single_model_leaves_nothing(tmp_path: Path, signum: int, code: int):
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(SOURCE, work / "m.mlmodel")
    result = _interrupt_cli(tmp_path, signum, "convert", work / "m.mlmodel", "-o", work / "new.mlpackage")
    assert result.returncode == code, result
    assert "Traceback" not in result.stderr, result.stderr
    assert f"interrupted ({signal.Signals(signum).name})" in result.stderr
    assert temporaries(tmp_path) == []
    assert sorted(os.listdir(work)) == ["m.mlmodel"]


@pytest.mark.parametrize(("signum", "code"), SIGNALS)
def test_interrupted_overwrite_keeps_the_old_model(tmp_path: Path, signum: int, code: int):
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(SOURCE, work / "m.mlmodel")
    old = shutil.copytree(MODELS / "torch" / "mlp_mlprogram.mlpackage", work / "new.mlpackage")
    before = digest(old)
    result = _interrupt_cli(tmp_path, signum, "convert", work / "m.mlmodel", "-o", old, "--overwrite")
    assert result.returncode == code, result
    assert temporaries(tmp_path) == []
    assert digest(old) == before
    assert sorted(os.listdir(work)) == ["m.mlmodel", "new.mlpackage"]


@pytest.mark.parametrize(("signum", "code"), SIGNALS)
def test_interrupted_folder_leaves_nothing(tmp_path: Path, signum: int, code: int):
    src = tmp_path / "src"
    (src / "deep").mkdir(parents=True)
    shutil.copy(SOURCE, src / "deep" / "m.mlmodel")
    before = digest(src)
    out = tmp_path / "out"
    result = _interrupt_cli(tmp_path, signum, "convert", src, "-o", out)
    assert result.returncode == code, result
    assert "Traceback" not in result.stderr, result.stderr
    assert temporaries(tmp_path) == []
    assert digest(src) == before
    assert not out.exists() or not any(out.rglob("*")), sorted(out.rglob("*"))  # not even the folder made for it
