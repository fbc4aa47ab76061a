"""Harness shared by the NeuralNetwork layer tests (tests/nn): models built with coremltools'
NeuralNetworkBuilder are converted (``converter.load``) and run (``converter.run``); every converted
program is also saved as an .mlpackage, loaded again and run again (bit-identical outputs) and
handed to coremltools' MIL proto loader, which re-runs its own type inference on every op we emit.
Also here: the onnxmltools + onnxruntime oracle, the malformed-model check, a closeness check and
``compare_with_oracle``, which records the running test's oracle comparisons for the coverage
plugin's ``oracle_checks`` declarations (tests/nn_models/coverage.py).
Helpers of a single layer family stay in that family's ``*_util`` module or test file.

Under tools/mutate_nn_lowerings.py (``CONVERTER_MUTATION=1``) the MIL round trip and coremltools'
loader are skipped: both sides of the round trip see the same mutated lowering, so they cannot
tell a mutant from the original, and they are most of a test's time."""

from __future__ import annotations

import functools
import logging
import os
import tempfile
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import converter
from converter.errors import ConverterError, FormatError
from converter.ir.core import Program
from tests.nn_models.coverage import record_oracle

# Set by tools/mutate_nn_lowerings.py: skip the checks that cannot kill a mutant (see the docstring).
MUTATION_RUN = os.environ.get("CONVERTER_MUTATION") == "1"

# -- coremltools -----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def quiet_coremltools() -> Any:
    """coremltools, imported once (it takes seconds) and quietly (it warns and logs loudly)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.getLogger("coremltools").setLevel(logging.ERROR)
        import coremltools as ct
        from coremltools.converters.mil.frontend.milproto import load  # noqa: F401
        from coremltools.models.neural_network import NeuralNetworkBuilder, flexible_shape_utils  # noqa: F401
    return ct


@functools.lru_cache(maxsize=1)
def _milproto_loader() -> Any:
    from tests.mil.helpers import CoremltoolsLoader

    quiet_coremltools()
    return CoremltoolsLoader()


def builder(inputs: Mapping[str, Sequence[int]] | Sequence[tuple[str, Sequence[int]]],
            outputs: Sequence[str] = ("y",), *, nd: bool = False) -> Any:
    """A NeuralNetworkBuilder with fp32 array inputs (``{name: shape}`` or ``[(name, shape)]``);
    ``nd``: exact (ND) shape mapping, spec 4, else the legacy rank-5 mapping, spec 1."""
    quiet_coremltools()
    from coremltools.models import datatypes
    from coremltools.models.neural_network import NeuralNetworkBuilder

    pairs = inputs.items() if isinstance(inputs, Mapping) else inputs
    return NeuralNetworkBuilder([(k, datatypes.Array(*s)) for k, s in pairs],
                                [(o, None) for o in outputs], disable_rank5_shape_mapping=nd)


def flexible(spec: Any, name: str, lower: Sequence[int], upper: Sequence[int]) -> None:
    """Give ND input ``name`` a shape range (its dims become symbols in our IR)."""
    quiet_coremltools()
    from coremltools.models.neural_network import flexible_shape_utils

    flexible_shape_utils.set_multiarray_ndshape_range(spec, name, lower_bounds=list(lower), upper_bounds=list(upper))


def coremltools_accepts(package: Path) -> None:
    """coremltools' MIL proto loader (which re-runs its type inference on every op) loads ``package``."""
    if MUTATION_RUN:
        return
    _milproto_loader().load(Path(package))


# -- conversion, run, MIL round trip ---------------------------------------------------------------


def _fresh_dir(tmp: Path) -> Path:
    """A new directory below ``tmp`` (a test may convert several models into one ``tmp_path``)."""
    return Path(tempfile.mkdtemp(prefix="m", dir=tmp))


def load_spec(spec: Any, tmp: Path, name: str = "model") -> Program:
    """Our conversion of the NeuralNetwork ``spec`` (written to a new file below ``tmp``)."""
    src = _fresh_dir(tmp) / f"{name}.mlmodel"
    src.write_bytes(spec.SerializeToString())
    return converter.load(src)


def load_error(spec: Any, tmp: Path) -> ConverterError:
    """The converter error that loading ``spec`` raises."""
    try:
        load_spec(spec, tmp)
    except ConverterError as e:
        return e
    raise AssertionError("the model loaded without error")


def assert_load_error(spec: Any, tmp: Path, layer: str, words: str | Sequence[str],
                      kind: type[ConverterError] = FormatError) -> None:
    """Loading ``spec`` raises a ``kind`` that names ``layer`` (as its op, quoted in the message)
    and says each of ``words``."""
    e = load_error(spec, tmp)
    assert isinstance(e, kind), repr(e)
    assert e.op == layer, f"op {e.op!r} != {layer!r}: {e}"
    assert f"'{layer}'" in str(e), str(e)
    for w in [words] if isinstance(words, str) else words:
        assert w in str(e), str(e)


def assert_identical(got: Any, want: Any, what: str) -> None:
    """``got`` is ``want`` bit for bit: same dtype, same shape, same bytes."""
    a, b = np.asarray(want), np.asarray(got)
    assert a.dtype == b.dtype and a.shape == b.shape, f"{what}: {b.dtype}{b.shape} != {a.dtype}{a.shape}"
    np.testing.assert_array_equal(b, a, err_msg=what)
    if a.dtype != object:
        assert a.tobytes() == b.tobytes(), f"{what}: bytes differ"


def through_mil(prog: Program, feeds: Mapping[str, np.ndarray], tmp: Path,
                same: Callable[[str, Any, Any], None] | None = None, *, renamed_ok: bool = False,
                coremltools_loads: bool = True, outs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Save ``prog`` as an .mlpackage, load and run it again: the same outputs as ``prog`` gives
    (``outs`` if already run), bit-identical unless ``same`` compares them; and coremltools' MIL
    proto loader accepts the package, unless ``coremltools_loads`` is False (for a known
    disagreement of its type inference). ``renamed_ok``: the MIL form may rename outputs (a model
    declaring one output twice). Returns the reloaded program's outputs (under the mutation tool,
    ``prog``'s own: nothing is saved)."""
    if MUTATION_RUN:
        return dict(converter.run(prog, feeds) if outs is None else outs)
    package = converter.save(prog, _fresh_dir(tmp) / "model.mlpackage")
    if outs is None:
        outs = converter.run(prog, feeds)
    again = converter.run(converter.load(package), feeds)
    if renamed_ok:
        outs = {k: v for k, v in outs.items() if k in again}
    assert list(again) == list(outs) or renamed_ok
    for name, value in outs.items():
        if same is None:
            assert_identical(again[name], value, f"output '{name}' changed through MIL")
        else:
            same(name, again[name], value)
    if coremltools_loads:
        coremltools_accepts(package)
    return again


def convert_and_run(spec: Any, feeds: Mapping[str, np.ndarray], tmp: Path, *,
                    coremltools_loads: bool = True) -> tuple[dict[str, Any], Program]:
    """Outputs of our conversion of ``spec`` on ``feeds``, and the program, after checking its MIL
    round trip (``through_mil``)."""
    prog = load_spec(spec, tmp)
    outs = converter.run(prog, feeds)
    through_mil(prog, feeds, tmp, coremltools_loads=coremltools_loads, outs=outs)
    return outs, prog


def convert_run(spec: Any, feeds: Mapping[str, np.ndarray], tmp: Path, *,
                coremltools_loads: bool = True) -> dict[str, Any]:
    """The outputs alone of ``convert_and_run``."""
    return convert_and_run(spec, feeds, tmp, coremltools_loads=coremltools_loads)[0]


def op_types(prog: Program) -> set[str]:
    """The IR op types of ``prog``."""
    return {op.type for op in prog.walk()}


# -- oracle and closeness --------------------------------------------------------------------------


def onnx_oracle(spec: Any, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Outputs of onnxruntime on the ONNX form onnxmltools makes of ``spec`` (classic rank-5
    layers; recurrent initial states, which onnxmltools gives a zero initializer, are fed too:
    onnxruntime lists them as overridable initializers)."""
    from tests.oracles import onnxmltools_oracle

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = onnxmltools_oracle.to_onnx(spec.SerializeToString())
    return {k: OracleArray.of(v, "onnxruntime") for k, v in onnxmltools_oracle.run(model, feeds).items()}


class OracleArray(np.ndarray):
    """An array an oracle we did not write computed (``onnx_oracle``'s outputs, and what is derived
    from them: reshapes, slices, arithmetic): ``check_close`` against it records an oracle
    comparison of the running test (tests/nn_models/coverage.py, ``oracle_checks``)."""

    oracle: str = ""

    @classmethod
    def of(cls, value: Any, oracle: str) -> Any:
        if not isinstance(value, np.ndarray):
            return value
        out = value.view(cls)
        out.oracle = oracle
        return out

    def __array_finalize__(self, obj: Any) -> None:
        self.oracle = getattr(obj, "oracle", "")


def compare_with_oracle(got: Any, want: Any, *, oracle: str, **tolerances: Any) -> None:
    """``check_close(got, want, **tolerances)`` where ``want`` comes from an oracle we did not write:
    ``"onnxruntime"``, ``"torch"``, ``"coremltools"`` or ``"spec formula"`` (numpy written in the
    test from the spec's formula, independently of the implementation). Records the comparison
    for the running test's ``oracle_checks`` declaration."""
    check_close(got, want, **tolerances)
    record_oracle(oracle)


def check_close(got: Any, want: Any, *, rtol: float, atol: float, match: str = "shape",
                want_dtype: Any = None, atol_scaled: bool = False, err_msg: str = "") -> None:
    """``got`` equals ``want`` within ``rtol`` and ``atol`` (NaN matches NaN). ``match``: "shape",
    the shapes are equal; "size", only the element counts (``want`` is reshaped: rank-5 results
    against [N, C, H, W] oracles); "squeezed", the shapes are equal but for size-1 axes.
    ``want_dtype``: the dtype ``want`` is compared in; ``atol_scaled``: ``atol`` is relative to the
    largest magnitude of ``want``, at least 1. When ``want`` is an ``OracleArray`` the comparison
    is recorded as an oracle check (``compare_with_oracle``)."""
    oracle = getattr(want, "oracle", "")
    got = np.asarray(got)
    want = np.asarray(want) if want_dtype is None else np.asarray(want, want_dtype)
    if match == "shape":
        assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    elif match == "size":
        assert got.size == want.size, f"size {got.size} != {want.size} ({got.shape} vs {want.shape})"
        want = want.reshape(got.shape)
    elif match == "squeezed":
        if want.shape != got.shape:
            squeezed = [tuple(d for d in a.shape if d != 1) for a in (got, want)]
            assert squeezed[0] == squeezed[1], f"shape {got.shape}, expected {want.shape}"
            want = want.reshape(got.shape)
    else:
        raise ValueError(f"match {match!r}")
    if atol_scaled:
        atol *= max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=err_msg)
    if oracle:
        record_oracle(oracle)
