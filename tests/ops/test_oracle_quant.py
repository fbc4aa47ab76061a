"""Compression and quantization ops against onnxruntime graphs.

Expected values come from onnxruntime: DequantizeLinear (per tensor, per axis, blocked with
opset 21's ``block_size``), QuantizeLinear, Cast, Gather / GatherND for LUT lookups and
NonZero + ScatterND / Compress for sparse data. What the test itself does is layout only:
unpacking the iOS16 packed bit fields (written below from the MIL text: row-major elements,
LSB first within each byte, a field straddling bytes continues in the next byte's low bits),
widening sub-byte dtypes ONNX lacks (uint1..uint6) to uint8, and naming the LUT block each
element belongs to.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import helper

from tests.oracles.onnx_oracle import run_onnx

from .harness import Case, assert_close, run_case, run_op

ORACLE = {
    "constexpr_affine_dequantize": "onnxruntime DequantizeLinear (per tensor / per axis); Cast-Sub-Mul for fp32 zero points",
    "constexpr_cast": "onnxruntime Cast",
    "constexpr_lut_to_dense": "onnxruntime Gather (iOS16, indices unpacked from the spec's bit layout); "
                              "GatherND on [block, index] + Transpose/Reshape (iOS18 per-block / vector LUTs)",
    "constexpr_sparse_to_dense": "onnxruntime NonZero + ScatterND (iOS16 mask unpacked from the spec's bit layout)",
    "constexpr_blockwise_shift_scale": "onnxruntime DequantizeLinear with block_size (opset 21); Expand/Sub/Mul "
                                       "graph for multi-axis blocks and float offsets",
    "constexpr_lut_to_sparse": "onnxruntime NonZero + ScatterND + GatherND + Compress",
    "constexpr_sparse_blockwise_shift_scale": "onnxruntime NonZero + ScatterND + DequantizeLinear(block_size) + Compress",
    "quantize": "onnxruntime QuantizeLinear (per tensor / per axis)",
    "dequantize": "onnxruntime DequantizeLinear (per tensor / per axis)",
}

_ONNX_INT4 = {"int4": ml_dtypes.int4, "uint4": ml_dtypes.uint4}


def _run(op: str, opset: str, **params) -> list[np.ndarray]:
    """Run ``op`` on constants; ``(array, "dtype")`` makes a const of a sub-byte dtype."""
    def build(b):
        vals = {k: b.const(*v) if isinstance(v, tuple) else v for k, v in params.items()}
        return list(b.add_op(op, vals).outputs)
    return run_case(Case(op, build=build, opset=opset))


def _onnx_array(v: np.ndarray, dt: str) -> np.ndarray:
    """An IR value (sub-byte held unpacked) as ONNX holds it: int4/uint4 natively, others widened."""
    return np.asarray(v).astype(_ONNX_INT4[dt]) if dt in _ONNX_INT4 else np.asarray(v)


def unpack_spec_bits(packed: np.ndarray, nbits: int, count: int) -> np.ndarray:
    """The iOS16 layout read bit by bit, as its MIL docstring describes it."""
    out = np.zeros(count, np.int64)
    for k in range(count):
        for j in range(nbits):
            pos = k * nbits + j
            out[k] |= ((int(packed[pos // 8]) >> (pos % 8)) & 1) << j
    return out


def _pack(values: np.ndarray, nbits: int) -> np.ndarray:
    """Inverse of unpack_spec_bits (to build inputs); padding bits are 0."""
    out = np.zeros(-(-len(values) * nbits // 8), np.uint8)
    for k, v in enumerate(values):
        for j in range(nbits):
            pos = k * nbits + j
            out[pos // 8] |= ((int(v) >> j) & 1) << (pos % 8)
    return out


def _expand_nodes(src: str, dst: str, small: tuple[int, ...], full: tuple[int, ...], tag: str):
    """ONNX nodes repeating each element of ``src`` (shape ``small``) over its block to ``full``."""
    nodes, inits, cur, shape = [], {}, src, list(small)
    for ax, (m, n) in enumerate(zip(small, full)):
        if m == n:
            continue
        r = n // m
        inits[f"{tag}{ax}_u"] = np.array([ax + 1])
        inits[f"{tag}{ax}_e"] = np.array(shape[: ax + 1] + [r] + shape[ax + 1:])
        shape[ax] = n
        inits[f"{tag}{ax}_r"] = np.array(shape)
        nodes += [helper.make_node("Unsqueeze", [cur, f"{tag}{ax}_u"], [f"{tag}{ax}_a"]),
                  helper.make_node("Expand", [f"{tag}{ax}_a", f"{tag}{ax}_e"], [f"{tag}{ax}_b"]),
                  helper.make_node("Reshape", [f"{tag}{ax}_b", f"{tag}{ax}_r"], [f"{tag}{ax}_c"])]
        cur = f"{tag}{ax}_c"
    nodes.append(helper.make_node("Identity", [cur], [dst]))
    return nodes, inits


# ---------------------------------------------------------------------------------------------
# quantize / dequantize / constexpr_affine_dequantize / constexpr_cast


def _qlinear(kind: str, x: np.ndarray, scale: np.ndarray, zp: np.ndarray | None, axis: int | None,
             out_dtype=None) -> np.ndarray:
    inits = {"s": scale}
    names = ["x", "s"]
    if zp is not None:
        inits["zp"] = zp
        names.append("zp")
    elif kind == "QuantizeLinear":
        inits["zp"] = np.zeros(scale.shape, out_dtype)
        names.append("zp")
    attrs = {} if axis is None else {"axis": axis}
    node = helper.make_node(kind, names, ["y"], **attrs)
    return run_onnx([node], {"x": x}, ["y"], inits)[0]


QUANT_CASES = [  # (input dtype, scale dtype, output dtype, per axis, with zero point)
    ("float32", "float32", "int8", None, True), ("float32", "float32", "uint8", 1, True),
    ("float32", "float32", "int8", -1, False), ("float16", "float16", "uint8", 0, True),
    ("float16", "float16", "int8", None, False),
]


@pytest.mark.parametrize("xdt,sdt,qdt,axis,with_zp", QUANT_CASES)
def test_quantize_vs_onnxruntime(xdt: str, sdt: str, qdt: str, axis: int | None, with_zp: bool):
    rng = np.random.default_rng(QUANT_CASES.index((xdt, sdt, qdt, axis, with_zp)))
    x = (rng.standard_normal((3, 4, 5)) * 40).astype(xdt)
    # saturation and round-half-even; onnxruntime's fp16 kernel maps +-inf to 0, so fp16 saturates at +-65504
    big = np.inf if xdt == "float32" else 65504.0
    x.flat[:10] = [big, -big, -0.0, 0.0, 2.5, -2.5, 0.5, 1.5, 1e4, -1e4]
    n = None if axis is None else x.shape[axis]
    scale = (2.0 ** rng.integers(-2, 2, n)).astype(sdt) if n else np.asarray(0.5, sdt)  # exact divisions
    lo, hi = np.iinfo(qdt).min, np.iinfo(qdt).max
    zp = rng.integers(lo, hi, n).astype(qdt) if n else np.asarray(rng.integers(lo, hi), qdt)
    params = {"scale": scale, "output_dtype": qdt}
    if axis is not None:
        params["axis"] = np.int32(axis)
    if with_zp:
        params["zero_point"] = zp
    got = run_op("quantize", {"input": x}, params, opset="iOS17")[0]
    want = _qlinear("QuantizeLinear", x, scale, zp if with_zp else None, axis, qdt)
    assert_close(got, want, what=f"quantize {xdt}->{qdt}")


DEQUANT_CASES = [("int8", "float32", None, True), ("uint8", "float32", 1, True), ("int8", "float16", 0, True),
                 ("uint8", "float16", None, False), ("int8", "float32", -1, False)]


@pytest.mark.parametrize("qdt,sdt,axis,with_zp", DEQUANT_CASES)
def test_dequantize_vs_onnxruntime(qdt: str, sdt: str, axis: int | None, with_zp: bool):
    rng = np.random.default_rng(DEQUANT_CASES.index((qdt, sdt, axis, with_zp)))
    lo, hi = np.iinfo(qdt).min, np.iinfo(qdt).max
    x = rng.integers(lo, hi + 1, (4, 3, 2)).astype(qdt)
    x.flat[:2] = [lo, hi]
    n = None if axis is None else x.shape[axis]
    scale = rng.random(n).astype(sdt) * 3 if n else np.asarray(0.37, sdt)
    zp = rng.integers(lo, hi + 1, n).astype(qdt) if n else np.asarray(hi, qdt)
    params = {"scale": scale}
    if axis is not None:
        params["axis"] = np.int32(axis)
    if with_zp:
        params["zero_point"] = zp
    got = run_op("dequantize", {"input": x}, params, opset="iOS17")[0]
    want = _qlinear("DequantizeLinear", x, scale, zp if with_zp else None, axis)
    assert got.dtype == want.dtype
    assert_close(got, want, rtol=1e-6, atol=0, what=f"dequantize {qdt}->{sdt}")


AFFINE_CASES = [("uint8", "uint8", "float32", 1, True), ("int8", "int8", "float16", 0, True),
                ("int8", "int8", "float32", 2, False), ("uint8", "float32", "float16", -1, True),
                ("int8", "float32", "float32", 0, False)]


@pytest.mark.parametrize("qdt,zdt,sdt,axis,vector", AFFINE_CASES)
def test_constexpr_affine_dequantize_vs_onnxruntime(qdt: str, zdt: str, sdt: str, axis: int, vector: bool):
    rng = np.random.default_rng(AFFINE_CASES.index((qdt, zdt, sdt, axis, vector)))
    info = np.iinfo(qdt)
    data = rng.integers(info.min, info.max + 1, (3, 4, 2)).astype(qdt)
    n = data.shape[axis] if vector else None
    scale = (rng.random(n) * 2).astype(sdt) if vector else np.asarray(0.7, sdt)
    if zdt == "float32":
        zp = (rng.standard_normal(n) * 10).astype(zdt) if vector else np.asarray(-3.5, zdt)
    else:
        zp = rng.integers(info.min, info.max + 1, n).astype(zdt) if vector else np.asarray(5, zdt)
    got = _run("constexpr_affine_dequantize", "iOS16", quantized_data=data, zero_point=zp, scale=scale,
               axis=np.int32(axis))[0]
    if zdt == "float32":  # DequantizeLinear needs an integer zero point of the data's dtype
        ax = axis % data.ndim
        shape = [1] * data.ndim
        if vector:
            shape[ax] = n
        nodes = [helper.make_node("Cast", ["x"], ["xf"], to=1), helper.make_node("Reshape", ["zp", "shp"], ["zpr"]),
                 helper.make_node("Reshape", ["s", "shp"], ["sr"]), helper.make_node("Cast", ["sr"], ["sf"], to=1),
                 helper.make_node("Sub", ["xf", "zpr"], ["d"]), helper.make_node("Mul", ["d", "sf"], ["yf"]),
                 helper.make_node("Cast", ["yf"], ["y"], to=helper.np_dtype_to_tensor_dtype(np.dtype(sdt)))]
        want = run_onnx(nodes, {"x": data}, ["y"], {"zp": zp, "s": scale, "shp": np.array(shape)})[0]
    else:
        want = _qlinear("DequantizeLinear", data, scale, zp, axis if vector else None)
    assert got.dtype == want.dtype
    assert_close(got, want, rtol=1e-6, atol=0, what="constexpr_affine_dequantize")


@pytest.mark.parametrize("opset", ["iOS16", "iOS18"])
def test_constexpr_cast_vs_onnxruntime(opset: str):
    rng = np.random.default_rng(1)
    src = rng.standard_normal((4, 5)).astype(np.float16)
    src.flat[:7] = [np.nan, np.inf, -np.inf, -0.0, 6e-8, 65504, -65504]  # subnormal and extremes
    got = _run("constexpr_cast", opset, source_val=src, output_dtype="fp32")[0]
    want = run_onnx([helper.make_node("Cast", ["x"], ["y"], to=1)], {}, ["y"], {"x": src})[0]
    assert_close(got, want, rtol=0, atol=0, what="constexpr_cast")
    assert np.signbit(got.flat[3])


# ---------------------------------------------------------------------------------------------
# LUT


@pytest.mark.parametrize("nbits", [1, 2, 4, 6, 8])
@pytest.mark.parametrize("ldt", ["float32", "float16", "int8", "uint8"])
def test_constexpr_lut_to_dense_ios16_vs_onnxruntime(nbits: int, ldt: str):
    rng = np.random.default_rng(nbits)
    shape = (3, 7)  # 21 indices: the last byte is partial for every nbits but 8
    idx = rng.integers(0, 1 << nbits, shape[0] * shape[1])
    lut = (rng.standard_normal(1 << nbits) * 50).astype(ldt)
    packed = _pack(idx, nbits)
    got = _run("constexpr_lut_to_dense", "iOS16", indices=packed, lut=lut, shape=np.array(shape, np.uint32))[0]
    flat = unpack_spec_bits(packed, nbits, idx.size)
    want = run_onnx([helper.make_node("Gather", ["lut", "i"], ["y"], axis=0)], {}, ["y"],
                    {"lut": lut, "i": flat.reshape(shape)})[0]
    assert_close(got, want, rtol=0, atol=0, what=f"lut iOS16 {nbits} bits")


def test_constexpr_lut_to_dense_ios16_spec_example():
    """The MIL docstring's worked example: 2-bit indices [0, 3, 2, 1, 3] in bytes 0b01101100, 0b11."""
    packed = np.array([0b01101100, 0b00000011], np.uint8)
    assert list(unpack_spec_bits(packed, 2, 5)) == [0, 3, 2, 1, 3]
    got = _run("constexpr_lut_to_dense", "iOS16", indices=packed, lut=np.array([10, 20, 30, 40], np.float32),
               shape=np.array([5], np.uint32))[0]
    assert_close(got, np.array([10, 40, 30, 20, 40], np.float32), what="lut spec example")


def _onnx_lut(indices: np.ndarray, lut: np.ndarray, vector_axis: int | None) -> np.ndarray:
    """onnxruntime GatherND of (block coordinates..., index) per element, vectors laid on vector_axis."""
    k = indices.ndim
    coords = np.indices(indices.shape)
    block = [coords[i] // (indices.shape[i] // lut.shape[i]) for i in range(k)]
    gather_idx = np.stack(block + [indices.astype(np.int64)], axis=-1)
    nodes = [helper.make_node("GatherND", ["lut", "gi"], ["v"])]  # indices.shape + (VECTOR_SIZE,)
    vs = lut.shape[-1]
    if vs == 1:
        nodes.append(helper.make_node("Squeeze", ["v", "last"], ["y"]))
        inits = {"last": np.array([-1])}
    else:
        ax = vector_axis % k
        perm = list(range(ax + 1)) + [k] + list(range(ax + 1, k))
        out_shape = list(indices.shape)
        out_shape[ax] *= vs
        nodes += [helper.make_node("Transpose", ["v"], ["t"], perm=perm), helper.make_node("Reshape", ["t", "shp"], ["y"])]
        inits = {"shp": np.array(out_shape)}
    return run_onnx(nodes, {}, ["y"], {"lut": lut, "gi": gather_idx, **inits})[0]


LUT18_CASES = [  # indices shape, index dtype, lut block shape, VECTOR_SIZE, vector_axis
    ((6, 2), "uint2", (2, 1), 1, None), ((4, 8), "uint1", (1, 1), 1, None), ((4, 6), "uint3", (4, 3), 1, None),
    ((2, 2, 2), "uint1", (1, 1, 1), 3, 1), ((2, 2, 2), "uint4", (1, 1, 2), 3, -1), ((3, 4), "uint6", (3, 1), 2, 0),
    ((2, 3), "uint8", (1, 3), 4, 1),
]


@pytest.mark.parametrize("shape,idt,blocks,vs,vector_axis", LUT18_CASES)
@pytest.mark.parametrize("ldt", ["float16", "int8"])
def test_constexpr_lut_to_dense_ios18_vs_onnxruntime(shape, idt: str, blocks, vs: int, vector_axis, ldt: str):
    rng = np.random.default_rng(LUT18_CASES.index((shape, idt, blocks, vs, vector_axis)))
    bits = int(idt[4:])
    indices = rng.integers(0, 1 << bits, shape).astype(np.uint8)
    lut = (rng.standard_normal(blocks + (1 << bits, vs)) * 20).astype(ldt)
    params = {"indices": (indices, idt), "lut": lut}
    if vector_axis is not None:
        params["vector_axis"] = np.int32(vector_axis)
    got = _run("constexpr_lut_to_dense", "iOS18", **params)[0]
    assert_close(got, _onnx_lut(indices, lut, vector_axis), rtol=0, atol=0, what="lut iOS18")


def test_constexpr_lut_to_dense_ios18_doc_example():
    """The MIL docstring's case 1: two 2-bit tables over the rows."""
    indices = np.array([2, 3, 3, 0, 1, 0, 3, 0, 2, 1, 0, 3], np.uint8).reshape(6, 2)
    lut = np.array([1.0, 5.0, 9.0, 13.0, 2.0, 10.0, 18.0, 26.0], np.float16).reshape(2, 1, 4, 1)
    got = _run("constexpr_lut_to_dense", "iOS18", indices=(indices, "uint2"), lut=lut)[0]
    want = np.array([[9, 13], [13, 1], [5, 1], [26, 2], [18, 10], [2, 26]], np.float16)
    assert_close(got, want, rtol=0, atol=0, what="lut doc example")
    assert_close(got, _onnx_lut(indices, lut, None), rtol=0, atol=0, what="lut doc example vs ort")


# ---------------------------------------------------------------------------------------------
# sparse


def _onnx_scatter(mask: np.ndarray, values: np.ndarray) -> np.ndarray:
    """onnxruntime: values placed (row-major) where mask != 0, zeros elsewhere."""
    nodes = [helper.make_node("NonZero", ["m"], ["nz"]), helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
             helper.make_node("ScatterND", ["zeros", "idx", "v"], ["y"])]
    return run_onnx(nodes, {}, ["y"], {"m": mask.astype(bool), "v": values, "zeros": np.zeros(mask.shape, values.dtype)})[0]


@pytest.mark.parametrize("ddt", ["float32", "float16", "int8", "uint8"])
@pytest.mark.parametrize("shape", [(5,), (3, 7), (2, 2, 4)])
def test_constexpr_sparse_to_dense_ios16_vs_onnxruntime(ddt: str, shape):
    rng = np.random.default_rng(len(shape))
    n = int(np.prod(shape))
    bits = rng.integers(0, 2, n)
    values = (rng.standard_normal(int(bits.sum())) * 30).astype(ddt)
    mask = _pack(bits, 1)
    got = _run("constexpr_sparse_to_dense", "iOS16", nonzero_data=values, mask=mask, shape=np.array(shape, np.uint32))[0]
    want = _onnx_scatter(unpack_spec_bits(mask, 1, n).reshape(shape), values)
    assert_close(got, want, rtol=0, atol=0, what="sparse iOS16")


def test_constexpr_sparse_to_dense_ios16_spec_example():
    """The MIL docstring's example: shape (5,), mask byte 0b00001100 sets elements 2 and 3."""
    got = _run("constexpr_sparse_to_dense", "iOS16", nonzero_data=np.array([7.0, 9.0], np.float32),
               mask=np.array([0b00001100], np.uint8), shape=np.array([5], np.uint32))[0]
    assert_close(got, np.array([0, 0, 7, 9, 0], np.float32), what="sparse spec example")


@pytest.mark.parametrize("ddt", ["float32", "float16", "int8", "uint8", "int4", "uint4"])
def test_constexpr_sparse_to_dense_ios18_vs_onnxruntime(ddt: str):
    rng = np.random.default_rng(3)
    mask = rng.integers(0, 2, (3, 4, 5)).astype(np.uint8)
    n = int(mask.sum())
    if ddt in _ONNX_INT4:
        lo, hi = (-8, 8) if ddt == "int4" else (0, 16)
        values = rng.integers(lo, hi, n).astype(np.int8 if ddt == "int4" else np.uint8)
        got = _run("constexpr_sparse_to_dense", "iOS18", nonzero_data=(values, ddt), mask=(mask, "uint1"))[0]
    else:
        values = (rng.standard_normal(n) * 30).astype(ddt)
        got = _run("constexpr_sparse_to_dense", "iOS18", nonzero_data=values, mask=(mask, "uint1"))[0]
    assert_close(got, _onnx_scatter(mask, values), rtol=0, atol=0, what=f"sparse iOS18 {ddt}")


# ---------------------------------------------------------------------------------------------
# block-wise shift/scale


def _onnx_shift_scale(data: np.ndarray, ddt: str, scale: np.ndarray, offset: np.ndarray | None,
                      odt: str | None) -> np.ndarray:
    """onnxruntime DequantizeLinear when one axis is blocked and the offset is the data's integer
    dtype; otherwise an Expand/Cast/Sub/Mul graph."""
    ratios = [d // s for d, s in zip(data.shape, scale.shape)]
    partial = [i for i, (d, s) in enumerate(zip(data.shape, scale.shape)) if s != d]
    integer = ddt in ("int4", "uint4", "int8", "uint8") and (offset is None or odt == ddt)
    if integer and len(partial) <= 1:
        axis = partial[0] if partial else 0
        inits = {"x": _onnx_array(data, ddt), "s": scale}
        names = ["x", "s"]
        if offset is not None:
            inits["zp"] = _onnx_array(offset, odt)
            names.append("zp")
        node = helper.make_node("DequantizeLinear", names, ["y"], axis=axis, block_size=ratios[axis])
        return run_onnx([node], {}, ["y"], inits)[0]
    nodes, inits = _expand_nodes("s", "sf", scale.shape, data.shape, "es")
    nodes += [helper.make_node("Cast", ["x"], ["xf"], to=1), helper.make_node("Cast", ["sf"], ["sf32"], to=1)]
    inits.update({"x": data, "s": scale})
    centred = "xf"
    if offset is not None:
        more, more_inits = _expand_nodes("o", "of", offset.shape, data.shape, "eo")
        nodes += more + [helper.make_node("Cast", ["of"], ["of32"], to=1), helper.make_node("Sub", ["xf", "of32"], ["c"])]
        inits.update(more_inits, o=offset)
        centred = "c"
    nodes += [helper.make_node("Mul", [centred, "sf32"], ["yf"]),
              helper.make_node("Cast", ["yf"], ["y"], to=helper.np_dtype_to_tensor_dtype(scale.dtype))]
    return run_onnx(nodes, {}, ["y"], inits)[0]


def _draw_values(rng: np.random.Generator, dt: str, shape: tuple) -> np.ndarray:
    """Values of IR dtype ``dt`` in their storage dtype (sub-byte unpacked)."""
    ranges = {"int4": (-8, 8, np.int8), "uint4": (0, 16, np.uint8), "int8": (-128, 128, np.int8),
              "uint8": (0, 256, np.uint8)}
    if dt in ranges:
        lo, hi, st = ranges[dt]
        return rng.integers(lo, hi, shape).astype(st)
    return (rng.standard_normal(shape) * 4).astype(dt)


def _const(v: np.ndarray, dt: str):
    return (v, dt) if dt in _ONNX_INT4 else v


BLOCK_CASES = [  # data dtype, data shape, scale shape, scale dtype, offset dtype (None: no offset)
    ("int4", (4, 8), (4, 2), "float32", "int4"), ("uint4", (6, 4), (3, 4), "float16", "uint4"),
    ("int8", (4, 6), (1, 1), "float32", "int8"), ("uint8", (4, 6), (2, 3), "float16", None),
    ("uint8", (2, 3, 4), (2, 3, 1), "float32", "uint8"), ("int8", (4, 6), (2, 6), "float32", "float32"),
    ("float16", (4, 6), (4, 2), "float16", "float16"), ("float32", (3, 4), (1, 4), "float32", None),
    ("int4", (2, 8), (2, 8), "float16", None),
]


@pytest.mark.parametrize("ddt,dshape,sshape,sdt,odt", BLOCK_CASES)
def test_constexpr_blockwise_shift_scale_vs_onnxruntime(ddt: str, dshape, sshape, sdt: str, odt: str | None):
    rng = np.random.default_rng(BLOCK_CASES.index((ddt, dshape, sshape, sdt, odt)))
    data = _draw_values(rng, ddt, dshape)
    scale = (rng.random(sshape) * 2 + 0.01).astype(sdt)
    params = {"data": _const(data, ddt), "scale": scale}
    offset = None
    if odt is not None:
        offset = _draw_values(rng, odt, sshape)
        params["offset"] = _const(offset, odt)
    got = _run("constexpr_blockwise_shift_scale", "iOS18", **params)[0]
    want = _onnx_shift_scale(data, ddt, scale, offset, odt)
    assert got.dtype == want.dtype
    tol = 1e-3 if sdt == "float16" else 1e-6
    assert_close(got, want, rtol=tol, atol=tol, what="blockwise_shift_scale")


# ---------------------------------------------------------------------------------------------
# sparse + LUT / shift-scale (two outputs)


def _compress(dense: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """onnxruntime Compress: the elements of ``dense`` where ``mask`` is set, row-major."""
    nodes = [helper.make_node("Reshape", ["d", "flat"], ["df"]), helper.make_node("Reshape", ["m", "flat"], ["mf"]),
             helper.make_node("Compress", ["df", "mf"], ["y"], axis=0)]
    return run_onnx(nodes, {}, ["y"], {"d": dense, "m": mask.astype(bool), "flat": np.array([-1])})[0]


def _onnx_repeat_mask(mask: np.ndarray, vs: int, axis: int) -> np.ndarray:
    full = list(mask.shape)
    full[axis] *= vs
    nodes, inits = _expand_nodes("m", "y", mask.shape, tuple(full), "rm")
    return run_onnx(nodes, {}, ["y"], {"m": mask, **inits})[0]


LUT_SPARSE_CASES = [((4, 6), "uint1", (1, 1), 2, 0), ((4, 6), "uint2", (2, 1), 1, None),
                    ((3, 4), "uint4", (1, 2), 3, 1), ((2, 3, 2), "uint3", (1, 1, 1), 2, -1)]


@pytest.mark.parametrize("shape,idt,blocks,vs,vector_axis", LUT_SPARSE_CASES)
def test_constexpr_lut_to_sparse_vs_onnxruntime(shape, idt: str, blocks, vs: int, vector_axis):
    rng = np.random.default_rng(LUT_SPARSE_CASES.index((shape, idt, blocks, vs, vector_axis)))
    bits = int(idt[4:])
    mask = rng.integers(0, 2, shape).astype(np.uint8)
    nz = rng.integers(0, 1 << bits, int(mask.sum())).astype(np.uint8)
    lut = rng.standard_normal(blocks + (1 << bits, vs)).astype(np.float16)
    params = {"indices_mask": (mask, "uint1"), "indices_nonzero_data": (nz, idt), "lut": lut}
    if vector_axis is not None:
        params["vector_axis"] = np.int32(vector_axis)
    got_mask, got_data = _run("constexpr_lut_to_sparse", "iOS18", **params)
    dense = _onnx_lut(_onnx_scatter(mask, nz), lut, vector_axis)
    want_mask = mask if vs == 1 else _onnx_repeat_mask(mask, vs, vector_axis % mask.ndim)
    assert_close(got_mask, want_mask, what="lut_to_sparse mask")
    assert_close(got_data, _compress(dense, want_mask), rtol=0, atol=0, what="lut_to_sparse data")


def test_constexpr_lut_to_sparse_doc_example():
    """The MIL docstring's scalar example."""
    mask = np.array([[1, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 1], [0, 1, 1, 0, 1, 0], [0, 0, 0, 1, 0, 0]], np.uint8)
    nz = np.array([0, 1, 1, 0, 1, 1, 0, 0, 1], np.uint8)
    lut = np.array([2.0, 3.0], np.float16).reshape(1, 1, 2, 1)
    got_mask, got_data = _run("constexpr_lut_to_sparse", "iOS18", indices_mask=(mask, "uint1"),
                              indices_nonzero_data=(nz, "uint1"), lut=lut)
    assert_close(got_mask, mask, what="mask")
    assert_close(got_data, np.array([2, 3, 3, 2, 3, 3, 2, 2, 3], np.float16), what="data")


SPARSE_BLOCK_CASES = [("int8", (4, 4), (1, 4), "float32", "int8"), ("uint4", (4, 6), (2, 6), "float16", "uint4"),
                      ("int4", (3, 4), (3, 2), "float32", None), ("float16", (4, 4), (2, 2), "float16", "float16")]


@pytest.mark.parametrize("ddt,shape,sshape,sdt,odt", SPARSE_BLOCK_CASES)
def test_constexpr_sparse_blockwise_shift_scale_vs_onnxruntime(ddt: str, shape, sshape, sdt: str, odt: str | None):
    rng = np.random.default_rng(SPARSE_BLOCK_CASES.index((ddt, shape, sshape, sdt, odt)))
    mask = rng.integers(0, 2, shape).astype(np.uint8)
    nz = _draw_values(rng, ddt, (int(mask.sum()),))
    scale = (rng.random(sshape) + 0.1).astype(sdt)
    params = {"data_mask": (mask, "uint1"), "nonzero_data": _const(nz, ddt), "scale": scale}
    offset = None
    if odt is not None:
        offset = _draw_values(rng, odt, sshape)
        params["offset"] = _const(offset, odt)
    got_mask, got_data = _run("constexpr_sparse_blockwise_shift_scale", "iOS18", **params)
    dense = _onnx_scatter(mask, nz)
    want = _compress(_onnx_shift_scale(dense, ddt, scale, offset, odt), mask)
    assert_close(got_mask, mask, what="sparse_blockwise_shift_scale mask")
    tol = 1e-3 if sdt == "float16" else 1e-6
    assert got_data.dtype == want.dtype
    assert_close(got_data, want, rtol=tol, atol=tol, what="sparse_blockwise_shift_scale data")
