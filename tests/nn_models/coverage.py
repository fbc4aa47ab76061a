"""Which NeuralNetwork layer kinds the tests' models contain, and how a test module says so.

The coverage test (test_coverage.py) needs, for each of the 158 layer kinds of the spec, one test
model that contains it. A layer-family test module under tests/nn/ says which kinds its models
cover in one of two ways:

    from tests.nn_models.coverage import covers

    KINDS_COVERED = {"convolution", "pooling"}       # module level, or

    @covers("convolution")                           # per test (a pytest mark, nn_layers)
    def test_conv_same_padding(tmp_path): ...

Declarations are read statically (no import, so the coverage test is fast and independent of
test order and of pytest-xdist), and checked against what the tests really load: this module is
also a pytest plugin (registered by tests/conftest.py) that records the layer kinds of every
NeuralNetwork model ``converter.load`` reads, per test. A test marked ``@covers(k)`` fails if no
model it (or a fixture of its module) loaded contains ``k``. A module's ``KINDS_COVERED`` is checked
after its last test when the whole module ran in one process (not split by pytest-xdist or ``-k``)
and every test of it passed, and reported as an error at that test's teardown.

A module without any declaration is not ignored: the coverage test derives its kinds by running it
in a subprocess in scan mode (each test stops at its first NeuralNetwork load, after the kinds of
that model are recorded), which is slower and may under-count, never over-count. To print the
declaration to paste into a module:

    python -m tests.nn_models.coverage tests/nn/test_<family>.py

Oracle checks. A test that compares the results of its models against an oracle we did not write
(onnxruntime, torch, coremltools, or a formula written in the test from the spec) says which
layer kinds and subtypes (subtypes.py: ``activation.scaledTanh``, ``unary.type=RSQRT``, ...) that
comparison pins:

    @oracle_checks("clampedReLU", "activation.scaledTanh")
    def test_...(tmp_path): ...

Read statically like ``covers`` (the kinds it names count as covered too), and checked when the
test runs: it fails unless a model it (or its module's fixtures) loaded contains each pair and
it recorded an oracle comparison (``record_oracle``, which the harness's ``compare_with_oracle``
and ``check_close`` against ``onnx_oracle`` outputs call). ``oracle_checks("*")`` marks a
whole-model test whose pairs are those of the models it compares (test_coverage.py reads them
from the model files).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from converter.formats.proto import Model_pb2, NeuralNetwork_pb2

from .subtypes import layer_pairs, unknown_pairs

REPO = Path(__file__).resolve().parents[2]
MARK = "nn_layers"
ORACLE_MARK = "nn_oracle_checks"
ALL_LOADED = "*"  # oracle_checks("*"): every pair of the models the test loads
DECLARATION = "KINDS_COVERED"
# Every NeuralNetworkLayer kind of the spec: the fields of the `layer` oneof.
SPEC_KINDS: tuple[str, ...] = tuple(
    f.name for f in NeuralNetwork_pb2.NeuralNetworkLayer.DESCRIPTOR.oneofs_by_name["layer"].fields)
_OUT_ENV = "CONVERTER_NN_KINDS_OUT"  # scan mode writes {module: kinds} here at session end
_SCAN_ENV = "CONVERTER_NN_KINDS_SCAN"  # "1": stop each test at its first NeuralNetwork load
# "1" under tools/mutate_nn_lowerings.py: its workers run tests outside pytest's protocol hooks, and
# what a test declares is about the unmutated models: the declarations are not checked there
_MUTATION = os.environ.get("CONVERTER_MUTATION") == "1"


def unknown_kinds(kinds: Iterable[str]) -> list[str]:
    return sorted(set(kinds) - set(SPEC_KINDS))


def covers(*kinds: str) -> pytest.MarkDecorator:
    """Mark a test as loading models that contain each of ``kinds`` (checked when it runs)."""
    bad = unknown_kinds(kinds)
    if bad or not kinds:
        raise ValueError(f"covers(): not NeuralNetworkLayer kinds of the spec: {bad or '(none given)'}")
    return getattr(pytest.mark, MARK)(*kinds)


def oracle_checks(*pairs: str) -> pytest.MarkDecorator:
    """Mark a test as comparing, against an oracle we did not write, results of models that contain
    each of ``pairs`` (``kind`` or ``kind.subtype``, see subtypes.py; ``"*"``: every pair of the
    models it loads). Checked when it runs."""
    bad = unknown_pairs(p for p in pairs if p != ALL_LOADED)
    if bad or not pairs:
        raise ValueError(f"oracle_checks(): not (kind, subtype) pairs of the spec: {bad or '(none given)'}")
    return getattr(pytest.mark, ORACLE_MARK)(*pairs)


ORACLES = ("onnxruntime", "torch", "coremltools", "spec formula")


def record_oracle(oracle: str) -> None:
    """Record that the running test compared results against ``oracle`` (one of ``ORACLES``)."""
    if oracle not in ORACLES:
        raise ValueError(f"oracle {oracle!r}: not one of {ORACLES}")
    if _recorder.test is not None:
        _recorder.oracles.setdefault(_recorder.test, set()).add(oracle)


# -- kinds of a model ------------------------------------------------------------------------------

_NN = ("neuralNetwork", "neuralNetworkClassifier", "neuralNetworkRegressor")
_PIPELINES = ("pipeline", "pipelineClassifier", "pipelineRegressor")


def networks(model: Model_pb2.Model) -> Iterator[Any]:
    """Every neural network of a model, pipeline stages included."""
    kind = model.WhichOneof("Type")
    if kind in _NN:
        yield getattr(model, kind)
    elif kind in _PIPELINES:
        pipeline = model.pipeline if kind == "pipeline" else getattr(model, kind).pipeline
        for sub in pipeline.models:
            yield from networks(sub)


def network_kinds(nn: Any) -> set[str]:
    """Layer kinds of a network, the networks nested in branch and loop layers included."""
    from converter.frontends.neuralnetwork.model import iter_layers

    return {k for _, layer in iter_layers(nn) if (k := layer.WhichOneof("layer"))}


def model_kinds(model: Model_pb2.Model) -> set[str]:
    return set().union(*(network_kinds(nn) for nn in networks(model)))


def network_pairs(nn: Any, skip: Iterable[str] = ()) -> set[str]:
    """(kind, subtype) pairs of a network's layers (subtypes.py), nested networks included;
    ``skip``: names of top-level layers left out."""
    from converter.frontends.neuralnetwork.model import iter_layers

    skip = set(skip)
    return set().union(*(layer_pairs(layer) for path, layer in iter_layers(nn) if path or layer.name not in skip))


def model_pairs(model: Model_pb2.Model, skip: Iterable[str] = ()) -> set[str]:
    return set().union(*(network_pairs(nn, skip) for nn in networks(model)))


# -- static declarations ---------------------------------------------------------------------------


def _strings(node: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def _call_name(node: ast.AST) -> str:
    if not isinstance(node, ast.Call):
        return ""
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _is_covers_call(node: ast.AST) -> bool:
    return _call_name(node) in ("covers", MARK)


def _is_oracle_call(node: ast.AST) -> bool:
    return _call_name(node) in ("oracle_checks", ORACLE_MARK)


def declared_kinds(path: Path) -> set[str] | None:
    """The kinds a test module declares (``KINDS_COVERED`` and ``covers(...)`` / ``mark.nn_layers(...)``
    anywhere in it), or None when it declares nothing."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] | None = None
    for node in ast.walk(tree):
        value = None
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == DECLARATION for t in node.targets):
            value = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == DECLARATION:
            value = node.value
        elif _is_covers_call(node):
            value = ast.Tuple(elts=list(node.args), ctx=ast.Load())  # type: ignore[union-attr]
        elif _is_oracle_call(node):
            pairs = _strings(ast.Tuple(elts=list(node.args), ctx=ast.Load()))  # type: ignore[union-attr]
            found = (found or set()) | {p.split(".")[0] for p in pairs if p != ALL_LOADED}
        if value is not None:
            found = (found or set()) | _strings(value)
    return found


def declared_oracle_pairs(path: Path) -> dict[str, list[str]]:
    """{pair: [test functions]} that a test module declares with ``oracle_checks(...)`` (``"*"``
    included: whole-model tests, see test_coverage.py)."""
    tree = ast.parse(path.read_text(), str(path))
    out: dict[str, list[str]] = {}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if _is_oracle_call(node):
                    for pair in sorted(_strings(ast.Tuple(elts=list(node.args), ctx=ast.Load()))):  # type: ignore
                        out.setdefault(pair, []).append(fn.name)
    return out


# -- recording what tests load (the pytest plugin) -------------------------------------------------


class _Stop(Exception):
    """Scan mode: the model's kinds are recorded, the test need not go on."""


class _Recorder:
    def __init__(self) -> None:
        self.module: str | None = None  # path (relative to the repository) of the running test's module
        self.test: str | None = None  # node id of the running test
        self.setup = False  # in the setup phase (fixtures)
        self.by_module: dict[str, set[str]] = {}  # everything the module's tests loaded in this process
        self.by_test: dict[str, set[str]] = {}  # what a test loaded in its setup and call
        self.by_fixtures: dict[str, set[str]] = {}  # what the module's tests loaded while setting up
        self.pairs_by_test: dict[str, set[str]] = {}  # (kind, subtype) pairs, as by_test
        self.pairs_by_fixtures: dict[str, set[str]] = {}  # ... and as by_fixtures
        self.oracles: dict[str, set[str]] = {}  # test -> oracles it compared results against
        self.scan = os.environ.get(_SCAN_ENV) == "1"

    def record(self, models: list[Model_pb2.Model]) -> None:
        if self.module is None or self.test is None:
            return
        kinds = set().union(*(network_kinds(nn) for m in models for nn in networks(m)))
        self.by_module.setdefault(self.module, set()).update(kinds)
        self.by_test.setdefault(self.test, set()).update(kinds)
        if self.setup:
            self.by_fixtures.setdefault(self.module, set()).update(kinds)
        if not self.scan:
            pairs = set().union(*(model_pairs(m) for m in models))
            self.pairs_by_test.setdefault(self.test, set()).update(pairs)
            if self.setup:
                self.pairs_by_fixtures.setdefault(self.module, set()).update(pairs)
        if self.scan:
            raise _Stop(f"scan mode: recorded {sorted(kinds)}")

    def install(self) -> None:
        from converter.frontends.neuralnetwork import model as nn_model

        original = nn_model.check_layers
        if getattr(original, "recorder", None) is not None:
            return

        def check_layers(models: list[Model_pb2.Model], file: str) -> None:
            self.record(models)
            original(models, file)

        check_layers.recorder = self  # type: ignore[attr-defined]
        nn_model.check_layers = check_layers


_recorder = _Recorder()
_executed: dict[str, int] = {}  # module -> items run in this process
_deselected: set[str] = set()  # modules some of whose items were deselected
_LAST_OF_MODULE = pytest.StashKey[bool]()
_unfinished: set[str] = set()  # modules some of whose items failed or were skipped (they may not have loaded all)


def _module_of(item: pytest.Item) -> str:
    try:
        return item.path.resolve().relative_to(REPO).as_posix()
    except ValueError:
        return item.path.as_posix()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARK}(*kinds): NeuralNetwork layer kinds the test's models contain")
    config.addinivalue_line("markers", f"{ORACLE_MARK}(*pairs): (kind, subtype) pairs the test compares against "
                                       f"an oracle")
    _recorder.install()


def pytest_deselected(items: list[pytest.Item]) -> None:
    _deselected.update(_module_of(i) for i in items)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    module = _recorder.module = _module_of(item)
    _recorder.test = item.nodeid
    _executed[module] = _executed.get(module, 0) + 1
    # whether this is the last test of its module that this process runs (read at its teardown)
    item.stash[_LAST_OF_MODULE] = nextitem is None or _module_of(nextitem) != module
    yield
    _recorder.module = _recorder.test = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    _recorder.setup = True
    yield
    _recorder.setup = False


def _declared_at_module_level(item: pytest.Item) -> set[str] | None:
    module = getattr(item, "module", None)
    value = getattr(module, DECLARATION, None)
    return set(value) if value is not None else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()
    module = _module_of(item)
    if not rep.passed:
        _unfinished.add(module)
    if _recorder.scan or _MUTATION or not rep.passed:
        return
    if rep.when == "call":
        declared = {k for m in item.iter_markers(MARK) for k in m.args}
        loaded = _recorder.by_test.get(item.nodeid, set()) | _recorder.by_fixtures.get(module, set())
        missing = sorted(declared - loaded)
        if missing:
            rep.outcome = "failed"
            rep.longrepr = (f"@covers{tuple(missing)}: no NeuralNetwork model this test (or its module's "
                            f"fixtures) loaded contains these layer kinds (loaded: {sorted(loaded)})")
            return
        problem = _oracle_problem(item, module)
        if problem:
            rep.outcome = "failed"
            rep.longrepr = problem
    elif rep.when == "teardown":
        loaded = _recorder.by_module.get(module, set())
        declared = _declared_at_module_level(item)
        if not item.stash.get(_LAST_OF_MODULE, False) or declared is None or module in _deselected \
                or module in _unfinished:
            return
        collected = sum(1 for i in item.session.items if _module_of(i) == module)
        missing = sorted(declared - loaded)
        if _executed.get(module) == collected and missing:
            rep.outcome = "failed"
            rep.longrepr = (f"{module}: {DECLARATION} names layer kinds that no model its tests loaded contains: "
                            f"{missing}")


def _oracle_problem(item: pytest.Item, module: str) -> str | None:
    """Why the test's ``oracle_checks`` declaration does not hold (None when it holds or is absent)."""
    marks = list(item.iter_markers(ORACLE_MARK))
    if not marks:
        return None
    declared = {p for m in marks for p in m.args if p != ALL_LOADED}
    loaded = _recorder.pairs_by_test.get(item.nodeid, set()) | _recorder.pairs_by_fixtures.get(module, set())
    missing = sorted(declared - loaded)
    if missing:
        return (f"@oracle_checks{tuple(missing)}: no NeuralNetwork model this test (or its module's fixtures) "
                f"loaded contains these (kind, subtype) pairs (loaded: {sorted(loaded)})")
    if not _recorder.oracles.get(item.nodeid):
        return ("@oracle_checks: the test recorded no comparison against an oracle (compare with "
                "tests/nn/common.py compare_with_oracle, or check_close against onnx_oracle's outputs)")
    return None


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = os.environ.get(_OUT_ENV)
    if out:
        Path(out).write_text(json.dumps({k: sorted(v) for k, v in _recorder.by_module.items()}))


# -- deriving the kinds of undeclared modules ------------------------------------------------------


def derive_kinds(modules: list[Path], timeout: float = 300.0) -> dict[str, set[str]]:
    """{module: kinds} of what the tests of ``modules`` load, from a scan-mode pytest subprocess."""
    if not modules:
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "kinds.json"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "XDIST"))}
        env.update({_OUT_ENV: str(out), _SCAN_ENV: "1"})
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "--no-header",
               "--tb=no", *[str(m) for m in modules]]
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
        if not out.exists():
            raise RuntimeError(f"scan of {[str(m) for m in modules]} wrote nothing:\n{proc.stdout[-3000:]}"
                               f"{proc.stderr[-3000:]}")
        return {k: set(v) for k, v in json.loads(out.read_text()).items()}


def main(argv: list[str]) -> None:
    """Print the KINDS_COVERED declaration of each test module given (derived by a scan)."""
    paths = [Path(a).resolve() for a in argv]
    for module, kinds in sorted(derive_kinds(paths).items()):
        print(f"# {module}\n{DECLARATION} = {{{', '.join(repr(k) for k in sorted(kinds))}}}")


if __name__ == "__main__":
    main(sys.argv[1:])
