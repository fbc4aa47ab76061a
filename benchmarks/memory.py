"""Peak-memory measurement shared by the benchmarks (Linux /proc; ru_maxrss elsewhere).

VmHWM is used rather than ru_maxrss because ru_maxrss survives exec: a benchmark subprocess would
report its parent's peak. ``reset_peak`` lowers VmHWM to the current RSS, so that a measurement
does not include what imports and setup used before it.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

_STATUS = Path("/proc/self/status")


def _status_mb(key: str) -> float | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def peak_mb() -> float:
    """Peak resident set of this process, in MiB."""
    got = _status_mb("VmHWM:")
    if got is not None:
        return got
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / (1024.0 * 1024.0) if sys.platform == "darwin" else r / 1024.0


def rss_mb() -> float:
    """Current resident set, in MiB (0 where /proc is missing)."""
    return _status_mb("VmRSS:") or 0.0


def mapped_resident_bytes(path: str | Path) -> int | None:
    """Bytes of ``path``'s memory mappings (a weight file read through mmap) resident in this
    process (/proc/self/smaps ``Rss``); None where smaps is missing."""
    smaps = Path("/proc/self/smaps")
    if not smaps.exists():
        return None
    target, total, inside = str(Path(path).resolve()), 0, False
    for line in smaps.read_text().splitlines():
        head = line.split(None, 5)
        if head and "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
            inside = len(head) == 6 and head[5] == target  # a mapping's first line: range perms ... path
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1]) * 1024
    return total


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where that is not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False
