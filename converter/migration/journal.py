"""The migration journal: what was started and what finished, so that a rerun resumes.

``DST_DIR/.converter-migrate/journal.jsonl``: append-only JSON lines, one per event, each written
with one ``write`` and fsynced before the run goes on, so that a crash or ``kill -9`` loses at most
the line being written (a torn last line is ignored when read, and a new line is started after it).
Records (every one has ``"v": 1``, ``"event"`` and ``"time"``):

- ``run``: a run began (``options``, ``pid``).
- ``start``: a model was handed to a worker (``rel``, ``fingerprint``, ``options``, ``output_path``:
  the absolute destination).
- ``result``: it finished (the same keys plus the report entry's fields: ``status``, ``reason``,
  ``output`` relative to the destination folder, ...; ``output_path`` is null when nothing was written).

A rerun skips a model whose last record is a ``result`` for the same fingerprint and options
(`MigrationOptions.key`) whose output, if it has one, still exists; a ``timeout`` or ``memory``
result is redone when the limit is now higher. The journal is locked (``flock``) while a run uses
it, so that two runs cannot share a destination folder.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

from ..errors import ConverterError
from .tasks import Task

__all__ = ["JOURNAL_DIR", "Journal", "NoJournal", "read_records"]

JOURNAL_DIR = ".converter-migrate"
JOURNAL_NAME = "journal.jsonl"
TERMINAL = frozenset({"converted", "refused", "failed", "timeout", "memory"})


def read_records(path: Path) -> list[dict[str, Any]]:
    """Every complete record of the journal at ``path`` (a torn or unreadable line is skipped)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    records = []
    lines = data.split(b"\n")
    if not data.endswith(b"\n"):
        lines.pop()  # torn by a crash mid-write
    for line in lines:
        if not line.strip():
            continue
        with contextlib.suppress(ValueError):
            rec = json.loads(line)
            if isinstance(rec, dict) and rec.get("v") == 1:
                records.append(rec)
    return records


class Journal:
    """The journal of one destination folder, open and locked for one run."""

    def __init__(self, dst: Path) -> None:
        self.folder = dst / JOURNAL_DIR
        self.path = self.folder / JOURNAL_NAME
        self.folder.mkdir(parents=True, exist_ok=True)
        self.records = read_records(self.path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(self._fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise ConverterError("another migration is writing to this folder (its journal is locked)",
                                     file=str(self.path)) from None
            raise
        size = os.fstat(self._fd).st_size
        if size:
            with open(self.path, "rb") as f:
                f.seek(size - 1)
                if f.read(1) != b"\n":  # a torn last line: end it, so the next record stands alone
                    os.write(self._fd, b"\n")
        self.last: dict[str, dict[str, Any]] = {}
        self._owned: set[tuple[str, str]] = set()
        for rec in self.records:
            self._index(rec)

    def _index(self, rec: dict[str, Any]) -> None:
        rel = rec.get("rel")
        if rec.get("event") in ("start", "result") and isinstance(rel, str):
            self.last[rel] = rec
            if rec.get("output_path") and (rec["event"] == "start" or rec.get("output")):
                self._owned.add((rel, rec["output_path"]))

    def append(self, event: str, **fields: Any) -> dict[str, Any]:
        rec = {"v": 1, "event": event, "time": round(time.time(), 3), **fields}
        os.write(self._fd, (json.dumps(rec, sort_keys=True) + "\n").encode())
        os.fsync(self._fd)
        self.records.append(rec)
        self._index(rec)
        return rec

    def done(self, task: Task, options_key: str, *, timeout: float | None,
             memory_mib: int | None) -> dict[str, Any] | None:
        """The result record that makes ``task`` need no rerun, or None (see the module docstring)."""
        rec = self.last.get(task.rel)
        if rec is None or rec.get("event") != "result" or rec.get("status") not in TERMINAL:
            return None
        if rec.get("fingerprint") != task.fingerprint or rec.get("options") != options_key:
            return None
        if rec.get("output_path") and not os.path.lexists(rec["output_path"]):
            return None
        if rec["status"] == "timeout" and _raised(rec.get("timeout"), timeout):
            return None
        if rec["status"] == "memory" and _raised(rec.get("memory_mib"), memory_mib):
            return None
        return rec

    def wrote(self, task: Task) -> bool:
        """Whether an earlier run of this journal wrote (or was writing) ``task``'s output: then it
        is ours to replace, not the user's."""
        return (task.rel, task.output) in self._owned

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # also releases the lock
            self._fd = -1


class NoJournal:
    """No journal (``converter convert FOLDER``): nothing is recorded, nothing skipped."""

    def append(self, event: str, **fields: Any) -> dict[str, Any]:
        return {"event": event, **fields}

    def done(self, task: Task, options_key: str, **limits: Any) -> None:
        return None

    def wrote(self, task: Task) -> bool:
        return False

    def close(self) -> None:
        pass


def _raised(before: Any, now: Any) -> bool:
    if before is None:
        return False
    return now is None or now > before
