"""Every option key the new lowerings write is a member the WebNN spec defines for that method's
options dictionary (../shared/spec/webnn-api.txt, "MLxxxOptions has the following members"), so a
misspelt or invented key (which a browser silently ignores) fails here. No browser needed."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import converter
from converter.ir.builder import new_program
from converter.ir.types import TensorType, dtype_of_array

SPEC = Path(__file__).resolve().parents[2].parent / "shared" / "spec" / "webnn-api.txt"

#: builder method -> the options dictionary the spec gives it (MLOperatorOptions: only ``label``)
DICTIONARY = {
    "resample2d": "MLResample2dOptions", "gather": "MLGatherOptions", "gatherElements": "MLGatherOptions",
    "argMax": "MLArgMinMaxOptions", "argMin": "MLArgMinMaxOptions", "linear": "MLLinearOptions",
    "clamp": "MLClampOptions", "slice": "MLSliceOptions", "transpose": "MLTransposeOptions",
    "conv2d": "MLConv2dOptions", "softmax": "MLOperatorOptions",
    **{m: "MLReduceOptions" for m in ("reduceSumSquare", "reduceMax", "reduceMin", "reduceSum")},
    **{m: "MLOperatorOptions" for m in (
        "add", "sub", "mul", "div", "pow", "matmul", "where", "equal", "lesser", "notEqual", "concat", "reshape",
        "cast", "sqrt", "exp", "log", "neg", "sign", "floor", "abs", "roundEven", "gatherND", "identity")},
}


def spec_members() -> dict[str, set[str]]:
    members: dict[str, set[str]] = {}
    current: set[str] | None = None
    for line in SPEC.read_text(encoding="utf-8").splitlines():
        if "has the following member" in line:
            head = re.match(r"^(ML\w+Options) has the following members?:", line)
            current = members.setdefault(head.group(1), set()) if head else None
            continue
        if re.match(r"^\d+(\.\d+)+\. ", line):  # a new section ends the dictionary
            current = None
        if current is not None:  # "name, of type T" (the text extraction may glue "of type" and T)
            current.update(re.findall(r"(?:^|\s)(\w+), of ?type", line))
    return members


def _programs() -> list[tuple[dict[str, np.ndarray], object, str]]:
    x = np.zeros((1, 3, 5, 7), np.float32)
    i = np.zeros((2, 2), np.int32)
    return [
        ({"x": x}, lambda b, v: [b.resize_bilinear(x=v, target_size_height=8, target_size_width=4, sampling_mode=m)
                                 for m in ("DEFAULT", "UNALIGN_CORNERS")], "iOS17"),
        ({"x": x}, lambda b, v: [b.upsample_nearest_neighbor(x=v, scale_factor_height=2.0, scale_factor_width=1.5),
                                 b.resize_nearest_neighbor(x=v, target_size_height=3, target_size_width=9),
                                 b.l2_norm(x=v), b.local_response_norm(x=v, size=3),
                                 *b.topk(x=v, k=1, axis=2), b.sinh(x=v), b.atanh(x=v),
                                 b.slice_by_index(x=v, begin=np.array([0, 0, 1, 0], np.int32),
                                                  end=np.array([1, 3, 5, 7], np.int32),
                                                  stride=np.array([1, 1, 2, 3], np.int32))], "iOS17"),
        ({"x": x, "i": i}, lambda b, v, j: [b.gather_nd(x=v, indices=j),
                                            b.one_hot(indices=j, one_hot_vector_size=4),
                                            b.quantize(input=v, scale=np.float32(0.5), zero_point=np.int8(1),
                                                       output_dtype="int8")], "iOS17"),
        ({"q": np.zeros((1, 2, 3, 4), np.float32)}, lambda b, q: [
            b.scaled_dot_product_attention(query=q, key=q, value=q),
            b.einsum(values=(q, np.zeros((1, 4, 3, 2), np.float32)), equation="nchw,nwhu->nchu")], "iOS18"),
    ]


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_every_option_key_is_a_spec_member(layout: str, tmp_path: Path) -> None:
    members = spec_members()
    assert {"MLResample2dOptions", "MLGatherOptions", "MLReduceOptions", "MLOperatorOptions"} <= set(members)
    assert members["MLResample2dOptions"] == {"mode", "scales", "sizes", "axes"}
    assert members["MLOperatorOptions"] == {"label"} and members["MLGatherOptions"] == {"axis"}
    seen: set[str] = set()
    for n, (feeds, body, opset) in enumerate(_programs()):
        prog = new_program([(k, TensorType(dtype_of_array(a), a.shape)) for k, a in feeds.items()], body, opset=opset)
        out = tmp_path / f"p{n}"
        converter.convert(prog, to="webnn", out=out, layout=layout)
        for method, args in re.findall(r"builder\.(\w+)\((.*)\);", (out / "model.js").read_text()):
            if method in ("input", "build", "constant"):
                continue
            assert method in DICTIONARY, f"{method}: add its options dictionary to DICTIONARY"
            seen.add(method)
            opts = re.search(r"\{([^{}]*)\}\)?$", args)
            keys = set(re.findall(r"(?:^|, )(\w+): ", opts.group(1))) if opts else set()
            allowed = members[DICTIONARY[method]] | members["MLOperatorOptions"]
            assert keys <= allowed, f"{method}: {sorted(keys - allowed)} not in {DICTIONARY[method]}"
    assert {"resample2d", "gather", "argMax", "reduceSumSquare", "slice", "gatherND"} <= seen
