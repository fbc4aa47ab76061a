"""Python side of the real-browser WebNN harness (issue 9, point 3): starts tests/webnn/browser/driver.mjs
(Chromium 153 from npm, driven by puppeteer-core) and sends it one JSON line per request.

One client is one browser; tests/webnn/conftest.py keeps one per pytest session (per xdist worker)."""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).resolve().parent / "browser" / "driver.mjs"
NPM_PACKAGES = ("@sparticuz/chromium", "puppeteer-core")
START_TIMEOUT_S = 90.0
REQUEST_SLACK_S = 15.0  # beyond the request's own in-browser timeout, for the driver to answer it

# WebNN data types -> numpy dtypes (feeds are sent, outputs received, as raw little-endian bytes).
DTYPES = {
    "float32": np.float32, "float16": np.float16, "int32": np.int32, "uint32": np.uint32,
    "int64": np.int64, "uint64": np.uint64, "int8": np.int8, "uint8": np.uint8,
}


class BrowserError(RuntimeError):
    """The page, the module or WebNN reported an error (the driver's message), or the driver failed."""


def module_features(folder: Path, which: str = "inputs") -> Any:
    """The ``inputs``, ``outputs`` or ``labels`` export of a generated model.js (written as JSON there)."""
    text = (Path(folder) / "model.js").read_text(encoding="utf-8")
    start = text.index(f"export const {which} = ") + len(f"export const {which} = ")
    end = text.index(";\n", start)
    return json.loads(text[start:end].replace('\n ["__proto__"]:', '\n "__proto__":'))  # a computed key in JS


def missing_requirements() -> str | None:
    """Why the browser cannot start here (no node, or `npm ci` not run), or None."""
    if shutil.which("node") is None:
        return "node is not installed"
    for package in NPM_PACKAGES:
        if not (REPO / "node_modules" / package / "package.json").is_file():
            return f"npm package {package} is not installed (run `npm ci` in the repository)"
    return None


@dataclass
class RunResult:
    outputs: dict[str, np.ndarray]
    fetch_ms: float
    build_ms: float
    run_ms: list[float]
    page_ms: float
    console: list[str] = field(default_factory=list)


@dataclass
class PageView:
    """What a visited page shows (`WebnnBrowser.visit_page`)."""

    text: dict[str, list[str]]  # selector -> textContent of each matching element
    page_errors: list[str]  # uncaught exceptions in the page
    console: list[str]


@dataclass
class PageResult:
    """What one of our own pages publishes (`WebnnBrowser.open_page`)."""

    result: object  # what the page published, decoded from JSON
    page_ms: float
    console: list[str] = field(default_factory=list)


class WebnnBrowser:
    """A running driver and its browser. Use as a context manager, or call close()."""

    def __init__(self, webnn: bool = True) -> None:
        argv = ["node", str(DRIVER)] + ([] if webnn else ["--no-webnn"])
        started = time.perf_counter()
        # Own process group: Ctrl-C in the terminal reaches pytest, which then closes us in order.
        self._proc = subprocess.Popen(argv, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, text=True, bufsize=1, start_new_session=True)
        self._next_id = 0
        self.browser_pid: int | None = None
        try:
            ready = self._read_line(START_TIMEOUT_S, "starting the browser")
        except BaseException:
            self.close()
            raise
        if not ready.get("ready"):
            self.close()
            raise BrowserError(ready.get("error", f"the driver did not start: {ready}"))
        self.browser_pid = ready.get("browser_pid")
        self.version: str = ready.get("browser_version", "")
        self.startup_s = time.perf_counter() - started

    def __enter__(self) -> WebnnBrowser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read_line(self, timeout_s: float, what: str) -> dict:
        assert self._proc.stdout is not None
        ready, _, _ = select.select([self._proc.stdout], [], [], timeout_s)
        if not ready:
            self.close()
            raise BrowserError(f"{what}: no answer from the browser driver within {timeout_s:.0f} s")
        line = self._proc.stdout.readline()
        if not line:
            code = self._proc.poll()
            self.close()
            raise BrowserError(f"{what}: the browser driver exited (code {code})")
        return json.loads(line)

    def _request(self, request: dict, timeout_s: float, what: str) -> dict:
        if self._proc.poll() is not None:
            raise BrowserError("the browser driver is not running")
        self._next_id += 1
        request = {"id": self._next_id, **request, "timeout_ms": int(timeout_s * 1000)}
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(request) + "\n")
        self._proc.stdin.flush()
        answer = self._read_line(timeout_s + REQUEST_SLACK_S, what)
        if answer.get("id") != self._next_id:
            raise BrowserError(f"answer out of order: {answer}")
        return answer

    def visit_page(self, folder: Path, visit: str = "index.html", steps: list[dict] | None = None,
                   text: list[str] | None = None, timeout_s: float = 60.0) -> PageView:
        """Open `visit` from `folder` in a fresh tab, perform `steps` in order ({"wait_for": selector},
        {"click": selector}, {"select": selector, "value": v}, {"upload": selector, "files": [paths]})
        and return the text of every element matching each selector of `text`."""
        request = {"page": str(Path(folder).resolve()), "visit": visit, "steps": steps or [], "text": text or []}
        answer = self._request(request, timeout_s, f"opening {folder}/{visit}")
        if not answer.get("ok"):
            raise BrowserError(f"{answer.get('error', 'unknown error')} [page shows: {answer.get('text')}; "
                               f"page errors: {answer.get('page_errors')}; console: {answer.get('console')}]")
        return PageView(answer["text"], answer["page_errors"], answer["console"])

    def run(self, page: Path, feeds: dict[str, np.ndarray], module: str = "model.js", runs: int = 1,
            via: str = "build", timeout_s: float = 60.0) -> RunResult:
        """Import `module` from the folder `page` in a fresh tab, build its graph, run it `runs` times
        on `feeds` and return its outputs (reshaped to the module's declared output shapes)."""
        request = {
            "page": str(Path(page).resolve()), "module": module, "runs": runs, "via": via,
            "feeds": {name: base64.b64encode(np.ascontiguousarray(value).tobytes()).decode("ascii")
                      for name, value in feeds.items()},
        }
        answer = self._request(request, timeout_s, f"running {page}/{module}")
        outputs = {}
        for name, out in answer["outputs"].items():
            array = np.frombuffer(base64.b64decode(out["data"]), dtype=DTYPES[out["dataType"]])
            outputs[name] = array.reshape(out["shape"])
        return RunResult(outputs, answer["fetch_ms"], answer["build_ms"], answer["run_ms"], answer["page_ms"],
                         answer.get("console", []))

    def open_page(self, page: Path, mounts: dict[str, Path] | None = None, query: dict[str, object] | None = None,
                  timeout_s: float = 60.0) -> PageResult:
        """Open an HTML page of our own in a fresh tab and return what it publishes in
        ``globalThis.__pageResult`` (see "open" in driver.mjs). Each folder of ``mounts`` is served and
        its URL given to the page as the query parameter of that name; ``query`` adds plain parameters.
        A result ``{"ok": false, "error": ...}`` or an uncaught error in the page raises BrowserError."""
        request = {
            "open": str(Path(page).resolve()), "query": {k: str(v) for k, v in (query or {}).items()},
            "mounts": {name: str(Path(folder).resolve()) for name, folder in (mounts or {}).items()},
        }
        answer = self._request(request, timeout_s, f"opening {page}")
        return PageResult(answer["result"], answer["page_ms"], answer.get("console", []))

    def _request(self, request: dict, timeout_s: float, what: str) -> dict:
        """Send one request, wait for its answer; a failure becomes a BrowserError with the page's console."""
        if self._proc.poll() is not None:
            raise BrowserError("the browser driver is not running")
        self._next_id += 1
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps({"id": self._next_id, "timeout_ms": int(timeout_s * 1000), **request}) + "\n")
        self._proc.stdin.flush()
        answer = self._read_line(timeout_s + REQUEST_SLACK_S, what)
        if answer.get("id") != self._next_id:
            raise BrowserError(f"answer out of order: {answer}")
        if not answer.get("ok"):
            console = "; ".join(answer.get("console", []))
            raise BrowserError(answer.get("error", "unknown error") + (f" [console: {console}]" if console else ""))
        return answer

    def close(self) -> None:
        """Ask the driver to quit, then make sure neither it nor the browser is left running."""
        proc = self._proc
        if proc.poll() is None:
            try:
                assert proc.stdin is not None
                proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
                proc.stdin.close()
            except (BrokenPipeError, OSError, ValueError):
                pass
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                _kill_group(proc.pid)
                proc.wait(timeout=10)
        # Puppeteer starts the browser in its own process group (pid = group id): end it if it outlived
        # the driver (for instance when the driver was killed).
        if self.browser_pid:
            _kill_group(self.browser_pid)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None and not stream.closed:
                stream.close()


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
