"""Core ML model descriptions (FeatureType) <-> IR types, shared by frontends and backends.

A feature's flexible shape (``shapeRange``, ``enumeratedShapes``, ``imageSizeRange``,
``enumeratedSizes``) becomes bounds (or choices) on the symbols of the matching IR dimensions; the
original FeatureType bytes are kept on the function (``FeatureInfo``) so that writing the same kind
of model gives the description back unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ir.types import DictType, DimExpr, DType, StateType, Symbol, TensorType, Type, dtype, is_static_dim
from ..limits import MAX_DIMENSION, MAX_RANK, shape_problem
from .proto import FeatureTypes_pb2

ARRAY_DTYPE = FeatureTypes_pb2.ArrayFeatureType
IMAGE = FeatureTypes_pb2.ImageFeatureType

ARRAY_DTYPE_TO_IR = {
    ARRAY_DTYPE.FLOAT32: "fp32",
    ARRAY_DTYPE.DOUBLE: "fp64",
    ARRAY_DTYPE.INT32: "int32",
    ARRAY_DTYPE.INT8: "int8",
    ARRAY_DTYPE.FLOAT16: "fp16",
}
IR_TO_ARRAY_DTYPE = {v: k for k, v in ARRAY_DTYPE_TO_IR.items()}
# Minimum specification version for a multiarray feature of this dtype.
ARRAY_DTYPE_MIN_SPEC = {"fp32": 1, "fp64": 1, "int32": 1, "int8": 9, "fp16": 7}


class DescriptionError(Exception):
    """A feature description the converter cannot map (callers add the file and feature name)."""


def feature_kind(ft: FeatureTypes_pb2.FeatureType) -> str:
    return ft.WhichOneof("Type") or "none"


def feature_from_bytes(data: bytes | None) -> FeatureTypes_pb2.FeatureType | None:
    if data is None:
        return None
    ft = FeatureTypes_pb2.FeatureType()
    ft.ParseFromString(data)
    return ft


def array_dtype(ft: FeatureTypes_pb2.FeatureType) -> DType:
    code = ft.multiArrayType.dataType
    name = ARRAY_DTYPE_TO_IR.get(code)
    if name is None:
        raise DescriptionError(f"unknown multiArray data type {code}")
    return dtype(name)


def image_channels(ft: FeatureTypes_pb2.FeatureType) -> int:
    cs = ft.imageType.colorSpace
    if cs in (IMAGE.GRAYSCALE, IMAGE.GRAYSCALE_FLOAT16):
        return 1
    if cs in (IMAGE.RGB, IMAGE.BGR):
        return 3
    raise DescriptionError(f"image feature has no valid colour space ({cs})")


def _range_problem(r: FeatureTypes_pb2.SizeRange) -> str | None:
    lower, upper = int(r.lowerBound), int(r.upperBound)
    if lower > MAX_DIMENSION:
        return f"size range lower bound {lower} is larger than {MAX_DIMENSION}"
    if upper != -1 and not lower <= upper <= MAX_DIMENSION:
        return f"size range [{lower}, {upper}] is not a range of sizes up to {MAX_DIMENSION} (or unbounded, -1)"
    return None


def feature_problem(ft: FeatureTypes_pb2.FeatureType) -> str | None:
    """What makes a feature type's sizes impossible (a negative or oversized dimension, an empty or
    inverted range, too many elements), or None. The sizes of a description become numpy shapes
    and random test inputs, so they are checked before anything is built from them."""
    kind = feature_kind(ft)
    if kind == "stateType":
        inner = FeatureTypes_pb2.FeatureType()
        inner.multiArrayType.CopyFrom(ft.stateType.arrayType)
        return feature_problem(inner)
    if kind == "multiArrayType":
        ma = ft.multiArrayType
        shapes = [list(ma.shape)] + [list(s.shape) for s in ma.enumeratedShapes.shapes]
        for shape in shapes:
            why = shape_problem(shape)
            if why:
                return f"shape {shape}: {why}"
        for r in ma.shapeRange.sizeRanges:
            why = _range_problem(r)
            if why:
                return f"shapeRange: {why}"
        if len(ma.shapeRange.sizeRanges) > MAX_RANK:
            return f"shapeRange: {len(ma.shapeRange.sizeRanges)} ranges, more than the {MAX_RANK} axes supported"
        lowest = [int(r.lowerBound) for r in ma.shapeRange.sizeRanges]
        why = shape_problem(lowest)
        if why:
            return f"shapeRange lower bounds {lowest}: {why}"
    elif kind == "imageType":
        im = ft.imageType
        sizes = [(int(im.height), int(im.width))] + [(int(s.height), int(s.width)) for s in im.enumeratedSizes.sizes]
        ranges = (im.imageSizeRange.heightRange, im.imageSizeRange.widthRange)
        sizes.append(tuple(int(r.lowerBound) for r in ranges))
        for h, w in sizes:
            why = shape_problem([3, h, w])
            if why:
                return f"image size {h} x {w}: {why}"
        for r in ranges:
            why = _range_problem(r)
            if why:
                return f"imageSizeRange: {why}"
    return None


def check_description(d: Any) -> None:
    """`DescriptionError` naming the first feature of a ModelDescription (or FunctionDescription,
    all functions included) whose sizes are impossible (``feature_problem``)."""
    for kind in ("input", "output", "state"):
        for f in getattr(d, kind, ()):
            why = feature_problem(f.type)
            if why:
                raise DescriptionError(f"{kind} '{f.name}': {why}")
    for fd in getattr(d, "functions", ()):
        check_description(fd)


def _range_bounds(r: FeatureTypes_pb2.SizeRange) -> dict[str, Any] | None:
    """Bounds of a flexible axis from a SizeRange (upperBound < 0: unbounded); None when fixed."""
    upper = None if r.upperBound < 0 else int(r.upperBound)
    if upper is not None and upper == r.lowerBound:
        return None
    return {"lower": int(r.lowerBound), "upper": upper, "choices": None}


def dimension_bounds(ft: FeatureTypes_pb2.FeatureType, rank: int) -> list[dict[str, Any] | None]:
    """Per axis of the IR tensor: None (fixed), or {lower, upper, choices} for a flexible axis.

    For images the IR tensor is [1, C, H, W]: axes 2 and 3 carry the size flexibility.
    """
    out: list[dict[str, Any] | None] = [None] * rank
    kind = feature_kind(ft)
    if kind == "multiArrayType":
        ma = ft.multiArrayType
        flex = ma.WhichOneof("ShapeFlexibility")
        if flex == "shapeRange":
            for i, r in enumerate(ma.shapeRange.sizeRanges[:rank]):
                out[i] = _range_bounds(r)
        elif flex == "enumeratedShapes":
            shapes = [list(s.shape) for s in ma.enumeratedShapes.shapes]
            for i in range(rank):
                sizes = sorted({s[i] for s in shapes if len(s) > i})
                if len(sizes) > 1:
                    out[i] = {"lower": sizes[0], "upper": sizes[-1], "choices": tuple(sizes)}
    elif kind == "imageType" and rank == 4:
        im = ft.imageType
        flex = im.WhichOneof("SizeFlexibility")
        if flex == "imageSizeRange":
            for axis, r in ((2, im.imageSizeRange.heightRange), (3, im.imageSizeRange.widthRange)):
                out[axis] = _range_bounds(r)
        elif flex == "enumeratedSizes":
            hs = sorted({int(s.height) for s in im.enumeratedSizes.sizes})
            ws = sorted({int(s.width) for s in im.enumeratedSizes.sizes})
            if len(hs) > 1:
                out[2] = {"lower": hs[0], "upper": hs[-1], "choices": tuple(hs)}
            if len(ws) > 1:
                out[3] = {"lower": ws[0], "upper": ws[-1], "choices": tuple(ws)}
    return out


def apply_bounds(t: Type, ft: FeatureTypes_pb2.FeatureType | None) -> Type:
    """Attach flexible-shape bounds from a feature description to ``t``'s symbolic dims."""
    if ft is None or not isinstance(t, TensorType) or t.shape is None:
        return t
    why = feature_problem(ft)
    if why:
        raise DescriptionError(why)
    bounds = dimension_bounds(ft, len(t.shape))
    dims = []
    for d, b in zip(t.shape, bounds):
        if isinstance(d, Symbol) and b is not None:
            d = _bounded_symbol(d, b)
        dims.append(d)
    return TensorType(t.dtype, tuple(dims))


def feature_to_type(ft: FeatureTypes_pb2.FeatureType, new_symbol: Callable[[], Symbol]) -> Type:
    """The IR type of a model input/output feature (multiArray, image, scalar, dict, state)."""
    why = feature_problem(ft)
    if why:
        raise DescriptionError(why)
    kind = feature_kind(ft)
    if kind == "multiArrayType":
        ma = ft.multiArrayType
        shape = list(ma.shape)
        if not shape and ma.WhichOneof("ShapeFlexibility") == "enumeratedShapes" and ma.enumeratedShapes.shapes:
            shape = list(ma.enumeratedShapes.shapes[0].shape)
        if not shape and ma.WhichOneof("ShapeFlexibility") == "shapeRange":
            shape = [r.lowerBound for r in ma.shapeRange.sizeRanges]
        if not shape:
            return TensorType(array_dtype(ft), None)
        bounds = dimension_bounds(ft, len(shape))
        dims = [int(s) if b is None else _bounded_symbol(new_symbol(), b) for s, b in zip(shape, bounds)]
        return TensorType(array_dtype(ft), tuple(dims))
    if kind == "imageType":
        im = ft.imageType
        dt = dtype("fp16") if im.colorSpace == IMAGE.GRAYSCALE_FLOAT16 else dtype("fp32")
        shape = [1, image_channels(ft), int(im.height), int(im.width)]
        bounds = dimension_bounds(ft, 4)
        dims = [s if b is None else _bounded_symbol(new_symbol(), b) for s, b in zip(shape, bounds)]
        return TensorType(dt, tuple(dims))
    if kind == "int64Type":
        return TensorType(dtype("int64"), ())
    if kind == "doubleType":
        return TensorType(dtype("fp64"), ())
    if kind == "stringType":
        return TensorType(dtype("string"), ())
    if kind == "dictionaryType":
        key = "int64" if ft.dictionaryType.WhichOneof("KeyType") == "int64KeyType" else "string"
        return DictType(TensorType(dtype(key), ()), TensorType(dtype("fp64"), ()))
    if kind == "stateType":
        inner = FeatureTypes_pb2.FeatureType()
        inner.multiArrayType.CopyFrom(ft.stateType.arrayType)
        wrapped = feature_to_type(inner, new_symbol)
        assert isinstance(wrapped, TensorType)
        return StateType(wrapped)
    raise DescriptionError(f"feature type '{kind}' is not supported")


def _bounded_symbol(s: Symbol, b: dict[str, Any]) -> Symbol:
    return Symbol(s.name, b["lower"], b["upper"], b["choices"])


def type_to_feature(t: Type, *, optional: bool = False) -> FeatureTypes_pb2.FeatureType:
    """A FeatureType describing IR type ``t`` (multiArray for tensors; flexible dims as ranges)."""
    ft = FeatureTypes_pb2.FeatureType()
    if isinstance(t, StateType):
        ft.stateType.arrayType.CopyFrom(type_to_feature(t.wrapped).multiArrayType)
        return ft
    if isinstance(t, DictType):
        if t.key.dtype.name == "int64":  # type: ignore[union-attr]
            ft.dictionaryType.int64KeyType.SetInParent()
        else:
            ft.dictionaryType.stringKeyType.SetInParent()
        return ft
    if not isinstance(t, TensorType):
        raise DescriptionError(f"no Core ML feature type for {t}")
    if t.dtype.name == "string" and t.shape == ():
        ft.stringType.SetInParent()
        return ft
    if t.dtype.name == "int64" and t.shape == ():
        ft.int64Type.SetInParent()
        return ft
    code = IR_TO_ARRAY_DTYPE.get(t.dtype.name)
    if code is None:
        raise DescriptionError(f"Core ML multiArray features cannot hold {t.dtype.name}")
    ma = ft.multiArrayType
    ma.dataType = code
    if t.shape is not None:
        # Symbolic dims are symbols or expressions of symbols (``2*s``, ``s floordiv 2 + 1``): an
        # expression is described by the sizes its symbols allow (evaluated per enumerated choice,
        # else the range its bounds give).
        symbolic = [d for d in t.shape if isinstance(d, DimExpr)]
        symbols = {s.name: s for d in symbolic for s in d.symbols()}
        counts = {len(s.choices) if s.choices else 0 for s in symbols.values()}
        if symbols and len(counts) == 1 and 0 not in counts:
            # enumerated shapes: one shape per choice index (the axes vary together)
            n = counts.pop()
            for k in range(n):
                env = {name: s.choices[k] for name, s in symbols.items()}  # type: ignore[index]
                shp = ma.enumeratedShapes.shapes.add()
                shp.shape.extend(_size_at(d, env) for d in t.shape)
            env = {name: s.choices[0] for name, s in symbols.items()}  # type: ignore[index]
            ma.shape.extend(_size_at(d, env) for d in t.shape)
        else:
            ranges = [(int(d), int(d)) if is_static_dim(d) else _dim_range(d) for d in t.shape]
            ma.shape.extend(lo for lo, _ in ranges)
            if symbolic:
                for lo, hi in ranges:
                    r = ma.shapeRange.sizeRanges.add()
                    r.lowerBound = lo
                    r.upperBound = -1 if hi is None else hi
    if optional:
        ft.isOptional = True
    return ft


def _size_at(d: Any, env: dict[str, int]) -> int:
    return int(d) if is_static_dim(d) else max(int(d.evaluate(env)), 0)


def _dim_range(d: DimExpr) -> tuple[int, int | None]:
    """The sizes a symbolic dim can take: its bounds (a size is never below 0)."""
    lo, hi = d.bounds()
    lo = max(lo or 0, 0)
    return lo, (None if hi is None else max(hi, lo))


def narrow_feature(ft: FeatureTypes_pb2.FeatureType, t: Type) -> FeatureTypes_pb2.FeatureType:
    """``ft`` narrowed to ``t`` after some of its flexible dims were fixed to sizes (shape
    specialization): a fixed dim takes its size; enumerated shapes or sizes that disagree are
    dropped, ranges of fixed dims are pinned; with nothing flexible left, no flexibility remains."""
    out = FeatureTypes_pb2.FeatureType()
    out.CopyFrom(ft)
    if isinstance(t, StateType):
        if feature_kind(out) == "stateType":
            inner = FeatureTypes_pb2.FeatureType()
            inner.multiArrayType.CopyFrom(out.stateType.arrayType)
            out.stateType.arrayType.CopyFrom(narrow_feature(inner, t.wrapped).multiArrayType)
        return out
    if not isinstance(t, TensorType) or t.shape is None:
        return out
    fixed = [int(d) if is_static_dim(d) else None for d in t.shape]
    kind = feature_kind(out)
    if kind == "multiArrayType":
        _narrow_array(out.multiArrayType, fixed)
    elif kind == "imageType" and len(fixed) == 4:
        _narrow_image(out.imageType, fixed[2], fixed[3])
    return out


def _narrow_array(ma: Any, fixed: list[int | None]) -> None:
    which = ma.WhichOneof("ShapeFlexibility")
    if which == "enumeratedShapes":
        keep = [list(s.shape) for s in ma.enumeratedShapes.shapes
                if len(s.shape) == len(fixed) and all(n is None or n == m for n, m in zip(fixed, s.shape))]
        if not keep:
            shown = ", ".join(str(list(s.shape)) for s in ma.enumeratedShapes.shapes)
            raise DescriptionError(f"shape {['?' if n is None else n for n in fixed]} is not one of the "
                                   f"enumerated shapes ({shown})")
        del ma.enumeratedShapes.shapes[:]
        for shape in keep:
            ma.enumeratedShapes.shapes.add().shape.extend(shape)
        if len(keep) <= 1:
            ma.ClearField("enumeratedShapes")
        if keep:
            del ma.shape[:]
            ma.shape.extend(keep[0])
    elif which == "shapeRange" and len(ma.shapeRange.sizeRanges) == len(fixed):
        for r, n in zip(ma.shapeRange.sizeRanges, fixed):
            if n is not None:
                r.lowerBound, r.upperBound = n, n
        if all(n is not None for n in fixed):
            ma.ClearField("shapeRange")
    if len(ma.shape) == len(fixed):
        for i, n in enumerate(fixed):
            if n is not None:
                ma.shape[i] = n
    elif all(n is not None for n in fixed):
        del ma.shape[:]
        ma.shape.extend(fixed)


def _narrow_image(im: Any, height: int | None, width: int | None) -> None:
    if height is not None:
        im.height = height
    if width is not None:
        im.width = width
    which = im.WhichOneof("SizeFlexibility")
    if which == "enumeratedSizes":
        keep = [(s.height, s.width) for s in im.enumeratedSizes.sizes
                if (height is None or s.height == height) and (width is None or s.width == width)]
        if not keep:
            shown = ", ".join(f"{s.height}x{s.width}" for s in im.enumeratedSizes.sizes)
            raise DescriptionError(f"image size {height}x{width} is not one of the enumerated sizes ({shown})")
        del im.enumeratedSizes.sizes[:]
        for h, w in keep:
            size = im.enumeratedSizes.sizes.add()
            size.height, size.width = h, w
        if len(keep) <= 1:
            im.ClearField("enumeratedSizes")
    elif which == "imageSizeRange":
        for r, n in ((im.imageSizeRange.heightRange, height), (im.imageSizeRange.widthRange, width)):
            if n is not None:
                r.lowerBound, r.upperBound = n, n
        if height is not None and width is not None:
            im.ClearField("imageSizeRange")


def feature_min_spec_version(ft: FeatureTypes_pb2.FeatureType) -> int:
    kind = feature_kind(ft)
    if kind == "multiArrayType":
        return ARRAY_DTYPE_MIN_SPEC.get(ARRAY_DTYPE_TO_IR.get(ft.multiArrayType.dataType, "fp32"), 1)
    if kind == "imageType" and ft.imageType.colorSpace == IMAGE.GRAYSCALE_FLOAT16:
        return 7
    if kind == "stateType":
        return 9
    return 1
