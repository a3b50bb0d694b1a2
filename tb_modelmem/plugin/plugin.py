"""ModelMemPlugin: the "Model Memory" tab's HTTP routes.

Every response goes through ``http_util.Respond``; request problems raise
``tensorboard.errors`` (TensorBoard turns them into 4xx text responses); an item still
being reduced answers 202 with its progress. Data comes from the sources in
``plugin.sources`` (TensorBoard's data provider, and profile files found by listing the
log dir); no path from a query or a summary is ever opened.
"""

from __future__ import annotations

import gzip
import json
import os
import time
from typing import Any, Callable, Dict, Hashable, List, Optional, Tuple, cast

import orjson
from tensorboard import errors, plugin_util
from tensorboard.backend import http_util, json_util
from tensorboard.plugins import base_plugin
from werkzeug import wrappers

from tb_modelmem.gc_paused import paused_gc
from tb_modelmem.plugin.sources import LISTING_SECONDS, MAX_NAME, Item, Located, Source
from tb_modelmem.plugin.sources.logdir_files import DEFAULT_MAX_PROFILE_BYTES, LogdirFiles
from tb_modelmem.plugin.sources.model_info import RunModel
from tb_modelmem.plugin.sources.profiles import ProfileLocated, ProfileSource
from tb_modelmem.plugin.sources.run_metadata import PLUGINS as RUN_METADATA_PLUGINS
from tb_modelmem.plugin.sources.run_metadata import RunMetadataSource
from tb_modelmem.plugin.sources.summaries import SummarySource
from tb_modelmem.plugin.sources.torch_files import TorchFileSource
from tb_modelmem.plugin.store import DEFAULT_CACHE_BYTES, Pending, Store, UnreadableError
from tb_modelmem.plugin.views import pager
from tb_modelmem.plugin.views.breakdown import VARIABLE_FIELDS, BreakdownView, loadbench_view
from tb_modelmem.plugin.views.trace import OP_FIELDS, TraceView
from tb_modelmem.plugin.views.whatif import whatif_view
from tb_modelmem.readers.pairing import Candidate, choose
from tb_modelmem.rules import growth
from tb_modelmem.rules.projection import MOST_ASKED, WhatIf, parse_size
from tb_modelmem.schema import metadata
from tb_modelmem.schema.names import COLLECTIVE
from tb_modelmem.schema.records import Breakdown, OpTrace

# werkzeug's Request.application, as TensorBoard's own plugins use it on methods (its types
# describe a plain function taking the request, so mypy is told what it returns here).
_route = cast(Callable[[Callable[..., wrappers.Response]], Callable[..., Any]], wrappers.Request.application)

_STATIC_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "static")
_STATIC_FILES = {"index.js": "text/javascript"}  # the only files ever served from disk
# A run's items of one kind, source by source, as the CLI prefers them (``readers.logdir.read_run``): tb_modelmem's
# own summaries, then profile sessions, then PyTorch's files (each source's preferred first: ``Item.rank``); TF1
# RunMetadata, which the CLI does not read, last. The tab opens on the first.
PRECEDENCE = (SummarySource.origin, ProfileSource.origin, TorchFileSource.origin, RunMetadataSource.origin)
_PLACE = {origin: place for place, origin in enumerate(PRECEDENCE)}  # a source not in it sorts last


class ModelMemPlugin(base_plugin.TBPlugin):
    """Weights vs optimizer slots, per-op memory and time, load cost by save format."""

    plugin_name = metadata.PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext, cache_bytes: int = DEFAULT_CACHE_BYTES,
                 max_profile_bytes: int = DEFAULT_MAX_PROFILE_BYTES) -> None:
        flags = getattr(context, "flags", None)
        reload_seconds = float(getattr(flags, "reload_interval", 5) or 5)
        model = RunModel(context.data_provider)
        files = LogdirFiles(context.logdir or "", reload_seconds, max_profile_bytes)
        self._profiles = ProfileSource(files, model)
        self._torch = TorchFileSource(files)
        self._sources: List[Source] = [
            SummarySource(context.data_provider),
            RunMetadataSource(context.data_provider, model),
            self._profiles,
            self._torch,
        ]
        self.store = Store(cache_bytes)
        self._listing: Dict[str, Tuple[float, List[Tuple[Source, Item]]]] = {}
        self._listed: Dict[Tuple[str, str], List[Item]] = {}  # (experiment, source origin) -> its last items

    def get_plugin_apps(self) -> Dict[str, Callable]:
        return {
            "/index.js": self._serve_static,
            "/runs": self._serve_runs,
            "/steps": self._serve_steps,
            "/breakdown": self._serve_breakdown,
            "/variables": self._serve_variables,
            "/ops": self._serve_ops,
            "/op_rows": self._serve_op_rows,
            "/timeline": self._serve_timeline,
            "/hosts": self._serve_hosts,
            "/growth": self._serve_growth,
            "/loadbench": self._serve_loadbench,
            "/whatif": self._serve_whatif,
            "/oom": self._serve_oom,
        }

    def is_active(self) -> bool:
        """TensorBoard activates the tab when its data provider has our summaries or RunMetadata;
        a log dir that holds only profile sessions has neither: then the listing decides."""
        try:
            return self._profiles.has_sessions() or self._torch.has_files()
        except Exception:  # an unreadable log dir: the tab stays off, as for any plugin
            return False

    def data_plugin_names(self) -> Tuple[str, ...]:
        """Our own summaries, and RunMetadata of old log dirs (so the tab shows for those too)."""
        return (metadata.PLUGIN_NAME,) + RUN_METADATA_PLUGINS

    def frontend_metadata(self) -> base_plugin.FrontendMetadata:
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="Model Memory")

    # --- routes --------------------------------------------------------------------------------

    @_route
    def _serve_static(self, request: wrappers.Request) -> wrappers.Response:
        name = os.path.basename(request.path)
        if name not in _STATIC_FILES:
            raise errors.NotFoundError(f"no such file: {name[:100]!r}")
        try:
            with open(os.path.join(_STATIC_DIR, name), "rb") as f:
                body = f.read()
        except OSError:
            raise errors.NotFoundError(
                "frontend bundle missing: build it with `npm ci && npm run build` in frontend/ "
                "(pip install . does this when Node.js is available)") from None
        return http_util.Respond(request, body, _STATIC_FILES[name])

    @_route
    def _serve_runs(self, request: wrappers.Request) -> wrappers.Response:
        ctx, experiment = _context(request)
        runs: Dict[str, list] = {}
        for _, item in self._items(ctx, experiment):
            runs.setdefault(item.run, []).append(item.to_json())
        return _respond_json(request, {"runs": [{"run": run, "tags": tags} for run, tags in sorted(runs.items())]})

    @_route
    def _serve_steps(self, request: wrappers.Request) -> wrappers.Response:
        ctx, experiment = _context(request)
        source, item = self._find(ctx, experiment, _arg(request, "run"), _arg(request, "tag"))
        return _respond_json(request, {"run": item.run, "tag": item.tag,
                                       "steps": source.steps(ctx, experiment, item)})

    @_route
    def _serve_breakdown(self, request: wrappers.Request) -> wrappers.Response:
        return self._respond(request, metadata.BREAKDOWN, lambda view, q: dict(
            view.summary(), variables=view.variables.page(**q.page(VARIABLE_FIELDS))))

    @_route
    def _serve_variables(self, request: wrappers.Request) -> wrappers.Response:
        return self._respond(request, metadata.BREAKDOWN,
                             lambda view, q: view.variables.page(**q.page(VARIABLE_FIELDS)))

    @_route
    def _serve_ops(self, request: wrappers.Request) -> wrappers.Response:
        return self._respond(request, metadata.OPS, lambda view, q: dict(
            view.summary(), ops=view.ops.page(**q.page(OP_FIELDS))), joined=True)

    @_route
    def _serve_op_rows(self, request: wrappers.Request) -> wrappers.Response:
        return self._respond(request, metadata.OPS, lambda view, q: view.ops.page(**q.page(OP_FIELDS)),
                             joined=True)

    @_route
    def _serve_timeline(self, request: wrappers.Request) -> wrappers.Response:
        return self._respond(request, metadata.OPS, lambda view, q: view.timeline(), joined=True)

    @_route
    def _serve_whatif(self, request: wrappers.Request) -> wrappers.Response:
        """The traced step projected to another batch, optimizer, policy or replica count, and the
        largest batch under a budget (``rules.projection``, as ``tb-modelmem estimate`` prints it)."""
        what, budget = _whatif_args(request)
        return self._respond(request, metadata.OPS, lambda view, q: whatif_view(view, what, budget), joined=True)

    @_route
    def _serve_oom(self, request: wrappers.Request) -> wrappers.Response:
        """A step that ran out of memory: what the error named and what was in use then."""
        return self._respond(request, metadata.OOM, lambda record, q: {"oom": record.to_dict()})

    @_route
    def _serve_loadbench(self, request: wrappers.Request) -> wrappers.Response:
        return self._respond(request, metadata.LOADBENCH, lambda record, q: loadbench_view(record))

    @_route
    def _serve_hosts(self, request: wrappers.Request) -> wrappers.Response:
        """Every host (and allocator) of a profile session, or rank of a PyTorch job, side by side: peak,
        resident, step bytes, and the host's op time and of it the collectives' (each row of a host repeats them)."""
        ctx, experiment = _context(request)
        source, item = self._find(ctx, experiment, _arg(request, "run"), _arg(request, "tag"), metadata.OPS)
        rows, pending, failed = [], [], []
        for host in item.hosts or [""]:
            try:
                trace = self._build(source.locate(ctx, experiment, item, _step_arg(request), host or None))
            except Pending as e:
                pending.append(dict(e.state(), host=host))
                continue
            except errors.PublicError as e:
                failed.append({"host": host, "error": str(e)})
                continue
            time_us = sum(trace.ops.column("time_us")) if trace.timed else None
            collective_us = sum(t for t, phase in zip(trace.ops.column("time_us"), trace.ops.column("phase"))
                                if phase == COLLECTIVE) if trace.timed else None
            for allocator in trace.allocators:
                peak, low = allocator["peak_bytes"], allocator["min_bytes"]
                rows.append({"host": host, "allocator": allocator["name"], "peak_bytes": peak,
                             "time_us": time_us, "collective_us": collective_us,
                             "resident_bytes": low if trace.counts_resident else None,
                             "step_bytes": peak - low if trace.counts_resident else peak,
                             "devices": trace.devices, "planned": trace.allocations == "planned"})
            if not trace.allocators:  # a host whose profile recorded no allocation: unknown, not 0
                rows.append({"host": host, "allocator": None, "peak_bytes": None, "resident_bytes": None,
                             "time_us": time_us, "collective_us": collective_us,
                             "step_bytes": None, "note": trace.allocations_note, "devices": trace.devices,
                             "planned": False})
        return _respond_json(request, {"run": item.run, "tag": item.tag, "hosts": item.hosts, "rows": rows,
                                       "pending": pending, "errors": failed})

    @_route
    def _serve_growth(self, request: wrappers.Request) -> wrappers.Response:
        """Memory samples of a tag over its steps (or model builds): every series, what keeps growing, why."""
        ctx, experiment = _context(request)
        source, item = self._find(ctx, experiment, _arg(request, "run"), _arg(request, "tag"), metadata.MEMORY)
        if not isinstance(source, SummarySource):  # memory samples are written only as our own summaries
            raise errors.NotFoundError(f"no memory samples under tag {item.tag!r}")
        located = source.locate_series(ctx, experiment, item)
        try:
            series = self._build(located)
            body = self.store.get(("view",) + _key(located), lambda job: growth.analyse(series.samples))
        except Pending as e:
            return _respond_json(request, dict(e.state(), run=item.run, tag=item.tag), code=202)
        labels = [{"step": step, "label": s.label} for step, s in series.samples if s.label]
        return _respond_json(request, {"run": item.run, "tag": item.tag, "labels": labels,
                                       "unreadable": series.unreadable, **body})

    # --- items --------------------------------------------------------------------------------

    def _respond(self, request: wrappers.Request, kind: str, render: Callable[[Any, "_Query"], Dict[str, Any]],
                 joined: bool = False) -> wrappers.Response:
        """Find the item, build (or take from the store) its record and view, and render it."""
        ctx, experiment = _context(request)
        query = _Query(request)
        source, item = self._find(ctx, experiment, query.run, query.tag, kind)
        located = source.locate(ctx, experiment, item, query.step, query.host)
        try:
            record = self._build(located)
            view: Any = record
            view_key: Tuple[Hashable, ...] = _key(located)
            extra: Dict[str, Any] = {}
            if isinstance(record, Breakdown):
                view_key = ("view",) + view_key
                view = self.store.get(view_key, lambda job: _built(BreakdownView, record))
            elif isinstance(record, OpTrace):
                breakdown, extra = (self._breakdown_for(ctx, experiment, item, located, query, source.stepped) if joined
                                    else (None, {}))
                if isinstance(located, ProfileLocated):  # where its shapes come from, or why none
                    extra["graph"] = located.graph
                view_key = ("view", breakdown[0] if breakdown else None) + view_key
                view = self.store.get(view_key, lambda job: _built(
                    TraceView, record, breakdown[1] if breakdown else None))

            def answer(job: Any) -> bytes:
                body = {"run": item.run, "tag": item.tag, "origin": item.origin, "step": located.step,
                        "wall_time": located.wall_time, "host": query.host or (item.hosts[0] if item.hosts else None),
                        "hosts": item.hosts, **extra, **render(view, query)}
                return _gzipped_json(body)

            # The same question about the same data gets the same bytes: kept, compressed, until evicted.
            # (what was joined and passed over is part of the question: a breakdown written since changes them)
            key = ("answer", request.path, view_key, tuple(sorted(request.args.items(multi=True))),
                   json.dumps(extra, sort_keys=True, default=str))
            body = self.store.get(key, answer)
        except Pending as e:  # the record, its view or this answer is still being built: asked again later
            return _respond_json(request, dict(e.state(), run=item.run, tag=item.tag), code=202)
        return http_util.Respond(request, body, "application/json", content_encoding="gzip")

    def _build(self, located: Located) -> Any:
        return self.store.get(_key(located), located.build, located.input_bytes)

    def _breakdown_for(self, ctx: Any, experiment: str, item: Item, located: Located, query: "_Query",
                       stepped: bool) -> Tuple[Optional[Tuple[Hashable, BreakdownView]], Dict[str, Any]]:
        """The breakdown the ops are joined with: of the run's breakdowns (the one asked for, at each of its steps),
        the one ``readers.pairing`` picks, as the CLI does (``stepped``: the trace's step is a training step, not
        a file's 0); and which ones there are, for a picker."""
        choices = [(s, i) for s, i in self._items(ctx, experiment)
                   if i.run == item.run and i.kind == metadata.BREAKDOWN and not i.error]
        listed = [i.tag for _, i in choices]
        if query.breakdown is not None and query.breakdown not in listed:
            raise errors.NotFoundError(f"no breakdown tag {query.breakdown!r} in run {item.run!r}")
        offered: Dict[Candidate, Tuple[Source, Item]] = {}
        for source, candidate in choices:
            if query.breakdown is None or candidate.tag == query.breakdown:
                for written in self._written(ctx, experiment, source, candidate):
                    offered[written] = (source, candidate)
        found: Dict[Candidate, Located] = {}
        passed: List[Dict[str, Any]] = []  # passed over as not readable, each with why (the CLI lists them too)

        def read(written: Candidate) -> Optional[BreakdownView]:
            source, candidate = offered[written]
            try:  # still building (Pending): the trace's answer waits for it rather than being kept unjoined
                found[written] = source.locate(ctx, experiment, candidate, written.step, None)
                record = self._build(found[written])
                return self.store.get(("view",) + _key(found[written]), lambda job: _built(BreakdownView, record))
            except errors.PublicError as e:  # unreadable: the next the rule takes
                passed.append({"tag": written.tag, "step": written.step, "error": str(e)})
                return None

        chosen = choose(offered, located.step if stepped else None, read, lambda view: bool(view.record.optimizer))
        extra: Dict[str, Any] = {"breakdown": None, "breakdowns": listed, "breakdowns_unreadable": passed}
        if chosen is None:
            return None, extra
        written, view = chosen  # a checkpoint's step is None: it has none
        extra["breakdown"] = {"tag": written.tag, "step": written.step}
        return (_key(found[written]), view), extra

    def _written(self, ctx: Any, experiment: str, source: Source, item: Item) -> List[Candidate]:
        """A breakdown item as ``readers.pairing`` weighs it: a summary at each step it was written, a file once."""
        try:
            steps = source.steps(ctx, experiment, item)
        except errors.PublicError:
            return []
        if not source.stepped:
            return [Candidate(item.tag, None, max((s["wall_time"] or 0.0 for s in steps), default=0.0))]
        return [Candidate(item.tag, s["step"], s["wall_time"] or 0.0) for s in steps]

    def _items(self, ctx: Any, experiment: str) -> List[Tuple[Source, Item]]:
        """Every item of every source, listed at most once per ``LISTING_SECONDS``."""
        cached = self._listing.get(experiment)
        if cached is not None and time.monotonic() - cached[0] < LISTING_SECONDS:
            return cached[1]
        found = []
        for source in self._sources:
            try:
                items = source.list(ctx, experiment)
                self._listed[(experiment, source.origin)] = items
            except Exception:  # one broken source never hides the others; a failing listing
                # (a data provider call that failed this once) keeps that source's last items
                items = self._listed.get((experiment, source.origin), [])
            found += [(source, item) for item in items]
        found.sort(key=lambda si: (si[1].run, _PLACE.get(si[0].origin, len(_PLACE)), si[1].rank, si[1].tag))
        self._listing[experiment] = (time.monotonic(), found)
        return found

    def _find(self, ctx: Any, experiment: str, run: str, tag: str, kind: Optional[str] = None) -> Tuple[Source, Item]:
        """The item at (run, tag); 404 if none, 422 if it cannot be read, 404 if of another kind."""
        matches = [(s, i) for s, i in self._items(ctx, experiment) if i.run == run and i.tag == tag]
        if not matches:
            self._listing.pop(experiment, None)  # it may have just appeared
            matches = [(s, i) for s, i in self._items(ctx, experiment) if i.run == run and i.tag == tag]
        for source, item in matches:
            if item.error:
                raise UnreadableError(f"{run}/{tag}: {item.error}")
            if kind is None or item.kind == kind:
                return source, item
        raise errors.NotFoundError(f"no {kind or 'tb_modelmem'} data for run {run[:200]!r}, tag {tag[:200]!r}")


class _Query:
    """The query parameters every item route shares, checked."""

    def __init__(self, request: wrappers.Request) -> None:
        self.run, self.tag = _arg(request, "run"), _arg(request, "tag")
        self.step = _step_arg(request)
        self.host = _optional(request, "host")
        self.breakdown = _optional(request, "breakdown")
        self.offset = _int_arg(request, "offset", 0)
        self.limit = _int_arg(request, "limit", pager.PAGE)
        self.sort = _optional(request, "sort")
        self.order = "asc" if request.args.get("order") == "asc" else "desc"
        self.filter = (_optional(request, "filter") or "")[:500]

    def page(self, fields: Tuple[str, ...]) -> Dict[str, Any]:
        return {"offset": self.offset, "limit": self.limit, "sort": self.sort, "order": self.order,
                "query": self.filter, "fields": fields}


def _built(view: Callable[..., Any], *args: Any) -> Any:
    """A prepared view, built with the garbage collector paused (millions of acyclic objects)."""
    with paused_gc():
        return view(*args)


def _key(located: Located) -> Tuple[Hashable, ...]:
    return located.key if isinstance(located.key, tuple) else (located.key,)


def _gzipped_json(body: Dict[str, Any]) -> bytes:
    """``_json(body)``, gzip-compressed."""
    return gzip.compress(_json(body), compresslevel=3, mtime=0)


def _respond_json(request: wrappers.Request, body: Dict[str, Any], code: int = 200) -> wrappers.Response:
    """JSON via Respond, serialised here (``_json``): Respond's own cleansing walks every value."""
    return http_util.Respond(request, _json(body), "application/json", code=code)


def _json(body: Dict[str, Any]) -> bytes:
    """Strict JSON by orjson (a first /breakdown's 215 KB: 1.3 -> 0.1 ms); a non-finite number,
    which no record lets through, is null (unknown). What orjson refuses (a lone surrogate in a
    run name, an int past 64 bits) takes the stdlib's path with Respond's cleansing."""
    try:
        return orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return json.dumps(json_util.Cleanse(body), separators=(",", ":")).encode("utf-8")


def _context(request: wrappers.Request) -> Tuple[Any, str]:
    return plugin_util.context(request.environ), plugin_util.experiment_id(request.environ)


def _arg(request: wrappers.Request, name: str) -> str:
    value = request.args.get(name)
    if value is None or value == "":
        raise errors.InvalidArgumentError(f"missing query parameter {name!r}")
    if len(value) > MAX_NAME:
        raise errors.InvalidArgumentError(f"query parameter {name!r} is longer than {MAX_NAME:,} characters")
    return value


def _optional(request: wrappers.Request, name: str) -> Optional[str]:
    value = request.args.get(name)
    return _arg(request, name) if value not in (None, "") else None


def _int_arg(request: wrappers.Request, name: str, default: int, lowest: int = 0) -> int:
    """An integer query argument from ``lowest`` to 10**9 (``default`` where not given)."""
    value = request.args.get(name)
    if value in (None, ""):
        return default
    try:
        number = int(value)
    except ValueError:
        raise errors.InvalidArgumentError(f"{name} must be an integer, got {value[:40]!r}") from None
    if not lowest <= number <= MOST_ASKED:
        raise errors.InvalidArgumentError(f"{name} must be between {lowest} and {MOST_ASKED:,}, got {number}")
    return number


def _asked_arg(request: wrappers.Request, name: str) -> Optional[int]:
    """A count a What-if question asks (batch, seq, devices): None where not given, else from 1 (0 is an error,
    as on the command line: not "as traced")."""
    return None if request.args.get(name) in (None, "") else _int_arg(request, name, 0, lowest=1)


def _whatif_args(request: wrappers.Request) -> Tuple[WhatIf, Optional[int]]:
    """The change a What-if question asks (batch, optimizer, policy, devices or replicas, shard, seq) and its
    budget in bytes."""
    devices = _asked_arg(request, "devices") or _asked_arg(request, "replicas") or 1
    what = WhatIf(_asked_arg(request, "batch"), _optional(request, "optimizer"), _optional(request, "policy"),
                  devices, _optional(request, "shard"), _asked_arg(request, "seq"))
    budget = _optional(request, "budget")
    try:
        what.check()
        return what, parse_size(budget) if budget is not None else None
    except ValueError as e:
        raise errors.InvalidArgumentError(str(e)) from None


def _step_arg(request: wrappers.Request) -> Optional[int]:
    value = request.args.get("step")
    if value in (None, "", "latest"):
        return None
    try:
        step = int(value)
    except ValueError:
        raise errors.InvalidArgumentError(f"step must be an integer, got {value[:40]!r}") from None
    if not 0 <= step < 2**63:
        raise errors.InvalidArgumentError("step must be between 0 and 2**63 - 1")
    return step

