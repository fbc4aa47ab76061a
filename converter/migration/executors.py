"""Where the workers run: processes on this machine, or a Dask distributed cluster.

Every model is converted by `run_isolated` in a worker process of its own (forked by this
thread's worker factory, zygote.py, which has the converter imported; or a new
``python -m converter.migration.worker`` when ``CONVERTER_MIGRATE_WORKER`` names another program),
waiting at most the time limit: a model that crashes its process, exceeds its memory limit or its
time becomes one failed / memory / timeout entry, never the end of the run. An executor only
decides where `run_isolated` runs; the interface is one method, `Executor.run`:

- `LocalExecutor`: ``jobs`` threads of this process, each waiting on its worker process.
- `DaskExecutor`: ``client.submit(run_isolated, ...)`` on a cluster whose workers see the same file
  system; a cluster worker that dies mid-task has its task retried elsewhere by Dask, and a task
  that keeps killing workers ends as a failed entry (`distributed.KilledWorker`).

At most as many models are in flight as there are slots, so the journal's ``start`` records name
what is running, and the largest models are handed out first (shorter runs on several cores).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from .tasks import MigrationOptions, Task, remove_temporaries
from .worker import RESULT_MARK

__all__ = ["DaskExecutor", "Executor", "InlineExecutor", "LocalExecutor", "WorkerSettings", "make_executor", "run_isolated"]

#: Environment of the worker processes: one thread per numeric library, as the parallelism is the
#: number of workers (values the user set are kept).
_SINGLE_THREADED = {v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}


@dataclass(frozen=True)
class WorkerSettings:
    options: MigrationOptions
    timeout: float | None = 600.0  # seconds of wall time per model
    memory_mib: int | None = 4096  # RLIMIT_DATA of the worker process
    #: onnxruntime's intra-op threads in a worker (its check's runs); None: the executor's share of
    #: the cores, so that ``jobs`` workers do not each start a thread per core
    ort_threads: int | None = None


def worker_command() -> list[str]:
    """The command that converts one model: ``CONVERTER_MIGRATE_WORKER`` (a shell-quoted command
    line, e.g. a wrapper that runs the worker under ``nice`` or, in tests, one that misbehaves)
    or ``python -m converter.migration.worker``."""
    custom = os.environ.get("CONVERTER_MIGRATE_WORKER")
    if custom:
        import shlex

        return shlex.split(custom)
    return [sys.executable, "-m", "converter.migration.worker"]


_live: set[Any] = set()  # worker processes running (subprocess.Popen or _Pid)
_live_lock = threading.Lock()


def kill_running() -> None:
    """SIGKILL every worker process this process started and that is still running (an interrupt)."""
    with _live_lock:
        procs = list(_live)
    for p in procs:
        try:
            p.kill()
        except OSError:  # pragma: no cover - already gone
            pass


def _entry(status: str, reason: str) -> dict[str, Any]:
    return {"status": status, "reason": reason, "output": None, "target": None, "ops_before": None,
            "ops_after": None, "max_error": None, "notes": [], "peak_mib": None}


def _request(task: Task, replace: bool, settings: WorkerSettings) -> dict[str, Any]:
    return {"task": asdict(task), "options": asdict(settings.options), "replace": replace,
            "memory_mib": settings.memory_mib, "ort_threads": settings.ort_threads, "parent": os.getpid(),
            "markers": os.environ.get("CONVERTER_MIGRATE_MARKERS")}


def _use_factory() -> bool:
    """Fork workers from a factory process (zygote.py) unless ``CONVERTER_MIGRATE_WORKER`` names
    another worker program, or this system cannot fork."""
    return not os.environ.get("CONVERTER_MIGRATE_WORKER") and hasattr(os, "fork") and sys.platform != "win32"


def run_isolated(task: Task, replace: bool, settings: WorkerSettings) -> dict[str, Any]:
    """Convert ``task`` in a worker process of its own (see the module docstring); the report
    entry's fields, with ``seconds`` measured here."""
    remove_temporaries(Path(task.output))  # a worker killed on this task before (a retry on a cluster)
    request = _request(task, replace, settings)
    start = time.perf_counter()
    entry = _run_forked(request, settings) if _use_factory() else _run_program(request, settings)
    if entry["status"] != "converted":
        remove_temporaries(Path(task.output))
    entry["seconds"] = round(time.perf_counter() - start, 3)
    return entry


def _timed_out(settings: WorkerSettings) -> dict[str, Any]:
    return _entry("timeout", f"stopped after the time limit of {settings.timeout:g} s")


class _Pid:
    """A worker forked by a factory: what `kill_running` needs of it."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class _Factory:
    """This thread's worker factory (``python -m converter.migration.zygote``) and its output."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "converter.migration.zygote", str(os.getpid())],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
                                     env={**_SINGLE_THREADED, **os.environ})
        self.buffer = b""

    def send(self, request: dict[str, Any]) -> None:
        self.proc.stdin.write((json.dumps(request) + "\n").encode())

    def line(self, deadline: float | None) -> bytes | None:
        """The next line (b"" if the factory is gone), or None when ``deadline`` passes first."""
        import select

        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                return None
            if not select.select([fd], [], [], wait)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b""
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


_factories: dict[int, _Factory] = {}  # by thread id


def _factory() -> _Factory:
    key = threading.get_ident()
    f = _factories.get(key)
    if f is None or f.proc.poll() is not None:
        f = _factories[key] = _Factory()
    return f


def close_factories() -> None:
    """End the worker factories of threads that have ended (their factories were killed with them)
    or, at the end of a run, all of them."""
    alive = {t.ident for t in threading.enumerate()}
    for key in [k for k in _factories if k not in alive]:
        _factories.pop(key).close()


def _run_forked(request: dict[str, Any], settings: WorkerSettings) -> dict[str, Any]:
    factory = _factory()
    worker = None
    try:
        factory.send(request)
        first = factory.line(time.monotonic() + 120)
        if not first:
            raise OSError("the worker factory did not answer")
        worker = _Pid(json.loads(first)["pid"])
        with _live_lock:
            _live.add(worker)
        deadline = None if settings.timeout is None else time.monotonic() + settings.timeout
        line = factory.line(deadline)
        if line is None:  # over the time limit
            worker.kill()
            factory.line(None)
            return _timed_out(settings)
        if not line:
            raise OSError("the worker factory died")
        answer = json.loads(line)
    except BaseException as e:
        if worker is not None:
            worker.kill()
        _factories.pop(threading.get_ident(), None)  # the next task starts a new factory
        factory.proc.kill()
        factory.proc.wait()
        if isinstance(e, (OSError, ValueError)):
            return _entry("failed", f"the worker factory failed: {e}")
        raise
    finally:
        if worker is not None:
            with _live_lock:
                _live.discard(worker)
    if answer["entry"] is not None:
        return answer["entry"]
    status = answer["status"]
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 75:
        return _entry("memory", f"out of memory (limit {settings.memory_mib} MiB)")
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    return _entry("failed", _died(code, ""))


def _run_program(request: dict[str, Any], settings: WorkerSettings) -> dict[str, Any]:
    env = {**_SINGLE_THREADED, **os.environ}
    proc = subprocess.Popen(worker_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, text=True)
    with _live_lock:
        _live.add(proc)
    try:
        try:
            out, err = proc.communicate(json.dumps(request) + "\n", timeout=settings.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return _timed_out(settings)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    finally:
        with _live_lock:
            _live.discard(proc)
    for line in reversed(out.splitlines()):
        if line.startswith(RESULT_MARK):
            return json.loads(line[len(RESULT_MARK):])
    if "MemoryError" in err:
        return _entry("memory", f"out of memory (limit {settings.memory_mib} MiB)")
    return _entry("failed", _died(proc.returncode, err))


def _died(code: int | None, stderr: str) -> str:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the worker process was killed by {name}"
    last = next((line for line in reversed(stderr.splitlines()) if line.strip()), "")
    return f"the worker process exited with status {code}" + (f": {last.strip()[:300]}" if last else "")


OnStart = Callable[[Task], None]
OnResult = Callable[[Task, dict[str, Any]], None]


class Executor(Protocol):
    def run(self, work: Iterable[tuple[Task, bool]], settings: WorkerSettings, on_start: OnStart,
            on_result: OnResult) -> None:
        """Convert every (task, may replace its output) of ``work``; call ``on_start`` (before a
        task is handed out) and ``on_result`` (when it ends) in the calling thread."""


class LocalExecutor:
    """``jobs`` worker processes at a time on this machine."""

    def __init__(self, jobs: int | None = None) -> None:
        self.jobs = max(1, jobs or os.cpu_count() or 1)

    def run(self, work: Iterable[tuple[Task, bool]], settings: WorkerSettings, on_start: OnStart,
            on_result: OnResult) -> None:
        if settings.ort_threads is None:
            settings = dataclasses.replace(settings, ort_threads=max(1, (os.cpu_count() or 1) // self.jobs))
        pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="migrate")
        try:
            _drive(work, self.jobs, lambda t, r: pool.submit(run_isolated, t, r, settings),
                   lambda fs: wait(fs, return_when=FIRST_COMPLETED)[0], lambda f: f.result(), on_start, on_result)
        except BaseException:
            kill_running()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            close_factories()


class DaskExecutor:
    """The tasks on a Dask distributed cluster (``scheduler``: its address; None: a local cluster
    of ``jobs`` single-threaded worker processes). Each task still runs in its own process on the
    cluster worker, so the time and memory limits hold there too (forked by a worker factory of
    the cluster worker's own, as locally)."""

    def __init__(self, scheduler: str | None = None, jobs: int | None = None, client: Any = None) -> None:
        try:
            import distributed  # noqa: F401
        except ImportError:
            from ..errors import UnsupportedError

            raise UnsupportedError("--executor dask needs the 'distributed' package: pip install "
                                   "'converter[dask]'") from None
        self.scheduler = scheduler
        self.jobs = jobs
        self.client = client

    def run(self, work: Iterable[tuple[Task, bool]], settings: WorkerSettings, on_start: OnStart,
            on_result: OnResult) -> None:
        import distributed

        cluster = None
        client = self.client
        if client is None:
            if self.scheduler is None:
                cluster = distributed.LocalCluster(n_workers=self.jobs or os.cpu_count() or 1, threads_per_worker=1,
                                                   processes=True, dashboard_address=None)
                client = distributed.Client(cluster)
            else:
                client = distributed.Client(self.scheduler)
        if settings.ort_threads is None:  # a task per cluster worker thread: one onnxruntime thread each
            settings = dataclasses.replace(settings, ort_threads=1)
        try:
            slots = max(1, sum(client.nthreads().values()))

            def result(f: Any) -> dict[str, Any]:
                try:
                    return f.result()
                except distributed.KilledWorker as e:
                    return {**_entry("failed", f"every cluster worker that ran it died ({e})"), "seconds": None}

            submitted: list[Any] = []

            def submit(task: Task, replace: bool) -> Any:
                submitted.append(client.submit(run_isolated, task, replace, settings, pure=False))
                return submitted[-1]

            try:
                _drive(work, slots, submit, lambda fs: distributed.wait(fs, return_when="FIRST_COMPLETED").done,
                       result, on_start, on_result)
            except BaseException:  # an interrupt: nothing new starts (a running model ends on its own)
                client.cancel(submitted, force=True)
                raise
        finally:
            if self.client is None:
                client.close()
                if cluster is not None:
                    cluster.close()


def _drive(work: Iterable[tuple[Task, bool]], slots: int, submit: Callable[[Task, bool], Any],
           wait_some: Callable[[set], set], result: Callable[[Any], dict[str, Any]], on_start: OnStart,
           on_result: OnResult) -> None:
    """Keep ``slots`` tasks in flight, the largest first (the last to finish is then a short one);
    report each as it ends."""
    pending = iter(sorted(work, key=lambda item: -item[0].size))
    running: dict[Any, Task] = {}

    def refill() -> None:
        while len(running) < slots:
            item = next(pending, None)
            if item is None:
                return
            task, replace = item
            on_start(task)
            running[submit(task, replace)] = task

    refill()
    while running:
        for f in wait_some(set(running)):
            task = running.pop(f)
            on_result(task, result(f))
        refill()


class InlineExecutor:
    """The tasks in this process, one after the other, in order, without limits (``converter convert
    FOLDER``: no process start per model; a monkeypatched function is seen)."""

    def run(self, work: Iterable[tuple[Task, bool]], settings: WorkerSettings, on_start: OnStart,
            on_result: OnResult) -> None:
        from .worker import convert_model

        for task, replace in work:
            on_start(task)
            start = time.perf_counter()
            entry = convert_model(task, settings.options, replace=replace)
            entry["seconds"] = round(time.perf_counter() - start, 3)
            entry.setdefault("peak_mib", None)
            on_result(task, entry)


def make_executor(executor: str = "local", *, jobs: int | None = None, scheduler: str | None = None) -> Executor:
    if scheduler is not None or executor == "dask":
        return DaskExecutor(scheduler, jobs)
    if executor == "inline":
        return InlineExecutor()
    if executor != "local":
        from ..errors import UnsupportedError

        raise UnsupportedError(f"unknown executor '{executor}' (local, dask, inline)")
    return LocalExecutor(jobs)
