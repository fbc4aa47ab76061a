"""classify through the ONNX backend: the label and the probabilities under the Core ML output
names, as a plain tensor or an ONNX-ML ZipMap. Oracle: the definition written here (label of the
first largest probability; the probabilities in class order) and our interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import converter
from converter.backends.onnx import program_to_onnx
from converter.errors import UnsupportedError
from converter.ir.runtime import ListValue
from converter.ir.types import TensorType, int64, string

from .helpers import program

LABELS = {"strings": ["cat", "dog", "eel", "fox"], "int64": [7, -3, 2**40, 0]}


def _prog(labels: list, p: np.ndarray):  # noqa: ANN202
    dt = string if isinstance(labels[0], str) else int64

    def body(b, x):  # noqa: ANN001, ANN202
        label, probs = b.classify(probabilities=b.softmax(x=x, axis=-1),
                                  classes=ListValue(TensorType(dt, ()), [np.asarray(s, dt.storage) for s in labels],
                                                    False))
        label.name, probs.name = "classLabel", "classLabelProbs"
        return [label, probs]

    return program({"x": p}, body)


def _session(prog, form: str):  # noqa: ANN001, ANN202
    import onnxruntime as ort

    model = program_to_onnx(prog, classifier=form)
    return model, ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max())
    return (z / z.sum()).reshape(-1)


@pytest.mark.parametrize("kind", sorted(LABELS))
@pytest.mark.parametrize("form", ["tensor", "zipmap"])
def test_classify_label_and_probabilities(kind: str, form: str) -> None:
    labels = LABELS[kind]
    x = np.array([[0.3, 2.5, -1.0, 2.4]], np.float32)
    prog = _prog(labels, x)
    model, sess = _session(prog, form)
    assert [o.name for o in model.graph.output] == ["classLabel", "classLabelProbs"]
    label, probs = sess.run(None, {"x": x})
    assert label.shape == () and label.item() == labels[1]
    want = _softmax(x.astype(np.float64))
    if form == "zipmap":
        assert [d.domain for d in model.opset_import if d.domain] == ["ai.onnx.ml"]
        (d,) = probs
        assert set(d) == set(labels)
        np.testing.assert_allclose([d[k] for k in labels], want, rtol=1e-6)
    else:
        np.testing.assert_allclose(probs, want, rtol=1e-6)
    ref = converter.run(prog, {"x": x})
    assert ref["classLabel"].item() == label.item()
    np.testing.assert_allclose(list(ref["classLabelProbs"].values()), want, rtol=1e-6)


def test_classify_first_of_tied_maxima() -> None:
    x = np.array([[1.0, 3.0, 3.0, 0.5]], np.float32)
    _, sess = _session(_prog(LABELS["strings"], x), "tensor")
    assert sess.run(None, {"x": x})[0].item() == "dog"


def test_unknown_classifier_form_is_refused() -> None:
    with pytest.raises(UnsupportedError, match="classifier form"):
        program_to_onnx(_prog(LABELS["strings"], np.zeros((1, 4), np.float32)), classifier="dict")


def test_save_and_cli_take_the_classifier_form(tmp_path) -> None:  # noqa: ANN001
    """converter.save(..., to="onnx", classifier=...) and `convert --to onnx --onnx-classifier`."""
    import onnx
    from click.testing import CliRunner

    import cli

    x = np.array([[0.3, 2.5, -1.0, 2.4]], np.float32)
    prog = _prog(LABELS["int64"], x)
    out = converter.save(prog, tmp_path / "c.onnx", to="onnx", classifier="zipmap")
    assert "ZipMap" in [n.op_type for n in onnx.load(str(out)).graph.node]
    src = converter.save(prog, tmp_path / "c.mlpackage")
    for form, want in (("zipmap", True), ("tensor", False)):
        dest = tmp_path / f"{form}.onnx"
        r = CliRunner().invoke(cli.main, ["convert", str(src), "--to", "onnx", "--onnx-classifier", form,
                                          "-o", str(dest)])
        assert r.exit_code == 0, r.output
        assert ("ZipMap" in [n.op_type for n in onnx.load(str(dest)).graph.node]) == want
    r = CliRunner().invoke(cli.main, ["convert", str(src), "--onnx-classifier", "zipmap", "-o",
                                      str(tmp_path / "d.mlpackage")])
    assert r.exit_code != 0 and "--onnx-classifier is an option of --to onnx" in r.output
