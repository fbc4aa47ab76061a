"""Weights read through a read-only mmap leave the process's resident set once written
(converter/formats/mapped.py, called by `atomic_write_segments`), and nothing else is touched.

Residency is read from /proc/self/smaps (the kernel's own account; Linux only, skipped elsewhere);
the bytes are checked against the arrays the test wrote, after the release and in the written model.
"""

from __future__ import annotations

import mmap
import sys
from pathlib import Path

import numpy as np
import pytest

import converter
from converter.formats.mapped import RELEASE_MIN_BYTES, release_mapped_pages
from converter.ir.builder import new_program
from converter.ir.types import tensor

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from memory import mapped_resident_bytes  # noqa: E402

pytestmark = pytest.mark.skipif(not Path("/proc/self/smaps").exists() or not hasattr(mmap, "MADV_DONTNEED"),
                                reason="needs /proc/self/smaps and madvise")


def _file(tmp_path: Path, data: np.ndarray) -> Path:
    path = tmp_path / "weights.bin"
    path.write_bytes(data.tobytes())
    return path


def test_a_read_view_of_a_read_only_mapping_leaves_the_resident_set_and_keeps_its_bytes(tmp_path: Path) -> None:
    data = np.random.default_rng(0).integers(0, 255, 8 << 20, dtype=np.uint8)
    path = _file(tmp_path, data)
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    whole = np.frombuffer(mm, np.uint8)
    view = whole[4096 + 3:].view(np.uint8).reshape(-1)  # an unaligned slice, as weights are
    assert int(view.sum(dtype=np.int64)) == int(data[4096 + 3:].sum(dtype=np.int64))  # reads every page
    assert mapped_resident_bytes(path) > 0.9 * data.nbytes
    assert release_mapped_pages(memoryview(view))
    assert mapped_resident_bytes(path) < 0.1 * data.nbytes
    np.testing.assert_array_equal(view, data[4096 + 3:])  # read again from the file
    del whole, view
    mm.close()


def test_heap_memory_private_mappings_and_small_buffers_are_left_alone(tmp_path: Path) -> None:
    data = np.arange(RELEASE_MIN_BYTES, dtype=np.uint8)
    heap = data.copy()
    assert not release_mapped_pages(memoryview(heap))
    np.testing.assert_array_equal(heap, data)
    path = _file(tmp_path, data)
    with open(path, "rb") as f:
        private = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    arr = np.frombuffer(private, np.uint8)
    arr[:10] = 7  # a copy-on-write change that exists only in this process
    assert not release_mapped_pages(memoryview(arr))
    assert (arr[:10] == 7).all()
    with open(path, "rb") as f:
        shared = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    small = np.frombuffer(shared, np.uint8)[: RELEASE_MIN_BYTES // 2]
    assert not release_mapped_pages(memoryview(small))
    del arr, small
    private.close()
    shared.close()


def test_a_neuralnetwork_model_written_from_a_loaded_package_holds_its_weights_one_at_a_time(tmp_path: Path) -> None:
    """Regression: writing the .mlmodel read every weight through the source's mapping and kept it
    resident (a ResNet-34's 83 MiB of weights, all at once at the end); now each is released once
    written, and the model holds the same weights."""
    rng = np.random.default_rng(1)
    w1, w2 = ((rng.standard_normal((512, 256, 4, 4)) * 0.01).astype(np.float32) for _ in range(2))

    def body(b, x):
        return [b.add(x=b.conv(x=x, weight=w1), y=b.conv(x=x, weight=w2))]

    pkg = converter.save(new_program({"x": tensor("fp32", [1, 256, 6, 6])}, body), tmp_path / "two.mlpackage")
    weight_file = next(Path(pkg).rglob("weight.bin"))
    prog = converter.load(pkg)
    out = converter.save(prog, tmp_path / "two.mlmodel", to="neuralnetwork")
    assert mapped_resident_bytes(weight_file) < 0.1 * (w1.nbytes + w2.nbytes)
    written = sorted((np.asarray(op.attributes["val"]) for op in converter.load(out).walk()
                      if op.type == "const" and np.asarray(op.attributes["val"]).size == w1.size),
                     key=lambda a: float(a.reshape(-1)[0]))
    want = sorted((w1, w2), key=lambda a: float(a.reshape(-1)[0]))
    assert len(written) == 2
    for got, w in zip(written, want):
        np.testing.assert_array_equal(got.reshape(w.shape), w)
