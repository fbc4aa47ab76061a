"""Every hostile or broken file of the corpus (tests/hostile/corpus.py) through the library and the
CLI, each in a child process limited to 5 s and 1 GiB: a one-line converter error (exit 2 from the
CLI) or success, as the case expects; never a traceback, a hang or unbounded memory.

The library run is what ``converter convert --check`` does (load, save, load the output, run both
on random inputs: tests/hostile/harness.py); the CLI runs are ``converter convert CASE -o OUT --check``
through the console entry point, with the interpreter (as the library) and with onnxruntime. Together about 15 s on an idle machine (three cases run loops to
the interpreter's default bound of 10,000 iterations; the slowest case takes about 1 s).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hostile.corpus import CASES
from tests.hostile.harness import Harness, Result, problems


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    with Harness() as h:
        yield h


def _check(what: str, r: Result, expect: str, fragment: str) -> None:
    wrong = problems(r, expect=expect)
    text = r.message if r.exit_code is None else r.stderr
    if expect == "error" and r.outcome == "error" and fragment and fragment not in text:
        wrong.append(f"the error does not mention {fragment!r}")
    assert not wrong, f"{what}: {'; '.join(wrong)}: {r.describe()}"


@pytest.mark.parametrize("name", list(CASES))
def test_corpus_case(name: str, tmp_path: Path, harness: Harness) -> None:
    case = CASES[name]
    folder = tmp_path / "case"
    folder.mkdir()
    model = case.make(folder)
    _check("library", harness.library(model), case.expect, case.fragment)
    cli = harness.cli("convert", model, "-o", tmp_path / "out.mlpackage", "--check", "--runtime", "interpreter")
    _check("CLI", cli, case.expect, case.fragment)
    # onnxruntime may compute what the interpreter refuses (a cropped deconvolution without its huge
    # uncropped intermediate, a list length folded away): an error or a result, never a traceback,
    # a hang or unbounded memory
    ort = harness.cli("convert", model, "-o", tmp_path / "out_ort.mlpackage", "--check", "--runtime", "onnxruntime")
    _check("CLI with onnxruntime", ort, "either", "")
