"""Files in the log dir that no event file names (profile sessions, PyTorch's traces, snapshots and
checkpoints), for the sources that serve them: found by listing the log dir the way TensorBoard's
profile plugin does, through TensorBoard's own filesystem layer (local paths, and gs:// or s3://
where TensorBoard can read them), at most once per reload interval, one listing shared by every
such source. Only files that listing found are ever opened, and each is read through
``readers.bounded`` (regular files only, capped at ``--modelmem_max_profile_mb``).
"""

from __future__ import annotations

import os
import posixpath
import threading
import time
from typing import List, Tuple

from tensorboard.compat.tensorflow_stub.io import gfile

from tb_modelmem.plugin.store import UnreadableError
from tb_modelmem.readers.bounded import InspectError, read_file

DEFAULT_MAX_PROFILE_BYTES = 1024 * 2**20  # --modelmem_max_profile_mb

Listing = List[Tuple[str, List[str]]]  # (directory, the file names in it)


class LogdirFiles:
    """The log dir's folders and file names (``walk``), and capped reads of the files found there."""

    def __init__(self, logdir: str, reload_seconds: float = 5.0,
                 max_bytes: int = DEFAULT_MAX_PROFILE_BYTES) -> None:
        self.logdir = logdir or ""
        self.max_bytes = max_bytes
        self._reload = max(reload_seconds, 1.0)
        self._lock = threading.Lock()
        self._listed_at = -1e9
        self._listing: Listing = []

    def walk(self) -> Listing:
        """Every folder under the log dir with its file names, re-listed at most once per reload interval."""
        with self._lock:
            if time.monotonic() - self._listed_at < self._reload:
                return self._listing
            self._listed_at = time.monotonic()
        listing: Listing = []
        if self.logdir:
            try:
                for directory, _, names in gfile.walk(self.logdir):
                    listing.append((directory, list(names)))
            except Exception:  # an unreadable log dir lists nothing; TensorBoard reports it itself
                pass
        with self._lock:  # the interval counts from the walk's end: a walk that takes longer is not made again at once
            self._listing, self._listed_at = listing, time.monotonic()
        return listing

    def run_of(self, directory: str) -> str:
        """TensorBoard's run name for a folder: its path under the log dir, "." for the log dir itself."""
        root, here = parts(self.logdir), parts(directory)
        rest = here[len(root):] if here[:len(root)] == root else here
        return "/".join(rest) or "."

    def read(self, path: str, where: str, what: str) -> bytes:
        """The whole file, or this item's error: over the cap (with the flag that lifts it), not a
        regular file (a FIFO, a device behind a symlink), unreadable."""
        try:
            return read_file(path, self.max_bytes, what)
        except InspectError as e:
            size, _ = stat(path)
            if size > self.max_bytes:
                raise UnreadableError(f"{where}: {size / 2**20:,.0f} MiB, over the {self.max_bytes / 2**20:,.0f} "
                                      f"MiB limit; start TensorBoard with --modelmem_max_profile_mb="
                                      f"{int(size / 2**20) + 1} to read it") from None
            raise UnreadableError(f"{where}: {unprefixed(str(e), path)}") from None


def stat(path: str) -> Tuple[int, float]:
    """(size, modification time); TensorBoard's filesystem layer gives no time for remote files (0)."""
    try:
        size = int(gfile.stat(path).length)
    except Exception:
        return 0, 0.0
    try:
        return size, os.path.getmtime(path)
    except OSError:
        return size, 0.0


def parts(path: str) -> List[str]:
    return [p for p in path.replace("\\", "/").split("/") if p]


def not_found(message: str) -> Exception:
    from tensorboard import errors

    return errors.NotFoundError(message)


def unprefixed(message: str, path: str) -> str:
    """A reader's message for the tab, which names the item by run and tag: the server's path dropped."""
    return message.replace(path + ": ", "").replace(path, posixpath.basename(path))
