"""How every command ends on an error and prints lines that may hold text from a model file, so
that ``cli.py`` and the command modules (``cli_inspect``, ``cli_verify``, ``cli_migrate``) agree."""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from .errors import ConverterError, printable


def fail(e: ConverterError, code: int = 2) -> NoReturn:
    """``error: ...`` on stderr, then exit with ``code`` (2: an error, 1: a verdict or a refusal)."""
    click.echo(f"error: {e}", err=True)
    sys.exit(code)


def say(text: str, *, err: bool = False) -> None:
    """Print a line that may hold strings from a model file or a file name (escaped: `printable`)."""
    click.echo(printable(text), err=err)
