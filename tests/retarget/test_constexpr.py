"""Issue 7: compressed weights re-targeted between the iOS16/17 and iOS18 constexpr forms, both ways.

Oracle: coremltools. Each one-op program is written by us at its own opset and at the target;
coremltools' MIL loader reads both (re-running its type inference) and its own op definitions
compute the dense weights (tests/retarget/oracle.py), which must be equal bit for bit. The
compression must be kept (the expected constexpr op types are checked), a round trip back to the
source opset must give back the same compressed parameters, and whatever the target cannot
express is stored dense with a note saying so.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import converter
from converter.errors import ConversionWarning, UnsupportedError
from converter.ir.builder import Builder, new_program
from converter.ir.core import Program
from converter.ir.types import tensor
from converter.ir.verify import verify
from tests.mil.helpers import CoremltoolsLoader
from tests.ops.cases.quant import pack_lsb_first

from .oracle import assert_same_weights, dense_weights

pytestmark = pytest.mark.usefixtures("no_fsync")
rng = np.random.default_rng(7)
Build = Callable[[Builder], None]


def weights_program(opset: str, build: Build) -> Program:
    """A program holding the constexpr ops ``build`` adds (their results unread: coremltools computes
    them all the same), with one ordinary op so the model has an input and an output."""
    def body(b: Builder, x):
        build(b)
        return [b.relu(x=x, name="y")]
    return new_program({"x": tensor("fp32", [1])}, body, opset=opset)


def op(op_type: str, name: str = "w", **params) -> Build:
    """One constexpr op; ``(array, "dtype")`` params become constants of that dtype."""
    def build(b: Builder) -> None:
        b.add_op(op_type, {k: b.const(*v) if isinstance(v, tuple) else b.const(v) for k, v in params.items()},
                 name=name)
    return build


def constexpr_types(path: Path) -> dict[str, str]:
    return {o.name: o.type for o in converter.load(path).walk() if o.type.startswith("constexpr_")}


def params_of(prog: Program) -> dict[str, dict[str, tuple]]:
    """Each constexpr op's constant parameters as (dtype, shape, bytes)."""
    out = {}
    for o in prog.walk():
        if o.type.startswith("constexpr_"):
            out[o.name] = {k: (v.type.dtype.name, np.shape(v.const_val), np.ascontiguousarray(v.const_val).tobytes())
                           for k, v in o.inputs.items()}
    return out


def retarget(loader: CoremltoolsLoader, tmp: Path, build: Build, source: str, target: str,
             expect: str | None, notes: tuple[str, ...] = ()) -> Path:
    """Write the program at ``source`` and at ``target``; coremltools' dense weights must agree, the
    target package must hold ``expect`` (a constexpr op type, None: dense), with the given notes."""
    tmp.mkdir(exist_ok=True)
    prog = weights_program(source, build)
    want = dense_weights(loader, converter.save(prog, tmp / f"src_{source}.mlpackage"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConversionWarning)
        out = converter.save(prog, tmp / f"to_{target}.mlpackage", target=target)
    said = [str(w.message) for w in caught if issubclass(w.category, ConversionWarning)]
    for fragment in notes:
        assert any(fragment in s for s in said), (fragment, said)
    if not notes:
        assert not said, said
    got = dense_weights(loader, out)
    written = constexpr_types(out)
    if expect is None:
        assert not written, written
        assert not got
        dense = converter.load(out)
        consts = {o.name: o.attributes["val"] for o in dense.walk() if o.type == "const" and o.name in want}
        assert_same_weights(want, consts)
    else:
        assert set(written.values()) == {expect}, written
        assert_same_weights(want, got)
        from converter.passes.retarget import retarget as retarget_pass

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConversionWarning)
            clone, problems, _ = retarget_pass(prog, target)
        assert not problems
        verify(clone)  # nothing left in a form the target lacks: the clone is a valid program
    return out


# ---------------------------------------------------------------------------------------------
# constexpr_lut_to_dense


def lut16(nbits: int, dt: str, shape: tuple[int, ...]) -> Build:
    count = int(np.prod(shape))
    lut = rng.standard_normal(1 << nbits) * 3
    if dt in ("int8", "uint8"):
        lut = rng.integers(0 if dt == "uint8" else -128, 128, 1 << nbits)
    return op("constexpr_lut_to_dense", indices=(pack_lsb_first(rng.integers(0, 1 << nbits, count), nbits), "uint8"),
              lut=(lut, dt), shape=(np.array(shape), "uint32"))


@pytest.mark.parametrize("nbits", [1, 2, 4, 6, 8])
@pytest.mark.parametrize("dt,shape", [("fp16", (3, 5, 7)), ("fp32", (4, 2, 1, 1)), ("int8", (9,)),
                                      ("uint8", (2, 3))])
def test_lut_ios16_up_to_ios18_and_back(nbits, dt, shape, tmp_path, coremltools_loader):
    build = lut16(nbits, dt, shape)
    up = retarget(coremltools_loader, tmp_path, build, "iOS16", "iOS18", "constexpr_lut_to_dense")
    prog18 = converter.load(up)
    w = next(o for o in prog18.walk() if o.name == "w")
    assert w.inputs["indices"].type.dtype.name == f"uint{nbits}" and w.inputs["lut"].type.shape == (
        *([1] * len(shape)), 1 << nbits, 1)
    back = converter.load(converter.save(prog18, tmp_path / "back.mlpackage", target="iOS16"))
    assert params_of(back) == params_of(weights_program("iOS16", build)), "iOS16 -> iOS18 -> iOS16 changed the weight"


def lut18(indices: np.ndarray, nbits: int, lut: np.ndarray, vector_axis: int | None = None) -> Build:
    params = {"indices": (indices, f"uint{nbits}"), "lut": lut}
    if vector_axis is not None:
        params["vector_axis"] = np.int32(vector_axis)
    return op("constexpr_lut_to_dense", **params)


@pytest.mark.parametrize("nbits", [1, 2, 3, 4, 6, 8])
@pytest.mark.parametrize("target", ["iOS16", "iOS17"])
def test_lut_ios18_per_tensor_down(nbits, target, tmp_path, coremltools_loader):
    lut = rng.standard_normal((1, 1, 1 << nbits, 1)).astype(np.float16)
    notes = ("re-encoded as one",) if nbits == 3 else ()  # 8 entries: iOS16 tables have 2/4/16/64/256
    retarget(coremltools_loader, tmp_path, lut18(rng.integers(0, 1 << nbits, (5, 3)), nbits, lut), "iOS18", target,
             "constexpr_lut_to_dense", notes)


@pytest.mark.parametrize("case", ["per_block", "per_block_int8", "vector_axis0", "vector_axis-1", "vector_per_block"])
def test_lut_ios18_blocks_and_vectors_reencoded(case, tmp_path, coremltools_loader):
    if case.startswith("per_block"):
        dt = np.int8 if case.endswith("int8") else np.float32
        lut = rng.integers(-100, 100, (2, 1, 16, 1)).astype(dt) if dt == np.int8 else rng.standard_normal(
            (2, 1, 16, 1)).astype(dt)
        build = lut18(rng.integers(0, 16, (4, 6)), 4, lut)
    elif case == "vector_per_block":
        build = lut18(rng.integers(0, 4, (2, 3, 4)), 2, rng.standard_normal((1, 3, 1, 4, 2)).astype(np.float16), 2)
    else:
        axis = int(case.removeprefix("vector_axis"))
        build = lut18(rng.integers(0, 2, (2, 3, 2)), 1, rng.standard_normal((1, 1, 1, 2, 3)).astype(np.float16), axis)
    retarget(coremltools_loader, tmp_path, build, "iOS18", "iOS16", "constexpr_lut_to_dense", ("re-encoded as one",))


def test_lut_with_too_many_distinct_values_is_stored_dense_with_a_note(tmp_path, coremltools_loader):
    build = lut18(rng.integers(0, 256, (4, 128)), 8, rng.standard_normal((4, 1, 256, 1)).astype(np.float32))
    retarget(coremltools_loader, tmp_path, build, "iOS18", "iOS16", None, ("more than 256 distinct values",
                                                                          "stored decompressed"))


# ---------------------------------------------------------------------------------------------
# constexpr_sparse_to_dense


@pytest.mark.parametrize("dt", ["fp16", "fp32", "int8", "uint8"])
@pytest.mark.parametrize("shape", [(13,), (3, 4, 5)])
def test_sparse_both_ways(dt, shape, tmp_path, coremltools_loader):
    mask = rng.integers(0, 2, shape).astype(np.uint8)
    values = rng.integers(1, 100, int(mask.sum()))
    build16 = op("constexpr_sparse_to_dense", nonzero_data=(values, dt),
                 mask=(pack_lsb_first(mask.reshape(-1), 1), "uint8"), shape=(np.array(shape), "uint32"))
    up = retarget(coremltools_loader, tmp_path, build16, "iOS16", "iOS18", "constexpr_sparse_to_dense")
    back = converter.load(converter.save(converter.load(up), tmp_path / "back.mlpackage", target="iOS16"))
    assert params_of(back) == params_of(weights_program("iOS16", build16))
    build18 = op("constexpr_sparse_to_dense", nonzero_data=(values, dt), mask=(mask, "uint1"))
    retarget(coremltools_loader, tmp_path / "down", build18, "iOS18", "iOS17", "constexpr_sparse_to_dense")


# ---------------------------------------------------------------------------------------------
# constexpr_affine_dequantize <-> constexpr_blockwise_shift_scale


@pytest.mark.parametrize("qdt,zdt", [("int8", "int8"), ("uint8", "uint8"), ("int8", "uint8"), ("uint8", "fp32")])
@pytest.mark.parametrize("sdt", ["fp16", "fp32"])
@pytest.mark.parametrize("axis,per_channel", [(0, True), (1, True), (-1, True), (0, False)])
def test_affine_up_to_blockwise_and_back(qdt, zdt, sdt, axis, per_channel, tmp_path, coremltools_loader):
    shape = (4, 3, 2)
    n = shape[axis] if per_channel else None
    lo = -128 if qdt == "int8" else 0
    data = rng.integers(lo, lo + 256, shape)
    zp = (rng.integers(0, 128, n) if zdt != "fp32" else rng.standard_normal(n) * 4) if n else np.array(7)
    scale = rng.random(n) + 0.01 if n else np.array(0.03)
    build = op("constexpr_affine_dequantize", quantized_data=(data, qdt), zero_point=(zp, zdt),
               scale=(scale, sdt), axis=(np.int32(axis), "int32"))
    up = retarget(coremltools_loader, tmp_path, build, "iOS16", "iOS18", "constexpr_blockwise_shift_scale")
    back = converter.save(converter.load(up), tmp_path / "back.mlpackage", target="iOS16")
    assert constexpr_types(back) == {"w": "constexpr_affine_dequantize"}
    assert_same_weights(dense_weights(coremltools_loader, converter.save(weights_program("iOS16", build),
                                                                        tmp_path / "src.mlpackage")),
                        dense_weights(coremltools_loader, back))


def test_affine_scalar_zero_point_with_per_channel_scale(tmp_path, coremltools_loader):
    build = op("constexpr_affine_dequantize", quantized_data=(rng.integers(0, 256, (3, 5)), "uint8"),
               zero_point=(np.array(128), "uint8"), scale=(rng.random(5) + 0.1, "fp16"), axis=(np.int32(1), "int32"))
    retarget(coremltools_loader, tmp_path, build, "iOS16", "iOS18", "constexpr_blockwise_shift_scale")


# offsets are quarter-integers so that coremltools' iOS18 formula, which subtracts an fp16 offset in
# fp16, is exact and comparable with iOS16's fp32 arithmetic (see the report: ours rounds once)
_OFFSETS = {"none": None, "int": "data", "fp16": "fp16", "fp32": "fp32"}


@pytest.mark.parametrize("ddt", ["int4", "uint4", "int8", "uint8"])
@pytest.mark.parametrize("scale_shape", [(1, 1), (4, 1), (1, 6), (1, 3), (2, 1)])
@pytest.mark.parametrize("offset", list(_OFFSETS))
def test_blockwise_down_to_affine(ddt, scale_shape, offset, tmp_path, coremltools_loader):
    sdt = "fp32" if scale_shape == (4, 1) else "fp16"  # fp32 scales with every data and offset dtype
    lo, hi = {"int4": (-8, 8), "uint4": (0, 16), "int8": (-128, 128), "uint8": (0, 256)}[ddt]
    params = {"data": (rng.integers(lo, hi, (4, 6)), ddt), "scale": (rng.random(scale_shape) + 0.01, sdt)}
    if offset == "int":
        params["offset"] = (rng.integers(lo, hi, scale_shape), ddt)
    elif offset != "none":
        params["offset"] = (rng.integers(-20, 20, scale_shape) / 4, offset)
    notes = ("4-bit data is widened to 8 bits",) if ddt in ("int4", "uint4") else ()
    retarget(coremltools_loader, tmp_path, op("constexpr_blockwise_shift_scale", **params), "iOS18", "iOS16",
             "constexpr_affine_dequantize", notes)


@pytest.mark.parametrize("case,says", [
    ("two_axes", "a scale varying along 2 axes has no iOS16 form"),
    ("float_data", "scaled float data has no iOS16 form"),
])
def test_blockwise_without_ios16_form_is_stored_dense_with_a_note(case, says, tmp_path, coremltools_loader):
    if case == "two_axes":
        params = {"data": (rng.integers(-8, 8, (4, 6)), "int4"), "scale": (rng.random((2, 3)) + 0.1, "fp16")}
    else:
        params = {"data": (rng.standard_normal((4, 6)), "fp16"), "scale": (rng.random((4, 1)), "fp16")}
    retarget(coremltools_loader, tmp_path, op("constexpr_blockwise_shift_scale", **params), "iOS18", "iOS16", None,
             (says, "stored decompressed"))


# ---------------------------------------------------------------------------------------------
# constexpr_cast, chains of constexpr ops (iOS18 joint compression), iOS15


@pytest.mark.parametrize("source,target", [("iOS16", "iOS18"), ("iOS18", "iOS16"), ("iOS17", "iOS18")])
def test_cast_both_ways(source, target, tmp_path, coremltools_loader):
    build = op("constexpr_cast", source_val=(rng.standard_normal((3, 4)), "fp16"), output_dtype=np.array("fp32"))
    retarget(coremltools_loader, tmp_path, build, source, target, "constexpr_cast")


def _mask(shape=(4, 6)):
    return rng.integers(0, 2, shape).astype(np.uint8)


def quantized_lut(b: Builder) -> None:
    lut = b.constexpr_blockwise_shift_scale(data=b.const(rng.integers(-128, 128, (1, 1, 16, 1)), "int8"),
                                            scale=b.const(np.float16([[[[0.01]]]])), name="lut_q")
    b.constexpr_lut_to_dense(indices=b.const(rng.integers(0, 16, (4, 6)), "uint4"), lut=lut, name="w")


def palettized_sparse(b: Builder) -> None:
    mask = _mask()
    m, nz = b.constexpr_lut_to_sparse(indices_mask=b.const(mask, "uint1"),
                                      indices_nonzero_data=b.const(rng.integers(0, 4, int(mask.sum())), "uint2"),
                                      lut=b.const(rng.standard_normal((1, 1, 4, 1)).astype(np.float16)), name="pal")
    b.constexpr_sparse_to_dense(nonzero_data=nz, mask=m, name="w")


def quantized_sparse(b: Builder) -> None:
    mask = _mask()
    m, nz = b.constexpr_sparse_blockwise_shift_scale(
        data_mask=b.const(mask, "uint1"), nonzero_data=b.const(rng.integers(-8, 8, int(mask.sum())), "int4"),
        scale=b.const(rng.random((1, 6)).astype(np.float16) + 0.1), name="q")
    b.constexpr_sparse_to_dense(nonzero_data=nz, mask=m, name="w")


def cast_of_lut(b: Builder) -> None:
    lut = b.constexpr_lut_to_dense(indices=b.const(rng.integers(0, 4, (3, 5)), "uint2"),
                                   lut=b.const(rng.standard_normal((1, 1, 4, 1)).astype(np.float16)), name="pal")
    b.constexpr_cast(source_val=lut, output_dtype="fp32", name="w")


@pytest.mark.parametrize("build,expect,says", [
    (cast_of_lut, "constexpr_cast", "input 'source_val' is computed by constexpr_lut_to_dense"),
    (quantized_lut, "constexpr_lut_to_dense", "input 'lut' is computed by constexpr_blockwise_shift_scale"),
    (palettized_sparse, "constexpr_sparse_to_dense", "computed by constexpr_lut_to_sparse"),
    (quantized_sparse, "constexpr_sparse_to_dense", "computed by constexpr_sparse_blockwise_shift_scale"),
], ids=["cast_of_lut", "quantized_lut", "palettized_sparse", "quantized_sparse"])
def test_chains_keep_the_outer_compression(build, expect, says, tmp_path, coremltools_loader):
    retarget(coremltools_loader, tmp_path, build, "iOS18", "iOS16", expect, (says, "outer compression is kept"))


@pytest.mark.parametrize("source,build", [
    ("iOS16", lut16(4, "fp16", (3, 4))),
    ("iOS18", lut18(rng.integers(0, 4, (3, 4)), 2, rng.standard_normal((1, 1, 4, 1)).astype(np.float16))),
    ("iOS18", quantized_lut),
], ids=["lut16", "lut18", "chain"])
def test_ios15_stores_dense_weights_with_a_note(source, build, tmp_path, coremltools_loader):
    retarget(coremltools_loader, tmp_path, build, source, "iOS15", None, ("iOS15 has no constexpr", "stored decompressed"))


def test_a_4bit_sparse_result_read_by_an_ordinary_op_is_refused_with_a_count(tmp_path):
    """An int4 sparse weight cannot be read by any iOS16 op; the error says so once for all of them."""
    def build(b: Builder) -> None:
        for i in range(5):
            b.constexpr_sparse_to_dense(nonzero_data=b.const(np.array([1, -2, 3]), "int4"),
                                        mask=b.const(np.array([1, 0, 1, 1]), "uint1"), name=f"s{i}")
    with pytest.raises(UnsupportedError) as e:
        converter.save(weights_program("iOS18", build), tmp_path / "never.mlpackage", target="iOS16")
    msg = str(e.value)
    assert not (tmp_path / "never.mlpackage").exists()
    assert msg.count("4-bit sparse data has no iOS16 form") == 1 and "(5 ops: 's0', 's1', 's2', ...)" in msg, msg
