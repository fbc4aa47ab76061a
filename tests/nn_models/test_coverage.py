"""Issue 4, coverage: every NeuralNetworkLayer kind of the spec (the 158 fields of the `layer`
oneof) has a lowering, except `custom`, which is refused with an UnsupportedError; and every kind
is contained in at least one test model: a model of the layer-family tests under tests/nn/ (as
their modules declare, see coverage.py) or a shared model the whole-model tests run.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

import converter
from converter.errors import UnsupportedError
from converter.formats.proto import Model_pb2
from converter.frontends.neuralnetwork.registry import load_all

from .coverage import REPO, SPEC_KINDS, declared_kinds, derive_kinds, model_kinds, unknown_kinds
from .shared import RUNS, model_id, read_spec

FAMILY_TESTS = sorted((REPO / "tests" / "nn").glob("test_*.py"))


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
    import os
    import subprocess
    import sys

    (tmp_path / "test_probe.py").write_text(_PLUGIN_PROBE)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "XDIST"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.nn_models.coverage", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "-q", "-rA", "--rootdir", str(tmp_path), str(tmp_path / "test_probe.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    out = proc.stdout
    assert "PASSED test_probe.py::test_loads_what_it_declares" in out, out[-3000:]
    assert "FAILED test_probe.py::test_declares_what_it_does_not_load" in out, out[-3000:]
    assert "@covers('convolution',): no NeuralNetwork model this test (or its module's fixtures) loaded" in out
    assert "ERROR at teardown of test_declares_what_it_does_not_load" in out
    assert "KINDS_COVERED names layer kinds that no model its tests loaded contains: ['pooling']" in out
