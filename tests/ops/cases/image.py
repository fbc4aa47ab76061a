"""Registry cases: image resampling and spatial rearrangement."""

import numpy as np

from tests.ops.harness import Case

_rng = np.random.default_rng(2)


def _f(*shape, dt=np.float32):
    return _rng.standard_normal(shape).astype(dt)


_x = _f(2, 3, 5, 4)
_grid = _rng.uniform(-1.2, 1.2, (2, 3, 6, 2)).astype(np.float32)
_roi4 = np.array([[0, 0, 3, 2], [1, 0.5, 4, 3.5]], np.float32).reshape(2, 1, 4, 1, 1)
_roi5 = np.array([[1, 0, 0, 3, 2], [0, 1, 0.5, 4, 3.5], [1, 2, 1, 2.5, 2]], np.float32).reshape(3, 1, 5, 1, 1)
_boxes = np.array([[0, 0, 3, 2], [1, 0.5, 4, 3.5], [2, 1, 2.5, 2]], np.float32)

CASES = [
    *[Case("resize_bilinear", {"x": _x}, {"target_size_height": 7, "target_size_width": 3, "sampling_mode": m}, id=m)
      for m in ("STRICT_ALIGN_CORNERS", "ALIGN_CORNERS", "DEFAULT", "OFFSET_CORNERS", "UNALIGN_CORNERS")],
    Case("resize_nearest_neighbor", {"x": _x}, {"target_size_height": 8, "target_size_width": 3}),
    Case("upsample_nearest_neighbor", {"x": _x}, {"scale_factor_height": 2, "scale_factor_width": 3}, id="int"),
    Case("upsample_nearest_neighbor", {"x": _x}, {"scale_factor_height": 1.5, "scale_factor_width": 0.5},
         id="fractional"),
    Case("upsample_bilinear", {"x": _x}, {"scale_factor_height": 2.0, "scale_factor_width": 1.5}, id="align"),
    Case("upsample_bilinear", {"x": _x}, {"scale_factor_height": 2, "scale_factor_width": 1,
                                          "align_corners": False}, id="half-pixel"),
    Case("upsample_bilinear", {"x": _x}, {"scale_factor_height": 2.5, "scale_factor_width": 2.0,
                                          "align_corners": False, "half_pixel_centers": False},
         opset="iOS16", id="iOS16-legacy"),
    Case("resize", {"x": _x}, {"shape": [9, 2], "resized_dims": np.uint32(2)}, opset="iOS17", id="linear"),
    Case("resize", {"x": _x, "shape": np.array([4, 0, 7], np.int32)},
         {"resized_dims": np.uint32(2), "interpolation_mode": "NEAREST_NEIGHBOR"}, opset="iOS17",
         fresh_ok="a size comes from a run-time value (shape)", id="nearest-runtime-shape"),
    Case("resize", {"x": _rng.integers(-50, 50, (1, 2, 3, 4)).astype(np.int32)},
         {"shape": [5, 7], "resized_dims": np.uint32(2), "sampling_mode": "ALIGN_CORNERS"}, opset="iOS17",
         id="int32"),
    Case("crop", {"x": _x}, {"crop_height": [1, 2], "crop_width": [0, 1]}),
    Case("crop_resize", {"x": _x, "roi": _roi4}, {"target_height": 3, "target_width": 4}, fresh_ok="the roi's coordinate count (4 or 5) picks the layout; symbolic, it is unknown", id="roi4"),
    Case("crop_resize", {"x": _x, "roi": _roi5},
         {"target_height": 2, "target_width": 3, "sampling_mode": "ALIGN_CORNERS",
          "box_coordinate_mode": "CORNERS_WIDTH_FIRST"}, fresh_ok="the roi's coordinate count (4 or 5) picks the layout; symbolic, it is unknown", id="roi5"),
    Case("crop_resize", {"x": _x, "roi": _roi5 / 5},
         {"target_height": 3, "target_width": 3, "normalized_coordinates": True, "pad_value": -1.0,
          "box_coordinate_mode": "CENTER_SIZE_HEIGHT_FIRST", "sampling_mode": "STRICT_ALIGN_CORNERS"},
         opset="iOS16", fresh_ok="the roi's coordinate count (4 or 5) picks the layout; symbolic, it is unknown",
         id="iOS16-pad_value"),
    Case("crop_resize", {"x": _x, "boxes": _boxes, "box_indices": np.array([1, 0, 1], np.int32)},
         {"target_height": 2, "target_width": 2, "sampling_mode": "OFFSET_CORNERS", "spatial_scale": 0.5},
         opset="iOS17", id="iOS17"),
    Case("crop_resize", {"x": _x, "boxes": _boxes[:2]}, {"target_height": 2, "target_width": 3}, opset="iOS17",
         id="iOS17-default-indices"),
    Case("resample", {"x": _x, "coordinates": _grid},
         {"sampling_mode": "bilinear", "padding_mode": "constant", "padding_value": 0.5,
          "coordinates_mode": "normalized_minus_one_to_one", "align_corners": False}, id="bilinear"),
    Case("resample", {"x": _x, "coordinates": _grid.astype(np.float16)},
         {"sampling_mode": "nearest", "padding_mode": "reflection", "padding_value": 0.0,
          "coordinates_mode": "normalized_zero_to_one", "align_corners": True}, opset="iOS16", id="iOS16-fp16"),
    Case("resample", {"x": _x, "coordinates": _rng.integers(-1, 6, (2, 3, 6, 2)).astype(np.int16)},
         {"sampling_mode": "bilinear", "padding_mode": "symmetric", "padding_value": 0.0,
          "coordinates_mode": "unnormalized", "align_corners": False}, opset="iOS17", id="iOS17-int16"),
    Case("affine", {"x": _x, "transform_matrix": _f(2, 6)},
         {"output_height": 3, "output_width": 6, "sampling_mode": "bilinear", "padding_mode": "constant",
          "padding_value": 0.0, "coordinates_mode": "normalized_minus_one_to_one", "align_corners": True}),
    Case("pixel_shuffle", {"x": _f(1, 8, 3, 2)}, {"upscale_factor": 2}),
    Case("pixel_unshuffle", {"x": _f(1, 2, 6, 4)}, {"downscale_factor": np.uint32(2)}),
    Case("depth_to_space", {"x": _f(1, 8, 3, 2)}, {"block_size": 2}),
    Case("space_to_depth", {"x": _f(1, 2, 6, 4)}, {"block_size": 2}),
    Case("space_to_batch", {"x": _f(2, 3, 5, 4)}, {"block_shape": [2, 3], "paddings": [[1, 0], [1, 1]]}),
    Case("batch_to_space", {"x": _f(12, 3, 3, 2)}, {"block_shape": [2, 3], "crops": [[1, 0], [0, 2]]}),
    Case("pad", {"x": _x}, {"pad": [1, 2, 0, 3], "constant_val": 1.5}, id="constant"),
    Case("pad", {"x": _x}, {"pad": [2, 3], "mode": "reflect"}, id="reflect"),
    Case("pad", {"x": _x.astype(np.float16)}, {"pad": [0, 1, 2, 0, 4, 4], "mode": "replicate"}, id="replicate"),
    Case("pad", {"x": _x, "pad": np.array([0, 1, 1, 0, 2, 2, 0, 3], np.int32)}, fresh_ok="a size comes from a run-time value (pad)", id="runtime-pad"),
    Case("sliding_windows", {"x": _f(2, 9, 3)}, {"axis": 1, "size": 4, "stride": 2}),
    Case("sliding_windows", {"x": _rng.integers(0, 2, (3, 7)).astype(bool)}, {"axis": -1, "size": 3},
         opset="iOS17", id="iOS17-bool"),
]
