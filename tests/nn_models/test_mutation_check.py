"""Issue 7, the mutation check of the NeuralNetwork layer lowerings (tools/mutate_nn_lowerings.py):
its mutants (tools/nn_mutants.py) and one small end-to-end run of the tool."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from converter.formats.proto import NeuralNetwork_pb2
from tools.nn_mutants import COMMUTATIVE, ORDERLESS, Mutant, changes, layer_mutants, mutated

from .coverage import REPO, SPEC_KINDS


def _scaled_tanh(alpha: float, beta: float) -> NeuralNetwork_pb2.NeuralNetworkLayer:
    layer = NeuralNetwork_pb2.NeuralNetworkLayer(name="act", input=["x"], output=["y"])
    layer.activation.scaledTanh.alpha = alpha
    layer.activation.scaledTanh.beta = beta
    return layer


def test_swapping_alpha_and_beta_is_a_mutant_of_a_copy() -> None:
    layer = _scaled_tanh(1.7, 0.4)
    found = {m.id: effective for m, effective in layer_mutants(layer)}
    assert found == {"activation: scaledTanh.alpha <-> scaledTanh.beta": True}
    m = Mutant("activation", "fields", ("scaledTanh",), "alpha", "beta")
    out = mutated(m, layer)
    assert (out.activation.scaledTanh.alpha, out.activation.scaledTanh.beta) == pytest.approx((0.4, 1.7))
    assert (layer.activation.scaledTanh.alpha, layer.activation.scaledTanh.beta) == pytest.approx((1.7, 0.4))
    assert not changes(m, _scaled_tanh(0.5, 0.5))  # equal values: the swap changes nothing


def test_element_field_and_input_swaps() -> None:
    lstm = NeuralNetwork_pb2.NeuralNetworkLayer(name="l", input=["x", "h", "c"], output=["y"])
    p = lstm.uniDirectionalLSTM
    for kind in ("sigmoid", "tanh", "tanh"):
        getattr(p.activations.add(), kind).SetInParent()
    p.weightParams.inputGateWeightMatrix.floatValue.extend([1.0, 2.0])
    p.weightParams.forgetGateWeightMatrix.floatValue.extend([3.0, 4.0])
    found = {m.id: effective for m, effective in layer_mutants(lstm)}
    assert found["uniDirectionalLSTM: activations[0] <-> activations[1]"]
    assert not found["uniDirectionalLSTM: activations[1] <-> activations[2]"]  # tanh, tanh: equivalent
    assert found["uniDirectionalLSTM: weightParams.inputGateWeightMatrix <-> weightParams.forgetGateWeightMatrix"]
    assert found["uniDirectionalLSTM: input[0] <-> input[1]"]
    swapped = mutated(Mutant("uniDirectionalLSTM", "inputs", (), 0, 1), lstm)
    assert list(swapped.input) == ["h", "x", "c"] and list(lstm.input) == ["x", "h", "c"]
    add = NeuralNetwork_pb2.NeuralNetworkLayer(name="a", input=["x", "y"], output=["z"])
    add.add.SetInParent()
    assert not any(m.family == "inputs" for m, _ in layer_mutants(add))  # commutative
    squeeze = NeuralNetwork_pb2.NeuralNetworkLayer(name="s", input=["x"], output=["y"])
    squeeze.squeeze.axes.extend([0, 2])
    assert not any(m.family == "elements" for m, _ in layer_mutants(squeeze))  # a set of axes


def test_tables_name_spec_kinds() -> None:
    assert set(COMMUTATIVE) <= set(SPEC_KINDS)
    assert {k for k, _ in ORDERLESS} <= set(SPEC_KINDS)


@pytest.mark.slow
def test_the_tool_kills_and_reports_survivors(tmp_path: Path) -> None:
    """About 10 s. Over a test that compares clampedReLU against the spec's formula and a shared
    model whose test compares nothing against an oracle (activations_all): the clampedReLU swap is
    killed; the activation swaps only that model has (scaledTanh's alpha and beta among them, the
    review's swap of issue 7) survive, and the tool exits 1."""
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "XDIST"))}
    proc = subprocess.run(
        [sys.executable, "tools/mutate_nn_lowerings.py", "--kinds", "clampedReLU,activation", "--workers", "1",
         "--json", str(report), "--tests", "tests/nn/test_activation.py::test_clamped_relu",
         "tests/nn_models/test_shared_models.py::test_runs_and_migrates_to_mil[builder/activations_all.mlmodel]"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads(report.read_text())
    killed = r["killed"]["clampedReLU: alpha <-> beta"]
    assert killed["by"].startswith("tests/nn/test_activation.py::test_clamped_relu["), killed
    survivors = {s["id"] for s in r["survivors"]}
    assert "activation: scaledTanh.alpha <-> scaledTanh.beta" in survivors
    assert r["totals"]["killed"] == 1 and r["totals"]["survived"] == len(survivors) >= 1


@pytest.mark.slow
def test_no_parameter_swap_of_any_lowering_survives(tmp_path: Path) -> None:
    """Issue 7's mutation check over every layer kind and every test of tests/nn and tests/nn_models
    (about 3 to 5 minutes on one worker; CI runs it beside the rest of the suite): swapping any two
    parameters of any NeuralNetwork layer lowering makes some test fail."""
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "XDIST"))}
    proc = subprocess.run([sys.executable, "tools/mutate_nn_lowerings.py", "--workers", "1", "--json", str(report)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    r = json.loads(report.read_text()) if report.exists() else {}
    survivors = [s["id"] for s in r.get("survivors", [])]
    assert proc.returncode == 0 and not survivors, (survivors, proc.stdout[-3000:] + proc.stderr[-3000:])
    assert r["totals"]["killed"] >= 900 and not r["crashed"] and not r["failing_unmutated"], r["totals"]
