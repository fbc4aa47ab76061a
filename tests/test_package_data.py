"""Every data file the package reads at run time (op tables, protos, WebNN limits, the recorder)
is declared as package data, so a non-editable install (`pip install .`) ships it: the WebNN
backend once failed there for want of its limits table."""

from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _declared_patterns() -> list[str]:
    text = (REPO / "pyproject.toml").read_text()
    section = text.split("[tool.setuptools.package-data]", 1)[1]
    match = re.search(r"^converter\s*=\s*(\[.*?\])", section, re.S | re.M)
    assert match, "no package-data entry for converter"
    return ast.literal_eval(match.group(1))


def test_every_data_file_of_the_package_is_declared() -> None:
    patterns = _declared_patterns()
    package = REPO / "converter"
    data = [p.relative_to(package).as_posix() for p in package.rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts]
    assert data
    missing = [f for f in data if not any(fnmatch.fnmatch(f, pat) for pat in patterns)]
    assert missing == []
