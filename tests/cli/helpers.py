"""Helpers of the command-line tests: run the CLI, prove a path was not modified."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from click.testing import CliRunner, Result

import cli


def invoke(*args: object) -> Result:
    return CliRunner().invoke(cli.main, [str(a) for a in args])


def digest(path: Path) -> str:
    """Every name, mode and content under ``path`` (a file or a folder, symlinks not followed)."""
    h = hashlib.sha256()
    path = Path(path)
    entries = [path] + (sorted(path.rglob("*")) if path.is_dir() and not path.is_symlink() else [])
    for p in entries:
        st = p.lstat()
        h.update(f"{p.relative_to(path)}\0{st.st_mode}\0{st.st_ino}\0".encode())
        if p.is_file() and not p.is_symlink():
            h.update(p.read_bytes())
        elif p.is_symlink():
            h.update(os.readlink(p).encode())
    return h.hexdigest()


def temporaries(root: Path) -> list[str]:
    """Names the atomic writers use for temporaries (``.NAME.<hex>.tmp`` / ``.old``) under ``root``."""
    return sorted(str(p.relative_to(root)) for p in Path(root).rglob(".*")
                  if p.name.endswith((".tmp", ".old")))


def one_error_line(result: Result, code: int = 2) -> str:
    """The single ``error: ...`` line of a command that failed with ``code`` (no traceback)."""
    assert result.exit_code == code, (result.exit_code, result.output)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]
