"""specialize_shapes and reinfer: a program with flexible inputs, specialized to sizes, (1) has the
types the same program built with static inputs of those sizes has (the builder's inference of the
static program is the oracle for types), (2) runs to the outputs the flexible program gives on
those sizes, bit for bit; sizes that are data stay symbols; loops and conds re-infer through their
blocks; bad requests and inputs an op no longer accepts raise located errors; the model description
of a flexible NeuralNetwork input is narrowed so that coremltools loads the written package with
static input shapes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import converter
from converter.errors import PassError, TypeInferenceError
from converter.formats import description as desc
from converter.ir.builder import new_program
from converter.ir.clone import clone_program
from converter.ir.interpreter import run
from converter.ir.reinfer import reinfer
from converter.ir.symbols import map_type
from converter.ir.types import Symbol, TensorType, dtype, is_static_shape, tensor
from converter.ir.verify import verify
from converter.passes.specialize import SpecializeShapes, specialize_shapes

H, W = Symbol("H", lower=4, upper=64), Symbol("W", lower=4, upper=64)
_rng = np.random.default_rng(0)
W1 = _rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
W2 = _rng.standard_normal((8, 12)).astype(np.float32)


def _cnn(b, x):
    y = b.relu(x=b.conv(x=x, weight=W1, strides=[2, 2], pad_type="same", name="conv"))
    y = b.max_pool(x=y, kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid", name="pool")
    up = b.upsample_nearest_neighbor(x=y, scale_factor_height=2.0, scale_factor_width=3.0, name="up")
    cat = b.concat(values=(y, y, y), axis=3, name="cat")
    flat = b.reshape(x=cat, shape=[1, 4, -1], name="flat")
    tail = b.slice_by_index(x=flat, begin=[0, 0, 1], end=[0, 0, 0], end_mask=[True, True, True], name="tail")
    padded = b.pad(x=up, pad=np.array([1, 2, 0, 3], np.int32), mode="constant", name="padded")
    pooled = b.reduce_mean(x=padded, axes=[2, 3], keep_dims=False, name="gap")
    rows = b.linear(x=b.reshape(x=b.transpose(x=b.slice_by_index(x=padded, begin=[0, 0, 0, 0], end=[1, 4, 1, 3],
                                                                   name="corner"), perm=[0, 2, 1, 3]),
                                shape=[1, 12]), weight=W2, name="rows")
    picked = b.non_zero(x=b.greater(x=pooled, y=np.float32(0.0)), name="picked")  # a size that is data
    return [tail, padded, rows, picked]


def _flexible():
    return new_program({"x": TensorType(dtype("fp32"), (1, 3, H, W))}, _cnn)


def _static(h: int, w: int):
    return new_program({"x": tensor("fp32", (1, 3, h, w))}, _cnn)


def _plain(t):
    """A type with fresh symbols (sizes that are data) made equal, whatever their names."""
    return map_type(t, lambda s: s if s.name in ("H", "W") else Symbol("?"))


@pytest.mark.parametrize("h,w", [(4, 4), (9, 13), (16, 7), (33, 64)])
def test_specialized_types_are_the_static_programs_and_outputs_are_the_flexible_ones(h, w):
    flexible = _flexible()
    assert not is_static_shape(flexible.main.outputs[0].type.shape)
    prog, _ = clone_program(flexible)
    assert specialize_shapes(prog, inputs={"x": {2: h, 3: w}})
    verify(prog)
    static = _static(h, w)
    got = [(v.name, _plain(v.type)) for v in prog.main.values()]
    want = [(v.name, _plain(v.type)) for v in static.main.values()]
    assert got == want
    for v in prog.main.outputs[:3]:
        assert is_static_shape(v.type.shape), v.type
    assert prog.main.outputs[3].type.shape[1] == 2 and not is_static_shape(prog.main.outputs[3].type.shape)
    x = _rng.standard_normal((1, 3, h, w)).astype(np.float32)
    a, b = run(flexible, {"x": x}), run(prog, {"x": x})
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
        assert a[name].dtype == b[name].dtype
    assert not is_static_shape(flexible.main.inputs[0].type.shape)  # the clone was changed, not the source


def test_symbols_by_name_and_partial_specialization():
    prog = _flexible()
    assert SpecializeShapes({"W": 10})(prog).modified
    # padded: conv 'same' stride 2 -> ceil(n / 2); pool 2/2 -> floor(. / 2); upsample x2, x3; pad +3
    assert prog.main.outputs[1].type.shape == (1, 4, 2 * ((H + 1) // 4) + 3, 3 * ((10 + 1) // 4) + 3)
    verify(prog)
    assert not SpecializeShapes(inputs={"x": [None, None, None, None]})(prog).modified


def _loops(b, x):
    def body(bb, i, keep, grow):
        return [bb.add(x=i, y=np.int32(1)), bb.relu(x=keep), bb.concat(values=(grow, keep), axis=0)]

    _, keep, grow = b.while_loop([b.const(np.int32(0)), x, x], lambda cb, i, k, g: cb.less(x=i, y=np.int32(2)), body)
    (c,) = b.cond(b.less(x=np.float32(0), y=np.float32(1)), lambda t: [t.mul(x=keep, y=np.float32(2))],
                  lambda f: [f.concat(values=(keep, keep), axis=1)])
    return [keep, grow, c]


def test_loops_and_conds_re_infer_through_their_blocks():
    n = Symbol("n", lower=1, upper=16)
    prog = new_program({"x": TensorType(dtype("fp32"), (n, 3))}, _loops)
    x = _rng.standard_normal((5, 3)).astype(np.float32)
    before = run(prog, {"x": x})
    specialize_shapes(prog, {"n": 5})
    verify(prog)
    keep, grow, c = (v.type.shape for v in prog.main.outputs)
    assert keep == (5, 3)  # the body keeps the shape: static
    assert grow[1] == 3 and not isinstance(grow[0], int)  # grows every iteration: a symbol
    assert c[0] == 5 and not isinstance(c[1], int)  # the branches differ (3 and 6 columns)
    loop = next(op for op in prog.main.block.ops if op.type == "while_loop")
    assert [v.type.shape for v in loop.blocks[1].inputs][1] == (5, 3)
    after = run(prog, {"x": x})
    for k in before:
        np.testing.assert_array_equal(before[k], after[k])


def test_bad_requests_are_refused_with_the_reason():
    prog = _flexible()
    with pytest.raises(PassError, match="outside the range"):
        specialize_shapes(prog, {"H": 65})
    with pytest.raises(PassError, match="no symbol named 'Q'"):
        specialize_shapes(prog, {"Q": 3})
    with pytest.raises(PassError, match="no input named 'y'"):
        specialize_shapes(prog, inputs={"y": [1]})
    with pytest.raises(PassError, match="axis 1 is 3, not 4"):
        specialize_shapes(prog, inputs={"x": {1: 4}})
    with pytest.raises(PassError, match="already fixed to 8"):
        specialize_shapes(prog, {"H": 8}, inputs={"x": {2: 9}})
    with pytest.raises(PassError, match="not one of the sizes"):
        p = new_program({"x": TensorType(dtype("fp32"), (Symbol("e", 2, 8, (2, 8)),))}, lambda b, x: [b.relu(x=x)])
        specialize_shapes(p, {"e": 4})
    assert not is_static_shape(prog.main.inputs[0].type.shape)  # refused before any change


def test_reinfer_names_the_op_that_no_longer_accepts_its_inputs():
    prog = _static(8, 8)
    x = prog.main.inputs[0]
    x.type = tensor("fp32", (1, 5, 8, 8))  # conv's weight wants 3 channels
    with pytest.raises(TypeInferenceError, match="op 'conv'"):
        reinfer(prog)
    x.type = tensor("fp32", (1, 3, 12, 8))
    assert reinfer(prog) > 0
    verify(prog)
    assert prog.main.outputs[1].type.shape == _static(12, 8).main.outputs[1].type.shape


def test_narrowed_descriptions_let_coremltools_load_static_shapes(tmp_path: Path):
    """A NeuralNetwork model with a flexible [C, H, W] input, converted, specialized and written as an
    ML program: coremltools' MIL loader (which re-infers every op with its own rules) loads it and
    sees the static input shape, the description has no flexibility left, and our reload runs to
    the outputs of the flexible program."""
    from tests.mil.helpers import CoremltoolsLoader
    from tests.nn.common import builder, load_spec

    b = builder({"x": (3, 8, 8)})
    b.add_convolution("conv", 3, 4, 3, 3, 2, 2, "same", 1, W1.transpose(2, 3, 1, 0), None, False,
                      input_name="x", output_name="y")
    spec = b.spec
    ranges = spec.description.input[0].type.multiArrayType.shapeRange
    for lo, hi in ((3, 3), (6, 20), (6, 20)):
        r = ranges.sizeRanges.add()
        r.lowerBound, r.upperBound = lo, hi
    flexible = load_spec(spec, tmp_path)
    prog, _ = clone_program(flexible)
    shape = prog.main.inputs[0].type.shape
    axes = {i: n for i, n in zip((len(shape) - 2, len(shape) - 1), (9, 13))}
    specialize_shapes(prog, inputs={"x": axes})
    verify(prog)
    ft = desc.feature_from_bytes(prog.main.input_info["x"].feature_type)
    assert ft.multiArrayType.WhichOneof("ShapeFlexibility") is None and list(ft.multiArrayType.shape) == [3, 9, 13]
    package = converter.save(prog, tmp_path / "fixed.mlpackage")
    ct_prog = CoremltoolsLoader().load(package)
    ct_shape = ct_prog.functions["main"].inputs["x"].shape
    assert tuple(int(d) for d in ct_shape) == tuple(int(d) for d in prog.main.inputs[0].type.shape)
    x = _rng.standard_normal((3, 9, 13)).astype(np.float32)
    again = converter.load(package)
    assert is_static_shape(again.main.inputs[0].type.shape)
    want = converter.run(flexible, {"x": x})
    got = converter.run(again, {"x": x})
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])


def test_narrowing_feature_descriptions():
    from converter.formats.proto import FeatureTypes_pb2

    ft = FeatureTypes_pb2.FeatureType()
    ma = ft.multiArrayType
    ma.shape.extend([1, 3])
    for shape in ([1, 3], [2, 5], [2, 7]):
        ma.enumeratedShapes.shapes.add().shape.extend(shape)
    s = Symbol("s")
    one = desc.narrow_feature(ft, tensor("fp32", (2, s)))
    assert [list(x.shape) for x in one.multiArrayType.enumeratedShapes.shapes] == [[2, 5], [2, 7]]
    fixed = desc.narrow_feature(ft, tensor("fp32", (2, 5)))
    assert fixed.multiArrayType.WhichOneof("ShapeFlexibility") is None and list(fixed.multiArrayType.shape) == [2, 5]
    with pytest.raises(desc.DescriptionError, match="not one of the enumerated shapes"):
        desc.narrow_feature(ft, tensor("fp32", (1, 5)))
    img = FeatureTypes_pb2.FeatureType()
    img.imageType.width, img.imageType.height = 8, 8
    img.imageType.colorSpace = FeatureTypes_pb2.ImageFeatureType.RGB
    img.imageType.imageSizeRange.heightRange.lowerBound = 4
    img.imageType.imageSizeRange.heightRange.upperBound = 64
    img.imageType.imageSizeRange.widthRange.lowerBound = 4
    img.imageType.imageSizeRange.widthRange.upperBound = -1
    half = desc.narrow_feature(img, tensor("fp32", (1, 3, 16, s)))
    r = half.imageType.imageSizeRange
    assert (half.imageType.height, r.heightRange.lowerBound, r.heightRange.upperBound) == (16, 16, 16)
    assert (r.widthRange.lowerBound, r.widthRange.upperBound) == (4, -1)
    full = desc.narrow_feature(img, tensor("fp32", (1, 3, 16, 24)))
    assert full.imageType.WhichOneof("SizeFlexibility") is None and (full.imageType.height, full.imageType.width) == (16, 24)
