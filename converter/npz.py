"""Reading named input arrays from an ``.npz`` file (``numpy.savez``), with errors naming the file."""

from __future__ import annotations

import io
import zipfile
import zlib

import numpy as np

from .errors import FormatError

_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")  # a zip archive (.npz): first member, or empty


def read_arrays(path: str) -> dict[str, np.ndarray]:
    """{name: array} from an .npz file (no pickles); `FormatError` naming the file for anything else."""

    def error(message: str, field: str | None = None) -> FormatError:
        return FormatError(message, file=path, field=field)

    hint = "save the inputs with numpy.savez(path, name=array, ...), one array per model input"
    bad = (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error)
    try:
        with open(path, "rb") as f:
            src = f if f.seekable() else io.BytesIO(f.read())  # a pipe: read once
            magic = src.read(6)
            src.seek(0)
            if magic.startswith(_NPY_MAGIC):
                raise error(f"a single .npy array, not an .npz file of named inputs: {hint}")
            if not magic.startswith(_ZIP_MAGICS):
                raise error(f"not an .npz file (not a zip archive): {hint}")
            try:
                data = np.load(src, allow_pickle=False)
            except bad as e:
                raise error(f"not a readable .npz file: {e}") from None
            if not isinstance(data, np.lib.npyio.NpzFile):  # pragma: no cover - the magic was checked
                raise error(f"not an .npz file: {hint}")
            with data:
                feeds = {}
                for k in data.files:
                    try:
                        feeds[k] = data[k]
                    except bad as e:
                        raise error(f"cannot read array '{k}': {e}", field=k) from None
    except OSError as e:
        raise error(f"cannot read: {e.strerror or e}") from None
    return feeds
