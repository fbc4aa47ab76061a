"""The boundary of a neural network: features in their declared form <-> tensors the layers see.

Core ML feeds NeuralNetwork layers float tensors: multiArrays are cast to fp32 (DOUBLE included,
which the runtime computes in fp32 anyway), images arrive as [C, H, W] in the model's colour order
and go through the network's preprocessing (scaler, mean image). With legacy rank-5 mapping
(spec <= 3, or RANK5_ARRAY_MAPPING) a declared [C] becomes [1, 1, C, 1, 1] and [C, H, W] becomes
[1, 1, C, H, W]; a sequence input is [Seq, 1, C, 1, 1]. Outputs go back to the declared shape
and dtype (image outputs to [1, C, H, W]).

Image inputs and the rank the layers see (``NeuralNetworkImageShapeMapping``, spec >= 4):
- RANK5_IMAGE_MAPPING (the only form for spec <= 3): [1, 1, C, H, W];
- RANK4_IMAGE_MAPPING: [1, C, H, W].
The proto's comments on the enum and Core ML's validator (NeuralNetworkValidator.cpp gives an image
input rank 5 or 4 by that mapping, and multiArray inputs of ND networks the rank of their declared
shape) say so, and coremltools' converters build on it: an ML program's image input must be
(1, C, H, W) (backend_helper._validate_image_input_output_shapes) and the NeuralNetwork backend
writes RANK4 networks whose layers address that rank-4 tensor. The program input of an image is
[1, C, H, W] in both cases (the preprocessing works on it) and RANK5 adds the leading axis.
coremltools' builder also turns rank-3 multiArray inputs into images (``make_image_input`` /
``set_pre_processing_parameters``, with a ``transpose`` [1, 2, 0] to HWC for image_format NHWC),
keeping layers written for rank 3, and Core ML runs them (its tests
test_multiarray_to_image_input_util*): the leading size-1 axes are implicit, as in Core ML's
rank-5 blobs, so a transpose that names fewer axes than its input has permutes the trailing axes
and drops the leading 1s (shape.py). A multiArray output is returned in its declared shape when
the network's result has the same number of elements (Core ML does: the transpose-elimination test
declares (H, W, C) = (1, 1, 3) for a [.., 3, 1, 1] result and gets (1, 1, 3)), in ND networks too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import FormatError
from ...formats import description as desc
from ...formats.proto import FeatureTypes_pb2, NeuralNetwork_pb2
from ...ir.builder import Builder
from ...ir.core import Value
from ...ir.types import Symbol, TensorType, is_static_dim, num_elements

RANK5_IMAGE = NeuralNetwork_pb2.RANK5_IMAGE_MAPPING


def _cast_fp32(b: Builder, v: Value, name: str) -> Value:
    t = v.type
    if isinstance(t, TensorType) and t.dtype.name != "fp32":
        return b.cast(x=v, dtype="fp32", name=name)
    return v


def preprocess_image(b: Builder, v: Value, ft: FeatureTypes_pb2.FeatureType, pre: list[Any], name: str, *,
                     file: str | None = None) -> Value:
    """Scaler and mean-image preprocessing on a [1, C, H, W] image tensor (the spec's formulas);
    a FormatError (in ``file``) when an entry does not fit the image."""
    channels = desc.image_channels(ft)
    bgr = ft.imageType.colorSpace == desc.IMAGE.BGR
    for p in pre:
        kind = p.WhichOneof("preprocessor")
        if kind == "scaler":
            s = p.scaler
            if channels == 1:
                bias = np.array([s.grayBias], np.float32)
            elif bgr:
                bias = np.array([s.blueBias, s.greenBias, s.redBias], np.float32)
            else:
                bias = np.array([s.redBias, s.greenBias, s.blueBias], np.float32)
            v = b.mul(x=v, y=np.float32(s.channelScale), name=f"{name}_scale")
            v = b.add(x=v, y=bias.reshape(1, channels, 1, 1), name=f"{name}_bias")
        elif kind == "meanImage":
            mean = np.asarray(p.meanImage.meanImage, np.float32)
            shape = v.type.shape
            if not all(is_static_dim(d) for d in shape[1:]) or mean.size != num_elements(shape[1:]):
                raise FormatError(f"mean image of input '{name}' has {mean.size} values for an image of shape "
                                  f"{[str(d) for d in shape[1:]]}", file=file, field="preprocessing.meanImage")
            v = b.sub(x=v, y=mean.reshape((1,) + tuple(int(d) for d in shape[1:])), name=f"{name}_mean")
    return v


def to_network(b: Builder, v: Value, ft: FeatureTypes_pb2.FeatureType, *, rank5: bool, image_mapping: int,
               preprocessing: list[Any], name: str, file: str | None = None) -> Value:
    """A feature value (declared form) -> the tensor the network's layers consume (``file``: for
    errors)."""
    kind = desc.feature_kind(ft)
    if kind in ("imageType", "multiArrayType") and not isinstance(v.type, TensorType):
        # a pipeline's stage declaring an array or image input that an earlier declaration made a dictionary
        what = "an image" if kind == "imageType" else "a multiArray"
        raise FormatError(f"network input '{name}' is declared as {what}, but it receives a value of type {v.type}",
                          file=file, field="description.input")
    if kind == "imageType":
        v = preprocess_image(b, v, ft, preprocessing, name, file=file)
        if image_mapping == RANK5_IMAGE:
            v = b.expand_dims(x=v, axes=[0], name=f"{name}_rank5")
        return v
    if kind != "multiArrayType":
        return v
    v = _cast_fp32(b, v, f"{name}_fp32")
    if not rank5:
        return v
    shape = v.type.shape
    if shape is None or len(shape) == 5:
        return v
    if len(shape) == 1:
        return b.reshape(x=v, shape=[1, 1, -1, 1, 1], name=f"{name}_rank5")
    if len(shape) == 3:
        return b.expand_dims(x=v, axes=[0, 1], name=f"{name}_rank5")
    return b.expand_dims(x=v, axes=list(range(5 - len(shape))), name=f"{name}_rank5")


def from_network(b: Builder, v: Value, ft: FeatureTypes_pb2.FeatureType | None, *, rank5: bool,
                 out_dtype: str, name: str) -> Value:
    """A network tensor -> the declared output form (shape and dtype)."""
    t = v.type
    if isinstance(t, TensorType) and ft is not None and desc.feature_kind(ft) == "imageType":
        return _image_output(b, v, ft, name)
    if not isinstance(t, TensorType) or ft is None or desc.feature_kind(ft) != "multiArrayType":
        return v
    declared = [int(d) for d in ft.multiArrayType.shape]
    shape = t.shape
    if shape is not None and (len(shape) == 5 or not rank5):
        static = all(is_static_dim(d) for d in shape)
        extra = len(shape) - len(declared)
        if declared and static and list(shape) != declared and num_elements(shape) == int(np.prod(declared)):
            v = b.reshape(x=v, shape=declared, name=f"{name}_declared")
        elif rank5 and not declared and all(is_static_dim(d) and int(d) == 1 for d in shape[:2]):
            v = b.squeeze(x=v, axes=[0, 1], name=f"{name}_chw")
        elif declared and not static and extra > 0 and all(is_static_dim(d) and int(d) == 1 for d in shape[:extra]):
            v = b.squeeze(x=v, axes=list(range(extra)), name=f"{name}_declared")
    if v.type.dtype.name != out_dtype:
        v = b.cast(x=v, dtype=out_dtype, name=f"{name}_{out_dtype}")
    return v


def _image_output(b: Builder, v: Value, ft: FeatureTypes_pb2.FeatureType, name: str) -> Value:
    """An image output in the [1, C, H, W] form an image feature has (the layers produce
    [1, 1, C, H, W] in rank-5 networks, [C, H, W] or [1, C, H, W] in ND ones), so that the
    converted model still declares an image output."""
    shape = v.type.shape
    if shape is not None and len(shape) == 5 and all(is_static_dim(d) and int(d) == 1 for d in shape[:2]):
        v = b.squeeze(x=v, axes=[0], name=f"{name}_image")
    elif shape is not None and len(shape) == 3:
        v = b.expand_dims(x=v, axes=[0], name=f"{name}_image")
    want = "fp16" if ft.imageType.colorSpace == desc.IMAGE.GRAYSCALE_FLOAT16 else "fp32"
    if v.type.dtype.name != want:
        v = b.cast(x=v, dtype=want, name=f"{name}_{want}")
    return v


def output_dtype(ft: FeatureTypes_pb2.FeatureType | None) -> str:
    """The IR dtype of a multiArray output (DOUBLE is computed and returned as fp32)."""
    if ft is None or desc.feature_kind(ft) != "multiArrayType":
        return "fp32"
    name = desc.ARRAY_DTYPE_TO_IR.get(ft.multiArrayType.dataType, "fp32")
    return "fp32" if name == "fp64" else name


def sequence_symbol(feature: str) -> Symbol:
    return Symbol(f"{feature}_seq", lower=1, upper=None)
