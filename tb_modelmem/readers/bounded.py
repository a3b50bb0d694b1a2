"""The one door every reader takes bytes through: regular files only, every read capped. No TF.

A reader is pointed at whatever a user has, crafted files included: a FIFO (``open`` blocks
forever), a symlink to ``/dev/zero`` (``read`` never ends, and ``stat`` says 0 bytes), a sparse
terabyte, a symlink loop, a folder named like a file, a gzip bomb. Through here each of those is
one ``InspectError`` naming the file, before anything is read:

- a local path is opened non-blocking (a FIFO cannot hold the open), symlinks resolved, and its
  descriptor must be a regular file (``fstat``, so what is checked is what is read);
- a remote one (``gs://``, ``s3://``, anything TensorBoard's filesystem layer reads) through that
  layer, with ranged reads;
- a whole-file read stops at its cap whatever ``stat`` said; ``gunzip`` stops at a cap on the bytes
  out *and* at a ratio of bytes out to bytes in that no real trace, profile or pickle reaches.

The caps are far above what real files need (a 300 MB ResNet50 checkpoint has a 30 KB index).
"""

from __future__ import annotations

import io
import os
import stat
import zlib
from typing import Any, List, Optional

MiB = 1 << 20
INDEX_LIMIT = 256 * MiB  # a tensor bundle's .index: ~100 bytes per tensor
GRAPH_LIMIT = 1024 * MiB  # .meta and saved_model.pb: graphs with their constants (protobuf's own cap is 2 GiB)
JSON_LIMIT = 8 * MiB  # config.json, keras_metadata.pb, HDF5 JSON attributes: ~2 KB a layer; decoded, up to ~25x
STATE_LIMIT = 1 * MiB  # a checkpoint folder's 'checkpoint' pointer file
GZIP_MAGIC = b"\x1f\x8b"
# gzip: past this many bytes out, at most MAX_RATIO bytes out per byte in. Real files inflate 5-25x
# (a PyTorch trace 17x, a memory snapshot 24x); deflate's own limit is ~1030x, which a bomb uses.
RATIO_FLOOR = 64 * MiB
MAX_RATIO = 200
_CHUNK = 16 * MiB


class InspectError(ValueError):
    """This path cannot be read as a model, checkpoint or trace; the message is one line for the user."""


def is_remote(path: str) -> bool:
    """Whether TensorBoard's filesystem layer, not the OS, reads ``path`` (``gs://``, ``s3://``, ...)."""
    return "://" in path


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


class Opened:
    """A regular file open for reading: its ``size`` and reads at an offset. Use it as a context manager."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: Optional[int] = None
        if is_remote(path):
            from tensorboard.compat.tensorflow_stub.io import gfile

            try:
                self._fs = gfile.get_filesystem(path)
                self.size = int(gfile.stat(path).length)
            except Exception as e:
                raise InspectError(f"{path}: cannot open ({type(e).__name__}: {str(e)[:200]})") from None
            return
        try:  # O_NONBLOCK: opening a FIFO waits for no writer; fstat then refuses it
            self._fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError as e:
            raise InspectError(f"{path}: cannot open ({e.strerror or type(e).__name__})") from None
        info = os.fstat(self._fd)
        if not stat.S_ISREG(info.st_mode):
            self.close()
            raise InspectError(f"{path}: expected a file, found {_kind(info.st_mode)}")
        self.size = info.st_size

    def read_at(self, offset: int, n: int) -> bytes:
        """At most ``n`` bytes at ``offset`` (fewer only at the end of the file)."""
        if n <= 0:
            return b""
        try:
            if self._fd is not None:
                return os.pread(self._fd, n, offset)
            data, _ = self._fs.read(self.path, True, n, {"byte_offset": offset, "opaque_offset": offset})
            return bytes(data[:n])  # TensorBoard's S3 ranges are inclusive: one byte more than asked
        except Exception as e:
            raise InspectError(f"{self.path}: cannot read ({type(e).__name__}: {str(e)[:200]})") from None

    def read_exactly(self, offset: int, n: int) -> bytes:
        """``n`` bytes at ``offset``; InspectError if the file is shorter."""
        if offset < 0 or n < 0 or offset + n > self.size:
            raise InspectError(f"{self.path}: truncated (bytes {offset:,}..{offset + n:,} are past its end)")
        data = self.read_at(offset, n)
        if len(data) != n:
            raise InspectError(f"{self.path}: truncated while being read")
        return data

    def read_all(self, limit: int, what: str) -> bytes:
        """The whole file, refused past ``limit`` bytes however big ``stat`` said it was."""
        if self.size > limit:
            raise InspectError(f"{self.path}: {what} of {self.size:,} bytes, more than the {limit:,} this tool "
                               "reads (a real one is far smaller: is this the right file?)")
        pieces: List[bytes] = []
        total = 0
        while True:
            piece = self.read_at(total, min(_CHUNK, limit + 1 - total))
            if not piece:
                return b"".join(pieces)
            pieces.append(piece)
            total += len(piece)
            if total > limit:
                raise InspectError(f"{self.path}: {what} grew past the {limit:,} bytes this tool reads while "
                                   "being read")

    def view(self, offset: int = 0, size: Optional[int] = None) -> "FileView":
        """Bytes ``offset .. offset + size`` (to the end by default) as a seekable read-only file."""
        return FileView(self, offset, self.size - offset if size is None else size)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "Opened":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def file_size(path: str) -> int:
    """Size of the regular file at ``path`` (symlinks followed); InspectError for anything else."""
    with Opened(path) as f:
        return f.size


def read_file(path: str, limit: int, what: str) -> bytes:
    """The whole of a regular file of at most ``limit`` bytes (``what`` names it in errors)."""
    with Opened(path) as f:
        return f.read_all(limit, what)


def read_range(path: str, offset: int, size: int) -> bytes:
    """``size`` bytes at ``offset`` of a regular file; InspectError if the file is shorter."""
    with Opened(path) as f:
        return f.read_exactly(offset, size)


def gunzip(data: bytes, limit: int, where: str) -> bytes:
    """A gzip file's content, refused past ``limit`` bytes out, or past MAX_RATIO bytes out per byte
    in once RATIO_FLOOR is out: a bomb costs at most that much inflating, not the whole cap."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    pieces: List[bytes] = []
    total, rest = 0, data
    try:
        while not inflater.eof:
            piece = inflater.decompress(rest, min(_CHUNK, limit + 1 - total))
            rest = inflater.unconsumed_tail
            if not piece and not rest:
                raise InspectError(f"{where}: truncated gzip file")
            pieces.append(piece)
            total += len(piece)
            if total > limit:
                raise InspectError(f"{where}: inflates past {limit:,} bytes, more than this tool reads")
            consumed = len(data) - len(rest)
            if total > RATIO_FLOOR and total > MAX_RATIO * consumed:
                raise InspectError(f"{where}: inflates past {MAX_RATIO}x its size ({consumed:,} bytes to over "
                                   f"{total:,}), which no real file does: a decompression bomb")
    except zlib.error as e:
        raise InspectError(f"{where}: not a readable gzip file ({e})") from None
    return b"".join(pieces)


def maybe_gunzip(data: bytes, limit: int, where: str) -> bytes:
    """``data`` inflated if it is gzip, else as it is, within ``limit``."""
    if data[:2] == GZIP_MAGIC:
        return gunzip(data, limit, where)
    if len(data) > limit:
        raise InspectError(f"{where}: {len(data):,} bytes, more than the {limit:,} this tool reads")
    return data


class FileView(io.RawIOBase):
    """Bytes ``offset .. offset + size`` of an ``Opened`` file as a read-only seekable file, for zipfile
    and h5py: a stored (uncompressed) zip member is such a range, read in place with no CRC pass.
    Given a path, it opens (and closes) the file itself."""

    def __init__(self, source: "Opened | str", offset: int, size: int) -> None:
        super().__init__()
        self._owned = isinstance(source, str)
        self._file = Opened(source) if isinstance(source, str) else source
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
        data = self._file.read_at(self._offset + self._pos, n) if n else b""
        buffer[:len(data)] = data
        self._pos += len(data)
        return len(data)

    def close(self) -> None:
        if not self.closed and self._owned:
            self._file.close()
        super().close()
