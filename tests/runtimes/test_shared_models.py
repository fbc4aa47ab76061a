"""Issue 12 on the shared models (../shared/data/models), through the onnxruntime runtime.

The models: every one that converts to MIL (the NeuralNetwork models that load and run,
tests/nn_models/shared.py ``RUNS``, and every ML program). For each:

- export: ``converter.convert(path, to="onnx")`` writes a file that passes
  ``onnx.checker.check_model(full_check=True)``, or is refused with an UnsupportedError naming
  only ops pinned for the model in ``REFUSED`` (the lowerings it lacks: a model not listed must
  export, and a refusal may not name a new op);
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

#: model -> the op types its refusal (export) or fallback note (run) may name: the ONNX lowerings it
#: lacks (measured; "while_loop" also stands for "a loop the interpreter bounds"). A model not listed
#: must export and run in onnxruntime.
REFUSED: dict[str, tuple[str, ...]] = {
    "builder/activations_all.mlmodel": ('expand_dims', 'reshape'),
    "builder/cnn_conv_pool_fc.mlmodel": ('avg_pool', 'batch_norm', 'conv', 'conv_transpose', 'expand_dims', 'linear', 'max_pool', 'reduce_max', 'reshape', 'squeeze'),
    "builder/cnn_conv_pool_fc_fp16.mlmodel": ('avg_pool', 'batch_norm', 'conv', 'conv_transpose', 'expand_dims', 'linear', 'max_pool', 'reduce_max', 'reshape', 'squeeze'),
    "builder/cnn_conv_pool_fc_int8_linear.mlmodel": ('avg_pool', 'batch_norm', 'conv', 'conv_transpose', 'expand_dims', 'linear', 'max_pool', 'reduce_max', 'reshape', 'squeeze'),
    "builder/cnn_conv_pool_fc_int8_symmetric.mlmodel": ('avg_pool', 'batch_norm', 'conv', 'conv_transpose', 'expand_dims', 'linear', 'max_pool', 'reduce_max', 'reshape', 'squeeze'),
    "builder/cnn_conv_pool_fc_lut2.mlmodel": ('avg_pool', 'batch_norm', 'conv', 'conv_transpose', 'expand_dims', 'linear', 'max_pool', 'reduce_max', 'reshape', 'squeeze'),
    "builder/cnn_conv_pool_fc_lut4.mlmodel": ('avg_pool', 'batch_norm', 'conv', 'conv_transpose', 'expand_dims', 'linear', 'max_pool', 'reduce_max', 'reshape', 'squeeze'),
    "builder/control_flow_branch.mlmodel": ('cond', 'reshape'),
    "builder/control_flow_loop.mlmodel": ('while_loop',),
    "builder/embedding_simple_rnn.mlmodel": ('expand_dims', 'gather', 'reshape', 'rnn', 'squeeze', 'transpose'),
    "builder/flexible_image_sizes.mlmodel": ('conv', 'expand_dims', 'squeeze'),
    "builder/flexible_shape_enumerated.mlmodel": ('conv', 'expand_dims', 'squeeze'),
    "builder/flexible_shape_range.mlmodel": ('conv', 'expand_dims', 'squeeze'),
    "builder/gru.mlmodel": ('expand_dims', 'gru', 'reshape', 'squeeze'),
    "builder/image_classifier_preprocessed.mlmodel": ('classify', 'conv', 'expand_dims', 'linear', 'reduce_mean', 'reshape', 'squeeze'),
    "builder/lstm_bidirectional.mlmodel": ('concat', 'expand_dims', 'lstm', 'reshape', 'split', 'squeeze'),
    "builder/lstm_unidirectional.mlmodel": ('expand_dims', 'linear', 'lstm', 'reshape', 'squeeze'),
    "builder/nd_attention_block.mlmodel": ('concat', 'gather', 'layer_norm', 'linear', 'matmul', 'reduce_mean', 'reshape', 'select', 'transpose'),
    "builder/pipeline_two_nn.mlmodel": ('expand_dims', 'linear', 'reshape', 'squeeze'),
    "builder/regressor_mlp.mlmodel": ('expand_dims', 'linear', 'reshape', 'squeeze'),
    "builder/shape_spatial_ops.mlmodel": ('concat', 'crop', 'depth_to_space', 'expand_dims', 'l2_norm', 'local_response_norm', 'pad', 'reduce_max', 'reduce_mean', 'reduce_sum', 'reshape', 'resize_bilinear', 'slice_by_index', 'space_to_depth', 'split', 'squeeze', 'tile', 'transpose', 'upsample_bilinear', 'upsample_nearest_neighbor'),
    "builder/updatable_classifier.mlmodel": ('classify', 'expand_dims', 'linear', 'reshape', 'squeeze'),
    "real/0c1c0adf_s4tf_house_simplified_trained_model.mlmodel": ('concat', 'expand_dims', 'gather', 'linear', 'reshape', 'squeeze', 'transpose'),
    "real/1655a77a_s4tf_house_simplified_trained_model.mlmodel": ('concat', 'expand_dims', 'gather', 'linear', 'reshape', 'squeeze', 'transpose'),
    "real/1aee5979_identity.mlmodel": ('reshape',),
    "real/39fbeb97_coreml_simplified_no_train.mlmodel": ('concat', 'expand_dims', 'gather', 'linear', 'reshape', 'squeeze', 'transpose'),
    "real/3a3562de_s4tf_model_personalization.mlmodel": ('expand_dims', 'linear', 'reshape', 'squeeze'),
    "real/3a80f611_coreml_no_train.mlmodel": ('concat', 'expand_dims', 'gather', 'linear', 'reshape', 'squeeze', 'transpose'),
    "real/3d92b676_DTLN_AEC_128_Part1.mlpackage": ('concat', 'expand_dims', 'layer_norm', 'linear', 'list_gather', 'list_read', 'list_scatter', 'list_write', 'make_list', 'matmul', 'reduce_mean', 'reshape', 'slice_by_index', 'split', 'stack', 'transpose', 'while_loop'),
    "real/49719a08_keras_model.mlmodel": ('linear',),
    "real/50a282d4_my_network.mlmodel": ('conv', 'expand_dims', 'linear', 'max_pool', 'reshape', 'squeeze'),
    "real/56e485a2_my_network_image.mlmodel": ('batch_norm', 'conv', 'linear', 'max_pool', 'reshape'),
    "real/5f22b2cb_my_network_image.mlmodel": ('conv', 'linear', 'max_pool', 'reshape'),
    "real/68e94b94_keras2coreml_Dense_ImageNet_small.mlmodel": ('expand_dims', 'linear', 'reshape', 'squeeze', 'transpose'),
    "real/6f940a19_mnist_model.mlmodel": ('expand_dims', 'linear', 'reshape', 'squeeze'),
    "real/7485461f_SqueezeNetFP16.mlmodel": ('classify', 'concat', 'conv', 'expand_dims', 'max_pool', 'reduce_mean', 'reshape', 'squeeze'),
    "real/764eeca3_ChineseClassifier.mlpackage": ('classify', 'gather', 'linear', 'reduce_mean'),
    "real/799a4a00_model_cpm.mlmodel": ('batch_norm', 'concat', 'conv', 'expand_dims', 'max_pool', 'reshape', 'resize_bilinear', 'squeeze'),
    "real/8157904a_my_network.mlmodel": ('conv', 'expand_dims', 'linear', 'max_pool', 'reshape', 'squeeze'),
    "real/83d3b71f_keras_model_pers_temp.mlmodel": ('expand_dims', 'linear', 'reshape', 'squeeze'),
    "real/88ce411d_Image2Image.mlmodel": ('expand_dims', 'squeeze'),
    "real/8d40cf76_DTLN_AEC_128_Part1.mlpackage": ('concat', 'expand_dims', 'layer_norm', 'linear', 'list_gather', 'list_read', 'list_scatter', 'list_write', 'make_list', 'matmul', 'reduce_mean', 'reshape', 'slice_by_index', 'split', 'stack', 'transpose', 'while_loop'),
    "real/8dbda0d2_SqueezeNetInt8LUT.mlmodel": ('classify', 'concat', 'constexpr_lut_to_dense', 'conv', 'expand_dims', 'max_pool', 'reduce_mean', 'reshape', 'squeeze'),
    "real/8fafee4d_ChineseClassifier.mlpackage": ('classify', 'gather', 'linear', 'reduce_mean'),
    "real/9cb541e9_model.mlmodel": ('linear',),
    "real/9de70cc9_DeepLabV3Int8LUT.mlmodel": ('avg_pool', 'concat', 'constexpr_lut_to_dense', 'conv', 'expand_dims', 'pad', 'reduce_argmax', 'reshape', 'resize_bilinear', 'squeeze'),
    "real/9f7cf8e5_model_hourglass.mlmodel": ('batch_norm', 'conv', 'expand_dims', 'max_pool', 'reshape', 'resize_bilinear', 'squeeze'),
    "real/a2e9c9a9_DTLN_AEC_128_Part2.mlpackage": ('concat', 'conv', 'expand_dims', 'layer_norm', 'linear', 'list_gather', 'list_read', 'list_scatter', 'list_write', 'make_list', 'matmul', 'reduce_mean', 'reshape', 'slice_by_index', 'split', 'stack', 'transpose', 'while_loop'),
    "real/b9214af7_TinyDrawingEmbedding.mlmodel": ('conv', 'expand_dims', 'linear', 'max_pool', 'reshape', 'squeeze', 'transpose'),
    "real/bc86aed3_SimpleMnist.mlmodel": ('batch_norm', 'classify', 'expand_dims', 'linear', 'reshape', 'squeeze', 'transpose'),
    "real/c3284a54_MNIST.mlmodel": ('conv', 'expand_dims', 'linear', 'max_pool', 'reshape', 'squeeze', 'transpose'),
    "real/c39a15ad_my_model.mlmodel": ('conv', 'expand_dims', 'linear', 'max_pool', 'reshape', 'squeeze', 'transpose'),
    "real/cdceb1a6_my_network_image_ct4.mlmodel": ('batch_norm', 'conv', 'linear', 'max_pool', 'reshape'),
    "real/d8cf86f0_test.mlmodel": ('expand_dims', 'linear', 'reshape', 'squeeze'),
    "real/e3201c3e_my_model.mlmodel": ('conv', 'expand_dims', 'linear', 'max_pool', 'reshape', 'squeeze', 'transpose'),
    "real/ecbd4fd1_model.mlmodel": ('expand_dims', 'linear', 'reshape', 'squeeze'),
    "real/f4695a22_my_network.mlmodel": ('batch_norm', 'conv', 'expand_dims', 'linear', 'max_pool', 'reshape', 'squeeze'),
    "torch/cnn_bn_mlprogram.mlpackage": ('conv', 'conv_transpose', 'linear', 'max_pool', 'reduce_mean', 'reshape'),
    "torch/cnn_bn_mlprogram_fp16.mlpackage": ('conv', 'conv_transpose', 'linear', 'max_pool', 'reduce_mean', 'reshape'),
    "torch/cnn_bn_nn.mlmodel": ('conv', 'conv_transpose', 'linear', 'max_pool', 'reduce_mean', 'reshape'),
    "torch/gru_bidirectional_mlprogram.mlpackage": ('concat', 'expand_dims', 'gather', 'linear', 'reverse', 'scatter', 'slice_by_index', 'squeeze', 'transpose', 'while_loop'),
    "torch/gru_bidirectional_mlprogram_fp16.mlpackage": ('concat', 'expand_dims', 'gather', 'linear', 'reverse', 'scatter', 'slice_by_index', 'squeeze', 'transpose', 'while_loop'),
    "torch/gru_bidirectional_nn.mlmodel": ('concat', 'expand_dims', 'gather', 'linear', 'reshape', 'reverse', 'scatter', 'slice_by_index', 'squeeze', 'transpose', 'while_loop'),
    "torch/lstm_mlprogram.mlpackage": ('expand_dims', 'linear', 'lstm', 'slice_by_index', 'transpose'),
    "torch/lstm_mlprogram_fp16.mlpackage": ('expand_dims', 'linear', 'lstm', 'slice_by_index', 'transpose'),
    "torch/lstm_nn.mlmodel": ('expand_dims', 'linear', 'lstm', 'reshape', 'slice_by_index', 'squeeze', 'transpose'),
    "torch/mlp_export_mlprogram.mlpackage": ('linear',),
    "torch/mlp_mlprogram.mlpackage": ('linear',),
    "torch/mlp_mlprogram_fp16.mlpackage": ('linear',),
    "torch/mlp_nn.mlmodel": ('linear',),
    "torch/transformer_encoder_layer_export_mlprogram.mlpackage": ('expand_dims', 'layer_norm', 'linear', 'matmul', 'reshape', 'slice_by_index', 'squeeze', 'transpose'),
    "torch/transformer_encoder_layer_mlprogram.mlpackage": ('expand_dims', 'layer_norm', 'linear', 'matmul', 'reshape', 'slice_by_index', 'squeeze', 'transpose'),
    "torch/transformer_encoder_layer_mlprogram_fp16.mlpackage": ('expand_dims', 'layer_norm', 'linear', 'matmul', 'reshape', 'slice_by_index', 'squeeze', 'transpose'),
    "torch/transformer_encoder_layer_nn.mlmodel": ('expand_dims', 'linear', 'matmul', 'reduce_mean', 'reshape', 'slice_by_index', 'squeeze', 'transpose'),
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
