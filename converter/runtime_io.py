"""Feeding a program the way a Core ML app does, and reading its outputs the way Core ML reports them.

Inputs: multiArrays in the shape the model description declares (a rank-5 model also accepts the
full [Seq, Batch, C, H, W] form with Seq = Batch = 1, or any shape with the same elements in order
when only leading 1s differ), any numeric dtype (cast to the declared one); images as H x W x 3
uint8 RGB arrays (H x W for grayscale), turned into the [1, C, H, W] tensor Core ML builds from a
pixel buffer, in BGR order when the model says BGR. An optional multiArray input left out takes its
declared default value (0 unless the model says otherwise), as Core ML does (NeuralNetwork models
mark the initial states of recurrent layers optional). Outputs: a classifier's probabilities are a
dict {label: probability} in class-label order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .errors import EvaluationError
from .formats import description as desc
from .ir.core import Function
from .ir.types import DimExpr, TensorType, is_static_dim
from .limits import DEFAULT_MAX_TENSOR_BYTES, size_text


def _image_to_tensor(x: np.ndarray, name: str, ft: Any, t: TensorType) -> np.ndarray:
    channels = desc.image_channels(ft)
    x = np.asarray(x)
    if channels == 1:
        if x.ndim == 3 and x.shape[-1] == 1:
            x = x[..., 0]
        if x.ndim != 2:
            raise EvaluationError(f"input '{name}': a grayscale image is an H x W array, got shape {list(x.shape)}")
        chw = x[None, :, :]
    else:
        if x.ndim != 3 or x.shape[-1] not in (3, 4):
            raise EvaluationError(f"input '{name}': a colour image is an H x W x 3 RGB array, got shape {list(x.shape)}")
        rgb = x[..., :3]
        if ft.imageType.colorSpace == desc.IMAGE.BGR:
            rgb = rgb[..., ::-1]
        chw = np.transpose(rgb, (2, 0, 1))
    return np.ascontiguousarray(chw[None]).astype(t.dtype.storage)


def _fit_shape(x: np.ndarray, name: str, t: TensorType) -> np.ndarray:
    """Reshape a feed whose shape differs from the declared one only by leading/trailing 1s."""
    if t.shape is None or x.shape == tuple(t.shape):
        return x
    if len(x.shape) == len(t.shape) and all(not is_static_dim(d) or int(d) == n for d, n in zip(t.shape, x.shape)):
        return x
    if all(is_static_dim(d) for d in t.shape):
        want = tuple(int(d) for d in t.shape)
        squeezed_x = [n for n in x.shape if n != 1]
        squeezed_t = [n for n in want if n != 1]
        if squeezed_x == squeezed_t:
            return x.reshape(want)
    elif x.ndim > len(t.shape) and all(n == 1 for n in x.shape[: x.ndim - len(t.shape)]):
        return x.reshape(x.shape[x.ndim - len(t.shape):])
    elif x.ndim < len(t.shape):
        lead = len(t.shape) - x.ndim
        if all(isinstance(d, DimExpr) or int(d) == 1 for d in t.shape[:lead]):
            return x.reshape((1,) * lead + x.shape)
    shown = [str(d) for d in t.shape]
    raise EvaluationError(f"input '{name}': shape {list(x.shape)} does not fit the declared shape {shown}")


def _optional_default(name: str, ft: Any, t: TensorType, max_bytes: int) -> np.ndarray:
    """The value Core ML gives an optional multiArray input the app leaves out: the declared default
    (``defaultOptionalValue``, spec 5+) or 0, in the declared shape (flexible dims: the default shape)."""
    arr = ft.multiArrayType
    which = arr.WhichOneof("defaultOptionalValue")
    value = getattr(arr, which) if which else 0
    declared = [int(d) for d in arr.shape]
    shape = t.shape or ()
    if len(declared) == len(shape):
        shape = [int(d) if is_static_dim(d) else n for d, n in zip(shape, declared)]
    if not all(is_static_dim(d) for d in shape):
        raise EvaluationError(f"input '{name}' is optional but has no default shape; feed it")
    nbytes = math.prod(int(d) for d in shape) * t.dtype.storage.itemsize
    if nbytes > max_bytes:
        raise EvaluationError(f"input '{name}' is optional, but its default value of shape {[int(d) for d in shape]} "
                              f"would take {size_text(nbytes)}, more than the limit of {size_text(max_bytes)} per "
                              "tensor (max_tensor_bytes); feed it")
    return np.full([int(d) for d in shape], value, dtype=t.dtype.storage)


def adapt_feeds(fn: Function, feeds: Mapping[str, Any], *, max_tensor_bytes: int | None = None) -> dict[str, Any]:
    """The feeds as the program's inputs take them (see the module docstring); defaults of omitted
    optional inputs are bounded by ``max_tensor_bytes`` (default `limits.DEFAULT_MAX_TENSOR_BYTES`)."""
    limit = DEFAULT_MAX_TENSOR_BYTES if max_tensor_bytes is None else max_tensor_bytes
    out: dict[str, Any] = dict(feeds)
    for v in fn.inputs:
        if not isinstance(v.type, TensorType):
            continue
        info = fn.input_info.get(v.name)
        ft = desc.feature_from_bytes(info.feature_type) if info is not None else None
        if v.name not in feeds:
            if ft is not None and ft.isOptional and desc.feature_kind(ft) == "multiArrayType":
                out[v.name] = _optional_default(v.name, ft, v.type, limit)
            continue
        x = feeds[v.name]
        if ft is not None and desc.feature_kind(ft) == "imageType":
            arr = np.asarray(x)
            if arr.dtype == np.uint8 or (arr.ndim in (2, 3) and arr.ndim != len(v.type.shape or ())):
                out[v.name] = _image_to_tensor(arr, v.name, ft, v.type)
                continue
        arr = np.asarray(x)
        if v.type.dtype.name != "string":
            if arr.dtype.kind not in "biuf":
                raise EvaluationError(f"input '{v.name}': {arr.dtype} data for a {v.type.dtype.name} input")
            arr = arr.astype(v.type.dtype.storage, copy=False)
        out[v.name] = _fit_shape(arr, v.name, v.type)
    return out


def adapt_outputs(fn: Function, outputs: dict[str, Any]) -> dict[str, Any]:
    """Outputs keyed by feature name; dicts keep class-label order (the classify op's order)."""
    return dict(outputs)
