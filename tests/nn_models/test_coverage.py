"""Issue 4, coverage: every NeuralNetworkLayer kind of the spec (the 158 fields of the `layer`
oneof) has a lowering, except `custom`, which is refused with an UnsupportedError; and every kind
is contained in at least one test model: a model of the layer-family tests under tests/nn/ (as
their modules declare, see coverage.py) or a shared model the whole-model tests run.

Issue 7, oracle coverage: every (kind, subtype) pair of the spec (subtypes.py) is pinned by a
value comparison against an oracle we did not write: a test declaring it with ``oracle_checks``
(checked when the test runs, see coverage.py), or a model that a whole-model oracle test compares
(test_onnx_oracle.py against onnxruntime, test_torch.py against torch). No pair is exempt.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

import converter
from converter.errors import UnsupportedError
from converter.formats.proto import Model_pb2
from converter.frontends.neuralnetwork.registry import load_all

from . import test_onnx_oracle, test_torch
from .coverage import (
    ALL_LOADED,
    REPO,
    SPEC_KINDS,
    declared_kinds,
    declared_oracle_pairs,
    derive_kinds,
    model_kinds,
    model_pairs,
    unknown_kinds,
)
from .shared import MALFORMED_LAYERS, RUNS, model_id, read_spec
from .subtypes import EXCLUDED, PAIRS, kind_subtypes, unknown_pairs

FAMILY_TESTS = sorted((REPO / "tests" / "nn").glob("test_*.py"))
ORACLE_TEST_MODULES = FAMILY_TESTS + sorted((REPO / "tests" / "nn_models").glob("test_*.py"))
# Whole-model oracle tests (declared ``oracle_checks("*")``): the models each compares.
WHOLE_MODEL_ORACLE_TESTS = {
    ("tests/nn_models/test_onnx_oracle.py", "test_matches_onnxruntime"): test_onnx_oracle.CHECKED,
    ("tests/nn_models/test_torch.py", "test_matches_torch_before_and_after_mil"): test_torch.NN_MODELS,
}


def test_spec_kinds() -> None:
    assert len(SPEC_KINDS) == len(set(SPEC_KINDS)) == 158
    assert {"convolution", "innerProduct", "loop", "NonMaximumSuppression", "custom"} <= set(SPEC_KINDS)


def test_every_kind_but_custom_has_a_lowering() -> None:
    lowerings = load_all()
    assert sorted(set(lowerings) - set(SPEC_KINDS)) == [], "lowerings registered for kinds the spec lacks"
    assert [k for k in SPEC_KINDS if k != "custom" and k not in lowerings] == []
    assert "custom" not in lowerings


def _custom_layer_model() -> Model_pb2.Model:
    """Spec 4: a custom layer at the top level and one inside a branch's else network."""
    m = Model_pb2.Model(specificationVersion=4)
    for name, shape in (("x", [3]), ("cond", [1])):
        f = m.description.input.add(name=name)
        f.type.multiArrayType.shape.extend(shape)
        f.type.multiArrayType.dataType = f.type.multiArrayType.FLOAT32
    m.description.output.add(name="y").type.multiArrayType.dataType = 65568
    nn = m.neuralNetwork
    top = nn.layers.add(name="my_custom", input=["x"], output=["c"])
    top.custom.className = "MyLayer"
    branch = nn.layers.add(name="choose", input=["cond"], output=[])
    branch.branch.ifBranch.layers.add(name="then_copy", input=["c"], output=["y"]).copy.SetInParent()
    nested = branch.branch.elseBranch.layers.add(name="other_custom", input=["c"], output=["y"])
    nested.custom.className = "OtherLayer"
    return m


def test_custom_layers_are_refused_all_at_once(tmp_path: Path) -> None:
    path = tmp_path / "custom.mlmodel"
    path.write_bytes(_custom_layer_model().SerializeToString())
    with pytest.raises(UnsupportedError) as info:
        converter.load(path)
    msg = info.value.message
    assert msg.startswith("2 layer(s) cannot be converted")
    assert "'my_custom' is a custom layer (class 'MyLayer')" in msg
    assert "'choose/else/other_custom' is a custom layer (class 'OtherLayer')" in msg
    assert info.value.file == str(path)


def test_declarations_name_spec_kinds() -> None:
    for module in FAMILY_TESTS:
        assert unknown_kinds(declared_kinds(module) or ()) == [], f"{module.name} declares kinds the spec lacks"


def test_every_kind_has_a_test_model() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    where["custom"].append("tests/nn_models/test_coverage.py")
    for path in RUNS:
        for kind in model_kinds(read_spec(path)):
            where[kind].append(model_id(path))
    undeclared = []
    for module in FAMILY_TESTS:
        kinds = declared_kinds(module)
        if kinds is None:
            undeclared.append(module)
            continue
        for kind in kinds:
            where[kind].append(module.relative_to(REPO).as_posix())
    # modules that declare nothing: what their tests load (slow; declare KINDS_COVERED instead)
    for module, kinds in derive_kinds(undeclared).items():
        for kind in kinds:
            where[kind].append(f"{module} (derived)")
    missing = [k for k in SPEC_KINDS if k not in where]
    assert missing == [], (f"{len(missing)} layer kinds have no test model: {missing} (modules without a "
                           f"declaration, derived by a scan: {[m.name for m in undeclared]})")


def _run_probe(tmp_path: Path, source: str) -> str:
    """pytest's output for the test module ``source``, run in a subprocess with the coverage plugin."""
    import os
    import subprocess
    import sys

    (tmp_path / "test_probe.py").write_text(source)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "XDIST"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.nn_models.coverage", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "-q", "-rA", "--rootdir", str(tmp_path), str(tmp_path / "test_probe.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    return proc.stdout


_PLUGIN_PROBE = '''
import pytest
import converter
from converter.formats.proto import Model_pb2
from tests.nn_models.coverage import covers

KINDS_COVERED = {"activation", "pooling"}


def _relu_model(path):
    m = Model_pb2.Model(specificationVersion=1)
    for feature in (m.description.input.add(name="x"), m.description.output.add(name="y")):
        feature.type.multiArrayType.shape.append(2)
        feature.type.multiArrayType.dataType = 65568
    m.neuralNetwork.layers.add(name="relu", input=["x"], output=["y"]).activation.ReLU.SetInParent()
    path.write_bytes(m.SerializeToString())
    return converter.load(path)


@covers("activation")
def test_loads_what_it_declares(tmp_path):
    _relu_model(tmp_path / "m.mlmodel")


@covers("convolution")
def test_declares_what_it_does_not_load(tmp_path):
    _relu_model(tmp_path / "m.mlmodel")
'''


def test_declarations_are_checked_against_what_tests_load(tmp_path: Path) -> None:
    """The plugin fails a test whose @covers kind no model it loaded contains, and reports a
    KINDS_COVERED kind no model of the module contains at the module's last teardown."""
    out = _run_probe(tmp_path, _PLUGIN_PROBE)
    assert "PASSED test_probe.py::test_loads_what_it_declares" in out, out[-3000:]
    assert "FAILED test_probe.py::test_declares_what_it_does_not_load" in out, out[-3000:]
    assert "@covers('convolution',): no NeuralNetwork model this test (or its module's fixtures) loaded" in out
    assert "ERROR at teardown of test_declares_what_it_does_not_load" in out
    assert "KINDS_COVERED names layer kinds that no model its tests loaded contains: ['pooling']" in out


# -- issue 7: every (kind, subtype) pair pinned by an oracle -------------------------------------------


def test_pairs_of_the_spec() -> None:
    """Subtypes come from the proto: oneof members and enum values, nested messages included."""
    assert {"activation.scaledTanh", "activation.parametricSoftplus", "padding.reflection", "pooling.includeLastPixel",
            "convolution.same.asymmetryMode=TOP_LEFT_HEAVY", "unary.type=RSQRT", "reduce.mode=ARGMAX",
            "gru.activations.sigmoidHard", "innerProduct", "upsample.linearUpsampleMode=ALIGN_CORNERS_TRUE",
            "cropResize.boxIndicesMode.boxMode=CENTER_SIZE_WIDTH_FIRST"} <= set(PAIRS)
    assert len([s for s in kind_subtypes("activation")]) == 13
    assert "gru.activations.ELU" in EXCLUDED and "gru.activations.ELU" not in PAIRS
    assert not any(p.split(".")[0] == "custom" for p in PAIRS)
    assert {p.split(".")[0] for p in PAIRS} == set(SPEC_KINDS) - {"custom"}
    assert all(EXCLUDED.values())


def oracle_checked() -> dict[str, list[str]]:
    """{pair: where an oracle comparison pins it}."""
    where: dict[str, list[str]] = defaultdict(list)
    for module in ORACLE_TEST_MODULES:
        rel = module.relative_to(REPO).as_posix()
        for pair, tests in declared_oracle_pairs(module).items():
            if pair != ALL_LOADED:
                where[pair] += [f"{rel}::{t}" for t in tests]
    for (rel, test), models in WHOLE_MODEL_ORACLE_TESTS.items():
        for path in models:
            for pair in model_pairs(read_spec(path), skip=MALFORMED_LAYERS.get(model_id(path), ())):
                where[pair].append(f"{rel}::{test}[{model_id(path)}]")
    return where


def test_oracle_declarations_name_spec_pairs() -> None:
    whole = set()
    for module in ORACLE_TEST_MODULES:
        declared = declared_oracle_pairs(module)
        assert unknown_pairs(p for p in declared if p != ALL_LOADED) == [], f"{module.name} declares unknown pairs"
        whole |= {(module.relative_to(REPO).as_posix(), t) for t in declared.get(ALL_LOADED, [])}
    assert whole == set(WHOLE_MODEL_ORACLE_TESTS), "oracle_checks('*') tests must be listed with their models"


def test_every_pair_has_an_oracle_check() -> None:
    """Every (kind, subtype) pair is pinned by a value comparison against an oracle we did not write."""
    where = oracle_checked()
    missing = [p for p in PAIRS if p not in where]
    assert missing == [], f"{len(missing)} (kind, subtype) pairs have no oracle check: {missing}"


_ORACLE_PROBE = '''
import numpy as np
import converter
from converter.formats.proto import Model_pb2
from tests.nn.common import compare_with_oracle
from tests.nn_models.coverage import oracle_checks


def _relu(path):
    m = Model_pb2.Model(specificationVersion=1)
    for feature in (m.description.input.add(name="x"), m.description.output.add(name="y")):
        feature.type.multiArrayType.shape.append(2)
        feature.type.multiArrayType.dataType = 65568
    m.neuralNetwork.layers.add(name="relu", input=["x"], output=["y"]).activation.ReLU.SetInParent()
    path.write_bytes(m.SerializeToString())
    x = np.array([-1.0, 2.0], np.float32)
    return x, converter.run(converter.load(path), {"x": x})["y"]


@oracle_checks("activation.ReLU")
def test_compares_what_it_declares(tmp_path):
    x, y = _relu(tmp_path / "m.mlmodel")
    compare_with_oracle(y, np.maximum(x, 0), oracle="spec formula", rtol=0, atol=0)


@oracle_checks("activation.scaledTanh")
def test_declares_a_pair_it_does_not_load(tmp_path):
    x, y = _relu(tmp_path / "m.mlmodel")
    compare_with_oracle(y, np.maximum(x, 0), oracle="spec formula", rtol=0, atol=0)


@oracle_checks("activation.ReLU")
def test_compares_against_no_oracle(tmp_path):
    x, y = _relu(tmp_path / "m.mlmodel")
    np.testing.assert_array_equal(y, np.maximum(x, 0))
'''


def test_oracle_checks_are_checked_against_what_tests_do(tmp_path: Path) -> None:
    """The plugin fails a test whose oracle_checks pair no model it loaded contains, and one that
    declares oracle checks but records no comparison against an oracle."""
    out = _run_probe(tmp_path, _ORACLE_PROBE)
    assert "PASSED test_probe.py::test_compares_what_it_declares" in out, out[-3000:]
    assert "FAILED test_probe.py::test_declares_a_pair_it_does_not_load" in out, out[-3000:]
    assert "@oracle_checks('activation.scaledTanh',): no NeuralNetwork model this test" in out
    assert "FAILED test_probe.py::test_compares_against_no_oracle" in out, out[-3000:]
    assert "the test recorded no comparison against an oracle" in out
