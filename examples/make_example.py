"""Write examples/tiny_classifier.mlmodel: a small spec-v1 NeuralNetwork image classifier.

A legacy (rank-5) model of the kind the migration targets: BGR image input with scaler
preprocessing, conv/relu/pool, innerProduct, softmax and string class labels. Weights are
deterministic pseudo-random numbers (the model demonstrates conversion, it recognises nothing).

    python examples/make_example.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from converter.formats.proto import Model_pb2, NeuralNetwork_pb2

HERE = Path(__file__).resolve().parent
LABELS = ["cat", "dog", "bird", "fish"]


def conv(nn, name, inp, out, cin, cout, k, rng):
    layer = nn.layers.add(name=name, input=[inp], output=[out])
    c = layer.convolution
    c.outputChannels, c.kernelChannels = cout, cin
    c.kernelSize.extend([k, k])
    c.stride.extend([1, 1])
    c.same.asymmetryMode = NeuralNetwork_pb2.SamePadding.BOTTOM_RIGHT_HEAVY
    c.hasBias = True
    c.weights.floatValue.extend((rng.standard_normal(cout * cin * k * k) * 0.2).astype(np.float32))
    c.bias.floatValue.extend((rng.standard_normal(cout) * 0.1).astype(np.float32))


def build() -> Model_pb2.Model:
    rng = np.random.default_rng(2024)
    m = Model_pb2.Model(specificationVersion=1)
    d = m.description
    img = d.input.add(name="image", shortDescription="a 32x32 colour picture")
    img.type.imageType.width, img.type.imageType.height = 32, 32
    img.type.imageType.colorSpace = img.type.imageType.BGR
    probs = d.output.add(name="classProbability", shortDescription="probability of each class")
    probs.type.dictionaryType.stringKeyType.SetInParent()
    label = d.output.add(name="classLabel", shortDescription="most likely class")
    label.type.stringType.SetInParent()
    d.predictedFeatureName, d.predictedProbabilitiesName = "classLabel", "classProbability"
    d.metadata.shortDescription = "converter example: a tiny legacy image classifier"
    d.metadata.author = "converter"
    d.metadata.license = "BSD-3-Clause"

    nn = m.neuralNetworkClassifier
    pre = nn.preprocessing.add(featureName="image")
    pre.scaler.channelScale = 1 / 255.0
    pre.scaler.blueBias, pre.scaler.greenBias, pre.scaler.redBias = -0.4, -0.45, -0.5
    conv(nn, "conv1", "image", "conv1_out", 3, 8, 3, rng)
    nn.layers.add(name="relu1", input=["conv1_out"], output=["relu1_out"]).activation.ReLU.SetInParent()
    pool = nn.layers.add(name="pool1", input=["relu1_out"], output=["pool1_out"]).pooling
    pool.type = pool.MAX
    pool.kernelSize.extend([2, 2])
    pool.stride.extend([2, 2])
    pool.valid.SetInParent()
    conv(nn, "conv2", "pool1_out", "conv2_out", 8, 16, 3, rng)
    nn.layers.add(name="relu2", input=["conv2_out"], output=["relu2_out"]).activation.ReLU.SetInParent()
    gap = nn.layers.add(name="gap", input=["relu2_out"], output=["gap_out"]).pooling
    gap.type = gap.AVERAGE
    gap.globalPooling = True
    gap.valid.SetInParent()
    fc = nn.layers.add(name="fc", input=["gap_out"], output=["logits"]).innerProduct
    fc.inputChannels, fc.outputChannels, fc.hasBias = 16, len(LABELS), True
    fc.weights.floatValue.extend((rng.standard_normal(16 * len(LABELS)) * 0.5).astype(np.float32))
    fc.bias.floatValue.extend(np.zeros(len(LABELS), np.float32))
    nn.layers.add(name="softmax", input=["logits"], output=["probs"]).softmax.SetInParent()
    nn.stringClassLabels.vector.extend(LABELS)
    nn.labelProbabilityLayerName = "probs"
    return m


if __name__ == "__main__":
    out = HERE / "tiny_classifier.mlmodel"
    out.write_bytes(build().SerializeToString())
    print(f"wrote {out}")
