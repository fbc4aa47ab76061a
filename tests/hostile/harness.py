"""Runs models through the library and the CLI in child processes, each under a wall-clock and an
address-space limit, and reports what happened (a value, an error, a crash, a hang) with the
child's peak memory.

A `Harness` starts one server process (``python -m tests.hostile.harness``) that imports the
converter once and then forks a child per job, so a job costs milliseconds of startup instead of
an interpreter's. Forking happens in that single-threaded server, never in the test process. A
child that outlives its time is killed (a hang); its peak resident memory comes from ``wait4``.

Jobs:
- ``library``: ``converter.load``, ``converter.save`` into a fresh folder, then what ``--check``
  does (``converter.check.compare`` of the source and the written model on random inputs).
- ``cli``: ``converter ARGS...`` through the console entry point (``cli.main``), stdout and stderr
  captured from the child's file descriptors, its exit status as the process's.
"""

from __future__ import annotations

import json
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TIME_LIMIT = 5.0  # seconds per job
# Fuzzing: a mutant of a real model whose loop no longer ends runs to the interpreter's bound on
# loop iterations (the default bound, 10,000, takes 4 to 8 s with the largest loop bodies of the
# shared models on a busy machine): fuzz jobs cut such loops at 1,000 iterations, and allow twice
# the corpus's time for a machine busy with other tests.
FUZZ_TIME_LIMIT = 10.0
FUZZ_LOOP_LIMIT = 1000
# ... and tensors at 64 MiB: a mutant declaring an image of 256 x 65536 pixels (192 MiB in fp32, under
# the default bound of 256 MiB) is a valid model whose check takes over 1 GiB.
FUZZ_TENSOR_BYTES = 64 << 20
MEMORY_LIMIT = 1 << 30  # bytes of peak resident memory per job
# Messages that mean an allocation was attempted and refused (by the address-space limit): the
# input still asked for unbounded memory, even if a catch-all turned it into a converter error.
MEMORY_WORDS = ("MemoryError", "Unable to allocate", "Cannot allocate memory", "out of memory")


@dataclass
class Result:
    outcome: str  # "ok", "error" (a ConverterError), "crash" (any other exception), "hang", "died"
    seconds: float
    peak_bytes: int
    error_type: str = ""
    message: str = ""  # the error message, or the traceback of a crash
    step: str = ""  # library: the step that raised (load, save, check)
    exit_code: int | None = None  # cli
    stdout: str = ""
    stderr: str = ""

    def describe(self) -> str:
        parts = [f"{self.outcome} after {self.seconds:.2f} s, peak {self.peak_bytes / 2**20:.0f} MiB"]
        if self.step:
            parts.append(f"step {self.step}")
        if self.exit_code is not None:
            parts.append(f"exit {self.exit_code}")
        if self.error_type:
            parts.append(self.error_type)
        text = self.message or self.stderr
        if text:
            parts.append(text[-3000:])
        return "; ".join(parts)


# -- the child's side ------------------------------------------------------------------------------


def _library_job(path: str, out_dir: str, loop_limit: int | None, tensor_limit: int | None) -> dict[str, Any]:
    import converter
    from converter.check import compare
    from converter.errors import ConverterError

    step = "load"
    try:
        prog = converter.load(path)
        step = "save"
        out = converter.save(prog, Path(out_dir) / "out.mlpackage")
        step = "check"
        bounds = {"max_loop_iterations": loop_limit, "max_tensor_bytes": tensor_limit}
        kw = {k: v for k, v in bounds.items() if v is not None}  # none given: the library's defaults
        compare(prog, converter.load(out), source_file=path, converted_file=str(out), **kw)
    except ConverterError as e:
        return {"outcome": "error", "error_type": type(e).__name__, "message": str(e), "step": step}
    except Exception as e:  # noqa: BLE001 - what the test is looking for
        return {"outcome": "crash", "error_type": type(e).__name__, "step": step,
                "message": "".join(traceback.format_exception(type(e), e, e.__traceback__))}
    return {"outcome": "ok", "step": "done"}


def _cli_job(args: list[str], out_dir: str) -> dict[str, Any]:
    import cli

    stdout, stderr = Path(out_dir) / "stdout", Path(out_dir) / "stderr"
    code: int = 0
    with open(stdout, "wb") as o, open(stderr, "wb") as e:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(o.fileno(), 1)
        os.dup2(e.fileno(), 2)
        sys.stdin = open(os.devnull)  # noqa: SIM115 - the child's stdin for its whole life
        try:
            cli.main(args=args, prog_name="converter")
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        except BaseException:  # noqa: BLE001 - as the interpreter does: a traceback, exit 1
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
    return {"outcome": "ok" if code == 0 else "error", "exit_code": code,
            "stdout": stdout.read_text(errors="replace"), "stderr": stderr.read_text(errors="replace")}


def _child(job: dict[str, Any], wfd: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (job["address_space"], job["address_space"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if job["kind"] == "library":
        import warnings

        warnings.simplefilter("ignore")  # notes about renamed features: not what this is about
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        res = _library_job(job["path"], job["out"], job.get("loop_limit"), job.get("tensor_limit"))
    else:
        res = _cli_job(job["args"], job["out"])
    os.write(wfd, json.dumps(res).encode())
    os.close(wfd)


def _vm_size() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def _run_one(job: dict[str, Any]) -> dict[str, Any]:
    """Fork a child for ``job``, wait for it at most its time limit, kill it after."""
    rfd, wfd = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(rfd)
        code = 0
        try:
            _child(job, wfd)
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
            code = 3
        os._exit(code)
    os.close(wfd)
    chunks = []
    deadline = start + job["time_limit"]
    hung = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            hung = True
            break
        ready, _, _ = select.select([rfd], [], [], left)
        if ready:
            data = os.read(rfd, 1 << 20)
            if not data:
                break
            chunks.append(data)
    if hung:
        os.kill(pid, signal.SIGKILL)
    _, status, usage = os.wait4(pid, 0)
    os.close(rfd)
    seconds = time.monotonic() - start
    peak = usage.ru_maxrss * 1024
    if hung:
        return {"outcome": "hang", "seconds": seconds, "peak_bytes": peak}
    if not chunks:
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        return {"outcome": "died", "seconds": seconds, "peak_bytes": peak,
                "message": f"child died without a result (status {status}, signal {sig})"}
    res = json.loads(b"".join(chunks))
    res.update(seconds=seconds, peak_bytes=peak)
    return res


def serve() -> None:
    """The server loop: one JSON job per stdin line, one JSON result per stdout line."""
    import cli  # noqa: F401 - imported once, before any fork
    import converter  # noqa: F401
    import converter.backends.mil  # noqa: F401
    import converter.check  # noqa: F401
    import converter.frontends.mil  # noqa: F401
    import converter.frontends.neuralnetwork  # noqa: F401
    from converter.frontends.neuralnetwork.registry import load_all

    load_all()
    base = _vm_size()
    out = sys.stdout
    for line in sys.stdin:
        job = json.loads(line)
        job.setdefault("address_space", base + job.pop("memory_limit"))
        out.write(json.dumps(_run_one(job)) + "\n")
        out.flush()


# -- the test's side -------------------------------------------------------------------------------


class Harness:
    """A server process running jobs one at a time (thread-safe: jobs are serialized)."""

    def __init__(self) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.hostile.harness"], cwd=REPO, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.lock = threading.Lock()
        self.tmp = tempfile.TemporaryDirectory(prefix="hostile-")
        self.count = 0

    def _job(self, job: dict[str, Any]) -> Result:
        with self.lock:
            self.count += 1
            out = Path(self.tmp.name) / f"job{self.count}"
            out.mkdir()
            job = dict(job, out=str(out))
            job.setdefault("time_limit", TIME_LIMIT)
            job.setdefault("memory_limit", MEMORY_LIMIT)
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(json.dumps(job) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
            shutil.rmtree(out, ignore_errors=True)  # outputs are not kept: thousands of jobs may run
            if not line:
                raise RuntimeError("the harness server died")
            return Result(**json.loads(line))

    def library(self, path: Path, *, loop_limit: int | None = None, tensor_limit: int | None = None,
                **limits: Any) -> Result:
        """``loop_limit``, ``tensor_limit``: the check's bounds (None: the library's defaults)."""
        return self._job({"kind": "library", "path": str(path), "loop_limit": loop_limit,
                          "tensor_limit": tensor_limit, **limits})

    def cli(self, *args: str, **limits: Any) -> Result:
        return self._job({"kind": "cli", "args": [str(a) for a in args], **limits})

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.tmp.cleanup()

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def memory_words(text: str) -> list[str]:
    return [w for w in MEMORY_WORDS if w in text]


def problems(r: Result, *, expect: str = "either") -> list[str]:
    """What is wrong with a job's result: not ending in success or a converter error (``expect``:
    "ok", "error" or "either"), a hang, more than 1 GiB, a memory error in disguise; for the CLI,
    more than one error line, or a traceback. Empty when all is well."""
    out = []
    if r.outcome in ("hang", "died", "crash"):
        out.append(r.outcome)
    elif expect != "either" and r.outcome != expect:
        out.append(f"expected {expect}")
    if r.peak_bytes > MEMORY_LIMIT:
        out.append(f"peak memory {r.peak_bytes / 2**20:.0f} MiB")
    if memory_words(r.message + r.stderr):
        out.append("an allocation was refused (the input asked for unbounded memory)")
    if r.exit_code is not None:  # the CLI
        if r.outcome == "error" and r.exit_code != 2:
            out.append(f"exit {r.exit_code}, not 2")
        lines = [ln for ln in r.stderr.splitlines() if not ln.startswith(("note: ", "running "))]
        if r.outcome == "error" and (len(lines) != 1 or not lines[0].startswith("error: ")):
            out.append("stderr is not one 'error: ...' line (besides notes and --check's progress lines)")
        if "Traceback" in r.stderr:
            out.append("a traceback")
    # (a model's names may hold newlines, and the library's messages quote them as they are: how they
    # reach a terminal is the CLI's concern, another item of issue 7)
    return out


if __name__ == "__main__":
    serve()
