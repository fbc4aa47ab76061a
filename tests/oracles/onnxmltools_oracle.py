"""Independent oracle for NeuralNetwork semantics: onnxmltools converts classic (rank-5) Core ML
layers to ONNX, onnxruntime runs the result.

onnxmltools 1.16 does not import with current onnx / onnxconverter-common; the five runtime fixes
from ../shared/reference/onnxmltools-oracle-notes.md are applied here, in the test process only
(site-packages is never edited). Know its limits: classic layers only, and known wrong results for
embedding bias, l2normalize (C only), unary RSQRT/INVERSE epsilon, reshape CHANNEL_LAST.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np


@functools.lru_cache(maxsize=1)
def _onnxmltools() -> Any:
    import onnx

    onnx.onnx_proto = onnx  # fix 4: `from onnx import onnx_proto`
    import onnxconverter_common.utils as occ_utils
    import onnxmltools.convert.common.data_types as data_types
    import onnxmltools.convert.common.utils as omt_utils

    if not hasattr(data_types, "find_type_conversion"):  # fix 1
        data_types.find_type_conversion = lambda *a, **k: "identity"
    original = data_types.FloatTensorType

    class FloatTensorType(original):  # fix 2: accept (and keep) a colour space argument
        def __init__(self, shape=None, color_space=None, doc_string="", **kwargs):
            super().__init__(shape, doc_string=doc_string if isinstance(doc_string, str) else "", **kwargs)
            self.color_space = color_space

    data_types.FloatTensorType = FloatTensorType
    for name in ("check_input_and_output_numbers", "check_input_and_output_types"):  # fix 5
        if not hasattr(omt_utils, name):
            setattr(omt_utils, name, getattr(occ_utils, name))
    import onnxmltools.convert.coreml._parse as parse

    parse.FloatTensorType = FloatTensorType
    if not hasattr(parse, "find_type_conversion"):
        parse.find_type_conversion = data_types.find_type_conversion
    # fix 3: register the Core ML operator converters and shape calculators
    import onnxmltools.convert.coreml.operator_converters  # noqa: F401
    import onnxmltools.convert.coreml.operator_converters.neural_network  # noqa: F401
    import onnxmltools.convert.coreml.shape_calculators  # noqa: F401
    import onnxmltools.convert.coreml.shape_calculators.neural_network  # noqa: F401
    import onnxmltools

    return onnxmltools


def to_onnx(model_bytes: bytes) -> Any:
    """ONNX model of a Core ML model (given as serialized bytes), or raise.

    Quantized weights are dequantized first with coremltools' own utility (onnxmltools cannot read
    them); that keeps the oracle independent of our weight decoding.
    """
    from coremltools.models.neural_network.quantization_utils import _dequantize_nn_spec
    from coremltools.proto import Model_pb2

    spec = Model_pb2.Model()
    spec.ParseFromString(model_bytes)
    for nn_kind in ("neuralNetwork", "neuralNetworkClassifier", "neuralNetworkRegressor"):
        if spec.WhichOneof("Type") == nn_kind:
            _dequantize_nn_spec(getattr(spec, nn_kind))
    omt = _onnxmltools()
    return omt.convert_coreml(spec, target_opset=13)


def run(onnx_model: Any, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(onnx_model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = {i.name: i for i in sess.get_inputs()}
    ready = {}
    for k, v in feeds.items():
        if k in names:
            want = np.float32 if "float" in names[k].type else np.int64
            ready[k] = _fit_rank(np.asarray(v).astype(want), len(names[k].shape))
    outs = sess.run(None, ready)
    return {o.name: np.asarray(x) for o, x in zip(sess.get_outputs(), outs)}


def _fit_rank(x: np.ndarray, rank: int) -> np.ndarray:
    """Reshape a Core ML feed to the rank onnxmltools gave the ONNX input: [N, C] for vectors
    (sequence steps become N), [N, C, H, W] for images and C,H,W arrays."""
    if x.ndim == rank:
        return x
    if x.ndim == 5:  # [Seq, Batch, C, H, W]
        s, b, c, h, w = x.shape
        if rank == 2:
            return x.reshape(s * b, c * h * w)
        if rank == 4:
            return x.reshape(s * b, c, h, w)
        if rank == 3:
            return x.reshape(s, b, c * h * w)
    if x.ndim == 3 and rank == 4:  # image HxWx3 uint8 is not handled here; C,H,W arrays gain N
        return x[None]
    if x.ndim == 1 and rank == 2:
        return x[None]
    return x.reshape((1,) * (rank - x.ndim) + x.shape) if x.ndim < rank else x
