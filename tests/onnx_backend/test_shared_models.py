"""Issue 12 on the shared models (../shared/data/models): every model that converts to MIL (the
NeuralNetwork models that load and run, tests/nn_models/shared.py ``RUNS``, and every ML program)
also exports to ONNX with ``converter.convert(path, to="onnx")``, or is refused with an
UnsupportedError whose ops are all among those pinned for it in ``REFUSED`` (the lowerings it
lacks). An exported model passes ``onnx.checker.check_model(full_check=True)`` on the file, and
onnxruntime running the file gives our interpreter's outputs on the source program (fp32 models
within 1e-4 x max(1, |ref|), fp16 ones within 2**-9 x max(1, |ref|), integers and labels exactly);
torch-derived models also match torch's stored outputs (the oracle we did not write; the same
tolerances). Feeds: those of tests/nn_models/shared.py (the .npz of a builder model, torch's
stored inputs, random inputs else).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import converter
from converter.errors import UnsupportedError
from converter.runtime_io import adapt_feeds
from converter.runtimes.ort import _as_ir_output
from converter.verify import computes_in_fp16

from ..conftest import MODELS
from ..mil.helpers import MLPROGRAM_PACKAGES
from ..mil.helpers import random_feeds as package_feeds
from ..nn_models.shared import RUNS, feeds_for, model_id

TOLERANCE = 1e-4
FP16_TOLERANCE = 2.0**-9

MODELS_TO_EXPORT = sorted(RUNS + MLPROGRAM_PACKAGES)

_SHAPE = ("concat", "expand_dims", "reshape", "slice_by_index", "split", "squeeze", "stack", "transpose")
#: model -> the op types its refusal may name (the lowerings it lacks; measured). A model not listed must export.
REFUSED: dict[str, tuple[str, ...]] = {}


def _torch_record(path: Path) -> tuple[str, str, dict[str, Any]] | None:
    """(torch model name, conversion kind, record) of a torch-derived model, from RESULTS.json."""
    if path.parent.name != "torch":
        return None
    results = json.loads((MODELS / "torch" / "RESULTS.json").read_text())["models"]
    for name, rec in results.items():
        for kind, conv in rec.items():
            if isinstance(conv, dict) and conv.get("path") == model_id(path):
                return name, kind, conv
    return None


def _feeds(path: Path, prog: converter.Program) -> dict[str, Any]:
    record = _torch_record(path)
    if record is not None:
        with np.load(MODELS / "torch" / f"{record[0]}.inputs.npz") as data:
            return {v.name: data[k] for v, k in zip(prog.main.inputs, data.files)}
    if path.suffix == ".mlpackage":
        return package_feeds(prog)
    return feeds_for(path, prog)


def _refused_ops(message: str) -> set[str]:
    """The op types an ONNX backend refusal names (``type 'name': reason`` items)."""
    return set(re.findall(r"(?:form: |; )([A-Za-z_0-9]+) '", message))


def _error(got: Any, want: Any) -> float:
    """max |got - want| / max(1, max |want|); labels and integers must be equal."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), (list(got)[:5], list(want)[:5])
        got, want = np.array(list(got.values())), np.array(list(want.values()))
    want = np.asarray(want)
    got = np.asarray(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind not in "f":
        assert np.array_equal(got.astype(want.dtype) if want.dtype.kind in "iub" else got.astype(str),
                              want if want.dtype.kind in "iub" else want.astype(str))
        return 0.0
    w = want.astype(np.float64)
    return float(np.max(np.abs(got.astype(np.float64) - w), initial=0.0)) / max(1.0, float(np.max(np.abs(w),
                                                                                                   initial=0.0)))


def _export(path: Path, out: Path) -> UnsupportedError | None:
    try:
        converter.convert(path, to="onnx", out=out)
    except UnsupportedError as e:
        return e
    return None


def _run_onnx(out: Path, prog: converter.Program, feeds: dict[str, Any]) -> dict[str, Any]:
    """onnxruntime on the written file, fed and read as `converter.run` is (features by name)."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(out), options, providers=["CPUExecutionProvider"])
    adapted = adapt_feeds(prog.main, feeds)
    types = {i.name: i.type for i in session.get_inputs()}
    names = [o.name for o in session.get_outputs()]
    values = dict(zip(names, session.run(names, {k: np.asarray(adapted[k]) for k in types})))
    return {v.name: _as_ir_output(v, values[v.name]) for v in prog.main.outputs}


@pytest.mark.parametrize("path", MODELS_TO_EXPORT, ids=model_id)
def test_every_model_exports_to_onnx_or_is_refused_naming_the_ops(path: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.onnx"
    refused = _export(path, out)
    pinned = REFUSED.get(model_id(path))
    if refused is not None:
        named = _refused_ops(refused.message)
        assert pinned is not None, f"{model_id(path)} is refused: {refused.message}"
        assert named and named <= set(pinned), f"refusal names {sorted(named - set(pinned))}: {refused.message}"
        assert not out.exists()
        return
    onnx.checker.check_model(str(out), full_check=True)
    prog = converter.load(path)
    feeds = _feeds(path, prog)
    want = converter.run(prog, feeds)
    got = _run_onnx(out, prog, feeds)
    tol = FP16_TOLERANCE if computes_in_fp16(prog.main) else TOLERANCE
    assert list(got) == list(want)
    for name in want:
        err = _error(got[name], want[name])
        assert err <= tol, f"output '{name}': onnxruntime differs from the interpreter by {err:.3g} x max(1, |ref|)"
    record = _torch_record(path)
    if record is None:
        return
    name, kind, conv = record
    with np.load(MODELS / "torch" / f"{name}.torch_outputs.npz") as refs:
        for i, out_name in enumerate(conv["outputs"]):
            ref = refs[f"output_{i}"].astype(np.float64)
            err = _error(np.asarray(got[out_name], np.float64).reshape(ref.shape), ref)
            tol = FP16_TOLERANCE if "fp16" in kind else TOLERANCE
            assert err <= tol, f"output '{out_name}': onnxruntime differs from torch by {err:.3g} x max(1, |ref|)"


def test_the_pinned_refusals_are_models_of_the_suite() -> None:
    ids = {model_id(p) for p in MODELS_TO_EXPORT}
    assert set(REFUSED) <= ids, sorted(set(REFUSED) - ids)
