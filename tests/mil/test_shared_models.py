"""Issue 3, shared models: every mlProgram model of ../shared/data/models loads; load -> save ->
load gives the same program and bit-identical interpreter outputs; the interpreter reproduces the
torch reference outputs of the torch-derived packages."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import converter
from converter.formats.model_file import read_model_file
from converter.ir.text import print_program

from ..conftest import MODELS
from .helpers import (
    MLPROGRAM_PACKAGES,
    assert_same_program,
    model_id,
    random_feeds,
    same_bits,
    torch_conversions,
)


def test_every_mlprogram_model_is_covered(shared_dir):
    """The list the tests below run over is exactly the manifest's mlProgram models."""
    manifest = json.loads((MODELS / "manifest.json").read_text())
    declared = sorted(r["path"] for r in manifest if r.get("model_type") == "mlProgram")
    assert [model_id(p) for p in MLPROGRAM_PACKAGES] == declared
    assert len(declared) == 17
    torch_packages = sorted(model_id(p) for p in MLPROGRAM_PACKAGES if p.parent.name == "torch")
    assert sorted(conv["path"] for _, _, conv in torch_conversions()) == torch_packages


@pytest.mark.parametrize("path", MLPROGRAM_PACKAGES, ids=model_id)
def test_round_trip(path: Path, tmp_path: Path):
    prog = converter.load(path)
    out_path = converter.save(prog, tmp_path / "out.mlpackage")
    again = converter.load(out_path)
    assert_same_program(prog, again)
    if path.parent.name == "torch":  # small enough to compare the full text, every weight printed
        assert print_program(prog) == print_program(again)
    # the default target is the model's own opset; the model description (features, flexible
    # shapes, classifier fields, metadata) and program attributes come back unchanged
    assert again.main.opset == prog.main.opset
    src, dst = read_model_file(path).model, read_model_file(out_path).model
    assert dst.specificationVersion == src.specificationVersion
    assert dst.description == src.description
    assert dst.mlProgram.attributes == src.mlProgram.attributes

    feeds = random_feeds(prog)
    before = converter.run(prog, feeds)
    after = converter.run(again, feeds)
    assert list(before) == list(after)
    for name in before:
        assert same_bits(before[name], after[name]), f"output '{name}' differs after the round trip"
        if isinstance(before[name], np.ndarray) and before[name].dtype.kind == "f":
            assert np.isfinite(before[name]).any(), f"output '{name}' is not finite anywhere: a vacuous check"


FP32_TOLERANCE = 1e-4
FP16_TOLERANCE = 2.0**-9


@pytest.mark.parametrize("name,kind,conv", [pytest.param(*c, id=f"{c[0]}-{c[1]}") for c in torch_conversions()])
def test_torch_reference(name: str, kind: str, conv: dict):
    """The interpreter's outputs match torch's: max abs error <= tol * max(1, |ref|max).

    fp32 packages: tol = 1e-4 (observed: <= 2.4e-7).

    fp16 packages (weights and activations in fp16, torch in fp32): tol = 2**-9 ~ 1.95e-3, two fp16
    epsilons. fp16 has an 11-bit significand, so its epsilon (spacing at 1.0) is 2**-10 ~ 9.8e-4
    and one rounding errs by at most half of that, relative to the value. These models are a few
    layers deep (conv + batch norm + linear, LSTM/GRU over 8-9 steps, a transformer encoder layer);
    the worst error observed is ~7.2e-4 of max(1, |ref|max) (the transformer layer, 0.74 epsilon),
    so the bound leaves 2.7x room for a few more roundings, while real mistakes (a wrong op, a lost
    bias, misordered gates) show up at 1e-2 and more.
    """
    inputs = np.load(MODELS / "torch" / f"{name}.inputs.npz")
    refs = np.load(MODELS / "torch" / f"{name}.torch_outputs.npz")
    prog = converter.load(MODELS / conv["path"])
    fn = prog.main
    # inputs by position: export variants rename them (x instead of tokens)
    assert len(fn.inputs) == len(inputs.files)
    feeds = {v.name: inputs[k] for v, k in zip(fn.inputs, inputs.files)}
    out = converter.run(prog, feeds)
    assert len(conv["outputs"]) == len(refs.files)
    tol = FP16_TOLERANCE if kind == "mlprogram_fp16" else FP32_TOLERANCE
    for i, out_name in enumerate(conv["outputs"]):
        ref = refs[f"output_{i}"]
        got = out[out_name]
        assert got.shape == ref.shape, f"{out_name}: shape {got.shape}, torch {ref.shape}"
        err = float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64))))
        bound = tol * max(1.0, float(np.max(np.abs(ref))))
        assert err <= bound, f"{name} {kind} output {out_name}: max abs error {err:.3g} > {bound:.3g}"
