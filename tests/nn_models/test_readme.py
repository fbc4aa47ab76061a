"""Issue 4, the README's first command: install, migrate the bundled legacy example to an
.mlpackage and print the largest output difference. The converter part of that command runs here
exactly as written (through click's CliRunner, from a directory holding the repository's examples/)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

import cli
import converter

from .coverage import REPO

COMMAND = "converter convert examples/tiny_classifier.mlmodel -o tiny_classifier.mlpackage --check"


def _first_command() -> str:
    block = re.search(r"```bash\n(.*?)\n```", (REPO / "README.md").read_text(), re.S)
    assert block is not None, "the README has no bash block"
    return block.group(1).strip()


def test_readme_first_command_installs_and_migrates_the_example() -> None:
    steps = [s.strip() for s in _first_command().split("&&")]
    assert steps[:3] == ["python3 -m venv .venv", ". .venv/bin/activate", "pip install ."]
    assert steps[3:] == [COMMAND]


def test_readme_command_prints_a_small_difference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "examples").symlink_to(REPO / "examples", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    argv = shlex.split(COMMAND)
    assert argv[0] == "converter"
    result = CliRunner().invoke(cli.main, argv[1:])
    assert result.exit_code == 0, result.output
    assert "wrote tiny_classifier.mlpackage" in result.output
    assert result.stdout.splitlines()[-1] == "PASS: 2 outputs within tolerance", result.output
    found = re.search(r"^classProbability +(\S+) ", result.stdout, re.M)  # the verify table's max abs err
    assert found is not None, result.output
    assert float(found.group(1)) <= 1e-6
    migrated = converter.load(tmp_path / "tiny_classifier.mlpackage")
    assert [v.name for v in migrated.main.outputs] == ["classProbability", "classLabel"]
