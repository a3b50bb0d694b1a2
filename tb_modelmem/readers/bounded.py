"""Reads of untrusted files for ``inspect``: regular files only, every size capped. No TF.

``inspect`` is pointed at whatever a user has, crafted files included: a FIFO (``open``
blocks forever), ``/dev/zero`` (``read`` never ends), a sparse terabyte, a symlink loop,
a folder named like a file. Every byte ``inspect`` reads goes through here, so each of
those is one ``InspectError`` naming the file, before anything is read. The caps are far
above what real files need (a 300 MB ResNet50 checkpoint has a 30 KB index).
"""

from __future__ import annotations

import io
import os
import stat
from typing import Any

MiB = 1 << 20
INDEX_LIMIT = 256 * MiB  # a tensor bundle's .index: ~100 bytes per tensor
GRAPH_LIMIT = 1024 * MiB  # .meta and saved_model.pb: graphs with their constants (protobuf's own cap is 2 GiB)
JSON_LIMIT = 8 * MiB  # config.json, keras_metadata.pb, HDF5 JSON attributes: ~2 KB a layer; decoded, up to ~25x
STATE_LIMIT = 1 * MiB  # a checkpoint folder's 'checkpoint' pointer file


class InspectError(ValueError):
    """This path cannot be read as a model or checkpoint; the message is one line for the user."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def file_size(path: str) -> int:
    """Size of the regular file at ``path`` (symlinks followed); InspectError for anything else."""
    try:
        info = os.stat(path)
    except OSError as e:
        raise InspectError(f"{path}: cannot open ({e.strerror or type(e).__name__})") from None
    if not stat.S_ISREG(info.st_mode):
        raise InspectError(f"{path}: expected a file, found {_kind(info.st_mode)}")
    return info.st_size


def read_file(path: str, limit: int, what: str) -> bytes:
    """The whole of a regular file of at most ``limit`` bytes (``what`` names it in errors)."""
    size = file_size(path)
    if size > limit:
        raise InspectError(f"{path}: {what} of {size:,} bytes, more than the {limit:,} this tool reads "
                           "(a real one is far smaller: is this the right file?)")
    try:
        with open(path, "rb") as f:
            data = f.read(size + 1)  # read(n) allocates n bytes first: the size the file has, not the cap
    except OSError as e:
        raise InspectError(f"{path}: cannot read ({e.strerror or type(e).__name__})") from None
    if len(data) > size:
        raise InspectError(f"{path}: {what} grew while being read")
    return data


def read_range(path: str, offset: int, size: int) -> bytes:
    """``size`` bytes at ``offset`` of a regular file; InspectError if the file is shorter."""
    if offset < 0 or size < 0 or offset + size > file_size(path):
        raise InspectError(f"{path}: truncated (bytes {offset:,}..{offset + size:,} are past its end)")
    with open(path, "rb") as f:
        data = os.pread(f.fileno(), size, offset)
    if len(data) != size:
        raise InspectError(f"{path}: truncated while being read")
    return data


class FileView(io.RawIOBase):
    """Bytes ``offset .. offset + size`` of a file as a read-only seekable file, for h5py:
    a stored (uncompressed) zip member is such a range, read in place with no CRC pass."""

    def __init__(self, path: str, offset: int, size: int) -> None:
        super().__init__()
        self._fd = os.open(path, os.O_RDONLY)
        self._offset, self._size, self._pos = offset, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + pos)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def readinto(self, buffer: Any) -> int:
        n = max(0, min(len(buffer), self._size - self._pos))
        data = os.pread(self._fd, n, self._offset + self._pos) if n else b""
        buffer[:len(data)] = data
        self._pos += len(data)
        return len(data)

    def close(self) -> None:
        if not self.closed:
            os.close(self._fd)
        super().close()
