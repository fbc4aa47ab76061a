"""Issue 9: ``precision="fp16"`` — float32 shared models converted to WebNN with float16 weights and
float16 compute run in the real browser; inputs and outputs stay float32 (cast at the graph's edges).

Tolerance, from float16's unit roundoff u = 2^-11 (~4.9e-4; machine epsilon 2^-10): the fp16 graph
rounds the inputs, every weight and every op's result to float16, each a relative error of at most u.
To first order, L such roundings along a chain of ops of gain ~1 add up to at most L·u relative to the
output's scale, where L <= the number of builder calls (the graph's depth cannot exceed them). The
test therefore asserts max |webnn - ref| <= L·u·max(1, |ref|), with ref our interpreter on the source
float32 model. Measured (this Chromium 153, XNNPACK on CPU), as max abs error / max(1, |ref|):
mnist_model 1.5e-3 (L=16, bound 7.8e-3), activations_all 6.0e-4 (L=40), my_network_image 7.3e-4 (L=21),
SqueezeNetInt8LUT 9.4e-4 (L=72), transformer encoder 2.3e-4 (L=44), cnn_bn 6.7e-5 (L=18): 2-30x below
the bound; the test prints each run's error and bound.

model.bin: every float constant is float16 (half the bytes of the fp32 conversion's), holding exactly
the fp32 conversion's values rounded to float16 (numpy's round-to-nearest-even as the oracle)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import converter
from converter.ir.interpreter import Interpreter
from converter.runtime_io import adapt_feeds

from ..nn_models.shared import model_id
from ..passes.test_models import MODELS, _feeds
from .browser_client import DTYPES, WebnnBrowser, module_features

UNIT_ROUNDOFF_FP16 = 2.0**-11
# fp32 models covering the lowering families: CNNs (conv/pool/bn), MLPs, attention/transformer,
# classifiers, LUT-compressed weights, every activation, int32 inputs, several inputs.
FP16_MODELS = {
    "builder/activations_all.mlmodel", "builder/cnn_conv_pool_fc.mlmodel", "builder/cnn_conv_pool_fc_lut4.mlmodel",
    "builder/image_classifier_preprocessed.mlmodel", "builder/nd_attention_block.mlmodel",
    "builder/updatable_classifier.mlmodel", "real/0c1c0adf_s4tf_house_simplified_trained_model.mlmodel",
    "real/50a282d4_my_network.mlmodel", "real/56e485a2_my_network_image.mlmodel", "real/6f940a19_mnist_model.mlmodel",
    "real/8dbda0d2_SqueezeNetInt8LUT.mlmodel", "real/764eeca3_ChineseClassifier.mlpackage",
    "torch/cnn_bn_nn.mlmodel", "torch/transformer_encoder_layer_mlprogram.mlpackage",
}
PATHS = [p for p in MODELS if model_id(p) in FP16_MODELS]
_CONSTANT = re.compile(r'constant\(builder, weights, "(\w+)", \[([\d, ]*)\], (\d+)\)')


@pytest.fixture(autouse=True)
def _quiet_notes(recwarn: pytest.WarningsRecorder) -> None:
    """Conversion notes are not the subject here."""


def test_every_chosen_model_is_present() -> None:
    assert sorted(model_id(p) for p in PATHS) == sorted(FP16_MODELS)


def constants(folder: Path) -> list[np.ndarray]:
    """Every constant model.js reads from model.bin, in program order, as stored there."""
    blob = (folder / "model.bin").read_bytes()
    out = []
    for dtype, shape, offset in _CONSTANT.findall((folder / "model.js").read_text(encoding="utf-8")):
        dims = [int(d) for d in shape.split(",") if d.strip()]
        count = int(np.prod(dims))
        out.append(np.frombuffer(blob, DTYPES[dtype], count, int(offset)).reshape(dims))
    return out


@pytest.mark.parametrize("path", PATHS, ids=model_id)
def test_fp16_conversion_runs_in_the_browser(path: Path, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    prog = converter.load(path)
    ir_feeds = adapt_feeds(prog.main, _feeds(path, prog))
    shapes = {v.name: list(np.shape(ir_feeds[v.name])) for v in prog.main.inputs if v.name in ir_feeds}
    half, full = tmp_path / "fp16", tmp_path / "fp32"
    converter.convert(prog, to="webnn", out=half, precision="fp16", input_shapes=shapes)
    converter.convert(prog, to="webnn", out=full, precision="fp32", input_shapes=shapes)

    # inputs and outputs keep their float32 descriptors: the casts are inside the graph
    assert module_features(half, "inputs") == module_features(full, "inputs")
    assert module_features(half, "outputs") == module_features(full, "outputs")
    # model.bin: float16 where the fp32 conversion has float32, the same values rounded
    c16, c32 = constants(half), constants(full)
    assert len(c16) == len(c32)
    for a, b in zip(c16, c32):
        if b.dtype == np.float32:
            assert a.dtype == np.float16
            np.testing.assert_array_equal(a, b.astype(np.float16))
        else:
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)
    # half the bytes for what is float32 in the fp32 conversion (a source's own float16 stays float16)
    pairs = [(a, b) for a, b in zip(c16, c32) if b.dtype == np.float32]
    assert 2 * sum(a.nbytes for a, _ in pairs) == sum(b.nbytes for _, b in pairs)
    assert "float32" not in {d for d, _, _ in _CONSTANT.findall((half / "model.js").read_text())}

    want = Interpreter(prog).run(ir_feeds, prog.main.name)
    module_inputs = module_features(half, "inputs")
    result = webnn_browser.run(half, {n: np.asarray(ir_feeds[n]).astype(DTYPES[d["dataType"]])
                                      for n, d in module_inputs.items()}, timeout_s=120)
    calls = (half / "model.js").read_text().count("builder.")
    bound = calls * UNIT_ROUNDOFF_FP16
    errors = {}
    for name in module_features(half, "outputs"):
        value = want[name]
        got = result.outputs[name]
        assert got.dtype == np.float32 or module_features(half, "outputs")[name]["dataType"] != "float32"
        if isinstance(value, dict):  # classifier probabilities, in label order
            by_label = dict(zip(module_features(half, "labels"), got))
            got, value = np.asarray([by_label[k] for k in value]), list(value.values())
        ref = np.asarray(value, np.float64)
        got = np.asarray(got, np.float64).reshape(ref.shape)
        scale = max(1.0, float(np.max(np.abs(ref), initial=0.0)))
        errors[name] = float(np.max(np.abs(got - ref), initial=0.0)) / scale
        assert errors[name] <= bound, f"{name}: relative error {errors[name]:.3g} > {calls} calls x u = {bound:.3g}"
    print(model_id(path), f"L={calls} bound={bound:.2g}", {k: f"{v:.2g}" for k, v in errors.items()})
