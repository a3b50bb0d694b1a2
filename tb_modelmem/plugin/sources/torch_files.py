"""PyTorch's own files in the log dir, read in place: profiler traces (``torch.profiler.tensorboard_trace_handler``:
``*.pt.trace.json``, ``*.pt.trace.json.gz``) and memory snapshots (``torch.cuda.memory._dump_snapshot``:
``*.pickle``, ``*.pickle.gz``) as traces; checkpoints as breakdowns: ``torch.save`` files (``*.pt``, ``*.pth``,
Lightning's ``*.ckpt``, transformers' ``pytorch_model*.bin``), ``*.safetensors`` (and a sharded set's
``.index.json``), and three kinds of folder, each one item: a Hugging Face Trainer ``checkpoint-N/``, an Accelerate
``save_state`` folder and a ``torch.distributed.checkpoint`` folder (their files are not listed again). Found in
the log dir's shared listing (``logdir_files``); only files that listing found are opened. An item's run is its
folder (``.`` for the log dir itself), its tag ``torch/<file name>`` (``torch/<folder name>/`` for a folder).

The traces of one job's ranks are one item, ``torch/ranks``, a host per rank (as a profile session's hosts:
the Hosts table side by side, each rank's ops on its own): a folder whose traces are each of another
worker (``tensorboard_trace_handler(dir, worker_name=f"rank{rank}")``, or its ``<host>_<pid>`` default),
two or more. A folder where a worker wrote several traces (windows over time) keeps an item per file.

Nothing is unpickled with a class allowed beyond an inert allowlist (``readers.safe_pickle``):
a crafted pickle is that item's error, and nothing it holds is run.
"""

from __future__ import annotations

import collections
import posixpath
from typing import Any, Dict, List, Optional, Tuple, Union

from tb_modelmem.messages import first_line
from tb_modelmem.plugin.sources import Item, Located, Source, name_error
from tb_modelmem.plugin.sources.logdir_files import LogdirFiles, not_found, stat, unprefixed
from tb_modelmem.plugin.store import Job, UnreadableError
from tb_modelmem.readers import torch_trace
from tb_modelmem.readers.bounded import InspectError, is_remote, read_file
from tb_modelmem.readers.model_file import read_path
from tb_modelmem.readers.pairing import checkpoint_folder_kind
from tb_modelmem.readers.safetensors import is_safetensors_name, read_safetensors
from tb_modelmem.readers.torch_checkpoint import is_checkpoint_name, read_torch_checkpoint
from tb_modelmem.readers.torch_snapshot import is_snapshot_name, load_snapshot, reduce_snapshot
from tb_modelmem.schema import metadata
from tb_modelmem.schema.names import natural_key, newest_first_key

ORIGIN = "torch"
TAG_PREFIX = "torch/"
RANKS_TAG = TAG_PREFIX + "ranks"
Found = Union[str, Dict[str, str]]  # a file or folder, or the ranks' traces: {worker: file}
# A trace file up to this size (and its JSON, inflated) is read as the log dir is listed, to know whether it holds
# ops: one a profile closed mid-cycle wrote, its metadata alone, is about 2.5 KB, and is listed after those that do.
SMALL_TRACE_BYTES = 64 * 1024


def _kind(name: str) -> Optional[Tuple[str, str]]:
    """(payload kind, what it is) of a PyTorch file by its name, None for any other file."""
    if torch_trace.is_trace_name(name):
        return metadata.OPS, "PyTorch profiler trace"
    if is_snapshot_name(name):
        return metadata.OPS, "PyTorch memory snapshot"
    if is_checkpoint_name(name):
        return metadata.BREAKDOWN, "PyTorch checkpoint"
    if is_safetensors_name(name):
        return metadata.BREAKDOWN, "safetensors weights"
    return None


def _paths(found: Found) -> List[str]:
    """The files ``found`` names: one, or each rank's."""
    return list(found.values()) if isinstance(found, dict) else [found]


def _is_trace(found: Found) -> bool:
    """A profiler trace, or a job's ranks' traces (what the CLI reads), not a snapshot nor a checkpoint."""
    return isinstance(found, dict) or torch_trace.is_trace_name(found)


class TorchFileSource(Source):
    origin = ORIGIN
    stepped = False

    def __init__(self, files: LogdirFiles) -> None:
        self._files = files
        self._folder_kinds: Dict[Tuple[str, str], str] = {}  # (run, tag) of a checkpoint folder -> what it is
        self._stats: Tuple[Any, Dict[str, Tuple[int, float]]] = (None, {})  # (the walk they were read in, {path: stat})
        self._no_ops: Dict[str, Tuple[int, float, bool]] = {}  # a small trace's path: (size, time, holds no ops)

    def list(self, ctx: Any, experiment: str) -> List[Item]:
        """A run's PyTorch files in the order the CLI reads them (``readers.logdir.read_run``), each kind newest
        first (``names.newest_first_key``): its traces, then those that hold no ops, then memory snapshots; its
        checkpoints. So the tab opens on the trace the CLI projects, joined with the first checkpoint that names an
        optimizer, as the CLI joins them."""
        items = []
        listing = self._listing()
        for (run, tag), path in sorted(listing.items()):
            if isinstance(path, dict):
                item = Item(run, tag, metadata.OPS, ORIGIN, max_step=0, hosts=sorted(path, key=natural_key),
                            note=f"PyTorch profiler traces of {len(path)} ranks")
            else:
                kind, note = ((metadata.BREAKDOWN, self._folder_kinds.get((run, tag), "checkpoint folder"))
                              if tag.endswith("/") else _kind(path) or (metadata.OPS, ""))
                item = Item(run, tag, kind, ORIGIN, max_step=0, note=note)
            item.error = name_error(run, tag)
            items.append(item)
        self._rank(items, listing)
        return items

    def _rank(self, items: List[Item], listing: Dict[Tuple[str, str], Found]) -> None:
        """Each item's place among its run's items of its kind (``Item.rank``): newest first, a run's traces before
        its snapshots, and the newest traces that hold no ops (read while they are small: ``_holds_no_ops``) after
        the first that holds some."""
        listed = {path for found in listing.values() for path in _paths(found)}
        self._no_ops = {path: known for path, known in list(self._no_ops.items()) if path in listed}
        groups: Dict[Tuple[str, Optional[str]], List[Item]] = collections.defaultdict(list)
        for item in sorted(items, reverse=True,
                           key=lambda i: newest_first_key(self._stat(listing[(i.run, i.tag)])[1], i.tag)):
            groups[(item.run, item.kind)].append(item)
        for group in groups.values():
            traces: List[Item] = []
            others: List[Item] = []
            for item in group:
                (traces if _is_trace(listing[(item.run, item.tag)]) else others).append(item)
            empty = 0
            for item in traces:  # the newest first, as far as the first that holds ops
                path = listing[(item.run, item.tag)]
                if isinstance(path, dict) or not self._holds_no_ops(path):
                    break
                item.note = "PyTorch profiler trace that holds no ops (its profile closed mid-cycle)"
                empty += 1
            for place, item in enumerate(traces[empty:] + traces[:empty] + others):
                item.rank = place

    def _stat(self, found: Found) -> Tuple[int, float]:
        """(size, the newest modification time) of what ``found`` names, read once per listing of the log dir."""
        walk = self._files.walk()
        if self._stats[0] is not walk:
            self._stats = (walk, {})
        paths = _paths(found)
        stats = self._stats[1]
        for path in paths:
            if path not in stats:  # a remote file has no time here (``stat``): not asked, one request saved each
                stats[path] = (0, 0.0) if is_remote(path) else stat(path)
        return sum(stats[path][0] for path in paths), max(stats[path][1] for path in paths)

    def _holds_no_ops(self, path: str) -> bool:
        """Whether the trace at ``path`` is small (``SMALL_TRACE_BYTES``, on disk and inflated) and holds no ops,
        read once per version of it. A larger one, or one that cannot be read, is taken to hold some: opened, it
        says what it holds."""
        size, mtime = self._stat(path)
        if size > SMALL_TRACE_BYTES or is_remote(path):  # a remote one is not read to list it
            return False
        known = self._no_ops.get(path)
        if known is None or known[:2] != (size, mtime):
            try:
                data = read_file(path, SMALL_TRACE_BYTES, "PyTorch trace")
                no_ops = not torch_trace.holds_ops(torch_trace.reduce_trace(torch_trace.load(data, SMALL_TRACE_BYTES)))
            except Exception:  # any failure is said when it is opened
                no_ops = False
            known = self._no_ops[path] = (size, mtime, no_ops)
        return known[2]

    def has_files(self) -> bool:
        return bool(self._listing())

    def steps(self, ctx: Any, experiment: str, item: Item) -> List[Dict[str, Any]]:
        return [{"step": 0, "wall_time": self._stat(self._found(item))[1]}]

    def locate(self, ctx: Any, experiment: str, item: Item, step: Optional[int], host: Optional[str]) -> Located:
        path, where = self._path(item, host)
        size, mtime = stat(path)

        def build(job: Job) -> Any:
            try:
                # a checkpoint: only its pickles, headers and zip directories are read (ranged reads, remote too)
                if item.tag.endswith("/"):
                    return read_path(path)
                if is_checkpoint_name(path):
                    return read_torch_checkpoint(path)
                if is_safetensors_name(path):
                    return read_safetensors(path)
                job.report(0.1, f"reading {size / 2**20:,.1f} MiB")
                if torch_trace.is_trace_name(path):
                    data = self._files.read(path, where, "PyTorch trace")
                    job.report(0.3, "parsing the trace")
                    trace = torch_trace.load(data)
                    del data
                    job.report(0.6, "placing ops and replaying the allocator")
                    return torch_trace.reduce_trace(trace)
                data = self._files.read(path, where, "memory snapshot")
                job.report(0.4, "unpickling (no class allowed)")
                snapshot = load_snapshot(data, posixpath.basename(path), self._files.max_bytes)
                del data
                job.report(0.7, "replaying the allocator")
                return reduce_snapshot(snapshot)
            except UnreadableError:
                raise
            except (InspectError, torch_trace.TraceError) as e:  # refused, truncated or foreign: this item's only
                raise UnreadableError(f"{where}: {unprefixed(first_line(e), path)}") from None
            except Exception as e:
                raise UnreadableError(f"{where}: not readable ({type(e).__name__}: {first_line(e)})") from None

        return Located((ORIGIN, path, size, mtime), 0, mtime, size, build)

    def _found(self, item: Item) -> Found:
        found = self._listing().get((item.run, item.tag))
        if found is None:
            raise not_found(f"no PyTorch file {item.tag!r} in run {item.run!r}")
        return found

    def _path(self, item: Item, host: Optional[str] = None) -> Tuple[str, str]:
        """The file of ``item`` (of the rank ``host``, else the first, for the ranks' item) and its name in errors."""
        found = self._found(item)
        if not isinstance(found, dict):
            return found, f"{item.run}/{item.tag}"
        host = host if host is not None else torch_trace.first_rank(found)
        if host not in found:
            ranks = ", ".join(sorted(found, key=natural_key))
            raise not_found(f"no rank {host!r} in {item.run}/{item.tag}; it has {ranks}")
        return found[host], f"{item.run}/{item.tag} rank {host}"

    def _listing(self) -> Dict[Tuple[str, str], Found]:
        """{(run, tag): path} of the PyTorch files and checkpoint folders in the log dir's listing, and
        {(run, ``RANKS_TAG``): {worker: path}} of a folder of one trace per rank."""
        found: Dict[Tuple[str, str], Found] = {}
        self._folder_kinds = {}  # this listing's (a folder gone since the last is gone from it)
        for directory, names in self._files.walk():
            what = checkpoint_folder_kind(names)
            if what:  # one item in its parent's run; its files are its own
                parent, folder = posixpath.split(directory.rstrip("/"))
                key = (self._files.run_of(parent), f"{TAG_PREFIX}{folder}/")
                found[key] = directory
                self._folder_kinds[key] = what
                continue
            run = self._files.run_of(directory)
            ranks = torch_trace.job_ranks([name for name in names if torch_trace.is_trace_name(name)])
            if ranks:
                found[(run, RANKS_TAG)] = {worker: posixpath.join(directory, name) for worker, name in ranks.items()}
            for name in names:
                if _kind(name) and not (ranks and torch_trace.is_trace_name(name)):
                    found[(run, TAG_PREFIX + name)] = posixpath.join(directory, name)
        return found

