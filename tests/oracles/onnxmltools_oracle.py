"""Independent oracle for NeuralNetwork semantics: onnxmltools converts classic (rank-5) Core ML
layers to ONNX, onnxruntime runs the result.

onnxmltools 1.16 does not import with current onnx / onnxconverter-common; the five runtime fixes
from ../shared/reference/onnxmltools-oracle-notes.md are applied here, in the test process only
(site-packages is never edited). Know its limits: classic layers only, and known wrong results for
embedding bias, l2normalize (C only), unary RSQRT/INVERSE epsilon, reshape CHANNEL_LAST.

What this harness adds around the two tools, none of which changes what the oracle computes:
- weights: onnxmltools reads ``floatValue`` only. fp16 weights are widened to fp32 here (exact);
  quantized weights are dequantized with coremltools' own utility, and only when some weight is
  quantized (that utility also prints a line per layer: conversion runs with stdout captured);
- repairs of onnxmltools' ONNX that onnxruntime rejects or cannot be fed, each keeping the meaning:
  fix 6: the bound of a unary THRESHOLD (an ONNX ``Clip``) is a float64 initializer next to a
  float32 input; it came from a float32 proto field, so storing it as float32 is exact.
  fix 7: a BILINEAR upsample becomes ``Resize(mode="bilinear", coordinate_transformation_mode=
  "asymmetric")``; ONNX calls that mode "linear" (x_in = x_out / scale with "asymmetric"). That is
  the spec's DEFAULT linearUpsampleMode: spacing (Xin - Xin/Xout) / (Xout - 1) = 1/scale when
  Xout = scale * Xin, grid point i * spacing. Renamed only when every bilinear upsample of the
  model is DEFAULT (onnxmltools ignores linearUpsampleMode).
  fix 8: a dilated convolution with "same" padding is a ``Conv`` with ``auto_pad=SAME_UPPER/LOWER``
  and dilations, which onnxruntime does not implement; the explicit pads ONNX defines for it
  (total = max(0, (ceil(in/s) - 1) * s + (k - 1) * d + 1 - in), the odd one at the end for UPPER,
  at the start for LOWER) replace it, from the input size onnx's shape inference gives;
  fix 9: an innerProduct whose input comes from a rank-N layer (e.g. reshapeStatic to [1, C], as
  coremltools writes before a classifier) is a ``Gemm`` on a rank-3 input ([-1, 1, C]: onnxmltools
  prepends a batch axis), which onnxruntime rejects (Gemm takes rank 2). When that input's last
  axis is the contracted one (size C), a ``Reshape`` to [-1, C] is put before the Gemm: the same
  elements in the same order, the same products and sums;
  fix 10: a rank-4 multiarray input (the [1, C, H, W] of every network coremltools converts from
  an ML program) is declared by onnxmltools with a placeholder shape ([N, 1, 1, 1]: its parser
  knows ranks 1 and 3 only), so a feed cannot reach it in the right shape. Core ML reads a rank-4
  input of a classic network as [Batch, C, H, W], ONNX's [N, C, H, W]: the input is declared with
  the model's own shape (the same elements in the same order);
- feeds in Core ML form (what ``converter.run`` takes), mapped to the ONNX inputs by element
  order: onnxmltools declares [N, C] for a [C] array (a [Seq, 1, C, 1, 1] sequence becomes
  N = Seq), [N, C, H, W] for [C, H, W], and an image as a float [N, C, H, W] tensor of raw 0-255
  pixel values with C in the model's colour order (it records that order as the metadata
  ``Image.BitmapPixelFormat``: Rgb8, Bgr8 or Gray8; the scaler/mean-image preprocessing is in the
  graph). Feeds for images are H x W x 3 uint8 RGB arrays (H x W for grayscale), as for
  ``converter.run``. The initial states of recurrent layers, which onnxruntime lists as
  overridable initializers rather than inputs, are fed too;
- ``as_coreml`` maps ONNX outputs back to the form ``converter.run`` returns (same element order,
  the shape of our output; a ZipMap's probabilities as a {label: probability} dict).
"""

from __future__ import annotations

import contextlib
import functools
import io
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from converter.frontends.neuralnetwork.weights import iter_weight_params  # walks any protobuf module


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
    import onnxmltools
    import onnxmltools.convert.coreml.operator_converters  # noqa: F401
    import onnxmltools.convert.coreml.operator_converters.neural_network  # noqa: F401
    import onnxmltools.convert.coreml.shape_calculators  # noqa: F401
    import onnxmltools.convert.coreml.shape_calculators.neural_network  # noqa: F401

    return onnxmltools


# -- Core ML model -> ONNX -------------------------------------------------------------------------

_NN_KINDS = ("neuralNetwork", "neuralNetworkClassifier", "neuralNetworkRegressor")
_PIPELINE_KINDS = ("pipeline", "pipelineClassifier", "pipelineRegressor")


def _networks(spec: Any) -> Iterator[Any]:
    """Every neural network of a model (pipeline stages included)."""
    kind = spec.WhichOneof("Type")
    if kind in _NN_KINDS:
        yield getattr(spec, kind)
    elif kind in _PIPELINE_KINDS:
        pipeline = spec.pipeline if kind == "pipeline" else getattr(spec, kind).pipeline
        for sub in pipeline.models:
            yield from _networks(sub)


def _densify(spec: Any) -> None:
    """fp16 weights -> fp32 ``floatValue`` (exact); quantized weights -> coremltools' dequantization."""
    quantized = False
    for nn in _networks(spec):
        for wp in iter_weight_params(nn):
            if len(wp.float16Value):
                wp.floatValue.extend(np.frombuffer(wp.float16Value, np.float16).astype(np.float32).tolist())
                wp.ClearField("float16Value")
            elif wp.HasField("quantization") and (len(wp.rawValue) or len(wp.int8RawValue)):
                quantized = True
    if quantized:
        from coremltools.models.neural_network.quantization_utils import _dequantize_nn_spec

        for nn in _networks(spec):
            _dequantize_nn_spec(nn)


def _repair_clip_bounds(model: Any) -> None:
    """Fix 6: float64 ``Clip`` bounds (onnxmltools' unary THRESHOLD) stored as float32."""
    from onnx import TensorProto, numpy_helper

    inits = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type != "Clip":
            continue
        for name in node.input[1:]:
            t = inits.get(name)
            if t is not None and t.data_type == TensorProto.DOUBLE:
                t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), name))


def _attribute(node: Any, name: str) -> Any:
    from onnx import helper

    return next((helper.get_attribute_value(a) for a in node.attribute if a.name == name), None)


def _repair_bilinear_upsample(model: Any, spec: Any) -> None:
    """Fix 7: ``Resize(mode="bilinear")`` -> "linear", when every bilinear upsample is DEFAULT."""
    from coremltools.proto import NeuralNetwork_pb2

    modes = {layer.upsample.linearUpsampleMode for nn in _networks(spec) for layer in nn.layers
             if layer.WhichOneof("layer") == "upsample" and layer.upsample.mode == layer.upsample.BILINEAR}
    if modes - {NeuralNetwork_pb2.UpsampleLayerParams.DEFAULT}:
        return
    for node in model.graph.node:
        if node.op_type == "Resize" and _attribute(node, "mode") == b"bilinear" \
                and _attribute(node, "coordinate_transformation_mode") == b"asymmetric":
            next(a for a in node.attribute if a.name == "mode").s = b"linear"


def _repair_dilated_same_conv(model: Any) -> None:
    """Fix 8: ``Conv(auto_pad=SAME_*)`` with dilations > 1 -> the equivalent explicit ``pads``."""
    import onnx
    from onnx import helper

    convs = [n for n in model.graph.node if n.op_type == "Conv"
             and _attribute(n, "auto_pad") in (b"SAME_UPPER", b"SAME_LOWER")
             and any(d != 1 for d in (_attribute(n, "dilations") or []))]
    if not convs:
        return
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes = {v.name: [d.dim_value if d.HasField("dim_value") else None for d in v.type.tensor_type.shape.dim]
              for v in [*inferred.graph.input, *inferred.graph.value_info]}
    for node in convs:
        spatial = shapes[node.input[0]][2:]
        kernel, dilations = _attribute(node, "kernel_shape"), _attribute(node, "dilations")
        strides = _attribute(node, "strides") or [1] * len(spatial)
        upper = _attribute(node, "auto_pad") == b"SAME_UPPER"
        begin, end = [], []
        for size, k, d, st in zip(spatial, kernel, dilations, strides):
            total = max(0, (-(-size // st) - 1) * st + (k - 1) * d + 1 - size)
            small, large = total // 2, total - total // 2
            begin.append(small if upper else large)
            end.append(large if upper else small)
        kept = [a for a in node.attribute if a.name != "auto_pad"]
        del node.attribute[:]
        node.attribute.extend([*kept, helper.make_attribute("pads", begin + end)])


def _repair_gemm_rank(model: Any) -> None:
    """Fix 9: a ``Gemm`` whose first input has rank > 2 (last axis the contracted one) gets it
    reshaped to [-1, C]."""
    import onnx
    from onnx import helper, numpy_helper

    inits = {t.name: t for t in model.graph.initializer}
    gemms = [n for n in model.graph.node if n.op_type == "Gemm" and not _attribute(n, "transA")
             and n.input[1] in inits]
    if not gemms:
        return
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes = {v.name: [d.dim_value if d.HasField("dim_value") else None for d in v.type.tensor_type.shape.dim]
              for v in [*inferred.graph.input, *inferred.graph.value_info]}
    for node in gemms:
        shape = shapes.get(node.input[0])
        weights = inits[node.input[1]]
        contracted = weights.dims[1] if _attribute(node, "transB") else weights.dims[0]
        if shape is None or len(shape) <= 2 or shape[-1] != contracted:
            continue
        target = f"{node.name or node.output[0]}_fix9_shape"
        flat = f"{node.input[0]}_fix9_flat"
        model.graph.initializer.append(numpy_helper.from_array(np.array([-1, contracted], np.int64), target))
        index = list(model.graph.node).index(node)
        model.graph.node.insert(index, helper.make_node("Reshape", [node.input[0], target], [flat]))
        node.input[0] = flat


def _declare_rank4_inputs(model: Any, spec: Any) -> None:
    """Fix 10: the ONNX inputs of rank-4 multiarray inputs get the model's own [B, C, H, W] shape."""
    rank4 = {f.name: list(f.type.multiArrayType.shape) for f in spec.description.input
             if f.type.WhichOneof("Type") == "multiArrayType" and len(f.type.multiArrayType.shape) == 4}
    for value in model.graph.input:
        dims = value.type.tensor_type.shape.dim
        if value.name in rank4 and len(dims) == 4:
            for dim, size in zip(dims, rank4[value.name]):
                dim.Clear()
                dim.dim_value = size


def to_onnx(model_bytes: bytes) -> Any:
    """ONNX model of a Core ML model (given as serialized bytes), or raise what onnxmltools raises."""
    from coremltools.proto import Model_pb2

    spec = Model_pb2.Model()
    spec.ParseFromString(model_bytes)
    with contextlib.redirect_stdout(io.StringIO()):
        _densify(spec)
        model = _onnxmltools().convert_coreml(spec, target_opset=13)
    _declare_rank4_inputs(model, spec)  # first: the repairs below read shapes inferred from the inputs
    _repair_clip_bounds(model)
    _repair_bilinear_upsample(model, spec)
    _repair_dilated_same_conv(model)
    _repair_gemm_rank(model)
    return model


# -- running ---------------------------------------------------------------------------------------


def session(onnx_model: Any) -> Any:
    """An onnxruntime CPU session of ``onnx_model`` (raises what onnxruntime raises when it rejects
    the model: made apart from `run` so that a caller can tell a rejected model from a failed run)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(onnx_model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _image_tensor(x: np.ndarray, pixel_format: str) -> np.ndarray:
    """H x W x 3 uint8 RGB (or H x W gray) -> [1, C, H, W] float32 in the model's colour order."""
    x = np.asarray(x)
    if x.ndim == 2:
        return x[None, None].astype(np.float32)
    rgb = x[..., :3]
    if pixel_format == "Bgr8":
        rgb = rgb[..., ::-1]
    elif pixel_format == "Gray8":
        raise ValueError("a colour array fed to a grayscale image input")
    return np.ascontiguousarray(np.transpose(rgb, (2, 0, 1))[None]).astype(np.float32)


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
    if x.ndim == 3 and rank == 4:
        return x[None]
    if x.ndim == 1 and rank == 2:
        return x[None]
    return x.reshape((1,) * (rank - x.ndim) + x.shape) if x.ndim < rank else x


def _fit(x: np.ndarray, shape: list[Any]) -> np.ndarray:
    """``x`` in the ONNX input's ``shape`` by element order (one free dimension is inferred)."""
    free = [i for i, d in enumerate(shape) if not isinstance(d, int)]
    static = int(np.prod([d for d in shape if isinstance(d, int)]))
    if not free and static == x.size:
        return x.reshape(shape)
    if len(free) == 1 and static and x.size % static == 0:
        return x.reshape([x.size // static if i == free[0] else d for i, d in enumerate(shape)])
    return _fit_rank(x, len(shape))


def run(onnx_model: Any, feeds: Mapping[str, Any], sess: Any = None) -> dict[str, Any]:
    """onnxruntime's outputs (in ONNX form) on Core ML-form ``feeds`` (see module docstring), in
    ``sess`` (a `session` of ``onnx_model``) when given."""
    sess = session(onnx_model) if sess is None else sess
    pixel_format = {p.key: p.value for p in onnx_model.metadata_props}.get("Image.BitmapPixelFormat", "Rgb8")
    images = {i.name for i in onnx_model.graph.input if i.type.denotation == "IMAGE"}
    args = {i.name: i for i in [*sess.get_inputs(), *sess.get_overridable_initializers()]}
    ready = {}
    for name, value in feeds.items():
        arg = args.get(name)
        if arg is None:
            continue
        x = np.asarray(value)
        if name in images and x.dtype == np.uint8:
            x = _image_tensor(x, pixel_format)
        want = np.float32 if "float" in arg.type else np.int64
        ready[name] = _fit(x.astype(want), list(arg.shape))
    outs = sess.run(None, ready)
    return {o.name: x for o, x in zip(sess.get_outputs(), outs)}


def as_coreml(onnx_outputs: Mapping[str, Any], ours: Mapping[str, Any]) -> dict[str, Any]:
    """ONNX outputs in the form of ``ours`` (outputs of ``converter.run``): arrays reshaped by
    element order, a ZipMap's one-element list of dicts as that dict (in our key order), a
    predicted label as a scalar. Outputs ONNX does not have are left out."""
    out: dict[str, Any] = {}
    for name, mine in ours.items():
        if name not in onnx_outputs:
            continue
        theirs = onnx_outputs[name]
        if isinstance(mine, dict):
            if isinstance(theirs, list) and len(theirs) == 1 and isinstance(theirs[0], dict):
                theirs = theirs[0]
            if isinstance(theirs, dict):
                theirs = {k: theirs[k] for k in mine if k in theirs} if set(theirs) == set(mine) else theirs
            out[name] = theirs
            continue
        mine_arr, theirs_arr = np.asarray(mine), np.asarray(theirs)
        if mine_arr.size == theirs_arr.size:
            theirs_arr = theirs_arr.reshape(mine_arr.shape)
        out[name] = theirs_arr
    return out
