"""Issue 10 on the shared models (../shared/data/models):

- every NeuralNetwork model that loads goes NN -> IR -> NN -> IR; the second program computes the
  first one's outputs (1e-4 x max(1, |ref|): the layers compute in fp32, and a decomposition may
  round differently), keeps the interface (feature names, kinds, classifier labels), and has at most
  the original's layer count plus the allowance listed in ``LAYER_ALLOWANCE`` (with why);
- every ML program converts to NeuralNetwork, or is refused with an UnsupportedError naming every
  offending op (``REFUSED_PROGRAMS``); the torch-derived ones, run through the NN frontend, match
  torch's stored outputs (the oracle: fp32 1e-4, fp16-derived 2**-9, as in tests/mil).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import converter
from converter.errors import UnsupportedError
from converter.formats.model_file import read_model_file

from ..conftest import MODELS
from ..mil.helpers import MLPROGRAM_PACKAGES, torch_conversions
from ..mil.helpers import model_id as package_id
from ..nn_models.coverage import networks
from ..nn_models.shared import RUNS, feeds_for, model_id
from .helpers import layer_kinds

TOLERANCE = 1e-4
FP16_TOLERANCE = 2.0**-9

_IO = ("a declared [C] feature of a rank-5 network is a [1, C] row for innerProduct / a [1, C, H, W] batch for "
       "convolution in ND layers: expandDims at the input, squeeze (or reshape) back at the output")
_SOFTMAX = "softmax over a flattened [1, C] row is softmaxND after a reshape (the legacy layer acts on axis -3)"
_RECURRENT = ("a declared [H] state feature of a rank-5 recurrent layer is one expandDims to [1, 1, H, 1, 1] in, "
              "one squeeze out")
_PER_CHANNEL = "PReLU and parametricSoftplus on rank-5 blobs come back as 3-4 ops each (per-channel constants)"
_RANK5_SHAPE = ("rank-5 legacy layers (reduce, mvn, l2normalize, slice, reorganize) are read as squeeze/reduce "
                "chains; re-emitted one layer per op")
_EMBED = "embedding layers are read as gather + transpose/expand_dims of their rank-5 index blobs"
_EMBED_INDICES = "a sequence of rank-5 indices [S, 1, 1, 1, 1] is squeezed to [S, 1, 1] for embeddingND"
#: model -> (extra layers allowed over the original's count, why): measured, each reason one of the above
LAYER_ALLOWANCE: dict[str, tuple[int, str]] = {
    **{f"builder/cnn_conv_pool_fc{s}.mlmodel": (1, _IO) for s in ("", "_int8_linear", "_int8_symmetric", "_lut2",
                                                                   "_lut4")},
    "builder/cnn_conv_pool_fc_fp16.mlmodel": (2, f"{_IO}; the batchnorm stays a layer: folded into the fp16 "
                                                 "convolution it would make the weights fp32"),
    "builder/activations_all.mlmodel": (8, _PER_CHANNEL),
    "builder/embedding_simple_rnn.mlmodel": (4, f"{_EMBED}; {_RECURRENT}; the gathered [Seq, 1, C] rows are "
                                                 "expanded to rank 5 for the layer"),
    "builder/flexible_image_sizes.mlmodel": (1, _IO),
    "builder/flexible_shape_enumerated.mlmodel": (2, _IO),
    "builder/flexible_shape_range.mlmodel": (2, _IO),
    "builder/gru.mlmodel": (4, f"{_RECURRENT}; remove_scaffolding computes the relu on the squeezed sequence (the "
                                "expand_dims sunk below it): a squeeze before it, an expandDims after"),
    "builder/image_classifier_preprocessed.mlmodel": (2, _SOFTMAX),
    "builder/lstm_bidirectional.mlmodel": (8, _RECURRENT),
    "builder/lstm_unidirectional.mlmodel": (6, f"{_RECURRENT}; {_IO}; the last LSTM's [1, 1, H] output is "
                                                "squeezed for the innerProduct"),
    "builder/pipeline_two_nn.mlmodel": (2, _IO),
    "builder/regressor_mlp.mlmodel": (2, _IO),
    "builder/shape_spatial_ops.mlmodel": (23, _RANK5_SHAPE),
    "builder/updatable_classifier.mlmodel": (2, f"{_IO}; {_SOFTMAX}"),
    "real/3a3562de_s4tf_model_personalization.mlmodel": (2, _IO),
    "real/3a80f611_coreml_no_train.mlmodel": (5, f"{_EMBED_INDICES}; {_IO}"),
    "real/50a282d4_my_network.mlmodel": (2, _IO),
    "real/68e94b94_keras2coreml_Dense_ImageNet_small.mlmodel": (2, _IO),
    "real/6f940a19_mnist_model.mlmodel": (2, f"{_IO}; {_SOFTMAX}"),
    "real/7485461f_SqueezeNetFP16.mlmodel": (1, _IO),
    "real/8157904a_my_network.mlmodel": (2, _IO),
    "real/83d3b71f_keras_model_pers_temp.mlmodel": (2, _IO),
    "real/8dbda0d2_SqueezeNetInt8LUT.mlmodel": (1, _IO),
    "real/9de70cc9_DeepLabV3Int8LUT.mlmodel": (13, f"{_RANK5_SHAPE}; the argmax output's float->int cast (7 layers)"),
    "real/b9214af7_TinyDrawingEmbedding.mlmodel": (2, _IO),
    "real/bc86aed3_SimpleMnist.mlmodel": (6, f"{_IO}; batchnorm on [1, C] rows is reshaped to rank 4 and back"),
    "real/c3284a54_MNIST.mlmodel": (2, f"{_IO}; {_SOFTMAX}"),
    "real/c39a15ad_my_model.mlmodel": (2, f"{_IO}; {_SOFTMAX}"),
    "real/d8cf86f0_test.mlmodel": (1, _IO),
    "real/e3201c3e_my_model.mlmodel": (2, f"{_IO}; {_SOFTMAX}"),
    "real/ecbd4fd1_model.mlmodel": (2, f"{_IO}; {_SOFTMAX}"),
    "torch/gru_bidirectional_nn.mlmodel": (9, "its loop's counters and copies of loop-carried values"),
    "torch/transformer_encoder_layer_nn.mlmodel": (11, "layer norms read back as mean/variance chains (mvn); " + _IO),
}

_LISTS = ("make_list", "list_scatter")
#: ML programs refused: model -> op types the error must name. The DTLN models run their LSTMs as TF
#: while loops over tensor lists; NeuralNetwork models have no list values
REFUSED_PROGRAMS: dict[str, tuple[str, ...]] = {
    "real/3d92b676_DTLN_AEC_128_Part1.mlpackage": _LISTS,
    "real/8d40cf76_DTLN_AEC_128_Part1.mlpackage": _LISTS,
    "real/a2e9c9a9_DTLN_AEC_128_Part2.mlpackage": _LISTS,
}


def _count(net: Any) -> int:
    """Layers of a network, those of nested networks (branch, loop) included."""
    total = 0
    for layer in net.layers:
        total += 1
        kind = layer.WhichOneof("layer")
        if kind == "branch":
            total += _count(layer.branch.ifBranch) + _count(layer.branch.elseBranch)
        elif kind == "loop":
            total += _count(layer.loop.conditionNetwork) + _count(layer.loop.bodyNetwork)
    return total


def _layer_count(path: Path) -> int:
    return sum(_count(nn) for nn in networks(read_model_file(path).model))


def _max_error(got: Any, want: Any) -> float:
    if isinstance(want, dict):
        return max((abs(float(got[k]) - float(v)) for k, v in want.items()), default=0.0)
    want = np.asarray(want)
    if want.dtype.kind not in "fiub":
        assert np.array_equal(np.asarray(got), want)
        return 0.0
    w = want.astype(np.float64)
    g = np.asarray(got, np.float64).reshape(w.shape)
    return float(np.max(np.abs(g - w), initial=0.0)) / max(1.0, float(np.max(np.abs(w), initial=0.0)))


@pytest.mark.parametrize("path", RUNS, ids=model_id)
def test_neuralnetwork_round_trip(path: Path, tmp_path: Path) -> None:
    first = converter.load(path)
    out = tmp_path / "again.mlmodel"
    converter.convert(path, to="neuralnetwork", out=out)
    second = converter.load(out)
    src, dst = read_model_file(path).model.description, read_model_file(out).model.description
    assert [f.name for f in dst.input] == [f.name for f in src.input]
    assert [f.name for f in dst.output] == list(dict.fromkeys(f.name for f in src.output))  # declared once
    assert [f.type.WhichOneof("Type") for f in dst.input] == [f.type.WhichOneof("Type") for f in src.input]
    assert (dst.predictedFeatureName, dst.predictedProbabilitiesName) == (src.predictedFeatureName,
                                                                         src.predictedProbabilitiesName)
    feeds = feeds_for(path, first)
    want = converter.run(first, feeds)
    got = converter.run(second, feeds)
    assert list(got) == list(want)
    for name in want:
        err = _max_error(got[name], want[name])
        assert err <= TOLERANCE, f"output '{name}': error {err:.3g} x max(1, |ref|)"
    allowed, _ = LAYER_ALLOWANCE.get(model_id(path), (0, ""))
    assert _layer_count(out) <= _layer_count(path) + allowed, dict(layer_kinds(out))


@pytest.mark.parametrize("path", MLPROGRAM_PACKAGES, ids=package_id)
def test_every_ml_program_converts_or_is_refused_naming_the_ops(path: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.mlmodel"
    refused = REFUSED_PROGRAMS.get(package_id(path))
    if refused is not None:
        with pytest.raises(UnsupportedError) as info:
            converter.convert(path, to="neuralnetwork", out=out)
        for op_type in refused:
            assert f"{op_type} '" in str(info.value)
        assert not out.exists()
        return
    converter.convert(path, to="neuralnetwork", out=out)
    assert read_model_file(out).model.WhichOneof("Type") in ("neuralNetwork", "neuralNetworkClassifier")


@pytest.mark.parametrize("name,kind,conv", [pytest.param(*c, id=f"{c[0]}-{c[1]}") for c in torch_conversions()])
def test_torch_programs_through_neuralnetwork_match_torch(name: str, kind: str, conv: dict, tmp_path: Path) -> None:
    if package_id(MODELS / conv["path"]) in REFUSED_PROGRAMS:
        pytest.skip("refused (see test_every_ml_program_converts_or_is_refused_naming_the_ops)")
    inputs = np.load(MODELS / "torch" / f"{name}.inputs.npz")
    refs = np.load(MODELS / "torch" / f"{name}.torch_outputs.npz")
    out = tmp_path / "m.mlmodel"
    converter.convert(MODELS / conv["path"], to="neuralnetwork", out=out)
    prog = converter.load(out)
    feeds = {v.name: inputs[k] for v, k in zip(prog.main.inputs, inputs.files)}
    got = converter.run(prog, feeds)
    tol = FP16_TOLERANCE if kind == "mlprogram_fp16" else TOLERANCE
    for i, out_name in enumerate(conv["outputs"]):
        ref = refs[f"output_{i}"]
        err = _max_error(got[out_name], ref)
        assert err <= tol, f"{name} {kind} output {out_name}: error {err:.3g} x max(1, |ref|)"
