"""The sequence axis of rank-5 inputs outside recurrent layers.

Core ML feeds a declared [C] or [C, H, W] array of a legacy rank-5 network either in that form or
as a sequence [Seq, 1, C, H, W]. A network whose layers need Seq > 1 (here: an embedding whose
steps a permute moves into W, flattened into an innerProduct of Seq * outputChannels inputs) must
load and run with a sequence; a network valid with Seq = 1 keeps its declared interface.

Oracle: the spec's layer formulas written below in numpy (onnxmltools cannot convert the sequence
model: its shape calculator refuses the innerProduct, "Expected 480 but got None"). Every converted
model also goes through MIL (same outputs, coremltools' loader accepts the package).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import converter
from converter.errors import EvaluationError, FormatError
from converter.ir.types import Symbol

from .common import assert_load_error, builder, check_close, load_spec, onnx_oracle, through_mil

KINDS_COVERED = {"embedding", "permute", "flatten", "innerProduct", "add", "reshape"}

VOCAB, EMB, STEPS, OUT = 10, 32, 15, 4


def _embedding_model(steps: int, *, permute: bool = True, extra_input: bool = False) -> tuple[Any, dict]:
    """x (declared [1, 1, 1]: one index per step) -> embedding (EMB channels) -> permute [3, 1, 2, 0]
    (the steps move into W) -> flatten -> innerProduct of ``steps * EMB`` inputs -> y; with
    ``extra_input`` y = that + z, z a declared [OUT] array."""
    rng = np.random.default_rng(7)
    table = rng.standard_normal((EMB, VOCAB)).astype(np.float32)  # [outputChannels, inputDim]
    weights = rng.standard_normal((OUT, steps * EMB)).astype(np.float32)  # [C_out, C_in]
    inputs = [("x", (1, 1, 1))] + ([("z", (OUT,))] if extra_input else [])
    b = builder(inputs, ["y"])
    b.add_embedding("emb", table, None, VOCAB, EMB, False, "x", "e")
    last = "e"
    if permute:
        b.add_permute("perm", (3, 1, 2, 0), "e", "p")
        last = "p"
    b.add_flatten("flat", 0, last, "f")
    b.add_inner_product("ip", weights, None, steps * EMB, OUT, False, "f", "ip_out" if extra_input else "y")
    if extra_input:
        b.add_elementwise("sum", ["ip_out", "z"], "y", "ADD")
    return b.spec, {"table": table, "weights": weights}


def _expected(indices: np.ndarray, w: dict) -> np.ndarray:
    """The spec's formulas, step by step: embedding y_t = W[:, x_t] ([Seq, C, 1, 1]); permute
    [3, 1, 2, 0] makes [Seq, C, H, W] -> [W, C, H, Seq] (one step of [C, 1, Seq]); flatten gives
    its C * H * W values in channel-first order; innerProduct W @ x."""
    seq = indices.reshape(-1).astype(int)
    emb = w["table"][:, seq].T.reshape(len(seq), EMB, 1, 1)  # [Seq, C, H, W]
    step = emb.transpose(3, 1, 2, 0)  # [1, C, 1, Seq]
    return (w["weights"].astype(np.float64) @ step.reshape(-1)).astype(np.float32)


def test_layers_that_need_a_sequence_get_one(tmp_path: Path) -> None:
    """The issue's model: refused at load before ("input's last three axes hold 32 values,
    inputChannels is 480"); now its input takes [Seq, 1, 1, 1, 1] and Seq = 15 runs."""
    spec, w = _embedding_model(STEPS)
    prog = load_spec(spec, tmp_path)
    (x_in,) = prog.main.inputs
    seq = x_in.type.shape[0]
    assert isinstance(seq, Symbol) and seq.lower == 1 and seq.upper is None
    assert tuple(x_in.type.shape[1:]) == (1, 1, 1, 1)
    assert any("feeds layer 'ip'" in n and "[Seq, Batch, C, H, W]" in n for n in prog.meta["notes"])

    x = np.random.default_rng(0).integers(0, VOCAB, (STEPS, 1, 1, 1, 1)).astype(np.float32)
    out = converter.run(prog, {"x": x})
    check_close(out["y"], _expected(x, w), rtol=1e-5, atol=1e-4, match="size")
    again = through_mil(prog, {"x": x}, tmp_path, outs=out)
    check_close(again["y"], _expected(x, w), rtol=1e-5, atol=1e-4, match="size")

    # the migrated package declares the sequence form: rank 5, Seq from 1 without upper bound
    package = converter.save(prog, tmp_path / "seq.mlpackage")
    migrated = converter.load(package)
    t = migrated.main.inputs[0].type
    assert len(t.shape) == 5 and isinstance(t.shape[0], Symbol) and tuple(t.shape[1:]) == (1, 1, 1, 1)

    # one step is not enough for this network (as in Core ML): a clear run-time error
    with pytest.raises(EvaluationError, match="480"):
        converter.run(prog, {"x": x[:1]})


def test_only_the_inputs_the_layer_reads_take_the_sequence_form(tmp_path: Path) -> None:
    """z joins after the innerProduct that needs a sequence: it keeps its declared [OUT] form."""
    spec, w = _embedding_model(STEPS, extra_input=True)
    prog = load_spec(spec, tmp_path)
    types = {v.name: v.type for v in prog.main.inputs}
    assert isinstance(types["x"].shape[0], Symbol)
    assert tuple(types["z"].shape) == (OUT,)
    x = np.random.default_rng(1).integers(0, VOCAB, (STEPS, 1, 1, 1, 1)).astype(np.float32)
    z = np.random.default_rng(2).standard_normal(OUT).astype(np.float32)
    out = converter.run(prog, {"x": x, "z": z})
    check_close(out["y"], _expected(x, w) + z, rtol=1e-5, atol=1e-4, match="size")
    through_mil(prog, {"x": x, "z": z}, tmp_path, outs=out)


def test_a_network_valid_with_one_step_keeps_its_declared_input(tmp_path: Path) -> None:
    """The same layers sized for one step (Seq = 1): the input keeps its declared [1, 1, 1] form."""
    spec, w = _embedding_model(1)
    prog = load_spec(spec, tmp_path)
    assert tuple(prog.main.inputs[0].type.shape) == (1, 1, 1)
    x = np.array([[[7]]], np.float32)
    out = converter.run(prog, {"x": x})
    check_close(out["y"], _expected(x, w), rtol=1e-5, atol=1e-4, match="size")
    through_mil(prog, {"x": x}, tmp_path, outs=out)


def test_a_reshape_across_seq_fed_one_step_keeps_its_declared_input(tmp_path: Path) -> None:
    """A reshape whose 4-element target names Seq (as Keras exports write them), fed one step:
    the declared [2, 3, 4] interface stays; onnxmltools + onnxruntime and the formula agree."""
    rng = np.random.default_rng(3)
    weights = rng.standard_normal((5, 24)).astype(np.float32)
    b = builder([("x", (2, 3, 4))], ["y"])
    b.add_reshape("rs", "x", "r", (1, 4, 3, 2), 0)
    b.add_flatten("flat", 0, "r", "f")
    b.add_inner_product("ip", weights, None, 24, 5, False, "f", "y")
    prog = load_spec(b.spec, tmp_path)
    assert tuple(prog.main.inputs[0].type.shape) == (2, 3, 4)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    out = converter.run(prog, {"x": x})
    # CHANNEL_FIRST reshape and flatten keep the row-major order: y = W @ x.ravel()
    check_close(out["y"], weights @ x.reshape(-1), rtol=1e-5, atol=1e-5, match="size")
    check_close(out["y"], onnx_oracle(b.spec, {"x": x})["y"], rtol=1e-5, atol=1e-5, match="size")
    through_mil(prog, {"x": x}, tmp_path, outs=out)


def test_a_network_invalid_with_any_sequence_reports_the_one_step_error(tmp_path: Path) -> None:
    """Without the permute, the innerProduct sees EMB values per step whatever Seq is: the sequence
    form does not help, and the error is the one of the declared form."""
    spec, _ = _embedding_model(STEPS, permute=False)
    assert_load_error(spec, tmp_path, "ip", ["hold 32 values", "inputChannels is 480"], FormatError)
