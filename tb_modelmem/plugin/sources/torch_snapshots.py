"""PyTorch files in the log dir, read in place: profiler traces (``torch.profiler.tensorboard_trace_handler``:
``*.pt.trace.json``, ``*.pt.trace.json.gz``) and memory snapshots (``torch.cuda.memory._dump_snapshot``:
``*.pickle``, ``*.pickle.gz``) as traces, and checkpoints (``torch.save``: ``*.pt``, ``*.pth``) as
breakdowns. Found by listing the log dir with TensorBoard's ``gfile``, as profile sessions are, at
most once per reload interval; only files that listing found are opened. A file's run is its
folder (``.`` for the log dir itself), its tag ``torch/<file name>``.

Neither is unpickled with a class allowed beyond an inert allowlist (``readers.safe_pickle``):
a crafted pickle is that item's error, and nothing it holds is run.
"""

from __future__ import annotations

import posixpath
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from tensorboard.compat.tensorflow_stub.io import gfile

from tb_modelmem.messages import first_line
from tb_modelmem.plugin.sources import Item, Located, Source, name_error
from tb_modelmem.plugin.sources.profiles import DEFAULT_MAX_PROFILE_BYTES, _not_found, _relative, _stat
from tb_modelmem.plugin.store import Job, UnreadableError
from tb_modelmem.readers import torch_trace
from tb_modelmem.readers.bounded import InspectError
from tb_modelmem.readers.torch_checkpoint import is_checkpoint_name, read_torch_checkpoint
from tb_modelmem.readers.torch_snapshot import is_snapshot_name, load_snapshot, reduce_snapshot
from tb_modelmem.schema import metadata

ORIGIN = "torch"
TAG_PREFIX = "torch/"


class TorchFileSource(Source):
    origin = ORIGIN

    def __init__(self, logdir: str, reload_seconds: float = 5.0, max_bytes: int = DEFAULT_MAX_PROFILE_BYTES) -> None:
        self._logdir = logdir or ""
        self._reload = max(reload_seconds, 1.0)
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._listed_at = -1e9
        self._files: Dict[Tuple[str, str], str] = {}  # (run, tag) -> path

    def list(self, ctx: Any, experiment: str) -> List[Item]:
        items = []
        for (run, tag), path in sorted(self._listing().items()):
            kind, note = ((metadata.OPS, "PyTorch profiler trace") if torch_trace.is_trace_name(path) else
                          (metadata.OPS, "PyTorch memory snapshot") if is_snapshot_name(path) else
                          (metadata.BREAKDOWN, "PyTorch checkpoint"))
            item = Item(run, tag, kind, ORIGIN, max_step=0, note=note)
            item.error = name_error(run, tag)
            items.append(item)
        return items

    def has_files(self) -> bool:
        return bool(self._listing())

    def steps(self, ctx: Any, experiment: str, item: Item) -> List[Dict[str, Any]]:
        return [{"step": 0, "wall_time": _stat(self._path(item))[1]}]

    def locate(self, ctx: Any, experiment: str, item: Item, step: Optional[int], host: Optional[str]) -> Located:
        path = self._path(item)
        size, mtime = _stat(path)
        where = f"{item.run}/{item.tag}"

        def build(job: Job) -> Any:
            if size > self.max_bytes:
                raise UnreadableError(f"{where}: {size / 2**20:,.0f} MiB, over the {self.max_bytes / 2**20:,.0f} "
                                      "MiB limit; start TensorBoard with "
                                      f"--modelmem_max_profile_mb={int(size / 2**20) + 1}")
            try:
                if is_checkpoint_name(path):
                    return read_torch_checkpoint(path)
                job.report(0.1, f"reading {size / 2**20:,.1f} MiB")
                with gfile.GFile(path, "rb") as f:
                    data = f.read()
                if torch_trace.is_trace_name(path):
                    job.report(0.3, "parsing the trace")
                    trace = torch_trace.load(data)
                    del data
                    job.report(0.6, "placing ops and replaying the allocator")
                    return torch_trace.reduce_trace(trace)
                job.report(0.4, "unpickling (no class allowed)")
                snapshot = load_snapshot(data, posixpath.basename(path), self.max_bytes)
                del data
                job.report(0.7, "replaying the allocator")
                return reduce_snapshot(snapshot)
            except (InspectError, torch_trace.TraceError) as e:  # refused, truncated or foreign: this item's only
                raise UnreadableError(f"{where}: {first_line(e)}") from None
            except Exception as e:
                raise UnreadableError(f"{where}: not readable ({type(e).__name__}: {first_line(e)})") from None

        return Located((ORIGIN, path, size, mtime), 0, mtime, size, build)

    def _path(self, item: Item) -> str:
        path = self._listing().get((item.run, item.tag))
        if path is None:
            raise _not_found(f"no PyTorch file {item.tag!r} in run {item.run!r}")
        return path

    def _listing(self) -> Dict[Tuple[str, str], str]:
        with self._lock:
            if time.monotonic() - self._listed_at < self._reload:
                return self._files
            self._listed_at = time.monotonic()
        files: Dict[Tuple[str, str], str] = {}
        if self._logdir:
            try:
                for directory, _, names in gfile.walk(self._logdir):
                    for name in names:
                        if is_snapshot_name(name) or is_checkpoint_name(name) or torch_trace.is_trace_name(name):
                            files[(_relative(directory, self._logdir), TAG_PREFIX + name)] = \
                                posixpath.join(directory, name)
            except Exception:  # an unreadable log dir lists nothing; TensorBoard reports it itself
                pass
        with self._lock:
            self._files = files
        return files
