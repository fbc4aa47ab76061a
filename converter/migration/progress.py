"""Telling the user how a migration goes: a progress bar on a terminal, plain lines otherwise.

When stderr is a terminal, a click progress bar counts the models there and each model that did
not convert is printed above it; otherwise each model gets one line on stdout as it finishes
(``converted  a/b.mlmodel -> a/b.mlpackage (1.2 s, 45 -> 40 ops, max err 3e-07)``), so that a log
or a pipe shows what finished even if the run is then stopped.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

import click

from .report import ModelEntry

__all__ = ["Progress"]


class Progress:
    def __init__(self, *, bar: bool | None = None, stream: TextIO | None = None) -> None:
        err = stream or sys.stderr
        self.bar_wanted = err.isatty() if bar is None else bar
        self._bar: Any = None
        self.finished: list[ModelEntry] = []

    def start(self, to_do: int, total: int) -> None:
        """Called once the work is planned: ``to_do`` of ``total`` models still to convert."""
        if self.bar_wanted and to_do:
            self._bar = click.progressbar(length=to_do, label=f"migrating {to_do} of {total} models",
                                          file=sys.stderr, show_pos=True, show_eta=True)
            self._bar.__enter__()

    def result(self, entry: ModelEntry) -> None:
        self.finished.append(entry)
        if self._bar is None:
            click.echo(entry.line())
            return
        if entry.status != "converted":
            click.echo("\r\033[K" + entry.line(), err=True)
        self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None
