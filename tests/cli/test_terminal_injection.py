"""Issue 7, terminal injection: strings from a model file (layer and feature names) and file names
reach the terminal only escaped, so a name cannot retitle or reprogram the terminal (an OSC
sequence), hide text (bidi controls) or split one error over several lines (a newline).

The models are built with coremltools' NeuralNetworkBuilder, with names holding such characters."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from converter.errors import ConverterError
from tests.cli.helpers import invoke, one_error_line
from tests.nn.common import builder

OSC = "\x1b]0;pwned\x07"  # retitles an xterm-compatible terminal
EVIL_IN, EVIL_OUT = f"in{OSC}\nput", f"out\u202e{OSC}"
EVIL_LAYER = f"fc{OSC}\nbad"
# What may not reach a terminal: C0 (but the newline ending each line), DEL, C1, line separators, bidi.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _assert_safe(text: str, *prefixes: str) -> None:
    assert not RAW.search(text), repr(text)
    for line in text.splitlines():
        assert line.startswith(prefixes), (line, prefixes)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("evil")
    b = builder({EVIL_IN: (3,)}, [EVIL_OUT], nd=True)
    b.add_activation(f"relu{OSC}\n", "RELU", EVIL_IN, "mid")
    b.add_activation(f"lin{OSC}", "LINEAR", "mid", EVIL_OUT, params=[2.0, 1.0])
    (d / "good.mlmodel").write_bytes(b.spec.SerializeToString())
    b = builder({EVIL_IN: (3,)}, [EVIL_OUT], nd=True)
    b.add_inner_product(EVIL_LAYER, W=np.ones((2, 4), np.float32), b=None, input_channels=4, output_channels=2,
                        has_bias=False, input_name=EVIL_IN, output_name=EVIL_OUT)
    (d / "bad.mlmodel").write_bytes(b.spec.SerializeToString())
    np.savez(d / "in.npz", **{EVIL_IN: np.ones(3, np.float32)})
    return {"good": d / "good.mlmodel", "bad": d / "bad.mlmodel", "feeds": d / "in.npz"}


def test_errors_render_control_characters_as_escapes():
    from converter.errors import printable

    e = ConverterError(f"name '{EVIL_LAYER}' \x9b31m\x7f\u2028\u202e\udcff é ok", op=EVIL_LAYER, field="a\tb")
    assert str(e) == ("op 'fc\\x1b]0;pwned\\x07\\nbad', field 'a\\tb': name 'fc\\x1b]0;pwned\\x07\\nbad' "
                      "\\x9b31m\\x7f\\u2028\\u202e\\udcff é ok")
    assert e.message.startswith("name 'fc\x1b")  # the message keeps the name itself, for callers
    assert printable("C:\\models\\new") == "C:\\models\\new"


def test_an_error_naming_a_hostile_layer_is_one_escaped_line(models, tmp_path: Path):
    line = one_error_line(invoke("convert", models["bad"], "-o", tmp_path / "x.mlpackage"))
    _assert_safe(line, "error: ")
    assert "op 'fc\\x1b]0;pwned\\x07\\nbad' (layer innerProduct), field 'inputChannels'" in line


def test_notes_and_check_lines_are_escaped(models, tmp_path: Path):
    out = tmp_path / "x.mlpackage"
    result = invoke("convert", models["good"], "-o", out, "--check")
    assert result.exit_code == 0, result.output
    _assert_safe(result.stderr, "note: ", "running ")
    _assert_safe(result.stdout, "wrote ", "output ", "out\\u202e", "note: ", "PASS: ")
    assert "note: function 'main' input 'in\\x1b]0;pwned\\x07\\nput' is written as 'in__0_pwned__put'" in result.stderr
    row = result.stdout.splitlines()[2]  # wrote, the header, the row
    assert row.split()[0] == "out\\u202e\\x1b]0;pwned\\x07" and row.endswith("  ok")
    assert "note: inputs paired by position (no input of that name): 'in\\x1b]0;pwned\\x07\\nput' -> " \
        "'in__0_pwned__put'" in result.stdout


def test_run_output_names_are_escaped(models):
    result = invoke("run", models["good"], "--inputs", models["feeds"])
    assert result.exit_code == 0, result.output
    _assert_safe(result.stdout, "out")
    assert result.stdout.splitlines() == ["out\\u202e\\x1b]0;pwned\\x07 = [3. 3. 3.]"]


def test_folder_lines_are_escaped(models, tmp_path: Path):
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(models["good"], src / f"good{OSC}.mlmodel")  # file names are not safe either
    shutil.copy(models["bad"], src / "bad.mlmodel")
    result = invoke("convert", src, "-o", tmp_path / "out")
    assert result.exit_code == 1, result.output
    _assert_safe(result.stdout, "ok      ", "failed  ", "        note: ", "1 converted, 1 failed")
    assert f"ok      {src}/good\\x1b]0;pwned\\x07.mlmodel -> " in result.stdout
    assert "failed  " in result.stdout and "op 'fc\\x1b]0;pwned\\x07\\nbad'" in result.stdout
