"""Batch migration: convert every model in a folder tree, continuing past failures.

Each ``.mlmodel`` file and ``.mlpackage`` directory under the source folder becomes an
``.mlpackage`` at the same relative place under the output folder. A model that cannot be
converted is reported with its error and the rest go on; nothing partial is written for it.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ConversionWarning, ConverterError


@dataclass
class Outcome:
    source: Path
    output: Path | None
    error: ConverterError | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None


def find_models(root: Path) -> Iterator[Path]:
    """``.mlmodel`` files and ``.mlpackage`` directories under ``root`` (packages are not entered)."""
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        for d in sorted(dirnames):
            if d.endswith(".mlpackage"):
                yield here / d
        dirnames[:] = sorted(d for d in dirnames if not d.endswith(".mlpackage"))
        for f in sorted(filenames):
            if f.endswith(".mlmodel"):
                yield here / f


def convert_tree(src: Path, out: Path, *, target: str | None = None) -> list[Outcome]:
    from .api import load, save

    outcomes = []
    for path in find_models(src):
        dest = (out / path.relative_to(src)).with_suffix(".mlpackage")
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            prog = load(path)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConversionWarning)
                save(prog, dest, target=target)
            notes = list(prog.meta.get("notes", [])) + [str(w.message) for w in caught]
            outcomes.append(Outcome(path, dest, notes=notes))
        except ConverterError as e:
            outcomes.append(Outcome(path, None, e))
    return outcomes
