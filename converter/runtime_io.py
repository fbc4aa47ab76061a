"""Feeding a program the way a Core ML app does, and reading its outputs the way Core ML reports them.

Inputs: multiArrays in the shape the model description declares (a rank-5 model also accepts the
full [Seq, Batch, C, H, W] form with Seq = Batch = 1, or any shape with the same elements in order
when only leading 1s differ), any numeric dtype (cast to the declared one); images as H x W x 3
uint8 RGB arrays (H x W for grayscale), turned into the [1, C, H, W] tensor Core ML builds from a
pixel buffer, in BGR order when the model says BGR. An optional multiArray input left out takes its
declared default value (0 unless the model says otherwise), as Core ML does (NeuralNetwork models
mark the initial states of recurrent layers optional). Outputs: a classifier's probabilities are a
dict {label: probability} in class-label order.

Mistakes are reported in the user's terms (converter/interface.py), not the program's: every
unknown and every missing input at once, with what each missing one takes (``image 32 x 32 (W x H)
RGB: an H x W x 3 uint8 array``), and a shape that does not fit against the declared feature with
flexible dimensions as ranges. A float array given for an image input runs (its values are taken as
pixels) but warns (`InputWarning`): the model takes uint8 pixels 0..255.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from .errors import EvaluationError, InputWarning
from .formats import description as desc
from .ir.core import Function
from .ir.interpreter import check_integer_range
from .ir.types import DimExpr, Symbol, TensorType, is_static_dim
from .limits import DEFAULT_MAX_TENSOR_BYTES, size_text


def _expected(fn: Function, name: str) -> str:
    """What input ``name`` takes, in the user's terms (converter/interface.py)."""
    from .interface import inputs

    return next((f.text() for f in inputs(fn) if f.name == name), "?")


def _does_not_fit(fn: Function, name: str, x: np.ndarray) -> EvaluationError:
    return EvaluationError(f"input '{name}': got a {x.dtype} array of shape {' x '.join(map(str, x.shape)) or 'scalar'}, "
                           f"expected {_expected(fn, name)}", function=fn.name)


def _image_to_tensor(fn: Function, x: np.ndarray, name: str, ft: Any, t: TensorType) -> np.ndarray:
    from .interface import inputs, shape_fits

    channels = desc.image_channels(ft)
    x = np.asarray(x)
    feature = next(f for f in inputs(fn) if f.name == name)
    if x.dtype.kind == "f" and feature.dtype == "uint8":
        small = x.size and float(np.nanmax(np.abs(x))) <= 1.0
        warnings.warn(f"input '{name}': a {x.dtype} array for an image, which takes uint8 pixels 0..255; its values "
                      "are used as pixel values as they are" + (" (values in [0, 1] make a nearly black image)"
                                                                   if small else ""), InputWarning, stacklevel=4)
    if channels == 1 and x.ndim == 3 and x.shape[-1] == 1:
        x = x[..., 0]
    if not (x.ndim == 2 if channels == 1 else (x.ndim == 3 and x.shape[-1] in (3, 4))) or \
            not shape_fits(feature, x.shape[:2] + ((3,) if channels != 1 else ())):
        raise _does_not_fit(fn, name, x)
    if channels == 1:
        chw = x[None, :, :]
    else:
        rgb = x[..., :3]
        if ft.imageType.colorSpace == desc.IMAGE.BGR:
            rgb = rgb[..., ::-1]
        chw = np.transpose(rgb, (2, 0, 1))
    return np.ascontiguousarray(chw[None]).astype(t.dtype.storage)


def _dims_fit(shape: tuple[int, ...], t: TensorType) -> bool:
    """Whether ``shape`` fits ``t``'s sizes one by one (a symbol: within its bounds or choices)."""
    if t.shape is None:
        return True
    if len(shape) != len(t.shape):
        return False
    for d, n in zip(t.shape, shape):
        if is_static_dim(d):
            if int(d) != n:
                return False
        elif isinstance(d, Symbol):
            if n < d.lower or (d.upper is not None and n > d.upper) or (d.choices and n not in d.choices):
                return False
    return True


def _fit_shape(fn: Function, x: np.ndarray, name: str, t: TensorType) -> np.ndarray:
    """Reshape a feed whose shape differs from the declared one only by leading/trailing 1s."""
    if t.shape is None or x.shape == tuple(t.shape):
        return x
    if _dims_fit(x.shape, t):
        return x
    if all(is_static_dim(d) for d in t.shape):
        want = tuple(int(d) for d in t.shape)
        squeezed_x = [n for n in x.shape if n != 1]
        squeezed_t = [n for n in want if n != 1]
        if squeezed_x == squeezed_t:
            return x.reshape(want)
    elif x.ndim > len(t.shape) and all(n == 1 for n in x.shape[: x.ndim - len(t.shape)]):
        y = x.reshape(x.shape[x.ndim - len(t.shape):])
        if _dims_fit(y.shape, t):
            return y
    elif x.ndim < len(t.shape):
        lead = len(t.shape) - x.ndim
        if all(isinstance(d, DimExpr) or int(d) == 1 for d in t.shape[:lead]):
            y = x.reshape((1,) * lead + x.shape)
            if _dims_fit(y.shape, t):
                return y
    raise _does_not_fit(fn, name, x)


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
    check_names(fn, feeds)
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
                out[v.name] = _image_to_tensor(fn, arr, v.name, ft, v.type)
                continue
        arr = np.asarray(x)
        if v.type.dtype.name != "string":
            if arr.dtype.kind not in "biuf":
                raise EvaluationError(f"input '{v.name}': {arr.dtype} data for a {v.type.dtype.name} input")
            if arr.dtype != v.type.dtype.storage:
                check_integer_range(v.name, arr, v.type, fn.name)
            arr = arr.astype(v.type.dtype.storage, copy=False)
        out[v.name] = _fit_shape(fn, arr, v.name, v.type)
    return out


def _names(names: list[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def check_names(fn: Function, feeds: Mapping[str, Any]) -> None:
    """`EvaluationError` naming every unknown and every missing input of ``fn`` at once, with what
    each missing one takes: ``unknown input 'img'; missing input 'image' (image 32 x 32 (W x H) RGB:
    an H x W x 3 uint8 array)``. An optional multiArray input may be left out (it has a default)."""
    from .interface import inputs

    features = {f.name: f for f in inputs(fn)}
    unknown = [k for k in feeds if k not in features]
    missing = [f for f in features.values() if f.name not in feeds and not (f.optional and f.kind == "multiArray")]
    if not unknown and not missing:
        return
    parts = []
    if unknown:
        parts.append(f"unknown input{'s' * (len(unknown) > 1)} {_names(unknown)}")
    if missing:
        parts.append(f"missing input{'s' * (len(missing) > 1)} " + ", ".join(f"'{f.name}' ({f.text()})" for f in missing))
    elif unknown:
        parts[-1] += f" (the inputs are {_names(list(features))})"
    raise EvaluationError("; ".join(parts), function=fn.name)


def adapt_outputs(fn: Function, outputs: dict[str, Any]) -> dict[str, Any]:
    """Outputs keyed by feature name; dicts keep class-label order (the classify op's order)."""
    return dict(outputs)
