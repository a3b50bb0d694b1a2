"""TF2 profiler sessions in the log dir, read in place: ``<run>/plugins/profile/<session>/<host>.xplane.pb``
(``keras.callbacks.TensorBoard(profile_batch=...)``, ``tf.profiler.experimental.start/stop``,
``client.trace`` of remote workers: one file per host), and ``<host>.memory_profile.json.gz``
where TF 2.3-2.10 left no xplane.

Found in the log dir's shared listing (``logdir_files``): only files that listing found are ever
opened, each through ``readers.bounded`` with a size cap; a query names a run, a session and a host.
"""

from __future__ import annotations

import collections
import dataclasses
import posixpath
from typing import Any, Dict, List, Optional, Tuple

from tb_modelmem import proto
from tb_modelmem.messages import first_line
from tb_modelmem.plugin.sources import Item, Located, Source, name_error
from tb_modelmem.plugin.sources.logdir_files import LogdirFiles, not_found, parts, stat
from tb_modelmem.plugin.sources.model_info import RUN_GRAPH, RunModel
from tb_modelmem.plugin.store import Job, UnreadableError
from tb_modelmem.readers.graph_info import GraphInfo
from tb_modelmem.readers.memory_profile import reduce_memory_profile
from tb_modelmem.readers.xspace import reduce_xspace
from tb_modelmem.schema import metadata

ORIGIN = "profile"
TAG_PREFIX = "profile/"
XPLANE, MEMORY_PROFILE = ".xplane.pb", ".memory_profile.json.gz"
PROFILE_DIR = ("plugins", "profile")
STEP_MATCH_SECONDS = 300  # a trace_export this close to a session's files says which step it covered


@dataclasses.dataclass
class ProfileLocated(Located):
    """A profile session's host, with what the run says of the step's graphs (``graph_state``)."""

    graph: Optional[Dict[str, Any]] = None


class ProfileSource(Source):
    origin = ORIGIN
    stepped = False  # a session's step is told by the time it was written, which the CLI does not read: paired alike

    def __init__(self, files: LogdirFiles, model: RunModel) -> None:
        self._files = files
        self._model = model

    def list(self, ctx: Any, experiment: str) -> List[Item]:
        """A run's sessions newest first (a session is named by its start time): the tab opens on the one the CLI
        reads."""
        items = []
        ranked: Dict[str, int] = collections.Counter()  # each run's own count
        for (run, session), hosts in sorted(self._listing().items(), reverse=True):
            item = Item(run, TAG_PREFIX + session, metadata.OPS, ORIGIN, hosts=sorted(hosts),
                        note=_note(hosts.values()), rank=ranked[run])
            ranked[run] += 1
            item.max_step = self._step(ctx, experiment, run, hosts)
            item.error = name_error(run, item.tag)
            items.append(item)
        return items

    def has_sessions(self) -> bool:
        """Whether the log dir holds any profile session (a cheap question: no step lookups)."""
        return bool(self._listing())

    def steps(self, ctx: Any, experiment: str, item: Item) -> List[Dict[str, Any]]:
        hosts = self._hosts(item)
        mtime = max((stat(p)[1] for p in hosts.values()), default=0.0)
        return [{"step": self._step(ctx, experiment, item.run, hosts), "wall_time": mtime}]

    def locate(self, ctx: Any, experiment: str, item: Item, step: Optional[int], host: Optional[str]) -> Located:
        hosts = self._hosts(item)
        host = host if host is not None else sorted(hosts)[0]
        if host not in hosts:
            raise not_found(f"no host {host!r} in {item.run}/{item.tag}; it has {', '.join(sorted(hosts))}")
        path = hosts[host]
        size, mtime = stat(path)
        trace = self._trace_tag(ctx, experiment, item.run, mtime)
        vocabulary, vocabulary_stamp = self._model.vocabulary(ctx, experiment, item.run)
        graphs, graph_stamp = (self._model.graphs(ctx, experiment, item.run, trace[0]) if trace else (None, None))
        key = (ORIGIN, path, size, mtime, vocabulary_stamp, graph_stamp)
        where = f"{item.run}/{item.tag} host {host}"

        def build(job: Job) -> Any:
            job.report(0.05, f"reading {size / 2**20:,.1f} MiB")
            data = self._files.read(path, where, "profile")
            job.report(0.3, "parsing")
            try:
                if path.endswith(MEMORY_PROFILE):
                    return reduce_memory_profile(data, vocabulary)
                space = proto.XSpace.FromString(data)
                del data
                job.report(0.6, "reducing")
                return reduce_xspace(space, graphs, vocabulary=vocabulary)
            except Exception as e:  # a truncated or foreign file: this item's error only
                raise UnreadableError(
                    f"{where}: not a readable profile ({type(e).__name__}: {first_line(e)})") from None

        return ProfileLocated(key, trace[1] if trace else None, mtime, size, build,
                              graph_state(trace[0] if trace else None, graphs, graph_stamp))

    def _listing(self) -> Dict[Tuple[str, str], Dict[str, str]]:
        """{(run, session): {host: path}} of the profile files in the log dir's listing."""
        sessions: Dict[Tuple[str, str], Dict[str, str]] = {}
        for directory, files in self._files.walk():
            profile_dir, session = posixpath.split(directory.rstrip("/"))
            if tuple(parts(profile_dir)[-2:]) != PROFILE_DIR:
                continue
            run = self._files.run_of(posixpath.dirname(posixpath.dirname(profile_dir)))
            hosts = _hosts(directory, files)
            if hosts:
                sessions[(run, session)] = hosts
        return sessions

    def _hosts(self, item: Item) -> Dict[str, str]:
        session = item.tag[len(TAG_PREFIX):]
        hosts = self._listing().get((item.run, session))
        if not hosts:
            raise not_found(f"no profile session {session!r} in run {item.run!r}")
        return hosts

    def _step(self, ctx: Any, experiment: str, run: str, hosts: Dict[str, str]) -> Optional[int]:
        mtime = max((stat(p)[1] for p in hosts.values()), default=0.0)
        trace = self._trace_tag(ctx, experiment, run, mtime)
        return trace[1] if trace else None

    def _trace_tag(self, ctx: Any, experiment: str, run: str, mtime: float) -> Optional[Tuple[str, int]]:
        """The trace_export tag written with this session (Keras writes "batch_N" as the profile stops)."""
        best = None
        for tag, step, wall_time in self._model.trace_tags(ctx, experiment, run):
            distance = abs(wall_time - mtime)
            if distance <= STEP_MATCH_SECONDS and (best is None or distance < best[0]):
                best = (distance, tag, step)
        return (best[1], best[2]) if best else None


def graph_state(tag: Optional[str], graphs: Optional[GraphInfo], stamp: Any) -> Dict[str, Any]:
    """Where a profile's op shapes and dataflow come from: ``{"tag", "source", "graphs", "note"}``,
    the note saying why there are none (output bytes are then known only where the allocator
    measured them, and ops reach a layer by their names only)."""
    read = {entry[0] for entry in stamp or ()}
    count = len(graphs.graphs) if graphs is not None else 0
    source = tag if tag in read else RUN_GRAPH if RUN_GRAPH in read else None
    note = ""
    if not count:
        where = ("no graph_run_metadata_graph tag was written with this profile" if tag is None else
                 f"the run's {tag!r} graph_run_metadata_graph holds no graph (TensorFlow's trace_export keeps only "
                 "the functions traced while it was on: Keras traced its step before profile_batch began) "
                 "and the run has no run graph")
        note = (f"{where}: output bytes are known only where the allocator recorded them, and ops are placed "
                "on layers by their names alone")
    return {"tag": tag, "source": source, "graphs": count, "note": note}


def _hosts(directory: str, files: List[str]) -> Dict[str, str]:
    """{host: file}: an xplane where there is one, else a TF 2.3-2.10 memory profile."""
    found: Dict[str, str] = {}
    for name in sorted(files, key=lambda f: f.endswith(XPLANE)):  # xplanes last: they win
        for suffix in (XPLANE, MEMORY_PROFILE):
            if name.endswith(suffix) and len(name) > len(suffix):
                found[name[:-len(suffix)]] = posixpath.join(directory, name)
    return found


def _note(paths: Any) -> str:
    kinds = {"xplane" if p.endswith(XPLANE) else "memory profile (TF 2.3-2.10)" for p in paths}
    return "TF2 profile: " + ", ".join(sorted(kinds))
