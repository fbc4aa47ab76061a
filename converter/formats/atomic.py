"""Atomic file and directory replacement.

Everything the converter saves is built under a temporary name in the destination's own directory
(same file system, so the final ``rename`` is atomic) and renamed into place only once it is
complete and flushed to disk. A failure at any point removes the temporary and leaves whatever was
at the destination untouched. Readers therefore see either the old file or the new one, never a
partial one.

Temporary names start with ``.`` and end with ``.tmp`` so that they are easy to recognise (and to
clean up by hand after a crash, the one case where one can be left behind). An interrupt (SIGINT,
or SIGTERM turned into an exception by the caller, as the command line does) unwinds through the
same cleanup; while a destination is being swapped, SIGINT and SIGTERM are held back and delivered
right after, so that an interrupt cannot leave the old copy renamed aside.

``overwrite=False`` publishes without replacing: a file is hard-linked into place (which fails if
the name exists), a folder is renamed (which fails over a non-empty folder), so that something
appearing at the destination after it was checked is not replaced either.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import signal
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from .mapped import release_mapped_pages

__all__ = [
    "atomic_write_bytes",
    "atomic_write_segments",
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


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back (main thread only) and deliver them when the block ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    saved: dict[int, object] = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(signum)
        if handler is None or handler == signal.SIG_IGN:  # installed outside Python, or ignored
            continue
        signal.signal(signum, lambda s, _frame: pending.append(s))
        saved[signum] = handler
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(pending):
            signal.raise_signal(signum)


def _exists_error(dest: Path) -> FileExistsError:
    return FileExistsError(errno.EEXIST, "already exists", str(dest))


def replace_path(tmp: str | os.PathLike, dest: str | os.PathLike, *, overwrite: bool = True,
                 durable: bool = True) -> None:
    """Move the finished ``tmp`` (file or directory) to ``dest``, replacing what is there.

    A file over a file is one atomic ``os.replace``. A directory cannot be renamed over a non-empty
    directory, so an existing ``dest`` is first renamed aside, then ``tmp`` is renamed into place,
    then the old one is deleted; if the second rename fails the old one is renamed back. Between
    the two renames ``dest`` briefly does not exist, but it never holds a partial result.
    ``overwrite=False``: `FileExistsError` rather than replacing anything (see the module docstring).
    ``durable``: fsync the directory after the rename, so that the new name survives a power loss
    (pointless when the data itself was not fsynced, so callers that skip that skip this too).
    """
    tmp, dest = Path(tmp), Path(dest)
    sync_dir = fsync_dir if durable else _no_sync
    with _signals_held():
        if not overwrite:
            _publish_new(tmp, dest)
            sync_dir(dest.parent)
            return
        if not tmp.is_dir() and not (dest.is_dir() and not dest.is_symlink()):
            os.replace(tmp, dest)
            sync_dir(dest.parent)
            return
        if not os.path.lexists(dest):
            os.rename(tmp, dest)
            sync_dir(dest.parent)
            return
        old = temp_name_beside(dest, "old")
        os.rename(dest, old)
        try:
            os.rename(tmp, dest)
        except BaseException:
            os.rename(old, dest)
            raise
        sync_dir(dest.parent)
        _remove(old)


def _no_sync(_dirpath: Path) -> None:
    pass


def _publish_new(tmp: Path, dest: Path) -> None:
    """Rename ``tmp`` to ``dest`` only if nothing is at ``dest`` (`FileExistsError` otherwise)."""
    if os.path.lexists(dest):
        raise _exists_error(dest)
    if tmp.is_dir():
        try:
            os.rename(tmp, dest)  # fails over anything but an empty folder
        except OSError as e:
            if e.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                raise _exists_error(dest) from None
            raise
        return
    try:
        os.link(tmp, dest)  # atomic, and never replaces
    except FileExistsError:
        raise _exists_error(dest) from None
    except OSError:  # no hard links on this file system: the check above has to do
        os.rename(tmp, dest)
        return
    os.unlink(tmp)


@contextlib.contextmanager
def _cleanup_on_error(tmp: Path) -> Iterator[None]:
    try:
        yield
    except BaseException:
        _remove(tmp)
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes | bytearray | memoryview, *,
                       durable: bool = True, overwrite: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file, rename; fsync first when ``durable``).
    ``overwrite=False``: `FileExistsError` if something is at ``path`` (nothing is replaced)."""
    return atomic_write_segments(path, (data,), durable=durable, overwrite=overwrite)


# One write() moves at most this much (Linux moves at most 0x7ffff000 bytes per call anyway).
_WRITE_CHUNK = 1 << 30


def atomic_write_segments(path: str | os.PathLike, segments: Iterable[bytes | bytearray | memoryview], *,
                          durable: bool = True, overwrite: bool = True) -> Path:
    """Write the concatenation of ``segments`` to ``path`` atomically, as `atomic_write_bytes` does,
    without joining them: each buffer is written from where it is (no copy of a large weight), and
    one read from a weight file's mapping leaves the process's resident set once written
    (`mapped.release_mapped_pages`)."""
    path = Path(path)
    fd, tmp = create_temp_beside(path)
    with _cleanup_on_error(tmp):
        try:
            for segment in segments:
                view = memoryview(segment).cast("B")
                while view:
                    view = view[os.write(fd, view[:_WRITE_CHUNK]):]
                release_mapped_pages(segment)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        replace_path(tmp, path, overwrite=overwrite, durable=durable)
    return path
