"""Atomic file and directory replacement.

Everything the converter saves is built under a temporary name in the destination's own directory
(same file system, so the final ``rename`` is atomic) and renamed into place only once it is
complete and flushed to disk. A failure at any point removes the temporary and leaves whatever was
at the destination untouched. Readers therefore see either the old file or the new one, never a
partial one.

Temporary names start with ``.`` and end with ``.tmp`` so that they are easy to recognise (and to
clean up by hand after a crash, the one case where one can be left behind).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "atomic_write_bytes",
    "create_temp_beside",
    "fsync_dir",
    "fsync_tree",
    "replace_path",
    "temp_name_beside",
]


def temp_name_beside(path: str | os.PathLike, tag: str = "tmp") -> Path:
    """A fresh, unused-looking name in the same directory as ``path`` (nothing is created)."""
    path = Path(path)
    return path.with_name(f".{path.name}.{secrets.token_hex(6)}.{tag}")


def create_temp_beside(path: str | os.PathLike) -> tuple[int, Path]:
    """Create an empty temporary file beside ``path``; return its (read-write fd, path).

    ``O_EXCL`` makes the creation race-free, and mode 0o666 lets the process umask decide the final
    permissions, as for a file opened normally (``mkstemp`` would force 0o600 on the result).
    """
    for _ in range(100):
        tmp = temp_name_beside(path)
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        except FileExistsError:  # pragma: no cover - 48 random bits
            continue
        return fd, tmp
    raise FileExistsError(f"could not create a temporary file beside {path}")  # pragma: no cover


def fsync_dir(path: str | os.PathLike) -> None:
    """Flush a directory entry change (a rename) to disk; a no-op where directories cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # pragma: no cover - Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some file systems refuse fsync on directories
        pass
    finally:
        os.close(fd)


def fsync_tree(root: str | os.PathLike) -> None:
    """fsync every regular file and directory under ``root`` (symlinks are not followed)."""
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            p = os.path.join(dirpath, name)
            if os.path.islink(p):
                continue
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(dirpath)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def replace_path(tmp: str | os.PathLike, dest: str | os.PathLike) -> None:
    """Move the finished ``tmp`` (file or directory) to ``dest``, replacing what is there.

    A file over a file is one atomic ``os.replace``. A directory cannot be renamed over a non-empty
    directory, so an existing ``dest`` is first renamed aside, then ``tmp`` is renamed into place,
    then the old one is deleted; if the second rename fails the old one is renamed back. Between
    the two renames ``dest`` briefly does not exist, but it never holds a partial result.
    """
    tmp, dest = Path(tmp), Path(dest)
    if not tmp.is_dir() and not (dest.is_dir() and not dest.is_symlink()):
        os.replace(tmp, dest)
        fsync_dir(dest.parent)
        return
    if not os.path.lexists(dest):
        os.rename(tmp, dest)
        fsync_dir(dest.parent)
        return
    old = temp_name_beside(dest, "old")
    os.rename(dest, old)
    try:
        os.rename(tmp, dest)
    except BaseException:
        os.rename(old, dest)
        raise
    fsync_dir(dest.parent)
    _remove(old)


@contextlib.contextmanager
def _cleanup_on_error(tmp: Path) -> Iterator[None]:
    try:
        yield
    except BaseException:
        _remove(tmp)
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes | bytearray | memoryview, *,
                       durable: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file, rename; fsync first when ``durable``)."""
    path = Path(path)
    fd, tmp = create_temp_beside(path)
    with _cleanup_on_error(tmp):
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        replace_path(tmp, path)
    return path
