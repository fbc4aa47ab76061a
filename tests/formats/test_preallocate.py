"""Blocks reserved ahead of a weight file's writes (converter/formats/preallocate.py): the file
written is the same, byte for byte, whether the reservation works, is refused or is absent, and
never keeps reserved bytes past its end (also after a failed blob is rolled back)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from converter.formats import blob, preallocate
from converter.formats.blob import BlobReader, BlobWriter

ARRAYS = [np.arange(n, dtype=np.float32) * (i + 1) for i, n in enumerate([300_000, 17, 1_000_000, 4096])]


def _write(path, step):  # noqa: ANN001, ANN202
    offsets = []
    with BlobWriter(path) as w:
        w._reserve.step = step
        offsets = [w.write(a, "fp32") for a in ARRAYS]
    return offsets


def _fails(*args):  # noqa: ANN001, ANN202 - fallocate refused (EOPNOTSUPP)
    return -1


@pytest.mark.parametrize("mode", ["reserved", "refused", "absent"])
def test_the_file_is_the_same_whatever_the_reservation(tmp_path, monkeypatch, mode):
    _write(tmp_path / "plain.bin", step=1 << 20)  # reference: written with the default behaviour
    if mode == "refused":
        monkeypatch.setattr(preallocate, "_FALLOCATE", _fails)
    elif mode == "absent":
        monkeypatch.setattr(preallocate, "_FALLOCATE", None)
    offsets = _write(tmp_path / "w.bin", step=1 << 20)
    data = (tmp_path / "w.bin").read_bytes()
    assert data == (tmp_path / "plain.bin").read_bytes()
    with BlobReader(tmp_path / "w.bin") as r:
        for off, a in zip(offsets, ARRAYS):
            np.testing.assert_array_equal(r.read(off), a)
    last = ARRAYS[-1]
    assert len(data) == offsets[-1] + 64 + last.nbytes  # ends at the last data byte


@pytest.mark.skipif(preallocate._FALLOCATE is None, reason="no fallocate(2) here")
def test_blocks_are_reserved_ahead_and_trimmed_at_close(tmp_path):
    path = tmp_path / "w.bin"
    w = BlobWriter(path)
    w._reserve.step = 8 << 20
    w.write(ARRAYS[0], "fp32")
    assert os.fstat(w._fd).st_size >= 8 << 20 or not w._reserve.enabled  # reserved ahead (where supported)
    w.close()
    assert path.stat().st_size == w.size


def test_a_rolled_back_blob_leaves_no_reserved_tail(tmp_path, monkeypatch):
    path = tmp_path / "w.bin"
    real = blob._write_at

    def fail(fd, buffers, offset):  # noqa: ANN001, ANN202
        raise OSError(28, "No space left on device")

    with BlobWriter(path) as w:
        first = w.write(ARRAYS[1], "fp32")
        monkeypatch.setattr(blob, "_write_at", fail)
        with pytest.raises(OSError):
            w.write(ARRAYS[2], "fp32")
        monkeypatch.setattr(blob, "_write_at", real)
        second = w.write(ARRAYS[3], "fp32")
    with BlobReader(path) as r:
        assert [i.offset for i in r.records()] == [first, second]
    assert path.stat().st_size == second + 64 + ARRAYS[3].nbytes
