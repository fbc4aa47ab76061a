"""ConvTranspose, Resize, GridSample, AffineGrid, DepthToSpace/SpaceToDepth, CenterCropPad,
MaxUnpool, Col2Im: the parameters where ONNX and MIL differ, against onnxruntime on random inputs
with distinct per-axis values (a swapped stride / pad / axis changes the output), plus the node-suite
cases pinned (their expected outputs are ONNX's)."""

from __future__ import annotations

import numpy as np
import pytest

from .family_oracles import node_suite_results, ort_check


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# -- ConvTranspose ------------------------------------------------------------------------------

CT_CASES = [
    {"strides": [2, 3], "pads": [1, 0, 0, 2]},
    {"strides": [2, 3], "output_padding": [1, 2]},
    {"strides": [3, 2], "pads": [1, 2, 2, 0], "output_padding": [2, 1]},
    {"strides": [2, 3], "dilations": [2, 1], "pads": [0, 1, 1, 0]},
    {"strides": [2, 3], "auto_pad": "SAME_UPPER"},
    {"strides": [2, 3], "auto_pad": "SAME_LOWER"},
    {"strides": [2, 3], "output_shape": [10, 14]},
    {"strides": [2, 3], "output_shape": [11, 16], "output_padding": [1, 1]},
    {"strides": [1, 2], "auto_pad": "VALID", "group": 2},
]


@pytest.mark.parametrize("attrs", CT_CASES)
def test_conv_transpose_pads_and_sizes(attrs):
    x = _rand(2, 4, 5, 5, seed=1)
    w = _rand(4, 3, 3, 4, seed=2)  # (SAME sizes with a negative total pad: onnxruntime and ONNX differ)
    bias = _rand(3 * attrs.get("group", 1), seed=3)
    ort_check("ConvTranspose", [x, w, bias], attrs, consts={1, 2})


def test_conv_transpose_1d_with_run_time_weight():
    ort_check("ConvTranspose", [_rand(1, 3, 7, seed=4), _rand(3, 2, 4, seed=5)], {"strides": [3], "pads": [2, 1]})


# -- Resize ------------------------------------------------------------------------------------

COORDS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric"]


@pytest.mark.parametrize("coord", COORDS)
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("scales", [[1, 1, 1.6, 0.75], [1, 1, 0.6, 2.5]])  # whole output sizes: see below
def test_resize_scales(coord, mode, scales):
    x = _rand(1, 2, 5, 4, seed=6)
    ort_check("Resize", [x, None, np.asarray(scales, np.float32)],
              {"mode": mode, "coordinate_transformation_mode": coord}, opset=19, consts={2})


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
def test_resize_nearest_modes_at_ties(nearest_mode):
    x = _rand(1, 1, 4, 6, seed=7)  # scale 2 with asymmetric coordinates lands on .5 exactly
    ort_check("Resize", [x, None, np.asarray([1, 1, 2, 0.5], np.float32)],
              {"mode": "nearest", "nearest_mode": nearest_mode, "coordinate_transformation_mode": "asymmetric"},
              opset=19)


def test_resize_sizes_axes_keep_aspect_ratio_and_cubic_options():
    x = _rand(1, 3, 6, 4, seed=8)
    for policy in ("stretch", "not_larger", "not_smaller"):
        ort_check("Resize", [x, None, None, np.asarray([9, 7], np.int64)],
                  {"mode": "linear", "axes": [3, 2], "keep_aspect_ratio_policy": policy}, opset=19)
    ort_check("Resize", [x, None, np.asarray([1.6, 0.7], np.float32)],
              {"mode": "cubic", "axes": [2, 3], "cubic_coeff_a": -0.5, "exclude_outside": 1}, opset=19)


def test_constant_scale_output_size_is_floor_of_the_exact_product():
    """10 * float32(0.7) = 6.99999988: onnx's shape inference and reference give 6 (onnxruntime 7)."""
    from converter.frontends.onnx import load_onnx
    from converter.ir.interpreter import run

    from .family_oracles import one_node_model

    x = _rand(1, 2, 10, 10, seed=30)
    for mode in ("linear", "cubic", "nearest"):
        model, feeds = one_node_model("Resize", [x, None, np.asarray([1, 1, 0.4, 0.7], np.float32)], {"mode": mode},
                                      opset=19, consts={2})
        assert run(load_onnx(model), feeds)["y0"].shape == (1, 2, 4, 6)


def test_resize_tf_crop_and_resize_extrapolates():
    x = _rand(1, 1, 5, 6, seed=9)
    roi = np.asarray([0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3], np.float32)
    for mode in ("nearest", "linear"):
        ort_check("Resize", [x, roi, None, np.asarray([1, 1, 4, 7], np.int64)],
                  {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize",
                   "extrapolation_value": 2.5}, opset=19)


# -- GridSample / AffineGrid -----------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample(mode, padding, align):
    x = _rand(2, 2, 4, 5, seed=10)
    grid = np.random.default_rng(11).uniform(-1.6, 1.6, (2, 3, 4, 2)).astype(np.float32)
    grid[0, 0, 0] = [0.25, -0.5]  # half-pixel ties for nearest
    ort_check("GridSample", [x, grid], {"mode": mode, "padding_mode": padding, "align_corners": align}, opset=20)


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_cubic_and_volumetric(padding, align):
    """The gather-based sampler (cubic, and 3-D for every mode). With cubic + border, onnxruntime
    (as torch) clamps each tap but not the coordinate; ONNX's reference clamps an out-of-bounds
    coordinate first. We follow ONNX: its ReferenceEvaluator is the oracle for that case."""
    rng = np.random.default_rng(21)
    attrs = {"padding_mode": padding, "align_corners": align}
    grid = rng.uniform(-1.7, 1.7, (2, 3, 4, 2)).astype(np.float32)
    x = _rand(2, 2, 4, 5, seed=22)
    if padding == "border":
        from onnx import shape_inference
        from onnx.reference import ReferenceEvaluator

        from converter.frontends.onnx import load_onnx
        from converter.ir.interpreter import run

        from .family_oracles import one_node_model

        model, feeds = one_node_model("GridSample", [x, grid], {"mode": "cubic", **attrs}, opset=20)
        want = ReferenceEvaluator(shape_inference.infer_shapes(model)).run(None, feeds)[0]
        np.testing.assert_allclose(run(load_onnx(model), feeds)["y0"], want, rtol=1e-4, atol=1e-5)
    else:
        ort_check("GridSample", [x, grid], {"mode": "cubic", **attrs}, opset=20)
    grid3 = rng.uniform(-1.7, 1.7, (2, 2, 3, 4, 3)).astype(np.float32)
    grid3[0, 0, 0, 0] = [0.25, -0.5, 0.75]  # ties for nearest
    for mode in ("nearest", "linear"):
        ort_check("GridSample", [_rand(2, 2, 3, 4, 5, seed=23), grid3], {"mode": mode, **attrs}, opset=20)


@pytest.mark.parametrize("align", [0, 1])
def test_affine_grid(align):
    theta = _rand(2, 2, 3, seed=12)
    ort_check("AffineGrid", [theta, np.asarray([2, 3, 4, 5], np.int64)], {"align_corners": align}, opset=20,
              consts={1})
    theta3 = _rand(2, 3, 4, seed=13)
    ort_check("AffineGrid", [theta3, np.asarray([2, 3, 2, 4, 5], np.int64)], {"align_corners": align}, opset=20)


# -- rearrangements, crop/pad, unpool, col2im -------------------------------------------------------

@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space(mode):
    ort_check("DepthToSpace", [_rand(2, 12, 2, 3, seed=14)], {"blocksize": 2, "mode": mode}, opset=13)


def test_space_to_depth():
    ort_check("SpaceToDepth", [_rand(2, 3, 4, 6, seed=15)], {"blocksize": 2}, opset=13)


def test_center_crop_pad_odd_amounts():
    x = _rand(7, 6, 3, seed=16)
    ort_check("CenterCropPad", [x, np.asarray([4, 9], np.int64)], {"axes": [0, 1]}, opset=18, consts={1})
    ort_check("CenterCropPad", [x, np.asarray([10, 3, 3], np.int64)], opset=18)


def test_max_unpool_after_max_pool_indices():
    """(With an output_shape larger than the unpooled shape onnxruntime scatters into the larger
    layout, ONNX's reference and node test into the unpooled one, then zero-extend: we follow ONNX.)"""
    x = _rand(1, 2, 4, 7, seed=17)
    import onnxruntime as ort
    from onnx import helper as h

    g = h.make_graph([h.make_node("MaxPool", ["x"], ["v", "i"], kernel_shape=[2, 3], strides=[2, 2])], "g",
                     [h.make_tensor_value_info("x", 1, x.shape)],
                     [h.make_tensor_value_info("v", 1, None), h.make_tensor_value_info("i", 7, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 21)])
    v, i = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    attrs = {"kernel_shape": [2, 3], "strides": [2, 2]}
    ort_check("MaxUnpool", [v, i], attrs)
    ort_check("MaxUnpool", [v, i, np.asarray([1, 2, 4, 7], np.int64)], attrs)


def test_col2im_with_constant_shapes():
    x = _rand(2, 2 * 6, 15, seed=18)  # 2 channels, block 2x3; image 5x9, strides 2x2, pads (1, 0, 0, 2): 3x5 blocks
    ort_check("Col2Im", [x, np.asarray([5, 9], np.int64), np.asarray([2, 3], np.int64)],
              {"strides": [2, 2], "pads": [1, 0, 0, 2]}, opset=18, consts={1, 2})
    x = _rand(1, 3 * 4, 8, seed=19)
    ort_check("Col2Im", [x, np.asarray([4, 7], np.int64), np.asarray([2, 2], np.int64)],
              {"dilations": [2, 3]}, opset=18, consts={1, 2})


# -- node suite ------------------------------------------------------------------------------------

OPS = {"ConvTranspose", "Resize", "Upsample", "GridSample", "AffineGrid", "DepthToSpace", "SpaceToDepth",
       "CenterCropPad", "MaxUnpool", "Col2Im", "RoiAlign", "DeformConv"}
#: Expected not to pass, with why.
NOT_PASSING = {
    **{f"test_resize_downsample_{k}_antialias": "antialias refused" for k in
       ("scales_linear", "sizes_linear", "scales_cubic", "sizes_cubic")},
    **{f"test_col2im{k}": "image_shape/block_shape are graph inputs" for k in
       ("", "_strides", "_pads", "_dilations", "_5d")},
}


def test_node_suite_cases_pass():
    res = node_suite_results(OPS)
    res = {n: r for n, r in res.items() if set(r.ops) & OPS and "expanded" not in n}
    bad = {n: f"{r.status}: {r.detail}" for n, r in res.items() if n not in NOT_PASSING and r.status != "pass"}
    assert not bad
    grid = {n: r.status for n, r in res.items() if n.startswith("test_gridsample_")}
    assert all(s == "pass" for s in grid.values()), grid


@pytest.mark.parametrize("case", [
    ({"mode": "linear"}, [1, 1, 2, 3], "resize_bilinear"),
    ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, [1, 1, 3, 0.5], "resize_bilinear"),
    ({"mode": "linear", "coordinate_transformation_mode": "asymmetric"}, [1, 1, 2, 1.5], "resize_bilinear"),
    ({"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}, [1, 1, 0.5, 2], "resize_bilinear"),
    ({"mode": "nearest"}, [1, 1, 2, 3], "upsample_nearest_neighbor"),
    ({"mode": "nearest", "nearest_mode": "round_prefer_ceil"}, [1, 1, 3, 2], "upsample_nearest_neighbor"),
    ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}, [1, 1, 2, 2],
     "upsample_nearest_neighbor"),
    ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric"}, [1, 1, 2, 2], "gather"),
    ({"mode": "nearest", "nearest_mode": "floor"}, [1, 1, 2, 2], "gather"),
    ({"mode": "linear"}, [1, 1, 1.7, 2], "gather"),
])
def test_constant_scale_resize_as_one_mil_op(case):
    """Where MIL's resize ops say the same as ONNX's (the oracle is still onnxruntime), one op; else gathers."""
    from converter.frontends.onnx import load_onnx

    from .family_oracles import one_node_model

    attrs, scales, op = case
    x = _rand(2, 3, 4, 6, seed=20)
    ins = [x, None, np.asarray(scales, np.float32)]
    ort_check("Resize", ins, attrs, opset=19, consts={2})
    model, _ = one_node_model("Resize", ins, attrs, opset=19, consts={2})
    assert op in {o.type for o in load_onnx(model).functions["main"].block.ops}


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("coord", ["half_pixel", "output_half_pixel"])
def test_roi_align(mode, coord):
    x = _rand(2, 3, 7, 9, seed=24)
    rois = np.asarray([[0.5, 1.0, 6.5, 5.0], [2.2, 0.3, 4.1, 6.9], [-1.5, -0.7, 12.0, 9.5], [3.0, 3.0, 3.2, 3.1]],
                      np.float32)
    batch = np.asarray([1, 0, 1, 0], np.int64)
    ort_check("RoiAlign", [x, rois, batch], {"mode": mode, "coordinate_transformation_mode": coord,
                                             "output_height": 3, "output_width": 2, "sampling_ratio": 2,
                                             "spatial_scale": 0.8}, opset=16)


def test_deform_conv_groups_strides_dilations_mask():
    rng = np.random.default_rng(25)
    x = _rand(2, 4, 6, 7, seed=26)
    w = _rand(6, 2, 2, 3, seed=27)  # group 2: 4 input channels, 2 per group
    attrs = {"group": 2, "offset_group": 2, "strides": [2, 1], "dilations": [1, 2], "pads": [1, 0, 0, 2],
             "kernel_shape": [2, 3]}
    oh, ow = (6 + 1 - 2) // 2 + 1, (7 + 2 - 5) // 1 + 1
    offset = rng.uniform(-2.5, 2.5, (2, 2 * 6 * 2, oh, ow)).astype(np.float32)  # some taps leave the image
    mask = rng.uniform(0, 1, (2, 2 * 6, oh, ow)).astype(np.float32)
    ort_check("DeformConv", [x, w, offset, _rand(6, seed=28), mask], attrs, opset=19)
    ort_check("DeformConv", [x, w, offset], attrs, opset=19)


def _with_inputs_as_initializers(case, names):
    """A node-suite case's model with the named graph inputs frozen to their data-set values."""
    from onnx import numpy_helper

    model = case.model.__class__()
    model.CopyFrom(case.model)
    g = model.graph
    feeds = dict(zip([v.name for v in g.input], case.data_sets[0][0]))
    for name in names:
        g.initializer.append(numpy_helper.from_array(np.asarray(feeds.pop(name)), name))
    keep = [v for v in g.input if v.name not in names]
    del g.input[:]
    g.input.extend(keep)
    return model, feeds


@pytest.mark.parametrize("name", ["test_resize_downsample_scales_linear_antialias",
                                  "test_resize_downsample_sizes_linear_antialias",
                                  "test_resize_downsample_scales_cubic_antialias",
                                  "test_resize_downsample_sizes_cubic_antialias",
                                  "test_col2im", "test_col2im_strides", "test_col2im_pads", "test_col2im_dilations"])
def test_node_cases_refused_for_run_time_shapes_pass_with_constants(name):
    """These node-suite cases feed scales / sizes / image and block shapes as graph inputs, which
    the mappings need as constants: frozen to their values, ONNX's expected outputs are met."""
    from converter.frontends.onnx import load_onnx
    from converter.ir.interpreter import run

    from .family_oracles import _cases

    case = next(c for c in _cases() if c.name == name)
    frozen = [v.name for v in case.model.graph.input if v.name in ("scales", "sizes", "image_shape", "block_shape")]
    model, feeds = _with_inputs_as_initializers(case, frozen)
    got = run(load_onnx(model), feeds)
    np.testing.assert_allclose(got[case.model.graph.output[0].name], case.data_sets[0][1][0], rtol=1e-3, atol=1e-6)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("coord", ["half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"])
def test_resize_antialias_vs_onnxruntime(mode, coord):
    """(Whole output sizes: with a fractional in * scale, align_corners differs between onnxruntime
    and ONNX, which we follow; see test_resize_scales.)"""
    x = _rand(1, 2, 10, 8, seed=29)
    attrs = {"mode": mode, "antialias": 1, "coordinate_transformation_mode": coord}
    ort_check("Resize", [x, None, np.asarray([1, 1, 0.4, 0.75], np.float32)], attrs, opset=19, consts={2})
    ort_check("Resize", [x, None, None, np.asarray([4, 6], np.int64)], {**attrs, "axes": [3, 2]}, opset=19,
              consts={3})


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample_opsets_7_and_9(mode):
    x = _rand(1, 2, 3, 4, seed=31)
    ort_check("Upsample", [x], {"mode": mode, "scales": [1.0, 1.0, 1.5, 2.5]}, opset=7)
    ort_check("Upsample", [x, np.asarray([1, 1, 2.5, 1.5], np.float32)], {"mode": mode}, opset=9)
