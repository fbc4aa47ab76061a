"""Weight blob I/O: 20M fp32 weights through our BlobWriter/BlobReader vs plain files vs coremltools.

    python benchmarks/blob_io.py [--elements 20000000] [--repeat 3] [--dir /tmp]

Every case runs in its own subprocess so that its peak RSS is its own. Reported per case: best
wall time of ``--repeat`` runs, throughput, the growth of peak RSS over the process's state just
before the operation (the input array already exists), and the peak of traced (numpy/Python)
allocations during one extra run under tracemalloc. Reads run on a warm page cache; a read
"touches" every element (a sum), so that a lazy mmap pays for its page faults. Pages of a mapped
file count in RSS although they are page cache, not process memory: see the traced column.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory import peak_mb, reset_peak  # noqa: E402

from converter.formats.blob import BlobReader, BlobWriter  # noqa: E402


def _ct():
    try:
        from coremltools.libmilstoragepython import _BlobStorageReader, _BlobStorageWriter
    except ImportError:
        return None
    return _BlobStorageReader, _BlobStorageWriter


def _weights(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.float32)


# Each case: (setup(n, dir) -> state, op(state) -> None). setup runs before the timed region.


def _case_raw_write(n, d):
    a = _weights(n)
    return lambda: a.tofile(d / "raw.bin")


def _case_raw_read(n, d):
    return lambda: float(np.fromfile(d / "raw.bin", np.float32).sum())


def _case_copy(n, d):
    return lambda: shutil.copyfile(d / "raw.bin", d / "copy.bin")


def _ours_write(a, path, durable, blobs=1):
    with BlobWriter(path, durable=durable) as w:
        for part in np.array_split(a, blobs):
            w.write(part, "fp32")


def _case_ours_write(n, d):
    a = _weights(n)
    return lambda: _ours_write(a, d / "ours.bin", False)


def _case_ours_write_fsync(n, d):
    a = _weights(n)
    return lambda: _ours_write(a, d / "ours_fsync.bin", True)


def _case_ours_write_200(n, d):
    """200 equal-sized blobs: every one is a dedup candidate, so all are hashed and compared."""
    a = _weights(n)
    return lambda: _ours_write(a, d / "ours200.bin", False, blobs=200)


def _case_ours_write_transposed(n, d):
    a = _weights(n).reshape(-1, 1000).T  # not contiguous: written in bounded chunks
    return lambda: _ours_write(a, d / "ours_t.bin", False)


def _case_ours_read(n, d):
    def op():
        with BlobReader(d / "ours.bin") as r:
            return float(r.read(64, "fp32", n).sum())

    return op


def _case_ct_write(n, d):
    _, writer_cls = _ct()
    a = _weights(n)

    def op():
        w = writer_cls(str(d / "ct.bin"))
        w.write_float_data(a)
        del w

    return op


def _case_ct_read(n, d):
    reader_cls, _ = _ct()
    return lambda: float(reader_cls(str(d / "ct.bin")).read_float_data(64).sum())


CASES = {
    "plain write (ndarray.tofile)": (_case_raw_write, False),
    "plain read (np.fromfile)": (_case_raw_read, False),
    "plain file copy (shutil.copyfile)": (_case_copy, False),
    "ours write": (_case_ours_write, False),
    "ours write + fsync": (_case_ours_write_fsync, False),
    "ours write, 200 same-size blobs": (_case_ours_write_200, False),
    "ours write, transposed input": (_case_ours_write_transposed, False),
    "ours read (mmap view)": (_case_ours_read, False),
    "coremltools write": (_case_ct_write, True),
    "coremltools read": (_case_ct_read, True),
}




def run_case(name: str, n: int, d: Path, repeat: int) -> dict:
    setup, _needs_ct = CASES[name]
    op = setup(n, d)
    reset_peak()
    rss_before = int(peak_mb() * 1024 * 1024)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        op()
        times.append(time.perf_counter() - t)
    rss_growth = int(peak_mb() * 1024 * 1024) - rss_before
    tracemalloc.start()
    op()
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"seconds": min(times), "rss_growth": rss_growth, "traced_peak": traced}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--elements", type=int, default=20_000_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--dir", type=Path, default=None, help="where to write (default: a temporary directory)")
    p.add_argument("--case", help=argparse.SUPPRESS)  # internal: run one case in this process
    args = p.parse_args()

    if args.case:
        print(json.dumps(run_case(args.case, args.elements, args.dir, args.repeat)))
        return

    have_ct = _ct() is not None
    mb = args.elements * 4 / 1e6
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        print(f"{args.elements:,} fp32 weights ({mb:.0f} MB), best of {args.repeat}, files in {tmp}")
        print(f"{'case':36} {'seconds':>8} {'MB/s':>8} {'peak RSS +MB':>13} {'traced peak MB':>15}")
        for name, (_setup, needs_ct) in CASES.items():
            if needs_ct and not have_ct:
                print(f"{name:36} {'(coremltools not installed)':>46}")
                continue
            cmd = [sys.executable, __file__, "--case", name, "--elements", str(args.elements)]
            cmd += ["--repeat", str(args.repeat), "--dir", tmp]
            proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
            if proc.returncode:
                print(f"{name:36} FAILED\n{proc.stderr}")
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            print(
                f"{name:36} {r['seconds']:8.3f} {mb / r['seconds']:8.0f} "
                f"{r['rss_growth'] / 1e6:13.1f} {r['traced_peak'] / 1e6:15.1f}"
            )


if __name__ == "__main__":
    main()
