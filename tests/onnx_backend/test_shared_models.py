"""Every shared model (../shared/data/models) that converts to MIL exports to ONNX, or is refused
with one UnsupportedError naming its ops; an exported model passes the ONNX checker (full check,
inside program_to_onnx) and onnxruntime's outputs match our interpreter's (fp32: 1e-4 x
max(1, |ref|); a program computing in fp16: 2**-9 x max(1, |ref|)); the torch-derived ones also
match torch's stored outputs (the oracle). Takes about 3 s."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import converter
from converter.backends.onnx import program_to_onnx
from converter.errors import UnsupportedError
from converter.runtime_io import adapt_feeds
from converter.verify import computes_in_fp16

from ..conftest import MODELS
from ..nn_models.shared import feeds_for
from ..runtimes.test_shared_models import MODELS_TO_EXPORT

# the shared models that convert to MIL (the others are out of this test's scope), as pinned there
PATHS = MODELS_TO_EXPORT


def _close(got: np.ndarray, want: np.ndarray, bound: float, what: str) -> None:
    want = np.asarray(want, np.float64)
    got = np.asarray(got, np.float64).reshape(want.shape)
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    err = float(np.max(np.abs(got - want), initial=0.0))
    assert err <= bound * scale, f"{what}: max abs error {err:.3g} > {bound:.3g} x {scale:.3g}"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shared_model_exports_and_matches(path: Path) -> None:
    prog = converter.convert(str(path))
    try:
        model = program_to_onnx(prog)
    except UnsupportedError as err:
        # one error naming every op it refuses: "N ops have no ONNX (opset 21) form: type 'name': why; ..."
        assert re.search(r"no ONNX \(opset 21\) form: \w+ '", err.message), err.message
        return
    stem = re.sub(r"_(nn|mlprogram|mlprogram_fp16|export_mlprogram)$", "", path.name.split(".")[0])
    if path.parent.name == "torch":
        with np.load(MODELS / "torch" / f"{stem}.inputs.npz") as data:
            feeds = {k: data[k] for k in data.files}
        names = [v.name for v in prog.main.inputs]
        if set(feeds) != set(names):  # torch.export names its inputs otherwise: pair them by position
            feeds = dict(zip(names, feeds.values()))
    else:
        feeds = feeds_for(path, prog)
    tensors = adapt_feeds(prog.main, feeds)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), options)
    names = [o.name for o in sess.get_outputs()]
    got = dict(zip(names, sess.run(names, {i.name: tensors[i.name] for i in sess.get_inputs()})))
    want = converter.run(prog, feeds)
    bound = 2.0**-9 if computes_in_fp16(prog.main) else 1e-4
    assert set(got) == set(want)
    for name, value in got.items():
        if isinstance(want[name], dict):  # a classifier's probabilities: the tensor in class-label order
            labels = _class_labels(prog, name)
            probs = dict(zip(labels, np.asarray(value).reshape(-1).tolist()))  # duplicates: the last wins, as in MIL
            assert probs.keys() == want[name].keys()
            _close(np.array([probs[k] for k in want[name]]), np.array(list(want[name].values())), bound, name)
        elif value.dtype.kind in "OU":  # a string class label
            assert value.item() == np.asarray(want[name]).item(), name
        else:
            _close(value, want[name], bound, name)
    if path.parent.name == "torch":
        with np.load(MODELS / "torch" / f"{stem}.torch_outputs.npz") as data:
            expected = [data[k] for k in sorted(data.files)]
        _close(next(iter(got.values())), expected[0], bound if bound > 1e-4 else 1e-4, "vs torch")


def _class_labels(prog, name: str) -> list:  # noqa: ANN001
    from converter.ir.ops.classify import class_labels

    (op,) = [op for op in prog.main.block.ops if op.type == "classify" and op.outputs[1].name == name]
    return class_labels(op.inputs["classes"].const_val)
