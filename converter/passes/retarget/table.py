"""The re-targeting table: (op type, opsets its current version covers, target opsets) -> rewrite.

Every change of an op's signature between two opsets (``ir/ops/signatures.json``, checked by
tests/retarget/test_table.py) has an entry for each direction. Ops whose signature is the same in
the source and target opsets need none: they are re-pointed at the target's definition.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...ir.core import Op
from ...ir.opdef import OPSETS, opset_index
from . import constexpr as cx
from . import ops
from .context import Context
from .generic import generic

Rewrite = Callable[[Context, Op], None]


@dataclass(frozen=True)
class Rule:
    op_type: str
    sources: tuple[str, str]  # inclusive range of opsets the op's current definition belongs to
    targets: tuple[str, str]  # inclusive range of target opsets
    rewrite: Rewrite
    summary: str

    def matches(self, source: str, target: str) -> bool:
        s, t = opset_index(source), opset_index(target)
        return (opset_index(self.sources[0]) <= s <= opset_index(self.sources[1])
                and opset_index(self.targets[0]) <= t <= opset_index(self.targets[1]))


UP_TO_17 = (("iOS15", "iOS16"), ("iOS17", "iOS18"))
DOWN_FROM_17 = (("iOS17", "iOS18"), ("iOS15", "iOS16"))
UP_TO_18 = (("iOS16", "iOS17"), ("iOS18", "iOS18"))
DOWN_FROM_18 = (("iOS18", "iOS18"), ("iOS16", "iOS17"))
_DROPS = "parameters added later dropped at their implicit values (else refused); constants re-typed exactly"
_WIDER_TYPES = "dtypes added later refused for run-time values; constants re-typed when exact"
_SPLIT_DOMAINS = ("iOS17 lets weights/biases/constants have another dtype than x: constants re-typed when exact "
                  "(compressed ones stored decompressed, with a note), run-time values refused")


def _rules() -> list[Rule]:
    r: list[Rule] = []

    def add(op_type: str, ranges: tuple[tuple[str, str], tuple[str, str]], rewrite: Rewrite, summary: str) -> None:
        r.append(Rule(op_type, ranges[0], ranges[1], rewrite, summary))

    # weight compression
    add("constexpr_lut_to_dense", UP_TO_18, cx.lut_to_ios18, "packed indices + flat lut + shape -> uint<n> "
        "indices + per-tensor lut")
    add("constexpr_lut_to_dense", DOWN_FROM_18, cx.lut_to_ios16, "per-tensor lut of 2/4/16/64/256 entries -> "
        "packed form; other luts re-encoded as one table of <= 256 distinct values, else stored decompressed")
    add("constexpr_sparse_to_dense", UP_TO_18, cx.sparse_to_ios18, "packed mask + shape -> uint1 mask")
    add("constexpr_sparse_to_dense", DOWN_FROM_18, cx.sparse_to_ios16, "uint1 mask -> packed mask + shape; "
        "int4/uint4 data refused")
    add("constexpr_affine_dequantize", UP_TO_18, cx.affine_to_blockwise, "-> constexpr_blockwise_shift_scale "
        "(rank-matched scale and offset)")
    add("constexpr_blockwise_shift_scale", (("iOS18", "iOS18"), ("iOS16", "iOS17")), cx.blockwise_to_affine,
        "-> constexpr_affine_dequantize when the scale varies along <= 1 axis (4-bit data widened to 8); "
        "else stored decompressed")
    add("constexpr_cast", UP_TO_18, generic, "same parameters (the iOS18 form binds them as inputs, the iOS16 "
        "one as attributes: the MIL writer's job)")
    add("constexpr_cast", DOWN_FROM_18, generic, "same parameters")
    for op_type in ("constexpr_lut_to_sparse", "constexpr_sparse_blockwise_shift_scale"):
        add(op_type, (("iOS18", "iOS18"), ("iOS16", "iOS17")), cx.no_older_form,
            "read by constexpr_sparse_to_dense: stored as the constants they compute (sparsity kept); read by "
            "anything else: stored decompressed")

    # gather / scatter: negative indices (iOS17), added parameters
    for op_type in ("gather", "gather_along_axis", "gather_nd", "scatter", "scatter_along_axis", "scatter_nd"):
        add(op_type, UP_TO_17, ops.wrap_negative_indices, "negative indices wrapped (constants rewritten, "
            "run-time ones through select); then " + _DROPS)
        add(op_type, DOWN_FROM_17, generic, "validate_indices dropped (True: with a note); batch_dims=0 dropped "
            "for iOS15; int8/uint8 data or indices refused unless constant")
    for op_type in ("gather", "gather_nd"):
        add(op_type, (("iOS15", "iOS15"), ("iOS16", "iOS16")), generic, "batch_dims optional, default 0")
        add(op_type, (("iOS16", "iOS16"), ("iOS15", "iOS15")), generic, "batch_dims=0 dropped, else refused")
    for op_type in ("gather_along_axis",):
        add(op_type, (("iOS15", "iOS15"), ("iOS16", "iOS16")), generic, "int16/uint16 indices added")
        add(op_type, (("iOS16", "iOS16"), ("iOS15", "iOS15")), generic, _WIDER_TYPES)

    # convolution: constness and dtypes
    for op_type in ("conv", "conv_transpose"):
        add(op_type, UP_TO_17, generic, "weight/bias may be computed at run time and have their own dtype")
        add(op_type, DOWN_FROM_17, ops.split_run_time_bias, "run-time bias -> conv + add; run-time conv_transpose "
            "weight refused; " + _SPLIT_DOMAINS)

    # reshape: 0s
    add("reshape", UP_TO_17, ops.resolve_zero_dims, "0s in a constant shape written out as the dims they copy")
    add("reshape", DOWN_FROM_17, ops.resolve_zero_dims, "0s in a constant shape written out; int8/int16 shape "
        "re-typed; " + _WIDER_TYPES)

    # crop_resize
    add("crop_resize", (("iOS15", "iOS15"), ("iOS16", "iOS16")), generic, "pad_value optional, default 0")
    add("crop_resize", (("iOS16", "iOS16"), ("iOS15", "iOS15")), generic, "pad_value=0 dropped, else refused")
    add("crop_resize", UP_TO_17, ops.roi_to_boxes, "roi -> boxes + box_indices, output reshaped back")
    add("crop_resize", DOWN_FROM_17, ops.boxes_to_roi, "boxes + box_indices -> roi, output squeezed")

    # non_maximum_suppression
    add("non_maximum_suppression", UP_TO_17, ops.nms_layout_changed, "refused (score_threshold, count output, "
        "transposed boxes)")
    add("non_maximum_suppression", DOWN_FROM_17, ops.nms_layout_changed, "refused (as above)")

    # parameters added later (topk: iOS16 and iOS17; upsample_bilinear: iOS16; reduce_argmax/argmin: iOS17;
    # gru: iOS18): up, absent means the old behaviour; down, dropped at their implicit values
    for op_type in ("topk", "upsample_bilinear", "reduce_argmax", "reduce_argmin", "gru"):
        add(op_type, ((OPSETS[0], OPSETS[-1]), (OPSETS[0], OPSETS[-1])), generic,
            "up: new optional parameters default to the old behaviour; down: " + _DROPS)

    # everything else that changed: dtypes added (iOS16 resample fp16 coordinates, iOS17 int8/int16/uint8/
    # uint16 tensors, fp16 recurrent ops) and iOS17's separate dtype domains for weights and constants
    return r


RULES: list[Rule] = _rules()
_BY_TYPE: dict[str, list[Rule]] = {}
for _rule in RULES:
    _BY_TYPE.setdefault(_rule.op_type, []).append(_rule)


def find_rule(op_type: str, source: str, target: str) -> Rule | None:
    for rule in _BY_TYPE.get(op_type, ()):
        if rule.matches(source, target):
            return rule
    return None


def default_rule(op_type: str) -> Rule:
    """Every other signature change: dtypes added, or iOS17's separate dtype domains."""
    return Rule(op_type, (OPSETS[0], OPSETS[-1]), (OPSETS[0], OPSETS[-1]), generic,
                "dtypes added later refused for run-time values; " + _SPLIT_DOMAINS)
