"""pytest plugin of tools/mutate_nn_lowerings.py: a worker that runs test items over and over in one
process, recording what the NeuralNetwork layer lowerings see or lowering mutated layers.

Activated only by the tool (``-p tools.nn_mutation_plugin`` with ``NN_MUTATION_DIR`` set). It wraps
every entry of the frontend's layer dispatch (registry.LOWERINGS, which NetworkConverter.
convert_layers and the nested networks of branch and loop layers go through) and replaces pytest's
run loop with its own:

- ``record`` mode: each collected item is run once; for every layer a lowering is handed, the
  mutants of that layer (tools/nn_mutants.py) are recorded with whether they change it.
- ``mutate`` mode: for each mutant of ``tasks.json``, its tests are run in the order given with the
  mutant installed (lowerings of its kind get a mutated copy of the layer), until one fails
  (killed, once the same test is seen to pass unmutated) or none is left (survivor).

Every item runs as if alone (``nextitem=None``: every fixture, session-scoped memos included, is
set up afresh, so a test converts its models itself instead of reusing another test's conversion),
with the module-level random generators of the test modules reset to their state after collection
(reruns draw the same inputs) and a time limit. Tasks are claimed through exclusive files in
``claims/``, so any number of workers share one list; results are JSON lines in
``results-<worker>.jsonl``. ``CONVERTER_MUTATION=1`` (set by the tool) makes the harness skip the
MIL round trip and coremltools' loader, which see the same mutation on both sides, and makes the
coverage plugin skip its declaration checks.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _pytest.runner import runtestprotocol

from tools.nn_mutants import Mutant, changes, layer_mutants, mutated

WORKDIR = Path(os.environ["NN_MUTATION_DIR"]) if os.environ.get("NN_MUTATION_DIR") else None
MODE = os.environ.get("NN_MUTATION_MODE", "record")
WORKER = os.environ.get("NN_MUTATION_WORKER", "0")
TIMEOUT = float(os.environ.get("NN_MUTATION_TIMEOUT", "120"))


class TestTimeout(Exception):
    """A test ran longer than the mutation tool's limit."""


class _State:
    """What the wrapped lowerings consult: the running test and the mutant to apply."""

    def __init__(self) -> None:
        self.test: str | None = None
        self.mutant: Mutant | None = None
        self.applied = 0  # layers mutated in the running test
        self.seen_kinds: set[str] = set()
        self.generated: dict[str, Mutant] = {}
        self.effective: set[str] = set()
        self._cache: dict[tuple[str, bytes, bool], list[tuple[Mutant, bool]]] = {}

    def reset(self) -> None:
        self.applied = 0
        self.seen_kinds = set()
        self.generated = {}
        self.effective = set()

    def record(self, layer: Any, kind: str) -> None:
        self.seen_kinds.add(kind)
        key = (kind, getattr(layer, kind).SerializeToString(deterministic=True),
               len(layer.input) >= 2 and layer.input[0] != layer.input[1])
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = list(layer_mutants(layer))
        for m, effective in found:
            self.generated[m.id] = m
            if effective:
                self.effective.add(m.id)


STATE = _State()


def _wrap(kind: str, lower: Any) -> Any:
    def lowering(ctx: Any) -> Any:
        if MODE == "record":
            STATE.record(ctx.layer, kind)
        elif STATE.mutant is not None and STATE.mutant.kind == kind and changes(STATE.mutant, ctx.layer):
            layer = mutated(STATE.mutant, ctx.layer)
            ctx.layer = layer
            ctx.params = getattr(layer, kind)
            if STATE.mutant.family == "inputs":
                ctx.inputs[0], ctx.inputs[1] = ctx.inputs[1], ctx.inputs[0]
            STATE.applied += 1
        return lower(ctx)

    lowering.__wrapped__ = lower  # type: ignore[attr-defined]
    lowering.__name__ = getattr(lower, "__name__", kind)
    return lowering


def _install() -> None:
    from converter.frontends.neuralnetwork.registry import load_all

    lowerings = load_all()
    for kind, lower in list(lowerings.items()):
        if not hasattr(lower, "__wrapped__"):
            lowerings[kind] = _wrap(kind, lower)


# -- running items in isolation ------------------------------------------------------------------------


class _Rngs:
    """Module-level random generators of the test modules, reset before each run."""

    def __init__(self) -> None:
        import numpy as np

        self.saved: list[tuple[Any, Any]] = []
        for name, module in list(sys.modules.items()):
            if not name.startswith("tests") or module is None:
                continue
            for value in vars(module).values():
                if isinstance(value, np.random.Generator):
                    self.saved.append((value.bit_generator, copy.deepcopy(value.bit_generator.state)))
                elif isinstance(value, np.random.RandomState):
                    self.saved.append((value, value.get_state()))
        self.np_global = np.random.get_state()
        import random

        self.py_global = random.getstate()

    def restore(self) -> None:
        import random

        import numpy as np

        for owner, state in self.saved:
            if hasattr(owner, "set_state"):
                owner.set_state(state)
            else:
                owner.state = copy.deepcopy(state)
        np.random.set_state(self.np_global)
        random.setstate(self.py_global)


def _alarm(signum: int, frame: Any) -> None:
    raise TestTimeout(f"the test ran longer than {TIMEOUT:g} s")


class _Runner:
    def __init__(self, session: pytest.Session) -> None:
        self.session = session
        self.items = {i.nodeid: i for i in session.items}
        self.rngs = _Rngs()
        self.basetemp = session.config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
        self.baseline: dict[str, bool] = {}

    def run(self, nodeid: str) -> tuple[bool, str, float]:
        """(passed, first line of the failure, seconds) of one isolated run of the item."""
        item = self.items[nodeid]
        self.rngs.restore()
        STATE.test = nodeid
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, TIMEOUT)
        start = time.perf_counter()
        try:
            reports = runtestprotocol(item, log=False, nextitem=None)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
            STATE.test = None
        seconds = time.perf_counter() - start
        self._clean_tmp()
        bad = [r for r in reports if r.failed or r.skipped]
        if not bad:
            return True, "", seconds
        r = bad[0]
        why = "skipped" if r.skipped else _first_line(r)
        return False, f"{r.when}: {why}", seconds

    def passes_unmutated(self, nodeid: str) -> bool:
        if nodeid not in self.baseline:
            mutant, STATE.mutant = STATE.mutant, None
            try:
                self.baseline[nodeid] = self.run(nodeid)[0]
            finally:
                STATE.mutant = mutant
        return self.baseline[nodeid]

    def _clean_tmp(self) -> None:
        for child in self.basetemp.iterdir():
            shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink(missing_ok=True)


def _first_line(report: Any) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr)
    line = next((s for s in text.splitlines() if s.strip()), "")
    return line[:300]


def _claims(tasks: int, prefix: str) -> Iterator[int]:
    """Indices of the tasks this worker claims (each claimed by exactly one worker)."""
    claims = WORKDIR / "claims"  # type: ignore[operator]
    claims.mkdir(exist_ok=True)
    for i in range(tasks):
        try:
            fd = os.open(claims / f"{prefix}{i}", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            continue
        os.write(fd, WORKER.encode())
        os.close(fd)
        yield i


def _record(runner: _Runner, out: Any) -> None:
    ids = list(runner.items)
    for i in _claims(len(ids), "r"):
        STATE.reset()
        passed, why, seconds = runner.run(ids[i])
        out.write(json.dumps({
            "test": ids[i], "passed": passed, "why": why, "seconds": round(seconds, 4),
            "kinds": sorted(STATE.seen_kinds),
            "generated": {k: m.to_json() for k, m in STATE.generated.items()},
            "effective": sorted(STATE.effective)}) + "\n")
        out.flush()


def _mutate(runner: _Runner, out: Any) -> None:
    tasks = json.loads((WORKDIR / "tasks.json").read_text())  # type: ignore[operator]
    for i in _claims(len(tasks), "m"):
        task = tasks[i]
        STATE.mutant = Mutant.from_json(task["mutant"])
        start = time.perf_counter()
        result: dict[str, Any] = {"id": STATE.mutant.id, "status": "survived", "ran": [], "unusable": []}
        for nodeid in task["tests"]:
            if nodeid not in runner.items:
                result["unusable"].append(nodeid)
                continue
            STATE.applied = 0
            passed, why, _ = runner.run(nodeid)
            result["ran"].append(nodeid)
            if passed:
                if STATE.applied == 0:  # the test lowered no layer the mutant changes (not as recorded)
                    result.setdefault("not_applied", []).append(nodeid)
                continue
            if not runner.passes_unmutated(nodeid):  # fails without the mutant too: says nothing
                result["unusable"].append(nodeid)
                continue
            result.update(status="killed", by=nodeid, why=why)
            break
        STATE.mutant = None
        result["seconds"] = round(time.perf_counter() - start, 3)
        out.write(json.dumps(result) + "\n")
        out.flush()


def pytest_configure(config: pytest.Config) -> None:
    if WORKDIR is not None:
        _install()


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    if WORKDIR is None:
        return None
    if session.testsfailed and not session.config.option.continue_on_collection_errors:
        raise session.Interrupted(f"{session.testsfailed} error(s) during collection")
    runner = _Runner(session)
    with open(WORKDIR / f"results-{MODE}-{WORKER}.jsonl", "a") as out:
        (_record if MODE == "record" else _mutate)(runner, out)
    return True
