"""Library calls inside pipelines: `converter.load` of a model in memory (.mlmodel bytes, a Model
message, coremltools' spec, a coremltools MLModel), and `convert(..., out=None)` + `export` giving
the converted model in memory.

The reference is `load(path)` of the same file: a model read from memory must run bit-identically
(same program, same interpreter). coremltools is the independent reader of what `export` makes:
it must accept the message as a Core ML model of the right type."""

from __future__ import annotations

import builtins
import os
import warnings

import numpy as np
import pytest

import converter
from converter.errors import FormatError, UnsupportedError
from converter.formats.proto import Model_pb2
from converter.verify import random_feeds

from .conftest import MODELS

ct = pytest.importorskip("coremltools")

NN = MODELS / "torch" / "mlp_nn.mlmodel"
CLASSIFIER = MODELS / "builder" / "image_classifier_preprocessed.mlmodel"
PROGRAM = MODELS / "torch" / "mlp_mlprogram.mlpackage"  # an ML program with a weight file
WEIGHT_REF = b"@model_path/weights/weight.bin"


def _outputs(prog):
    return converter.run(prog, random_feeds(prog.main, seed=3))


def _same(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for k in a:
        if isinstance(a[k], dict):
            assert a[k] == b[k], k
        else:
            assert np.array_equal(np.asarray(a[k]), np.asarray(b[k])), k


def _mlmodel(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ct.models.MLModel(str(path), skip_model_load=True)


@pytest.mark.parametrize("path", [NN, CLASSIFIER], ids=["neuralnetwork", "classifier"])
def test_a_model_file_in_memory_loads_as_its_path_does(path):
    want = _outputs(converter.load(path))
    data = path.read_bytes()
    ours = Model_pb2.Model.FromString(data)
    ml = _mlmodel(path)
    for given in (data, bytearray(data), memoryview(data), ours, ml.get_spec(), ml):
        _same(want, _outputs(converter.load(given)))
    assert ours == Model_pb2.Model.FromString(data)  # the message given is not modified


def test_an_ml_program_in_memory_reads_its_weights_from_weights_dir(tmp_path):
    want = _outputs(converter.load(PROGRAM))
    ml = _mlmodel(PROGRAM)
    assert ml.weights_dir  # coremltools keeps an ML program's weights in a folder
    _same(want, _outputs(converter.load(ml)))
    spec = ml.get_spec()
    _same(want, _outputs(converter.load(spec, weights_dir=ml.weights_dir)))
    _same(want, _outputs(converter.load(spec.SerializeToString(), weights_dir=ml.weights_dir)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rebuilt = ct.models.MLModel(spec, weights_dir=ml.weights_dir, skip_model_load=True)  # a copy in /tmp
    _same(want, _outputs(converter.load(rebuilt)))


def test_an_ml_program_in_memory_without_its_weights_says_what_to_give():
    with pytest.raises(FormatError, match=r"file '<bytes>'.*weight file '@model_path/weights/weight.bin'.*"
                                          r"given in memory without its weights folder: load\(\.\.\., weights_dir"):
        converter.load(_mlmodel(PROGRAM).get_spec().SerializeToString())


def test_a_blob_name_cannot_leave_the_weights_dir():
    ml = _mlmodel(PROGRAM)
    data = ml.get_spec().SerializeToString()
    assert WEIGHT_REF in data
    escaping = data.replace(WEIGHT_REF, b"@model_path/weights/../ght.bin")  # same length: still valid
    assert len(escaping) == len(data)
    with pytest.raises(FormatError, match=r"'\.\.' in path escapes"):
        converter.load(escaping, weights_dir=ml.weights_dir)


def test_loading_bytes_touches_no_file(monkeypatch):
    data = NN.read_bytes()
    converter.load(data)  # imports every module the load needs first

    def no_files(*args, **kwargs):
        raise AssertionError(f"opened {args[0]!r}")

    monkeypatch.setattr(builtins, "open", no_files)
    monkeypatch.setattr(os, "open", no_files)
    monkeypatch.setattr(os, "stat", no_files)
    prog = converter.load(data)
    monkeypatch.undo()
    _same(_outputs(converter.load(NN)), _outputs(prog))


def test_something_else_is_refused_clearly():
    with pytest.raises(UnsupportedError, match="cannot load a dict: give a path, the bytes of a .mlmodel"):
        converter.load({"spec": 1})
    with pytest.raises(FormatError, match="file '<bytes>': not a Core ML model"):
        converter.load(b"\xff\xff\xff")


@pytest.mark.parametrize(("path", "to", "kind"), [
    (NN, "mil", "mlProgram"),
    (PROGRAM, "neuralnetwork", "neuralNetwork"),
    (CLASSIFIER, "mil", "mlProgram"),
    (CLASSIFIER, "neuralnetwork", "neuralNetworkClassifier"),
], ids=["nn-to-mil", "program-to-nn", "classifier-to-mil", "classifier-to-nn"])
def test_convert_in_memory_and_export(tmp_path, path, to, kind):
    ml = _mlmodel(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", converter.ConversionWarning)
        prog = converter.convert(ml, to=to)  # out=None: nothing written, the program in memory
        model = converter.export(prog)  # the format converted to
    assert isinstance(model, converter.ConvertedModel) and model.format == to
    assert model.spec.WhichOneof("Type") == kind
    want = _outputs(converter.load(path))
    _same(want, _outputs(converter.load(model.to_bytes())))  # complete: no weight file needed
    _same(want, _outputs(converter.load(model.spec)))
    assert model.to_coreml(skip_model_load=True).get_spec().WhichOneof("Type") == kind  # coremltools reads it
    out = tmp_path / ("m.mlpackage" if to == "mil" else "m.mlmodel")
    assert model.save(out) == out
    _same(want, _outputs(converter.load(out)))
    with pytest.raises(converter.DestinationError):
        model.save(out)  # nothing is replaced unless asked


def test_convert_bytes_to_a_file(tmp_path):
    out = tmp_path / "m.mlpackage"
    converter.convert(NN.read_bytes(), out=out)
    _same(_outputs(converter.load(NN)), _outputs(converter.load(out)))


def test_export_refuses_webnn():
    with pytest.raises(UnsupportedError, match="a WebNN model is a folder of files"):
        converter.export(converter.load(NN), to="webnn")


@pytest.mark.parametrize("path", [NN, PROGRAM], ids=lambda p: p.name)
def test_run_takes_a_model_as_load_does(path):
    """``converter.run`` of a path (or bytes) runs what ``load`` of it gives, bit for bit; a path
    that is not a model is a clear error, not an AttributeError."""
    prog = converter.load(path)
    feeds = random_feeds(prog.functions[prog.default_function], 0)
    want = converter.run(prog, feeds)
    for given in (path, str(path)) + ((path.read_bytes(),) if path.is_file() else ()):
        got = converter.run(given, feeds)
        assert got.keys() == want.keys()
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])
    with pytest.raises(converter.ConverterError, match="nothing.mlmodel"):
        converter.run(path.parent / "nothing.mlmodel", feeds)
