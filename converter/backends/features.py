"""Model descriptions shared by the Core ML backends (ML program and NeuralNetwork): a feature is
written as the frontend recorded it (image, flexible shapes, doc string) while that still describes
the function's type, and derived from the type otherwise."""

from __future__ import annotations

from ..errors import UnsupportedError
from ..formats import description as desc
from ..formats.proto import FeatureTypes_pb2, Model_pb2
from ..ir.core import FeatureInfo, Program
from ..ir.types import TensorType, Type, fresh_symbol, types_compatible


def describe_feature(info: FeatureInfo | None, name: str, t: Type, out: Model_pb2.FeatureDescription) -> int:
    """Fill a FeatureDescription; returns the minimum spec version it needs."""
    out.name = name
    ft = desc.feature_from_bytes(info.feature_type) if info is not None else None
    if ft is not None and not feature_fits(ft, t):
        ft = None
    if ft is None:
        try:
            ft = desc.type_to_feature(t)
        except desc.DescriptionError as e:
            raise UnsupportedError(f"feature '{name}': {e}") from None
    out.type.CopyFrom(ft)
    if info is not None and info.short_description:
        out.shortDescription = info.short_description
    return desc.feature_min_spec_version(ft)


def feature_fits(ft: FeatureTypes_pb2.FeatureType, t: Type) -> bool:
    """Whether a recorded feature type still describes IR type ``t``."""
    try:
        described = desc.feature_to_type(ft, fresh_symbol)
    except desc.DescriptionError:
        return False
    if isinstance(t, TensorType) and isinstance(described, TensorType) and described.shape is None:
        return described.dtype == t.dtype
    return types_compatible(described, t) or (
        isinstance(t, TensorType) and isinstance(described, TensorType) and described.dtype == t.dtype
        and t.shape is not None and described.shape is not None and len(t.shape) == len(described.shape)
        and desc.feature_kind(ft) == "multiArrayType" and not ft.multiArrayType.shape
    )


def recorded_metadata(prog: Program, d: Model_pb2.ModelDescription) -> Model_pb2.ModelDescription:
    """Copy what the source model's description held beyond the features (metadata, classifier
    output names, training inputs) into ``d``; returns the source description (empty if none)."""
    original = Model_pb2.ModelDescription()
    if prog.meta.get("model_description"):
        original.ParseFromString(prog.meta["model_description"])
    if original.HasField("metadata"):
        d.metadata.CopyFrom(original.metadata)
    if original.predictedFeatureName:
        d.predictedFeatureName = original.predictedFeatureName
    if original.predictedProbabilitiesName:
        d.predictedProbabilitiesName = original.predictedProbabilitiesName
    d.trainingInput.extend(original.trainingInput)
    return original
