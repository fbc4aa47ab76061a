"""What the user sees while a migration runs: a line per model on stdout when stderr is not a
terminal; with a progress bar (stderr a terminal), only the models that did not convert are
printed, on stderr, and stdout stays empty."""

from __future__ import annotations

from converter.migration.progress import Progress
from converter.migration.report import ModelEntry

CONVERTED = ModelEntry("a/b.mlmodel", "a/b.mlpackage", "converted", None, "iOS15", 45, 40, 3e-7, 1.23, 50.0)
REFUSED = ModelEntry("t.mlmodel", None, "refused", "model type 'treeEnsembleRegressor' cannot be converted",
                     seconds=0.31)


def test_plain_lines_without_a_terminal(capsys):
    progress = Progress(bar=False)
    progress.start(2, 3)
    progress.result(CONVERTED)
    progress.result(REFUSED)
    progress.close()
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        "converted  a/b.mlmodel -> a/b.mlpackage (1.2 s, 45 -> 40 ops, max err 3e-07)",
        "refused    t.mlmodel (0.3 s): model type 'treeEnsembleRegressor' cannot be converted"]
    assert err == ""


def test_with_a_bar_only_the_problems_are_printed(capsys):
    progress = Progress(bar=True)
    progress.start(2, 3)
    progress.result(CONVERTED)
    progress.result(REFUSED)
    progress.close()
    out, err = capsys.readouterr()
    assert out == ""
    assert "refused    t.mlmodel (0.3 s): model type 'treeEnsembleRegressor'" in err
    assert "a/b.mlmodel" not in err
    assert "migrating 2 of 3 models" in err


def test_names_from_files_are_escaped():
    entry = ModelEntry("evil\x1b]0;title\x07.mlmodel", None, "failed", "bad\nline")
    assert "\x1b" not in entry.line() and "\n" not in entry.line() and "\\x1b" in entry.line()
