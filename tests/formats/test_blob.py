"""MIL weight blob reader/writer: real files, round trips, coremltools interop, malformed input."""

from __future__ import annotations

import gc
import mmap
import os
import shutil
import struct
import tempfile
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from converter.errors import FormatError
from converter.formats import blob
from converter.formats.blob import (
    BLOB_DTYPES,
    DTYPE_BY_CODE,
    DTYPE_BY_NAME,
    BlobReader,
    BlobWriter,
    pack_subbyte,
    unpack_subbyte,
)
from converter.ir.types import DTYPES
from tests.conftest import MODELS

WEIGHT_FILES = sorted(MODELS.rglob("weight.bin")) if MODELS.is_dir() else []


def _ct_storage():
    try:
        from coremltools.libmilstoragepython import _BlobStorageReader, _BlobStorageWriter
    except ImportError:  # pragma: no cover - coremltools is a test dependency
        pytest.skip("coremltools is not installed")
    return _BlobStorageReader, _BlobStorageWriter


# coremltools' reader/writer method suffix per dtype (bf16 and the fp8 types have none). Its fp16
# methods take and return the uint16 bit pattern.
CT_METHODS = {
    "fp32": "float",
    "fp16": "fp16",
    "uint8": "uint8",
    "int8": "int8",
    "int16": "int16",
    "uint16": "uint16",
    "int32": "int32",
    "uint32": "uint32",
    "int4": "int4",
    "uint1": "uint1",
    "uint2": "uint2",
    "uint3": "uint3",
    "uint4": "uint4",
    "uint6": "uint6",
}


def _bits(a: np.ndarray) -> np.ndarray:
    """Exact comparison form: floats as their bit patterns (NaN payloads included), C order."""
    a = np.ascontiguousarray(a, a.dtype.newbyteorder("=")).reshape(-1)
    if a.dtype.kind == "f":
        return a.view(f"u{a.dtype.itemsize}").astype(np.uint64)
    return a.astype(np.int64)


def _random(dt: blob.BlobDType, shape, rng: np.random.Generator) -> np.ndarray:
    n = int(np.prod(shape))
    if dt.is_subbyte:
        lo, hi = (-(1 << (dt.bits - 1)), 1 << (dt.bits - 1)) if dt.signed else (0, 1 << dt.bits)
        return rng.integers(lo, hi, size=shape).astype(dt.storage)
    raw = rng.integers(0, 256, size=n * dt.storage.itemsize, dtype=np.uint8)
    return raw.view(dt.storage).reshape(shape)


def _mmap_base(arr: np.ndarray):
    base = arr
    while isinstance(base, (np.ndarray, memoryview)):
        base = base.obj if isinstance(base, memoryview) else base.base
    return base


# ---------------------------------------------------------------------------------------------
# The dtype table


def test_dtype_table_matches_ir_types():
    assert sorted(DTYPE_BY_CODE) == list(range(1, 18))
    assert len(DTYPE_BY_NAME) == len(BLOB_DTYPES)
    for dt in BLOB_DTYPES:
        ir = DTYPES[dt.name]
        assert ir.bits == dt.bits, dt.name
        assert ir.storage == dt.storage.newbyteorder("="), dt.name
        assert dt.is_subbyte == ir.is_subbyte, dt.name


# ---------------------------------------------------------------------------------------------
# Every weight file in the shared models


def test_shared_weight_files_exist(shared_dir):
    assert len(WEIGHT_FILES) >= 10, f"expected the shared .mlpackage weight files under {MODELS}"


@pytest.mark.parametrize("path", WEIGHT_FILES, ids=lambda p: str(p.relative_to(MODELS)))
def test_reads_every_shared_weight_file(path: Path):
    ct_reader_cls, _ = _ct_storage()
    ct = ct_reader_cls(str(path))
    with BlobReader(path) as reader:
        records = list(reader.records())
        assert len(records) == reader.count == len(reader) > 0
        assert records[0].offset == 64 and records[0].data_offset == 128
        assert records[-1].data_offset + records[-1].nbytes == reader.size  # file ends at the last data byte
        for info in records:
            assert info.offset % 64 == 0 and info.data_offset % 64 == 0
            arr = reader.read(info.offset, expected_dtype=info.dtype.name, expected_count=info.count)
            assert arr.shape == (info.count,) and arr.dtype == info.dtype.storage
            assert not arr.flags.writeable
            assert np.shares_memory(arr, reader.buffer)  # zero copy ...
            assert isinstance(_mmap_base(arr), mmap.mmap)  # ... of the mapping itself
            expected = getattr(ct, f"read_{CT_METHODS[info.dtype.name]}_data")(info.offset)
            np.testing.assert_array_equal(_bits(arr), _bits(np.asarray(expected).view(arr.dtype)))


# ---------------------------------------------------------------------------------------------
# Bit order of packed sub-byte data


def test_subbyte_bit_order_is_lsb_first_like_coremltools(tmp_path):
    """The layout documented in blob.py, checked on coremltools' own writer output."""
    _, ct_writer_cls = _ct_storage()
    cases = [
        ("uint4", np.array([1, 2, 3, 4, 5], np.uint8), "214305", 4),
        ("uint3", np.arange(1, 8, dtype=np.uint8), "d1581f", 3),
        ("uint6", np.array([63, 1, 2], np.uint8), "7f2000", 6),
        ("uint2", np.array([1, 2, 3], np.uint8), "39", 2),
        ("uint1", np.array([1, 0, 0, 0, 0, 0, 0, 0, 1, 1], np.uint8), "0103", 6),
        ("int4", np.array([-1, 2, -8, 7, 0], np.int8), "2f7800", 4),
    ]
    for name, values, packed_hex, padding in cases:
        ct_path = tmp_path / f"{name}.ct.bin"
        ct = ct_writer_cls(str(ct_path))
        offset = getattr(ct, f"write_{CT_METHODS[name]}_data")(values)
        del ct
        data = ct_path.read_bytes()
        _, code, nbytes, data_offset, pad = struct.unpack_from("<IIQQQ", data, offset)
        assert (code, pad) == (DTYPE_BY_NAME[name].code, padding)
        assert data[data_offset : data_offset + nbytes].hex() == packed_hex, name
        assert pack_subbyte(values, DTYPE_BY_NAME[name].bits).tobytes().hex() == packed_hex, name
        ours = tmp_path / f"{name}.bin"
        with BlobWriter(ours) as w:
            assert w.write(values, name) == offset
        assert ours.read_bytes() == data, name


@pytest.mark.parametrize("bits", [1, 2, 3, 4, 6])
def test_pack_unpack_inverse(bits):
    rng = np.random.default_rng(bits)
    for n in (1, 7, 8, 9, 100, 1001):
        v = rng.integers(0, 1 << bits, n).astype(np.uint8)
        packed = pack_subbyte(v, bits)
        assert packed.size == (n * bits + 7) // 8
        np.testing.assert_array_equal(unpack_subbyte(packed, bits, n), v)
    s = np.array([-8, -1, 0, 7, 3, -5], np.int8)
    np.testing.assert_array_equal(unpack_subbyte(pack_subbyte(s, 4), 4, s.size, signed=True), s)


# ---------------------------------------------------------------------------------------------
# Round trips


def _round_trip(arrays: list[tuple[np.ndarray, str]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "weight.bin"
        with BlobWriter(path) as w:
            offsets = [w.write(a, name) for a, name in arrays]
        assert sorted(os.listdir(d)) == ["weight.bin"]
        with BlobReader(path) as r:
            assert len(r) == len(set(offsets))
            assert [i.offset for i in r.records()] == sorted(set(offsets))
            last = max(r.records(), key=lambda i: i.offset)
            assert last.data_offset + last.nbytes == r.size
            for (a, name), off in zip(arrays, offsets):
                got = r.read(off, expected_dtype=name, expected_count=a.size)
                assert got.dtype == DTYPE_BY_NAME[name].storage
                np.testing.assert_array_equal(_bits(got), _bits(a))


@st.composite
def blob_arrays(draw):
    dt = draw(st.sampled_from(BLOB_DTYPES))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=9))
    if dt.is_subbyte:
        lo, hi = (-(1 << (dt.bits - 1)), (1 << (dt.bits - 1)) - 1) if dt.signed else (0, (1 << dt.bits) - 1)
        elements = st.integers(lo, hi)
    else:
        elements = None  # any bit pattern, NaNs and infinities included
    storage = dt.storage if dt.storage.itemsize == 1 else dt.storage.newbyteorder(draw(st.sampled_from("<>")))
    a = draw(hnp.arrays(storage, shape, elements=elements))
    if a.ndim >= 2 and draw(st.booleans()):
        a = a.T  # not C-contiguous
    return a, dt.name


@settings(max_examples=60, deadline=None)
@given(st.lists(blob_arrays(), min_size=1, max_size=6))
def test_round_trip_random(arrays):
    arrays = arrays + arrays[:2]  # repeats exercise deduplication
    _round_trip(arrays)


@pytest.mark.parametrize("name", [d.name for d in BLOB_DTYPES])
def test_round_trip_small_chunks(monkeypatch, name):
    """Tiny chunks: non-contiguous, byte-swapped and sub-byte data cross many chunk boundaries."""
    monkeypatch.setattr(blob, "_CHUNK_BYTES", 64)
    monkeypatch.setattr(blob, "_SUBBYTE_CHUNK", 16)
    dt = DTYPE_BY_NAME[name]
    rng = np.random.default_rng(dt.code)
    base = _random(dt, (13, 11, 7), rng)
    arrays = [base, base.transpose(2, 0, 1), base[:, ::3, 1:], base.reshape(-1)[:1001], base[:1, :1, :1]]
    if dt.storage.itemsize > 1:
        arrays.append(base.astype(dt.storage.newbyteorder(">")))
    _round_trip([(a, name) for a in arrays])


# ---------------------------------------------------------------------------------------------
# coremltools interop


@pytest.mark.parametrize("name", list(CT_METHODS))
def test_coremltools_reads_ours_and_we_read_coremltools(tmp_path, name):
    ct_reader_cls, ct_writer_cls = _ct_storage()
    dt = DTYPE_BY_NAME[name]
    method = CT_METHODS[name]
    rng = np.random.default_rng(100 + dt.code)
    arrays = [_random(dt, (n,), rng) for n in (1, 5, 16, 17, 333)]

    def ct_form(a):  # what coremltools' writer takes and its reader returns
        return a.view(np.uint16) if name == "fp16" else a

    # ours -> coremltools
    ours = tmp_path / "ours.bin"
    with BlobWriter(ours) as w:
        offsets = [w.write(a, name) for a in arrays]
    ct = ct_reader_cls(str(ours))
    for a, off in zip(arrays, offsets):
        np.testing.assert_array_equal(getattr(ct, f"read_{method}_data")(off), ct_form(a))

    # coremltools -> ours
    theirs = tmp_path / "theirs.bin"
    ct_w = ct_writer_cls(str(theirs))
    ct_offsets = [getattr(ct_w, f"write_{method}_data")(np.ascontiguousarray(ct_form(a))) for a in arrays]
    del ct_w
    with BlobReader(theirs) as r:
        for a, off in zip(arrays, ct_offsets):
            got = r.read(off, expected_dtype=name, expected_count=a.size)
            np.testing.assert_array_equal(_bits(got), _bits(a))

    # Distinct data, so no deduplication: the two writers produce the same bytes.
    assert offsets == ct_offsets
    assert ours.read_bytes() == theirs.read_bytes()


# ---------------------------------------------------------------------------------------------
# Writer behaviour


def test_layout_and_deduplication(tmp_path):
    path = tmp_path / "weight.bin"
    a = np.arange(216, dtype=np.float32)  # 864 bytes, as in the reference notes
    with BlobWriter(path) as w:
        o1 = w.write(a, "fp32")
        o2 = w.write(a.reshape(12, 18), "fp32")  # same bytes, other shape: same blob
        o3 = w.write(a.view(np.int32), "int32")  # same bytes, other dtype: new blob
        o4 = w.write(np.array([1, 0], np.uint8), "uint4")
        o5 = w.write(np.array([1], np.uint8), "uint4")  # same packed byte, other count: new blob
        o6 = w.write(np.array([1, 0], np.uint8), "uint4")
        assert (w.count, w.deduplicated) == (4, 2)
    assert (o1, o2, o3, o4, o5, o6) == (0x40, 0x40, 0x400, 0x7C0, 0x840, 0x7C0)
    data = path.read_bytes()
    assert struct.unpack_from("<II7Q", data, 0) == (4, 2) + (0,) * 7
    assert len(data) == 0x880 + 1  # ends at the last data byte
    assert struct.unpack_from("<IIQQQ4Q", data, o5) == (0xDEADBEEF, 11, 1, 0x880, 4, 0, 0, 0, 0)


def test_hash_collision_falls_back_to_byte_comparison(tmp_path, monkeypatch):
    monkeypatch.setattr(blob, "_digest", lambda chunks: b"same")
    path = tmp_path / "weight.bin"
    middle = np.zeros(100, np.float32)
    middle[50] = 1  # same dtype, size, head and tail: only the bytes tell them apart
    with BlobWriter(path) as w:
        a = w.write(np.zeros(100, np.float32), "fp32")
        b = w.write(middle, "fp32")
        c = w.write(middle.copy(), "fp32")
    assert a != b and b == c
    with BlobReader(path) as r:
        np.testing.assert_array_equal(r.read(b), middle)


def test_writer_rejects_bad_input_without_damaging_the_file(tmp_path):
    path = tmp_path / "weight.bin"
    with BlobWriter(path) as w:
        first = w.write(np.arange(10, dtype=np.float16), "fp16")
        with pytest.raises(TypeError, match="fp32 blob data must be a float32 array"):
            w.write(np.arange(10, dtype=np.float64), "fp32")
        with pytest.raises(ValueError, match=r"uint4 values must lie in \[0, 15\], found 16"):
            w.write(np.array([1, 16], np.uint8), "uint4")
        with pytest.raises(ValueError, match=r"int4 values must lie in \[-8, 7\], found -9"):
            w.write(np.array([-9, 0], np.int8), "int4")
        with pytest.raises(ValueError, match="cannot be stored in a weight blob"):
            w.write(np.zeros(10, np.float64), "fp64")
        with pytest.raises(ValueError, match="empty blob"):
            w.write(np.zeros(0, np.float32), "fp32")
        second = w.write(np.arange(10, dtype=np.int8), "int8")
    with BlobReader(path) as r:
        assert [i.offset for i in r.records()] == [first, second]


def test_failure_mid_blob_rolls_back(tmp_path, monkeypatch):
    path = tmp_path / "weight.bin"
    real_chunks = blob._byte_chunks

    def failing(a, dt):
        for i, chunk in enumerate(real_chunks(a, dt)):
            if i == 2:
                raise RuntimeError("disk on fire")
            yield chunk

    with BlobWriter(path) as w:
        w.write(np.arange(100, dtype=np.float32), "fp32")
        monkeypatch.setattr(blob, "_CHUNK_BYTES", 64)
        monkeypatch.setattr(blob, "_byte_chunks", failing)
        with pytest.raises(RuntimeError, match="disk on fire"):
            w.write(np.arange(200, dtype=np.float32)[::-1], "fp32")
        monkeypatch.setattr(blob, "_byte_chunks", real_chunks)
        w.write(np.arange(5, 105, dtype=np.float32), "fp32")
    with BlobReader(path) as r:
        assert [i.count for i in r.records()] == [100, 100]
        np.testing.assert_array_equal(r.read(0x240), np.arange(5, 105, dtype=np.float32))


def test_writer_is_atomic(tmp_path):
    path = tmp_path / "weight.bin"
    with BlobWriter(path) as w:
        w.write(np.arange(20, dtype=np.float32), "fp32")
    before = path.read_bytes()
    with pytest.raises(RuntimeError):
        with BlobWriter(path) as w:
            w.write(np.ones(50, np.float32), "fp32")
            assert path.read_bytes() == before  # nothing published until close
            raise RuntimeError("interrupted")
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["weight.bin"]

    w = BlobWriter(tmp_path / "aborted.bin")
    w.write(np.ones(50, np.float32), "fp32")
    w.abort()
    with pytest.raises(ValueError, match="aborted"):
        w.close()
    assert os.listdir(tmp_path) == ["weight.bin"]

    w = BlobWriter(tmp_path / "other.bin")  # never closed: collected without a trace
    w.write(np.ones(50, np.float32), "fp32")
    del w
    gc.collect()
    assert os.listdir(tmp_path) == ["weight.bin"]


def test_written_file_gets_umask_permissions(tmp_path):
    umask = os.umask(0)
    os.umask(umask)
    path = tmp_path / "weight.bin"
    with BlobWriter(path) as w:
        w.write(np.ones(20, np.float32), "fp32")
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask


def test_writing_streams_without_copying_the_weights(tmp_path):
    a = np.arange(2_000_000, dtype=np.float32).reshape(1000, 2000)  # 8 MB
    for arr in (a, a.T):  # contiguous: written from its memory; transposed: in 4 MB chunks
        tracemalloc.start()
        with BlobWriter(tmp_path / "weight.bin", durable=False) as w:
            w.write(arr, "fp32")
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < (1 << 20 if arr is a else (4 << 20) + (1 << 20)), peak
        with BlobReader(tmp_path / "weight.bin") as r:
            assert np.array_equal(r.read(64), arr.reshape(-1))


# ---------------------------------------------------------------------------------------------
# Reader behaviour


def test_views_outlive_the_reader(tmp_path):
    path = tmp_path / "weight.bin"
    with BlobWriter(path) as w:
        off = w.write(np.arange(100, dtype=np.float32), "fp32")
        off4 = w.write(np.arange(16, dtype=np.uint8) % 16, "uint4")
    r = BlobReader(path)
    view = r.read(off)
    unpacked = r.read(off4)
    assert not np.shares_memory(unpacked, r.buffer)  # sub-byte data is the one copy
    buffer = r.buffer
    r.close()
    del buffer
    assert view[99] == 99.0  # the mapping lives as long as the view
    with pytest.raises(ValueError, match="closed"):
        r.read(off)


def _malformed(tmp_path: Path, patch=None, truncate: int | None = None) -> Path:
    """A valid file with fp32 blobs at 0x40 (96 elements) and 0x200 (10 elements), then patched."""
    path = tmp_path / "bad.bin"
    with BlobWriter(path) as w:
        assert w.write(np.arange(96, dtype=np.float32), "fp32") == 0x40
        assert w.write(np.arange(10, dtype=np.float32), "fp32") == 0x200
    data = bytearray(path.read_bytes())
    if patch:
        for offset, fmt, value in patch:
            struct.pack_into(fmt, data, offset, value)
    if truncate is not None:
        del data[truncate:]
    path.write_bytes(data)
    return path


# (name, patches, truncate, metadata offset read, expected message fragment)
MALFORMED = [
    ("bad sentinel", [(0x200, "<I", 0xCAFEBABE)], None, 0x200, "bad sentinel 0xCAFEBABE"),
    ("offset past end of file", None, None, 0x1000, "offset past end of file"),
    ("offset at end of file", None, None, 0x268, "offset past end of file"),
    ("offset inside header", None, None, 0, "inside the 64-byte file header"),
    ("negative offset", None, None, -64, "negative metadata offset"),
    ("misaligned offset", None, None, 0x41, "not 64-byte aligned"),
    ("size not a multiple of fp32", [(0x208, "<Q", 38)], None, 0x200, "size does not match the declared type"),
    ("sub-byte size vs padding", [(0x204, "<I", 12), (0x208, "<Q", 40), (0x218, "<Q", 9)], None, 0x200,
     "size does not match the declared type"),
    ("truncated data", None, 0x250, 0x200, "truncated file"),
    ("truncated metadata", None, 0x220, 0x200, "truncated file"),
    ("data size past end", [(0x208, "<Q", 1 << 40)], None, 0x200, "truncated file"),
    ("unknown dtype code", [(0x204, "<I", 99)], None, 0x200, "unknown dtype code 99"),
    ("dtype code zero", [(0x204, "<I", 0)], None, 0x200, "unknown dtype code 0"),
    ("data offset before metadata", [(0x210, "<Q", 0x80)], None, 0x200, "after the metadata record"),
    ("misaligned data offset", [(0x210, "<Q", 0x244)], None, 0x200, "after the metadata record"),
]


@pytest.mark.parametrize("name,patch,truncate,offset,message", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_blob(tmp_path, name, patch, truncate, offset, message):
    path = _malformed(tmp_path, patch, truncate)
    with BlobReader(path) as r, pytest.raises(FormatError, match=message) as e:
        r.read(offset)
    assert e.value.file == str(path) and e.value.offset == offset
    assert str(path) in str(e.value) and f"offset {offset}" in str(e.value)


def test_size_mismatch_with_the_declared_type(tmp_path):
    path = _malformed(tmp_path)
    with BlobReader(path) as r:
        with pytest.raises(FormatError, match="holds 10 fp32 elements .* declares 12") as e:
            r.read(0x200, expected_count=12)
        assert e.value.offset == 0x200 and str(path) in str(e.value)
        with pytest.raises(FormatError, match="blob holds fp32 data but the model declares fp16") as e:
            r.read(0x200, expected_dtype=DTYPES["fp16"])
        assert e.value.offset == 0x200 and str(path) in str(e.value)


@pytest.mark.parametrize(
    "name,patch,truncate,message",
    [
        ("bad version", [(4, "<I", 3)], None, "storage version 3"),
        ("version 1", [(4, "<I", 1)], None, "storage version 1"),
        ("count too large", [(0, "<I", 1000)], None, "declares 1000 blobs"),
        ("shorter than header", None, 40, "shorter than the 64-byte header"),
        ("empty file", None, 0, "shorter than the 64-byte header"),
    ],
)
def test_bad_header(tmp_path, name, patch, truncate, message):
    path = _malformed(tmp_path, patch, truncate)
    with pytest.raises(FormatError, match=message) as e:
        BlobReader(path)
    assert e.value.file == str(path) and e.value.offset == 0
    assert str(path) in str(e.value) and "offset 0" in str(e.value)


def test_missing_file(tmp_path):
    with pytest.raises(FormatError, match="cannot read weight file: No such file"):
        BlobReader(tmp_path / "nope.bin")


def test_records_stop_at_a_broken_chain(tmp_path):
    path = _malformed(tmp_path, [(0, "<I", 3)])  # claims a third blob that is not there
    with BlobReader(path) as r, pytest.raises(FormatError, match="offset past end of file"):
        list(r.records())


def test_shared_file_copy_detects_corruption(tmp_path):
    """A real file with its first sentinel clobbered."""
    if not WEIGHT_FILES:
        pytest.skip("no shared weight files")
    path = tmp_path / "weight.bin"
    shutil.copyfile(WEIGHT_FILES[0], path)
    with open(path, "r+b") as f:
        f.seek(64)
        f.write(b"\0\0\0\0")
    with BlobReader(path) as r, pytest.raises(FormatError, match="bad sentinel") as e:
        next(r.records())
    assert e.value.offset == 64



def test_a_failed_write_of_a_contiguous_blob_rolls_back(tmp_path, monkeypatch):
    """A contiguous blob is one pwritev from the array's memory; if it fails (a full disk), the
    partial blob is removed and the writer goes on."""
    path = tmp_path / "weight.bin"
    real = blob._write_at

    def partial_then_fail(fd, buffers, offset):
        real(fd, [buffers[0]], offset)  # the metadata got out, the data did not
        raise OSError(28, "No space left on device")

    with BlobWriter(path) as w:
        first = w.write(np.arange(100, dtype=np.float32), "fp32")
        monkeypatch.setattr(blob, "_write_at", partial_then_fail)
        with pytest.raises(OSError, match="No space left"):
            w.write(np.ones(50, np.float32), "fp32")
        monkeypatch.setattr(blob, "_write_at", real)
        second = w.write(np.full(30, 2, np.float32), "fp32")
    with BlobReader(path) as r:
        assert [i.offset for i in r.records()] == [first, second]
        np.testing.assert_array_equal(r.read(second), np.full(30, 2, np.float32))
