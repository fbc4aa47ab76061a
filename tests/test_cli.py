"""The command line's own commands: --version, --help, ops [--json], example (inspect: tests/inspect)."""

from __future__ import annotations

import json

from click.testing import CliRunner

import cli
import converter
from converter.ir.opdef import mil_op_types, registered_op_types


def test_version_and_help():
    r = CliRunner().invoke(cli.main, ["--version"])
    assert r.exit_code == 0 and converter.__version__ in r.output
    r = CliRunner().invoke(cli.main, ["--help"])
    assert r.exit_code == 0
    for cmd in ("convert", "run", "ops", "example", "inspect"):
        assert cmd in r.output


def test_ops_json_lists_every_op_with_opsets_and_kernels():
    r = CliRunner().invoke(cli.main, ["ops", "--json"])
    assert r.exit_code == 0
    rows = {row["op"]: row for row in json.loads(r.output)}
    assert set(rows) == set(registered_op_types()) | set(mil_op_types())
    assert all(row["defined"] and row["has_kernel"] for row in rows.values())
    assert rows["conv"]["opsets"] == ["iOS15", "iOS16", "iOS17", "iOS18"]
    assert rows["conv"]["versions"] == ["iOS15", "iOS17"]
    assert rows["read_state"]["opsets"] == ["iOS18"]
    assert rows["coreml_update_state"]["ir_only"]


def test_ops_table_has_one_line_per_op():
    r = CliRunner().invoke(cli.main, ["ops"])
    assert r.exit_code == 0
    assert r.output.strip().splitlines()[-1] == f"{len(set(registered_op_types()) | set(mil_op_types()))} ops"


def test_ops_table_has_a_header_over_its_columns():
    lines = CliRunner().invoke(cli.main, ["ops"]).output.splitlines()
    assert lines[0].split() == ["op", "opsets", "kernel", "origin", "WebNN", "form", "NeuralNetwork", "form", "ONNX",
                                "form"]
    row = next(x for x in lines if x.startswith("conv "))
    for column in ("opsets", "kernel", "origin", "WebNN form", "NeuralNetwork form", "ONNX form"):  # aligned
        assert row[lines[0].index(column)] != " " and row[lines[0].index(column) - 1] == " ", column
    assert len(lines) == 1 + len(json.loads(CliRunner().invoke(cli.main, ["ops", "--json"]).output)) + 1


def test_example_prints_and_runs_a_program():
    r = CliRunner().invoke(cli.main, ["example"])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("program")
    assert "probs = [[" in r.output
