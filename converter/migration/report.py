"""The migration report: one entry per model, totals by status, as JSON and Markdown.

Built from the journal (`from_journal`): each model's last ``result`` record for its current
fingerprint and options, so a run interrupted and resumed reports what an uninterrupted run does
(apart from ``seconds`` and ``peak_mib``). Written atomically to ``DST_DIR/migration-report.json``
and ``DST_DIR/migration-report.md``; the JSON follows docs/schemas/migration-report.schema.json.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import printable
from ..formats.atomic import atomic_write_bytes
from .tasks import MigrationOptions, Task

__all__ = ["REPORT_JSON", "REPORT_MD", "STATUSES", "MigrationReport", "ModelEntry"]

REPORT_JSON = "migration-report.json"
REPORT_MD = "migration-report.md"
SCHEMA_ID = "converter-migration-report/1"
#: Every status a model can end with; "pending": not finished (the run was interrupted).
STATUSES = ("converted", "refused", "failed", "timeout", "memory", "pending")
_ENTRY_FIELDS = ("output", "status", "reason", "target", "ops_before", "ops_after", "max_error", "seconds",
                 "peak_mib", "notes")


@dataclass
class ModelEntry:
    source: str  # relative to the source folder
    output: str | None  # relative to the destination folder; None when nothing was written
    status: str
    reason: str | None = None
    target: str | None = None
    ops_before: int | None = None  # ops other than const, nested blocks included
    ops_after: int | None = None
    max_error: float | None = None  # largest absolute output difference found by the check
    seconds: float | None = None
    peak_mib: float | None = None  # the worker process's peak resident memory
    notes: list[str] = field(default_factory=list)
    #: not in the report: {source output: largest difference} of the check, and what the passes did
    differences: dict[str, float] | None = field(default=None, repr=False)
    pass_summary: str | None = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k not in ("differences", "pass_summary")}

    def line(self) -> str:
        """One line for a terminal: ``converted  a/b.mlmodel -> a/b.mlpackage (1.2 s, 45 -> 40 ops, ...)``."""
        facts = []
        if self.seconds is not None:
            facts.append(f"{self.seconds:.1f} s")
        if self.ops_before is not None and self.ops_after is not None:
            facts.append(f"{self.ops_before} -> {self.ops_after} ops")
        if self.max_error is not None:
            facts.append(f"max err {self.max_error:.2g}")
        where = f"{self.source} -> {self.output}" if self.output else self.source
        text = f"{self.status:<10} {where}" + (f" ({', '.join(facts)})" if facts else "")
        if self.reason:
            text += f": {self.reason}"
        return printable(text)


@dataclass
class MigrationReport:
    source: str
    destination: str
    options: dict[str, Any]
    limits: dict[str, Any]
    models: list[ModelEntry]
    copied: list[str] = field(default_factory=list)  # other files copied (--copy-other), relative
    errors: list[str] = field(default_factory=list)  # folders that could not be listed, files not copied

    @property
    def totals(self) -> dict[str, int]:
        counts = Counter(m.status for m in self.models)
        return {"models": len(self.models), **{s: counts.get(s, 0) for s in STATUSES}}

    @property
    def complete(self) -> bool:
        return not any(m.status == "pending" for m in self.models)

    @property
    def ok(self) -> bool:
        """Every model converted and nothing else went wrong."""
        return not self.errors and all(m.status == "converted" for m in self.models)

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA_ID, "source": self.source, "destination": self.destination,
                "options": self.options, "limits": self.limits, "complete": self.complete,
                "totals": self.totals, "models": [m.to_json() for m in self.models], "copied": self.copied,
                "errors": self.errors}

    def summary(self) -> str:
        t = self.totals
        parts = [f"{t[s]} {s}" for s in STATUSES if t[s] or s in ("converted", "failed")]
        return ", ".join(parts)

    def to_markdown(self) -> str:
        def cell(v: Any) -> str:
            return "" if v is None else printable(v).replace("|", "\\|")

        rows = ["# Migration report", "", f"- source: `{cell(self.source)}`",
                f"- destination: `{cell(self.destination)}`",
                f"- options: {', '.join(f'{k}={v}' for k, v in self.options.items())}",
                f"- totals: {self.summary()} (of {len(self.models)} models)", "",
                "| source | output | status | target | ops before | ops after | max error | seconds | peak MiB "
                "| reason |", "|---|---|---|---|---|---|---|---|---|---|"]
        for m in self.models:
            err = None if m.max_error is None else f"{m.max_error:.3g}"
            rows.append("| " + " | ".join(cell(v) for v in (m.source, m.output, m.status, m.target, m.ops_before,
                                                              m.ops_after, err, m.seconds, m.peak_mib, m.reason))
                        + " |")
        if self.copied:
            rows += ["", f"{len(self.copied)} other files copied."]
        if self.errors:
            rows += ["", "## Errors", ""] + [f"- {cell(e)}" for e in self.errors]
        return "\n".join(rows) + "\n"

    def write(self, dst: Path) -> None:
        atomic_write_bytes(dst / REPORT_JSON, (json.dumps(self.to_json(), indent=1) + "\n").encode())
        atomic_write_bytes(dst / REPORT_MD, self.to_markdown().encode())


def entry_from_record(task: Task, rec: dict[str, Any] | None) -> ModelEntry:
    if rec is None:
        return ModelEntry(task.rel, None, "pending")
    return ModelEntry(task.rel, **{k: rec.get(k) for k in _ENTRY_FIELDS if k != "notes"},
                      notes=list(rec.get("notes") or []), differences=rec.get("differences"),
                      pass_summary=rec.get("pass_summary"))


def from_journal(src: Path, dst: Path, tasks: list[Task], results: dict[str, dict[str, Any]],
                 options: MigrationOptions, limits: dict[str, Any], copied: list[str],
                 errors: list[str]) -> MigrationReport:
    """The report of ``tasks``, each from its result record in ``results`` (by ``rel``), sorted by source."""
    models = [entry_from_record(t, results.get(t.rel)) for t in sorted(tasks, key=lambda t: t.rel)]
    return MigrationReport(str(src), str(dst), asdict(options), limits, models, sorted(copied), errors)
