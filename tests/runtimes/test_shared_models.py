"""Issue 12 on the shared models (../shared/data/models), through the onnxruntime runtime.

The models: every one that converts to MIL (the NeuralNetwork models that load and run,
tests/nn_models/shared.py ``RUNS``, and every ML program). For each:

- export: ``converter.convert(path, to="onnx")`` writes a file that passes
  ``onnx.checker.check_model(full_check=True)``, or is refused with an UnsupportedError naming
  only ops pinned for the model in ``REFUSED`` (the lowerings it lacks: a model not listed must
  export, a refusal may not name a new op, and a pinned model must still lack exactly its pins);
- run: ``converter.run(runtime="onnxruntime")`` on the program as loaded gives our interpreter's
  outputs (fp32 within 1e-4 x max(1, |ref|), a program computing in fp16 within 2**-9 x
  max(1, |ref|), integers and labels exactly), and the torch-derived models torch's stored outputs
  (the oracle we did not write; same tolerances); a model onnxruntime cannot run falls back with a
  note naming only pinned ops (or its loop, which only the interpreter bounds).

Feeds: those of tests/nn_models/shared.py (the .npz of a builder model, torch's stored inputs,
random inputs else). (tests/onnx_backend/test_shared_models.py, the backend's own, checks the
optimized program exported in memory.)
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

import converter
from converter.errors import RuntimeFallbackWarning, UnsupportedError
from converter.verify import computes_in_fp16

from ..conftest import MODELS
from ..mil.helpers import MLPROGRAM_PACKAGES
from ..mil.helpers import random_feeds as package_feeds
from ..nn_models.shared import RUNS, feeds_for, model_id

TOLERANCE = 1e-4
FP16_TOLERANCE = 2.0**-9

MODELS_TO_EXPORT = sorted(RUNS + MLPROGRAM_PACKAGES)
#: the interpreter's reference run takes 2-3 s each on an idle machine (10 s under load)
_SLOW_RUNS = {"real/9de70cc9_DeepLabV3Int8LUT.mlmodel", "real/799a4a00_model_cpm.mlmodel"}
_RUN_PARAMS = [pytest.param(p, id=model_id(p), marks=[pytest.mark.slow] if model_id(p) in _SLOW_RUNS else [])
               for p in MODELS_TO_EXPORT]

_LOOP = ("while_loop",)  # exports as an ONNX Loop, but onnxruntime cannot bound it: the interpreter runs it
_DYNAMIC_LIST = ("make_list", "while_loop")  # TF tensor lists of a run-time element shape; and the loop
_FLEXIBLE_LSTM = ("lstm",)  # the lowering unrolls this lstm, which needs a static sequence length (flexible here)
#: model -> the op types its refusal (export) and fallback note (run) name together: the ONNX lowerings
#: it lacks, with why (measured). A model not listed must export and run in onnxruntime; a listed
#: one must still need exactly these (``test_the_pinned_refusals_are_exact``).
REFUSED: dict[str, tuple[str, ...]] = {
    "builder/control_flow_loop.mlmodel": _LOOP,
    "builder/lstm_bidirectional.mlmodel": _FLEXIBLE_LSTM,
    "builder/lstm_unidirectional.mlmodel": _FLEXIBLE_LSTM,
    "real/3d92b676_DTLN_AEC_128_Part1.mlpackage": _DYNAMIC_LIST,
    "real/8d40cf76_DTLN_AEC_128_Part1.mlpackage": _DYNAMIC_LIST,
    "real/a2e9c9a9_DTLN_AEC_128_Part2.mlpackage": _DYNAMIC_LIST,
    "torch/gru_bidirectional_mlprogram.mlpackage": _LOOP,
    "torch/gru_bidirectional_mlprogram_fp16.mlpackage": _LOOP,
    "torch/gru_bidirectional_nn.mlmodel": _LOOP,
}


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


def refused_ops(message: str) -> set[str]:
    """The op types a backend refusal (``N ops have no ONNX (opset 21) form: type 'name': why; ...``)
    or a fallback note (``... (no ONNX form for ops a, b); ...``, ``(it has while_loop, ...``) names."""
    listed = re.search(r"no ONNX form for ops? ([\w, ]+)\)", message)
    if listed:
        return {t.strip() for t in listed.group(1).split(",")}
    loop = re.search(r"it has ([\w, ]+), whose iterations", message)
    if loop:
        return {t.strip() for t in loop.group(1).split(",")}
    return set(re.findall(r"(?:form: |; )(\w+) '", message))


def _error(got: Any, want: Any) -> float:
    """max |got - want| / max(1, max |want|); labels and integers must be equal."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), (list(got)[:5], list(want)[:5])
        got, want = np.array(list(got.values())), np.array(list(want.values()))
    want, got = np.asarray(want), np.asarray(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind in "USO":
        assert np.array_equal(got.astype(str), want.astype(str))
        return 0.0
    if want.dtype.kind != "f":
        assert got.dtype == want.dtype and np.array_equal(got, want)
        return 0.0
    w = want.astype(np.float64)
    err = float(np.max(np.abs(got.astype(np.float64) - w), initial=0.0))
    return err / max(1.0, float(np.max(np.abs(w), initial=0.0)))


def _pinned(path: Path) -> set[str]:
    return set(REFUSED.get(model_id(path), ()))


@pytest.mark.parametrize("path", MODELS_TO_EXPORT, ids=model_id)
def test_every_model_exports_to_onnx_or_is_refused_naming_pinned_ops(path: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.onnx"
    try:
        converter.convert(path, to="onnx", out=out)
    except UnsupportedError as e:
        named = refused_ops(e.message)
        assert named, e.message
        assert named <= _pinned(path), f"refusal names {sorted(named - _pinned(path))} (not pinned): {e.message}"
        assert not out.exists()
        return
    onnx.checker.check_model(str(out), full_check=True)


@pytest.mark.parametrize("path", _RUN_PARAMS)
def test_onnxruntime_runs_every_model_as_the_interpreter_does(path: Path) -> None:
    prog = converter.load(path)
    feeds = _feeds(path, prog)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeFallbackWarning)
        got = converter.run(prog, feeds, runtime="onnxruntime")
    notes = [str(w.message) for w in caught if issubclass(w.category, RuntimeFallbackWarning)]
    if notes:
        (note,) = notes
        named = refused_ops(note)
        assert named and named <= _pinned(path), f"fallback names {sorted(named - _pinned(path))}: {note}"
        return
    want = converter.run(prog, feeds)
    assert list(got) == list(want)
    tol = FP16_TOLERANCE if computes_in_fp16(prog.main) else TOLERANCE
    for name in want:
        err = _error(got[name], want[name])
        assert err <= tol, f"output '{name}': onnxruntime differs from the interpreter by {err:.3g} x max(1, |ref|)"
    record = _torch_record(path)
    if record is None:
        return
    torch_name, kind, conv = record
    with np.load(MODELS / "torch" / f"{torch_name}.torch_outputs.npz") as refs:
        for i, out_name in enumerate(conv["outputs"]):
            ref = refs[f"output_{i}"].astype(np.float64)
            err = _error(np.asarray(got[out_name], np.float64).reshape(ref.shape), ref)
            bound = FP16_TOLERANCE if "fp16" in kind else TOLERANCE
            assert err <= bound, f"output '{out_name}': onnxruntime differs from torch by {err:.3g} x max(1, |ref|)"


def test_the_pinned_refusals_are_models_of_the_suite() -> None:
    ids = {model_id(p) for p in MODELS_TO_EXPORT}
    assert set(REFUSED) <= ids, sorted(set(REFUSED) - ids)


@pytest.mark.parametrize("rel", sorted(REFUSED))
def test_the_pinned_refusals_are_exact(rel: str, tmp_path: Path) -> None:
    """A pinned model still lacks exactly its pinned lowerings (a lowering that lands shrinks the list)."""
    from converter.runtimes import prepare

    path = MODELS / rel
    named: set[str] = set()
    try:
        converter.convert(path, to="onnx", out=tmp_path / "m.onnx")
    except UnsupportedError as e:
        named |= refused_ops(e.message)
    named |= refused_ops(prepare(converter.load(path), runtime="onnxruntime").note)
    assert named == set(REFUSED[rel]), f"{rel} now lacks {sorted(named)}, pinned {sorted(REFUSED[rel])}"
