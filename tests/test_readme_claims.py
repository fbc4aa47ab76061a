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


def _command_lines(text: str) -> list[str]:
    """The ``converter ...`` lines of the README's command-line block, comments cut."""
    block = text.split("## Command line", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.startswith("converter ")]


def test_the_readme_onnx_commands_run(tmp_path: Path, monkeypatch) -> None:
    """Each README command with ``model.onnx`` (ONNX in) and the ``--to onnx --check`` one (ONNX out)
    runs as written, in a folder holding a torch-exported model.onnx (and model.mlpackage for
    verify and inspect)."""
    import shlex
    import shutil

    from click.testing import CliRunner

    from .onnx_cli.models import torch_cnn

    lines = _command_lines((REPO / "README.md").read_text())
    onnx_in = [line for line in lines if "model.onnx" in line]
    onnx_out = [line for line in lines if "--to onnx --check" in line]
    assert {shlex.split(line)[1] for line in onnx_in} >= {"convert", "verify", "inspect"}, onnx_in
    assert len(onnx_out) == 1
    model = torch_cnn(tmp_path / "model.onnx")
    for i, line in enumerate(onnx_in + onnx_out):
        here = tmp_path / f"run{i}"
        here.mkdir()
        shutil.copy(model, here / "model.onnx")
        shutil.copy(REPO / "examples" / "tiny_classifier.mlmodel", here / "MODEL")
        args = shlex.split(line)[1:]
        if args[0] != "convert":
            converter.convert(here / "model.onnx", out=here / "model.mlpackage")
        monkeypatch.chdir(here)
        r = CliRunner().invoke(cli.main, args)
        assert r.exit_code == 0, (line, r.output)


def test_the_ort_extra_and_the_runtime_choices_are_as_the_readme_says() -> None:
    readme = (REPO / "README.md").read_text()
    assert "pip install 'converter[ort]'" in readme
    extra = re.search(r"^ort = \[(.*)\]$", (REPO / "pyproject.toml").read_text(), re.M)
    assert extra is not None and "onnxruntime" in extra.group(1)
    said = re.search(r"--runtime ([a-z|]+)", readme.split("## Runtimes", 1)[1]).group(1).split("|")
    for name in ("run", "verify", "convert", "migrate"):
        option = next(p for p in cli.main.commands[name].params if p.name == "runtime")
        assert sorted(option.type.choices) == sorted(said), name


def test_the_api_docs_onnx_examples_run(tmp_path: Path, monkeypatch) -> None:
    """docs/api.md's ONNX Python blocks, run as written in a folder holding the files they name."""
    import shutil

    from .onnx_cli.models import torch_cnn

    doc = (REPO / "docs" / "api.md").read_text().split("## ONNX models", 1)[1].split("\n## ", 1)[0]
    blocks = [b.split("```", 1)[0] for b in doc.split("```python")[1:]]
    assert len(blocks) == 2
    torch_cnn(tmp_path / "model.onnx")
    for name in ("Old.mlmodel", "Classifier.mlmodel"):
        shutil.copy(REPO / "examples" / "tiny_classifier.mlmodel", tmp_path / name)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(blocks[0], "docs/api.md", "exec"), namespace)  # noqa: S102 - the docs' own example
    exec(compile(blocks[1], "docs/api.md", "exec"), namespace)  # noqa: S102
    assert namespace["report"].ok
    import onnx

    onnx.checker.check_model(onnx.load("Old.onnx"), full_check=True)
    assert onnx.load("Old.onnx").opset_import[0].version == 17
