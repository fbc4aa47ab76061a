"""Run a WebNN ``model.js`` under Node with our recording builder (recorder.mjs) and read the result.

Node is needed only for this input. The module is code from outside: it runs in a child process
with a time limit and bounded output, under Node's permission model where Node has one (20+): it may
read only its own folder (and the recorder's), write only the recorder's output folder, and start
no processes or workers (network access is not restricted by Node 20). Its failure (a validation
error of the recorder, an exception, a hang, a denied access) becomes one FormatError naming the file.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, TypeVar

from ...errors import FormatError, UnsupportedError, printable
from .graph import Graph, read_graph

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
    module = module.resolve()
    argv = [node, *_sandbox_flags(node, module.parent, out_json.resolve().parent), "--no-warnings", str(RECORDER),
            str(module), str(out_json)]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    tail = _StderrTail(proc)
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise FormatError(f"the module did not finish building its graph within {timeout_s:g} s",
                          file=str(module)) from None
    finally:
        if proc.poll() is None:
            _kill_group(proc)
        tail.join()
    if code != 0:
        text = _read_bounded(out_json.with_name(out_json.name + ".error")) or tail.text()
        lines = [ln for ln in text.splitlines() if ln.startswith("recorder: ")]
        message = lines[-1][len("recorder: "):] if lines else (text.strip().splitlines() or ["node failed"])[-1]
        raise FormatError(printable(message)[:2000], file=str(module))


def _read_bounded(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_MESSAGE_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


@functools.cache
def _node_major(node: str) -> int:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout
        return int(out.strip().lstrip("v").split(".")[0])
    except (OSError, ValueError, subprocess.SubprocessError):
        return 0


def _sandbox_flags(node: str, module_dir: Path, out_dir: Path) -> list[str]:
    """Node permission-model flags: read the module's folder and the recorder's, write the output
    folder, nothing else (no child processes, workers or native addons)."""
    major = _node_major(node)
    if major < 20:
        return []
    dirs = [module_dir, RECORDER.resolve().parent, out_dir]
    if any("," in str(d) for d in dirs):  # Node splits these flags at commas
        raise UnsupportedError(f"cannot confine model.js to its folder '{module_dir}': Node's permission flags "
                               "cannot name a path that contains a comma (move or rename the folder)")
    flag = "--permission" if major >= 22 else "--experimental-permission"
    # The output folder is readable too (renaming the finished files into place needs it); each
    # folder is named once (Node 20 aborts on a path given twice).
    reads = dict.fromkeys(str(d) for d in dirs)
    return [flag, *(f"--allow-fs-read={d}{os.sep}*" for d in reads), f"--allow-fs-write={out_dir}{os.sep}*"]


class _StderrTail:
    """Reads a child's stderr to its end, keeping only the last MAX_MESSAGE_BYTES (a module may
    print without bound; the recorder's own message is its last line)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self._buf = bytearray()
        self._thread = threading.Thread(target=self._read, args=(proc.stderr,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[bytes]) -> None:
        with stream:
            while chunk := stream.read(1 << 16):
                self._buf += chunk
                del self._buf[:-MAX_MESSAGE_BYTES]

    def join(self) -> None:
        self._thread.join(timeout=5)

    def text(self) -> str:
        return bytes(self._buf).decode("utf-8", "replace")


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def record_module(module: Path, convert: Callable[[Graph], T], *, timeout_s: float = DEFAULT_TIMEOUT_S) -> T:
    """Record ``module`` into a temporary folder, read the graph and pass it to ``convert``.

    The constants ``convert`` gets are views of the recorded .bin; the folder is removed afterwards
    (on POSIX an open memory map keeps its bytes)."""
    with tempfile.TemporaryDirectory(prefix="converter-webnn-") as tmp:
        out = Path(tmp) / "graph.webnn.json"
        record_graph_file(module, out, timeout_s=timeout_s)
        graph = read_graph(out)
        graph.path = str(module)
        return convert(graph)
