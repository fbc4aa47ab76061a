"""A model's inputs and outputs in the user's terms: what an app passes and gets back.

The IR holds an image input as a [1, C, H, W] float tensor, and a rank-5 NeuralNetwork input as
[Seq, Batch, C, H, W]; neither is what a user passes. `features` describes each input and output
the way `converter.run` takes and returns them (converter/runtime_io.py): an image as an H x W x 3
uint8 RGB array (H x W for grayscale) with its size and colour space, a multiArray in its declared
shape with flexible dimensions as ranges or enumerated shapes, a classifier's probabilities as a
{label: probability} dict. `inspect`, `run`'s error messages and `verify` all print these, so the
three say the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .formats import description as desc
from .formats.proto import FeatureTypes_pb2
from .ir.core import Function, Value
from .ir.types import DictType, DimExpr, StateType, Symbol, TensorType, is_static_dim

#: A dimension in the user's terms: a size, or {"min": lo, "max": hi or None} for a range, or
#: {"choices": [...]} for one of some sizes, or {"param": NAME} for an ONNX model's named size.
Dim = Any

_COLOUR_SPACES = {desc.IMAGE.RGB: "RGB", desc.IMAGE.BGR: "BGR", desc.IMAGE.GRAYSCALE: "grayscale",
                  desc.IMAGE.GRAYSCALE_FLOAT16: "grayscale fp16"}
_ARRAY_DTYPES = {"fp32": "float32", "fp16": "float16", "fp64": "float64", "int32": "int32", "int8": "int8",
                 "int64": "int64", "int16": "int16", "uint8": "uint8", "uint16": "uint16", "bool": "bool",
                 "string": "string"}


@dataclass
class Feature:
    """One input or output as the user sees it (see the module docstring)."""

    name: str
    #: "image", "multiArray", "int64", "double", "string", "dictionary", "sequence", "state", or
    #: "tensor" for a program without a Core ML description (a WebNN graph, a built program)
    kind: str
    #: the numpy dtype name the user passes or gets ("uint8" for image pixels); None for a dict
    dtype: str | None
    #: the shape the user passes or gets (an image: [H, W, 3] or [H, W]); None when unknown
    shape: list[Dim] | None
    optional: bool = False
    description: str = ""
    #: images: {"width", "height", "colour_space"}; enumerated shapes: {"enumerated": [[...], ...]};
    #: dictionaries: {"key": "string"|"int64"}
    details: dict[str, Any] = field(default_factory=dict)

    def shape_text(self) -> str:
        """``224 x 224 x 3``, ``1 x 3 x 1..512``, ``one of 1 x 8, 1 x 16``; "?" when unknown."""
        enumerated = self.details.get("enumerated")
        if enumerated:
            return "one of " + ", ".join(" x ".join(str(d) for d in s) for s in enumerated)
        if self.shape is None:
            return "?"
        if not self.shape:
            return "scalar"
        return " x ".join(dim_text(d) for d in self.shape)

    def text(self) -> str:
        """One line: ``image 224 x 224 (W x H) RGB: an H x W x 3 uint8 array``, ``multiArray float32 1 x 10``."""
        opt = " (optional)" if self.optional else ""
        if self.kind == "image":
            d = self.details
            sizes = d.get("enumerated_sizes")
            size = ("one of " + ", ".join(f"{s['width']} x {s['height']}" for s in sizes) if sizes
                    else f"{dim_text(d['width'])} x {dim_text(d['height'])}") + " (W x H)"
            layout = "H x W" if d["colour_space"].startswith("grayscale") else "H x W x 3"
            return f"image {size} {d['colour_space']}{opt}: an {layout} {self.dtype} array"
        if self.kind == "dictionary":
            return f"dictionary {{{self.details.get('key', 'string')}: float64}}{opt}"
        if self.kind in ("int64", "double", "string"):
            return f"{self.kind} scalar{opt}"
        return f"{self.kind} {self.dtype or '?'} {self.shape_text()}{opt}"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "dtype": self.dtype, "shape": self.shape,
                "shape_text": self.shape_text(), "optional": self.optional, "description": self.description,
                **({"details": self.details} if self.details else {})}


def dim_text(d: Dim) -> str:
    """A dimension as text: ``32``, ``1..512``, ``8..`` (no upper bound), ``8|16|32``, or an ONNX
    ``dim_param`` name (``batch``)."""
    if isinstance(d, dict):
        if "param" in d:
            return str(d["param"])
        if "choices" in d:
            return "|".join(str(c) for c in d["choices"])
        hi = d.get("max")
        return f"{d['min']}..{'' if hi is None else hi}"
    return str(d)


def _ir_dim(d: Any) -> Dim:
    """An IR dimension in the user's terms: its size, or the sizes its symbol allows."""
    if is_static_dim(d):
        return int(d)
    if isinstance(d, Symbol) and d.choices:
        return {"choices": [int(c) for c in d.choices]}
    if isinstance(d, DimExpr):
        lo, hi = d.bounds()
        return {"min": max(int(lo or 0), 0), "max": None if hi is None else int(hi)}
    return {"min": 0, "max": None}


def _range_dim(r: FeatureTypes_pb2.SizeRange) -> Dim:
    hi = None if r.upperBound < 0 else int(r.upperBound)
    return int(r.lowerBound) if hi == r.lowerBound else {"min": int(r.lowerBound), "max": hi}


def _image_feature(name: str, ft: FeatureTypes_pb2.FeatureType) -> Feature:
    im = ft.imageType
    height: Dim = int(im.height)
    width: Dim = int(im.width)
    details: dict[str, Any] = {}
    flex = im.WhichOneof("SizeFlexibility")
    if flex == "imageSizeRange":
        height = _range_dim(im.imageSizeRange.heightRange)
        width = _range_dim(im.imageSizeRange.widthRange)
    elif flex == "enumeratedSizes" and len(im.enumeratedSizes.sizes) > 1:
        sizes = [[int(s.height), int(s.width)] for s in im.enumeratedSizes.sizes]
        details["enumerated_sizes"] = [{"width": w, "height": h} for h, w in sizes]
        height = {"choices": sorted({h for h, _ in sizes})}
        width = {"choices": sorted({w for _, w in sizes})}
    colour = _COLOUR_SPACES.get(im.colorSpace, f"colour space {im.colorSpace}")
    grayscale = colour.startswith("grayscale")
    shape: list[Dim] = [height, width] if grayscale else [height, width, 3]
    dtype = "float16" if im.colorSpace == desc.IMAGE.GRAYSCALE_FLOAT16 else "uint8"
    details.update(width=width, height=height, colour_space=colour)
    return Feature(name, "image", dtype, shape, bool(ft.isOptional), details=details)


def _array_feature(name: str, ft: FeatureTypes_pb2.FeatureType, t: Any) -> Feature:
    ma = ft.multiArrayType
    dtype = _ARRAY_DTYPES.get(desc.ARRAY_DTYPE_TO_IR.get(ma.dataType, ""), None)
    details: dict[str, Any] = {}
    flex = ma.WhichOneof("ShapeFlexibility")
    shape: list[Dim] | None = [int(d) for d in ma.shape] if len(ma.shape) else None
    if flex == "shapeRange" and ma.shapeRange.sizeRanges:
        shape = [_range_dim(r) for r in ma.shapeRange.sizeRanges]
    elif flex == "enumeratedShapes" and ma.enumeratedShapes.shapes:
        shapes = [[int(d) for d in s.shape] for s in ma.enumeratedShapes.shapes]
        if len(shapes) > 1:
            details["enumerated"] = shapes
        shape = shapes[0] if len(shapes) == 1 else [
            _choices({s[i] for s in shapes if len(s) > i}) for i in range(len(shapes[0]))]
    if shape is None and isinstance(t, TensorType) and t.shape is not None:
        shape = [_ir_dim(d) for d in t.shape]
    return Feature(name, "multiArray", dtype, shape, bool(ft.isOptional), details=details)


def _choices(sizes: set[int]) -> Dim:
    return next(iter(sizes)) if len(sizes) == 1 else {"choices": sorted(sizes)}


def _described(name: str, ft: FeatureTypes_pb2.FeatureType, t: Any) -> Feature:
    kind = desc.feature_kind(ft)
    if kind == "imageType":
        return _image_feature(name, ft)
    if kind == "multiArrayType":
        return _array_feature(name, ft, t)
    if kind == "dictionaryType":
        key = "int64" if ft.dictionaryType.WhichOneof("KeyType") == "int64KeyType" else "string"
        return Feature(name, "dictionary", None, None, bool(ft.isOptional), details={"key": key})
    if kind in ("int64Type", "doubleType", "stringType"):
        short = kind[: -len("Type")]
        return Feature(name, short, {"int64": "int64", "double": "float64", "string": "str"}[short], [],
                       bool(ft.isOptional))
    if kind == "stateType":
        inner = FeatureTypes_pb2.FeatureType()
        inner.multiArrayType.CopyFrom(ft.stateType.arrayType)
        f = _array_feature(name, inner, t.wrapped if isinstance(t, StateType) else t)
        f.kind = "state"
        return f
    if kind == "sequenceType":
        return Feature(name, "sequence", None, None, bool(ft.isOptional))
    return _undescribed(name, t)


def _undescribed(name: str, t: Any) -> Feature:
    """A feature without a Core ML description: its IR type as it is."""
    if isinstance(t, DictType):
        return Feature(name, "dictionary", None, None, details={"key": t.key.dtype.name})  # type: ignore[union-attr]
    if isinstance(t, StateType):
        t = t.wrapped
        kind = "state"
    else:
        kind = "tensor"
    if isinstance(t, TensorType):
        shape = None if t.shape is None else [_ir_dim(d) for d in t.shape]
        return Feature(name, kind, _ARRAY_DTYPES.get(t.dtype.name, t.dtype.name), shape)
    return Feature(name, type(t).__name__, None, None)


def _feature(v: Value, info: Any) -> Feature:
    ft = desc.feature_from_bytes(info.feature_type) if info is not None else None
    f = _described(v.name, ft, v.type) if ft is not None and desc.feature_kind(ft) != "none" else _undescribed(
        v.name, v.type)
    if info is not None and info.short_description:
        f.description = info.short_description
    return f


def inputs(fn: Function) -> list[Feature]:
    """``fn``'s inputs in the user's terms, in order."""
    return [_feature(v, fn.input_info.get(v.name)) for v in fn.inputs]


def outputs(fn: Function) -> list[Feature]:
    """``fn``'s outputs in the user's terms, in order."""
    return [_feature(v, fn.output_info.get(v.name)) for v in fn.outputs]


def states(fn: Function) -> list[Feature]:
    """``fn``'s state features (iOS18 stateful models), as declared."""
    out = []
    for name, info in fn.state_info.items():
        ft = desc.feature_from_bytes(info.feature_type)
        if ft is not None:
            out.append(_described(name, ft, None))
    return out


def described(name: str, feature_type: bytes, short_description: str = "") -> Feature:
    """A feature from a Core ML model description alone (no program: e.g. a model type the
    converter does not read, which `converter inspect` still describes)."""
    ft = desc.feature_from_bytes(feature_type)
    f = _described(name, ft, None) if ft is not None and desc.feature_kind(ft) != "none" else Feature(
        name, "unknown", None, None)
    f.description = short_description
    return f


def fits(f: Feature, value: Any) -> bool:
    """Whether ``value``'s shape fits ``f``'s shape (flexible dims within their bounds)."""
    return shape_fits(f, tuple(np.shape(value)))


def shape_fits(f: Feature, shape: tuple[int, ...]) -> bool:
    """Whether an array of ``shape`` fits ``f``'s shape: flexible dims within their bounds, an
    enumerated shape one of them, an image of enumerated sizes one of its (W, H) pairs."""
    if f.shape is None:
        return True
    sizes = f.details.get("enumerated_sizes")
    if sizes and len(shape) >= 2 and {"height": shape[0], "width": shape[1]} not in sizes:
        return False
    enumerated = f.details.get("enumerated")
    if enumerated:
        return list(shape) in enumerated
    if len(shape) != len(f.shape):
        return False
    for d, n in zip(f.shape, shape):
        if isinstance(d, dict):
            if "choices" in d and n not in d["choices"]:
                return False
            if "min" in d and (n < d["min"] or (d["max"] is not None and n > d["max"])):
                return False
        elif int(d) != n:
            return False
    return True
