"""A run's traced step and its breakdown, read straight from a log dir without TensorBoard or TF: what
``tb_modelmem.estimate`` and ``tb-modelmem estimate`` project from.

Runs are named as TensorBoard names them (the folder under the log dir: "train", "." for the log dir
itself). The step is the run's newest op trace written by tb_modelmem, else its newest profile session
(``<run>/plugins/profile/<session>/<host>.xplane.pb``: its first host, as the tab shows it first),
else its newest PyTorch profiler trace (``<run>/*.pt.trace.json[.gz]``, as ``tensorboard_trace_handler``
writes them), reduced here; the breakdown is the one ``readers.pairing`` picks, as the tab does, of the run's
breakdown summaries and the checkpoints in its folder (``torch.save``, Lightning's ``.ckpt``, ``*.safetensors``,
a Trainer, Accelerate or ``torch.distributed.checkpoint`` folder). Only the asked run's files are read.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import struct
from typing import Any, Dict, Iterator, List, Optional, Tuple

from tensorboard.compat.proto import event_pb2
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

from tb_modelmem.messages import first_line
from tb_modelmem.readers import xspace
from tb_modelmem.readers.bounded import InspectError
from tb_modelmem.readers.model_file import read_path
from tb_modelmem.readers.pairing import Candidate, checkpoint_folder_kind, choose, is_checkpoint_file
from tb_modelmem.readers.torch_trace import first_rank, holds_ops, is_trace_name, job_ranks, read_trace_file
from tb_modelmem.schema import metadata, payload
from tb_modelmem.schema.names import newest_first_key
from tb_modelmem.schema.records import Breakdown, OpTrace


@dataclasses.dataclass
class Logged:
    """A run's traced step, with where it came from, and the breakdown beside it (None if none)."""

    run: str
    trace: OpTrace
    source: str  # "<tag> step N" or "profile <session>"
    breakdown: Optional[Breakdown]
    breakdown_source: str
    unreadable: List[str] = dataclasses.field(default_factory=list)  # breakdowns passed over, each with why


@dataclasses.dataclass
class _Run:
    """What a run's folder holds that a projection reads."""

    summaries: List["_Summary"] = dataclasses.field(default_factory=list)  # tb_modelmem's
    sessions: List[str] = dataclasses.field(default_factory=list)  # profile sessions with an XSpace
    torch_traces: List[str] = dataclasses.field(default_factory=list)  # PyTorch profiler traces' paths
    checkpoints: List[str] = dataclasses.field(default_factory=list)  # checkpoints' paths: files, folders

    def traced(self) -> bool:
        return bool(self.sessions or self.torch_traces or any(s.kind == metadata.OPS for s in self.summaries))


@dataclasses.dataclass
class _Summary:
    tag: str
    kind: str
    step: int
    wall_time: float
    blob: bytes


def read_run(logdir: str, run: Optional[str] = None) -> Logged:
    """The traced step of ``run`` (None: the one run that has one). ValueError saying what is there
    when the log dir has no such run, no traced step, or several runs to choose from."""
    if os.path.isfile(logdir):
        raise ValueError(f"{logdir}: a file, not a log dir (tb-modelmem inspect reads a model or checkpoint file)")
    if not os.path.isdir(logdir):
        raise ValueError(f"{logdir}: no such log dir")
    if run is not None:
        run = os.path.normpath(run)  # "./train", "train/" name the run "train"
        if os.path.isabs(run) or run.split(os.sep)[0] == "..":
            raise ValueError(f"run {run!r}: expected a run under {logdir} (such as 'train', or '.')")
    runs = _runs(logdir, run)
    traced = sorted(name for name, found in runs.items() if found.traced())
    if run is None:
        if len(traced) != 1:
            raise ValueError(f"{logdir}: {'no run has' if not traced else 'several runs have'} a traced step"
                             + (f" ({_listed(traced)}): pick one with --run (run= from Python)" if traced else
                                " (record one with MemoryCallback(profile_steps=...) or tb_modelmem.trace)"))
        run = traced[0]
    if run not in runs or run not in traced:
        everywhere = _runs(logdir)  # only the asked run was read: list the ones that have a traced step
        with_one = sorted(name for name, found in everywhere.items() if found.traced())
        raise ValueError(f"{logdir}: run {run!r} has no traced step (runs with one: {_listed(with_one) or 'none'})")
    found = runs[run]
    summaries = found.summaries
    ops = [s for s in summaries if s.kind == metadata.OPS]
    if ops:
        newest = max(ops, key=lambda s: (s.wall_time, s.step))
        record = _decode(newest, run, OpTrace)
        trace, source, step = record, f"{newest.tag} step {newest.step}", newest.step
    elif found.sessions:
        session = max(found.sessions)
        trace, host = _reduce_session(os.path.join(logdir, run, "plugins", "profile", session))
        source, step = f"profile {session} host {host}", None
    else:
        path, trace, source = _torch_trace(found.torch_traces)
        step = None
    candidates: Dict[Candidate, Any] = {Candidate(s.tag, s.step, s.wall_time): s for s in summaries
                                        if s.kind == metadata.BREAKDOWN}
    candidates.update({Candidate(_checkpoint_tag(path), None, _mtime(path)): path for path in found.checkpoints})
    unreadable: List[str] = []

    def read(candidate: Candidate) -> Optional[Breakdown]:
        held = candidates[candidate]
        try:
            if isinstance(held, _Summary):
                return _decode(held, run, Breakdown)
            return _read_file(read_path, held)
        except ValueError as e:
            unreadable.append(str(e))
            return None

    chosen = choose(candidates, step, read, lambda record: bool(record.optimizer))
    if chosen is None:  # none, or none readable: the step alone, as the tab shows it
        return Logged(run, trace, source, None, "", unreadable)
    candidate, breakdown = chosen
    named = candidate.tag if candidate.step is None else f"{candidate.tag} step {candidate.step}"
    return Logged(run, trace, source, breakdown, named, unreadable)


def _checkpoint_tag(path: str) -> str:
    """A checkpoint's name as the answer says it, and as the tab's picker lists it (a folder's ends in "/")."""
    return os.path.basename(path) + ("/" if os.path.isdir(path) else "")


def _torch_trace(paths: List[str]) -> Tuple[str, OpTrace, str]:
    """(Path, trace, what the answer names it as) of a run's PyTorch traces: the newest that holds ops, or, where
    they are one job's ranks, the first rank's, as the tab's ``torch/ranks`` item opens on it."""
    by_name = {os.path.basename(path): path for path in paths}  # one folder's: each name once
    ranks = job_ranks(list(by_name))
    if not ranks:
        path, trace = _first_read(paths, read_trace_file, holds_ops)
        return path, trace, os.path.basename(path)
    worker = first_rank(ranks)
    path = by_name[ranks[worker]]
    return path, _read_file(read_trace_file, path), f"{ranks[worker]} (worker {worker}, 1 of {len(ranks)})"


def _first_read(paths: List[str], reader: Any, wanted: Any) -> Tuple[str, Any]:
    """The newest file (by its time, then its name) whose record is ``wanted``, else the newest's: a
    profiler's schedule may end with an empty trace written at exit. ValueError naming the newest file when it
    cannot be read."""
    newest_first = sorted(paths, key=lambda path: newest_first_key(_mtime(path), os.path.basename(path)),
                          reverse=True)
    first = _read_file(reader, newest_first[0])
    if wanted(first):
        return newest_first[0], first
    for path in newest_first[1:]:
        try:
            record = _read_file(reader, path)
        except ValueError:
            continue
        if wanted(record):
            return path, record
    return newest_first[0], first


def _read_file(reader: Any, path: str) -> Any:
    """``reader(path)``; ValueError naming the file when it cannot be read (refused, truncated, foreign)."""
    try:
        return reader(path)
    except InspectError as e:
        raise ValueError(first_line(e)) from None
    except Exception as e:
        raise ValueError(f"{path}: not readable ({type(e).__name__}: {first_line(e)})") from None


def _listed(names: List[str], most: int = 10) -> str:
    """Run names for a message: the first ``most``, then how many more."""
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most:,} more" if len(names) > most else "")


def _decode(summary: _Summary, run: str, kind: type) -> Any:
    """The summary's record; ValueError naming it when it cannot be read (corrupt, a future version)."""
    try:
        record = payload.decode(summary.blob)
    except Exception as e:
        raise ValueError(f"run {run!r}, {summary.tag} step {summary.step}: {first_line(e)}") from None
    if not isinstance(record, kind):
        raise ValueError(f"run {run!r}, {summary.tag} step {summary.step}: not a {kind.__name__}")
    return record


def _runs(logdir: str, only: Optional[str] = None) -> Dict[str, _Run]:
    """Run -> what its folder holds; ``only``: that run's alone."""
    found: Dict[str, _Run] = {}
    root = os.path.join(logdir, only) if only else logdir
    for folder, subfolders, files in os.walk(root):
        subfolders.sort()
        run = os.path.relpath(folder, logdir)
        if folder != root and checkpoint_folder_kind(files):  # one checkpoint of its parent's run, read whole
            found.setdefault(os.path.relpath(os.path.dirname(folder), logdir), _Run()).checkpoints.append(folder)
            subfolders.clear()
            continue
        inside = os.path.relpath(folder, os.path.join(logdir, only or "."))
        if only and run != only and inside != "plugins" and not inside.startswith("plugins" + os.sep):
            subfolders.clear()  # another run's folder
            continue
        if os.path.basename(folder) == "profile" and os.path.basename(os.path.dirname(folder)) == "plugins":
            owner = os.path.relpath(os.path.dirname(os.path.dirname(folder)), logdir)
            sessions = [s for s in subfolders if glob.glob(os.path.join(folder, s, "*.xplane.pb"))]
            found.setdefault(owner, _Run()).sessions.extend(sessions)
            continue
        for name in sorted(files):
            if is_trace_name(name):
                found.setdefault(run, _Run()).torch_traces.append(os.path.join(folder, name))
            elif is_checkpoint_file(name):
                found.setdefault(run, _Run()).checkpoints.append(os.path.join(folder, name))
        for name in sorted(f for f in files if "tfevents" in f):
            summaries = found.setdefault(run, _Run()).summaries
            for event in _events(os.path.join(folder, name)):
                for value in event.summary.value:
                    if value.metadata.plugin_data.plugin_name != metadata.PLUGIN_NAME or not value.tensor.string_val:
                        continue
                    try:
                        _, kind = metadata.parse_plugin_metadata(value.metadata.plugin_data.content)
                    except metadata.MetadataError:
                        continue
                    summaries.append(_Summary(value.tag, kind, event.step, event.wall_time,
                                              value.tensor.string_val[0]))
    return found


def _mtime(path: str) -> float:
    try:
        return os.path.getmtime(path)
    except OSError:  # gone since it was listed, a dangling link: its read says so
        return 0.0


def _events(path: str) -> Iterator[event_pb2.Event]:
    """The events of an event file, read as TensorFlow writes records (length, its masked CRC-32C, the
    data, its masked CRC-32C: checked), without TensorFlow. A record cut short (a file still being
    written) or corrupt ends the file there."""
    with open(path, "rb") as f:
        while True:
            header = f.read(12)
            if len(header) < 12:
                return
            length, header_crc = struct.unpack("<QI", header)
            if masked_crc32c(header[:8]) != header_crc:
                return
            data, footer = f.read(length), f.read(4)
            if len(data) < length or len(footer) < 4 or struct.unpack("<I", footer)[0] != masked_crc32c(data):
                return
            yield event_pb2.Event.FromString(data)


def _reduce_session(folder: str) -> Tuple[OpTrace, str]:
    """The session's first host's step, and the host; ValueError naming a file that is no profile."""
    path = sorted(glob.glob(os.path.join(folder, "*.xplane.pb")))[0]
    try:
        space = xspace.load_xspace(path)
        return xspace.reduce_xspace(space), os.path.basename(path)[:-len(".xplane.pb")]
    except Exception as e:  # a truncated or foreign file
        raise ValueError(f"{path}: not a readable profile ({type(e).__name__}: {first_line(e)})") from None
