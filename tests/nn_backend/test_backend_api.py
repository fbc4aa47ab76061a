"""The NeuralNetwork backend's entry points: convert/save to a .mlmodel, the CLI, version choice,
errors. Values are checked by reading the written model back with the NeuralNetwork frontend and
running it against numpy formulas written here from the ops' definitions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import converter
from converter.errors import UnsupportedError
from converter.formats.model_file import read_model_file
from converter.ir.builder import new_program
from converter.ir.types import TensorType, fp32


def _program():
    def body(b, x):
        y = b.add(x=b.mul(x=x, y=np.float32(2)), y=np.arange(4, dtype=np.float32))
        return [b.relu(x=y, name="out"), b.scaled_tanh(x=x, alpha=np.float32(2), beta=np.float32(0.5), name="st")]

    return new_program([("x", TensorType(fp32, (3, 4)))], body)


def _layers(path: Path) -> list[str]:
    return [layer.WhichOneof("layer") for layer in read_model_file(path).model.neuralNetwork.layers]


def test_convert_writes_a_neuralnetwork_model_that_computes_the_program(tmp_path: Path) -> None:
    out = tmp_path / "m.mlmodel"
    converter.convert(_program(), to="neuralnetwork", out=out)
    model = read_model_file(out).model
    assert model.WhichOneof("Type") == "neuralNetwork"
    assert model.specificationVersion == 4  # ND layers and array mapping: iOS13
    assert [f.name for f in model.description.input] == ["x"]
    assert [f.name for f in model.description.output] == ["out", "st"]
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    got = converter.run(converter.load(out), {"x": x})
    np.testing.assert_allclose(got["out"], np.maximum(2 * x + np.arange(4), 0), rtol=1e-6, atol=1e-6)
    # scaled_tanh(alpha=2, beta=0.5) = 2 tanh(0.5 x): alpha and beta swapped would give 0.5 tanh(2 x)
    np.testing.assert_allclose(got["st"], 2 * np.tanh(0.5 * x), rtol=1e-6, atol=1e-6)


def test_the_cli_writes_a_neuralnetwork_model(tmp_path: Path) -> None:
    from cli import main

    src = converter.save(_program(), tmp_path / "src.mlpackage")
    out = tmp_path / "out.mlmodel"
    result = CliRunner().invoke(main, ["convert", str(src), "-o", str(out), "--to", "neuralnetwork"])
    assert result.exit_code == 0, result.output
    assert "activation" in _layers(out)
    result = CliRunner().invoke(main, ["convert", str(src), "-o", str(tmp_path / "b.mlmodel"), "--to",
                                       "neuralnetwork", "--target", "iOS16"])
    assert result.exit_code != 0 and "iOS11, iOS11.2, iOS12, iOS13, iOS14" in result.output
    result = CliRunner().invoke(main, ["convert", str(src), "-o", str(tmp_path / "c.mlpackage"), "--to",
                                       "neuralnetwork"])
    assert result.exit_code != 0 and ".mlmodel" in result.output


def test_every_op_without_a_form_is_listed_and_nothing_is_written(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from converter.backends.neuralnetwork.lowering import LOWERINGS, load_all

    load_all()
    monkeypatch.delitem(LOWERINGS, "relu")
    monkeypatch.delitem(LOWERINGS, "scaled_tanh")
    out = tmp_path / "bad.mlmodel"
    with pytest.raises(UnsupportedError) as info:
        converter.convert(_program(), to="neuralnetwork", out=out, passes="none")
    message = str(info.value)
    assert "2 ops have no NeuralNetwork form" in message
    assert "relu 'out'" in message and "scaled_tanh 'st'" in message
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_version_floor_below_the_layers_is_refused_with_the_reasons(tmp_path: Path) -> None:
    # iOS12 is a rank-5 model (tests/nn_backend/test_rank5.py): its [3, 4] input has a batch axis > 1
    with pytest.raises(UnsupportedError, match="input 'x': 'x' of shape \\[3, 4\\] has a batch axis > 1"):
        converter.convert(_program(), to="neuralnetwork", out=tmp_path / "a.mlmodel", target="iOS12")
    converter.convert(_program(), to="neuralnetwork", out=tmp_path / "b.mlmodel", target="iOS13")
    assert read_model_file(tmp_path / "b.mlmodel").model.specificationVersion == 4
    with pytest.raises(UnsupportedError, match="iOS11"):
        converter.convert(_program(), to="neuralnetwork", out=tmp_path / "c.mlmodel", target="iOS9")


def test_image_preprocessing_becomes_the_networks_scaler_and_mean_image(tmp_path: Path) -> None:
    """An image input whose program starts with the scale/bias (or mean image) ops a frontend writes
    for Core ML's preprocessing keeps it as preprocessing, not layers; values vs the spec's formulas."""
    from converter.ir.core import FeatureInfo
    from converter.ir.types import TensorType as T

    from .helpers import layer_kinds

    def image_program(body):
        prog = new_program([("image", T(fp32, (1, 3, 2, 2)))], body)
        from converter.formats import description as desc
        ft = desc.type_to_feature(T(fp32, (1, 3, 2, 2)))
        ft = type(ft)()
        ft.imageType.width, ft.imageType.height = 2, 2
        ft.imageType.colorSpace = desc.IMAGE.BGR
        prog.main.input_info["image"] = FeatureInfo("image", ft.SerializeToString())
        return prog

    bias = np.array([0.5, -1.0, 2.0], np.float32).reshape(1, 3, 1, 1)
    scaled = image_program(lambda b, x: [b.relu(x=b.add(x=b.mul(x=x, y=np.float32(0.25)), y=bias), name="y")])
    out = tmp_path / "scaled.mlmodel"
    converter.convert(scaled, to="neuralnetwork", out=out, passes="none")
    model = read_model_file(out).model
    assert dict(layer_kinds(out)) == {"activation": 1}
    s = model.neuralNetwork.preprocessing[0].scaler
    # BGR image: channel 0 is blue, so blueBias = bias[0]
    assert (s.channelScale, s.blueBias, s.greenBias, s.redBias) == (0.25, 0.5, -1.0, 2.0)
    assert model.description.input[0].type.WhichOneof("Type") == "imageType"
    pixels = np.arange(12, dtype=np.uint8).reshape(2, 2, 3) * 20  # H x W x 3, RGB (what converter.run takes)
    got = converter.run(converter.load(out), {"image": pixels})["y"]
    chw = pixels[..., ::-1].transpose(2, 0, 1)[None].astype(np.float32)  # the BGR planes the network sees
    np.testing.assert_allclose(got, np.maximum(chw * 0.25 + bias, 0), rtol=1e-6)

    mean = np.linspace(-3, 3, 12, dtype=np.float32).reshape(1, 3, 2, 2)
    centred = image_program(lambda b, x: [b.relu(x=b.sub(x=x, y=mean), name="y")])
    out = tmp_path / "mean.mlmodel"
    converter.convert(centred, to="neuralnetwork", out=out, passes="none")
    assert list(read_model_file(out).model.neuralNetwork.preprocessing[0].meanImage.meanImage) == mean.reshape(-1).tolist()
    got = converter.run(converter.load(out), {"image": pixels})["y"]
    np.testing.assert_allclose(got, np.maximum(chw - mean, 0), rtol=1e-6)


def test_indices_cast_from_floats_cost_no_layers(tmp_path: Path) -> None:
    """gather(table, cast(float x, int32)): the gather layer truncates float indices itself, so the
    cast is no layer (7 layers otherwise: clip, comparisons, where, floor, ceil)."""
    from converter.ir.types import TensorType as T

    from .helpers import layer_kinds

    table = np.arange(15, dtype=np.float32).reshape(5, 3) * 0.5
    prog = new_program([("i", T(fp32, (4,)))],
                       lambda b, i: [b.gather(x=table, indices=b.cast(x=i, dtype="int32"), axis=0, name="rows")])
    out = tmp_path / "g.mlmodel"
    converter.convert(prog, to="neuralnetwork", out=out, passes="none")
    assert dict(layer_kinds(out)) == {"loadConstantND": 1, "gather": 1}
    idx = np.array([2.7, 0.2, 4.0, -1.5], np.float32)  # truncated: 2, 0, 4, -1 (the last row)
    got = converter.run(converter.load(out), {"i": idx})["rows"]
    np.testing.assert_array_equal(got, table[[2, 0, 4, -1]])


def test_layers_whose_results_nothing_reads_are_dropped() -> None:
    from converter.backends.neuralnetwork.network import remove_dead_layers
    from converter.formats.proto import NeuralNetwork_pb2

    nn = NeuralNetwork_pb2.NeuralNetwork()
    for name, ins, outs in [("a", ["x"], ["a"]), ("unused", ["a"], ["u"]), ("b", ["a"], ["y"]),
                            ("feeds_branch", ["x"], ["f"]), ("br", ["c"], [])]:
        layer = nn.layers.add(name=name, input=ins, output=outs)
        layer.activation.ReLU.SetInParent()
    nn.layers[-1].branch.ifBranch.layers.add(name="inner", input=["f"], output=["y2"]).activation.ReLU.SetInParent()
    assert remove_dead_layers(nn, {"y"}) == 1
    assert [layer.name for layer in nn.layers] == ["a", "b", "feeds_branch", "br"]


def test_lut_and_linear_quantized_weights_stay_compressed(tmp_path: Path) -> None:
    """SqueezeNet with 8-bit lookup-table weights: its convolutions keep their codes and table
    (`lookupTableQuantization`) instead of being expanded to fp32, so the model stays its size; the
    outputs are checked by the shared-model round trip."""
    from ..conftest import MODELS

    src = MODELS / "real" / "8dbda0d2_SqueezeNetInt8LUT.mlmodel"
    out = tmp_path / "squeezenet.mlmodel"
    converter.convert(src, to="neuralnetwork", out=out)
    layers = read_model_file(out).model.neuralNetworkClassifier.layers
    convs = [layer.convolution for layer in layers if layer.WhichOneof("layer") == "convolution"]
    lut = [c for c in convs if c.weights.quantization.HasField("lookupTableQuantization")]
    assert len(lut) >= 20 and all(c.weights.quantization.numberOfBits == 8 for c in lut)
    assert out.stat().st_size < 1.1 * src.stat().st_size  # fp32 weights would be about 4x


def test_every_op_has_a_neuralnetwork_entry_and_compressed_weights_are_not_unsupported() -> None:
    from converter.ir.registry_info import op_table

    rows = {r["op"]: r["neuralnetwork"] for r in op_table()}
    assert all(e["status"] in ("direct", "decomposed", "unsupported") for e in rows.values())
    assert all(e.get("reason") for e in rows.values() if e["status"] == "unsupported")
    assert rows["constexpr_lut_to_dense"]["status"] == "decomposed"
    assert rows["make_list"]["status"] == "unsupported" and "list" in rows["make_list"]["reason"]


def test_fp16_weights_are_written_as_float16(tmp_path: Path) -> None:
    """SqueezeNet fp16: its large convolution weights (fp16 constants the program casts to fp32) go
    back into the file as float16Value, not fp32 (the file stays about its source's size)."""
    from ..conftest import MODELS

    src = MODELS / "real" / "7485461f_SqueezeNetFP16.mlmodel"
    out = tmp_path / "squeezenet.mlmodel"
    converter.convert(src, to="neuralnetwork", out=out)
    written = read_model_file(out).payloads  # (WeightParams field, bytes) of the weights >= 4 KiB
    fp16 = [n for n, _ in written if n == 2]
    assert len(fp16) == 22 and len(written) == 22  # every weight of 4 KiB and more, as in the source
    assert out.stat().st_size < 1.2 * src.stat().st_size  # all fp32 would be about 2x
