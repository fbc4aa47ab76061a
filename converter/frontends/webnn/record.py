"""Run a WebNN ``model.js`` under Node with our recording builder (recorder.mjs) and read the result.

Node is needed only for this input. The module is untrusted code as far as the converter is
concerned: it runs in a child process with a time limit, its output is bounded, and its failure
(a validation error of the recorder, an exception, a hang) becomes one FormatError naming the file.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ...errors import FormatError, UnsupportedError, printable
from .graph import read_graph

RECORDER = Path(__file__).with_name("recorder.mjs")
#: Seconds a module may take to build its graph (a real model's build() takes well under a second).
DEFAULT_TIMEOUT_S = 60.0
#: Bytes of the recorder's stderr kept for the error message.
MAX_MESSAGE_BYTES = 64 << 10

T = TypeVar("T")


def node_executable() -> str:
    node = shutil.which("node")
    if node is None:
        raise UnsupportedError("reading a WebNN model.js needs Node.js (`node` on the PATH); it is needed only for "
                               "model.js input (a .webnn.json graph file is read without it)")
    return node


def record_graph_file(module: Path, out_json: Path, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
    """Write ``out_json`` (and its .bin) for ``module``; FormatError naming the module on failure."""
    if not module.is_file():
        raise FormatError("no such file", file=str(module))
    node = node_executable()
    argv = [node, "--no-warnings", str(RECORDER), str(module.resolve()), str(out_json)]
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True)
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise FormatError(f"the module did not finish building its graph within {timeout_s:g} s",
                              file=str(module)) from None
        finally:
            if proc.poll() is None:
                _kill_group(proc)
        err.seek(0)
        text = err.read(MAX_MESSAGE_BYTES).decode("utf-8", "replace")
    if code != 0:
        lines = [ln for ln in text.splitlines() if ln.startswith("recorder: ")]
        message = lines[-1][len("recorder: "):] if lines else (text.strip().splitlines() or ["node failed"])[-1]
        raise FormatError(printable(message)[:2000], file=str(module))


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def record_module(module: Path, convert: Callable, *, timeout_s: float = DEFAULT_TIMEOUT_S):  # noqa: ANN201
    """Record ``module`` into a temporary folder, read the graph and pass it to ``convert``.

    The constants ``convert`` gets are views of the recorded .bin; the folder is removed afterwards
    (on POSIX an open memory map keeps its bytes)."""
    with tempfile.TemporaryDirectory(prefix="converter-webnn-") as tmp:
        out = Path(tmp) / "graph.webnn.json"
        record_graph_file(module, out, timeout_s=timeout_s)
        graph = read_graph(out)
        graph.path = str(module)
        return convert(graph)
