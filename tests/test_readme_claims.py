"""Issue 7: the README, the package description and the CLI help claim only what converts today.

A format is claimed as an output only where the CLI's ``convert --to`` accepts it; formats that are
not built yet may be named only as planned. (The README's test-oracle section may mention WebNN's
conformance vectors and onnxruntime: they are oracles, not outputs.)"""

from __future__ import annotations

import re
from pathlib import Path

import click

import cli
import converter

REPO = Path(__file__).resolve().parents[1]
# Formats the product card names that may not be built yet, by the words that name them.
PLANNED = {"webnn": "WebNN", "onnx": "ONNX"}


def _to_choices() -> set[str]:
    convert = cli.main.commands["convert"]
    option = next(p for p in convert.params if p.name == "fmt")
    assert isinstance(option.type, click.Choice)
    return {c.lower() for c in option.type.choices}


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", " ".join(text.split())) if s]


def _intro() -> str:
    readme = (REPO / "README.md").read_text()
    return readme.split("```", 1)[0]


def test_unbuilt_formats_are_named_only_as_planned() -> None:
    built = _to_choices()
    texts = {
        "README intro": _intro(),
        "pyproject description": re.search(r'^description = "(.*)"$', (REPO / "pyproject.toml").read_text(), re.M).group(1),
        "CLI help": cli.main.help or "",
        "package docstring": (converter.__doc__ or "").splitlines()[0],
    }
    for fmt, word in PLANNED.items():
        if fmt in built:
            continue
        for where, text in texts.items():
            for sentence in _sentences(text):
                if word in sentence:
                    assert "planned" in sentence, f"{where} claims {word}, which `convert --to` cannot write: {sentence!r}"


def test_readme_what_converts_lists_only_readable_and_writable_formats() -> None:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## What converts", 1)[1].split("\n## ", 1)[0]
    for fmt, word in PLANNED.items():
        if fmt not in _to_choices():
            assert word not in section, f"'What converts' mentions {word}, which is not built"


def test_the_readme_nn_to_mil_example_runs_the_default_pipeline_and_prints_ops_before_and_after(
        tmp_path: Path, capsys) -> None:
    """Issue 8: the README's Python NN -> ML program example, run on a shared NeuralNetwork model."""
    from .conftest import MODELS

    source = MODELS / "torch" / "lstm_nn.mlmodel"
    block = (REPO / "README.md").read_text().split("```python", 1)[1].split("```", 1)[0]
    lines = block.splitlines()
    end = next(i for i, line in enumerate(lines) if "converter.convert(" in line)
    code = "\n".join(lines[: end + 1])
    assert "converter.optimize(prog" in code and "print(stats.summary())" in code
    code = code.replace('"OldModel.mlmodel"', repr(str(source))).replace('"NewModel.mlpackage"',
                                                                         repr(str(tmp_path / "new.mlpackage")))
    exec(compile(code, "README.md", "exec"), {})  # noqa: S102 - the README's own example
    printed = capsys.readouterr().out
    before = sum(1 for op in converter.load(source).main.walk() if op.type != "const")
    after = sum(1 for op in converter.load(tmp_path / "new.mlpackage").main.walk() if op.type != "const")
    assert printed.startswith(f"ops {before} -> {after} (const ops "), printed
