"""Opening input files safely: regular files only, of bounded size.

``open()`` on a FIFO blocks until a writer appears (forever, for a FIFO nobody writes), a device
such as /dev/zero never ends, and a socket cannot be opened at all. Inputs are therefore checked
before they are read: the path's type first (a clear message for a socket, whose open fails
oddly), then the open file's own type again (the path may have changed in between; the open is
non-blocking, so a FIFO swapped in cannot block), then its size against the caller's bound.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from ..errors import FormatError
from ..limits import size_text

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words ("a FIFO (named pipe)", "a character device", ...)."""
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def open_regular(path: str | os.PathLike, *, max_bytes: int | None = None, what: str = "file",
                 field: str | None = None) -> BinaryIO:
    """``path`` opened for reading in binary mode; `FormatError` naming the file when it is not a
    regular file (after symlinks), is larger than ``max_bytes``, or cannot be opened."""
    p = Path(path)

    def error(message: str) -> FormatError:
        return FormatError(message, file=str(p), field=field)

    def check(st: os.stat_result) -> None:
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{what} is not a regular file: it is {file_kind(st.st_mode)}")
        if max_bytes is not None and st.st_size > max_bytes:
            raise error(f"{what} is {size_text(st.st_size)}; no valid one is larger than {size_text(max_bytes)}")

    try:
        check(os.stat(p))
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise error(f"cannot read {what}: {e.strerror or e}") from None
    try:
        check(os.fstat(fd))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
