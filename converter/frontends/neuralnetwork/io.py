"""The boundary of a neural network: features in their declared form <-> tensors the layers see.

Core ML feeds NeuralNetwork layers float tensors: multiArrays are cast to fp32 (DOUBLE included,
which the runtime computes in fp32 anyway), images arrive as [C, H, W] in the model's colour order
and go through the network's preprocessing (scaler, mean image). With legacy rank-5 mapping
(spec <= 3, or RANK5_ARRAY_MAPPING) a declared [C] becomes [1, 1, C, 1, 1] and [C, H, W] becomes
[1, 1, C, H, W]; a sequence input is [Seq, 1, C, 1, 1]. Outputs go back to the declared shape
and dtype (image outputs to [1, C, H, W]).
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
    if rank5 and shape is not None and len(shape) == 5:
        static = all(is_static_dim(d) for d in shape)
        if declared and static and num_elements(shape) == int(np.prod(declared)):
            v = b.reshape(x=v, shape=declared, name=f"{name}_declared")
        elif not declared and all(is_static_dim(d) and int(d) == 1 for d in shape[:2]):
            v = b.squeeze(x=v, axes=[0, 1], name=f"{name}_chw")
        elif declared and not static and len(declared) < 5:
            squeezable = [i for i, d in enumerate(shape[:5 - len(declared)]) if is_static_dim(d) and int(d) == 1]
            if len(squeezable) == 5 - len(declared):
                v = b.squeeze(x=v, axes=squeezable, name=f"{name}_declared")
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
