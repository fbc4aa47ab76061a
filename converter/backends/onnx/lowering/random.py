"""Random sampling (converter/ir/ops/random.py) as ONNX's generators.

The distributions are MIL's; the values cannot be: Core ML, our interpreter (numpy PCG64) and
onnxruntime each have their own generator. Seeds:

- MIL ``seed >= 0`` becomes the ONNX ``seed`` attribute (a float). onnxruntime seeds the node's
  generator once per session: the first run of every session gives the same values, later runs
  of one session continue the stream (MIL's seeded op gives the same values on every run);
- MIL ``seed = -1`` (the default) leaves ``seed`` out: onnxruntime picks one per session.

Shapes known at conversion time are attributes (``RandomNormal``/``RandomUniform``); run-time
shapes go through ``ConstantOfShape`` and the ``*Like`` forms. Samples are drawn in fp32 and
rounded to the output dtype, as the interpreter does; an fp16 uniform sample rounded up to
``high`` is moved one ulp below it, as MIL's range ``[low, high)`` requires.

- random_bernoulli: ``Cast(RandomUniform < prob)`` (MIL's definition);
- random_categorical: ``Multinomial`` over ``[-1, C]`` (``mode="probs"`` through ``Log``), the
  indices cast to x's float dtype and reshaped to ``x.shape[:-1] + [size]``.
"""

from __future__ import annotations

import numpy as np

from ....ir.core import Op
from ....ir.types import TensorType, is_static_dim
from ..emitter import OnnxEmitter, onnx_type
from ._common import finish_fp32, float_param, int_param, str_param
from .registry import lowering


def _seed(e: OnnxEmitter, op: Op) -> float | None:
    seed = int_param(e, op, "seed")
    return float(seed) if seed >= 0 else None


def _draw(e: OnnxEmitter, op: Op, kind: str, **attrs: object) -> str:
    """An fp32 sample of ``op``'s output shape from RandomNormal/RandomUniform (``kind``)."""
    t = e.tensor_type(op.outputs[0])
    attrs["seed"] = _seed(e, op)
    attrs["dtype"] = onnx_type("fp32")
    if isinstance(t, TensorType) and t.shape is not None and all(is_static_dim(d) for d in t.shape):
        return e.node(kind, [], shape=[int(d) for d in t.shape], **attrs)
    zeros = e.node("ConstantOfShape", [e.cast(e.input(op, "shape"), "int64")])
    return e.node(kind + "Like", [zeros], **attrs)


@lowering("random_normal", note="RandomNormal(mean, scale) (RandomNormalLike for a run-time shape); seed: "
                                "the same first run per session")
def _random_normal(e: OnnxEmitter, op: Op) -> None:
    y = _draw(e, op, "RandomNormal", mean=float_param(e, op, "mean"), scale=float_param(e, op, "stddev"))
    finish_fp32(e, op, y)


@lowering("random_uniform", note="RandomUniform(low, high); fp16 kept below high")
def _random_uniform(e: OnnxEmitter, op: Op) -> None:
    low, high = float_param(e, op, "low"), float_param(e, op, "high")
    y = _draw(e, op, "RandomUniform", low=low, high=high)
    dt = e.dtype(op.outputs[0])
    if dt.name == "fp32" or not high > low:
        finish_fp32(e, op, y)
        return
    top = np.nextafter(np.asarray(high, dt.storage), np.asarray(low, dt.storage))
    e.node("Min", [e.cast(y, dt), e.constant(top)], [e.out(op)])


@lowering("random_bernoulli", kind="decomposed", note="Cast(RandomUniform(0, 1) < prob)")
def _random_bernoulli(e: OnnxEmitter, op: Op) -> None:
    u = _draw(e, op, "RandomUniform", low=0.0, high=1.0)
    hit = e.node("Less", [u, e.scalar(np.float32(float_param(e, op, "prob")), "fp32")])
    e.node("Cast", [hit], [e.out(op)], to=onnx_type(e.dtype(op.outputs[0])))


@lowering("random_categorical", kind="decomposed", note="Multinomial over [-1, C] (Log of probs), indices cast "
                                                        "to x's dtype")
def _random_categorical(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    x = e.name(xv)
    x = x if e.dtype(xv).name == "fp32" else e.cast(x, "fp32")
    if str_param(e, op, "mode") == "probs":
        x = e.node("Log", [x])
    shape = e.node("Shape", [e.name(xv)])
    classes = e.node("Slice", [shape, e.int64s([-1]), e.int64s([np.iinfo(np.int64).max])])
    rows = e.node("Reshape", [x, e.node("Concat", [e.int64s([-1]), classes], axis=0)])
    size = int_param(e, op, "size")
    idx = e.node("Multinomial", [rows], sample_size=size, seed=_seed(e, op), dtype=onnx_type("int32"))
    lead = e.node("Slice", [shape, e.int64s([0]), e.int64s([-1])])
    shaped = e.node("Reshape", [idx, e.node("Concat", [lead, e.int64s([size])], axis=0)])
    e.node("Cast", [shaped], [e.out(op)], to=onnx_type(e.dtype(op.outputs[0])))
