"""ModelMemPlugin: the "Model Memory" tab's HTTP routes.

Every response goes through ``http_util.Respond``; request problems raise
``tensorboard.errors`` (TensorBoard turns them into 4xx text responses).
Data comes only from ``context.data_provider``; no path from a query or a
summary is ever opened (static files come from a fixed allowlist).
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, Optional, Tuple

from tensorboard import errors, plugin_util
from tensorboard.backend import http_util
from tensorboard.plugins import base_plugin
from werkzeug import wrappers

from tb_modelmem import metadata
from tb_modelmem.plugin import queries
from tb_modelmem.plugin.source import RUN_METADATA_PLUGINS, DataSource, TagInfo
from tb_modelmem.records import Breakdown, OpTrace

_STATIC_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "static")
_STATIC_FILES = {"index.js": "text/javascript"}  # the only files ever served from disk
_MAX_QUERY_VALUE = 4096


class ModelMemPlugin(base_plugin.TBPlugin):
    """Weights vs optimizer slots, per-op memory and time, load cost by save format."""

    plugin_name = metadata.PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext):
        self._source = DataSource(context.data_provider)

    def get_plugin_apps(self) -> Dict[str, Callable]:
        return {
            "/index.js": self._serve_static,
            "/runs": self._serve_runs,
            "/steps": self._serve_steps,
            "/breakdown": self._serve_breakdown,
            "/ops": self._serve_ops,
            "/loadbench": self._serve_loadbench,
        }

    def is_active(self) -> bool:
        return False  # TensorBoard's list_plugins activates the tab when data exists

    def data_plugin_names(self) -> Tuple[str, ...]:
        """Our own summaries, and RunMetadata of old log dirs (so the tab shows for those too)."""
        return (metadata.PLUGIN_NAME,) + RUN_METADATA_PLUGINS

    def frontend_metadata(self) -> base_plugin.FrontendMetadata:
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="Model Memory")

    @wrappers.Request.application
    def _serve_static(self, request: wrappers.Request) -> wrappers.Response:
        name = os.path.basename(request.path)
        if name not in _STATIC_FILES:
            raise errors.NotFoundError(f"no such file: {name!r}")
        try:
            with open(os.path.join(_STATIC_DIR, name), "rb") as f:
                body = f.read()
        except OSError:
            raise errors.NotFoundError(
                "frontend bundle missing: build it with `npm ci && npm run build` in frontend/ "
                "(pip install . does this when Node.js is available)") from None
        return http_util.Respond(request, body, _STATIC_FILES[name])

    @wrappers.Request.application
    def _serve_runs(self, request: wrappers.Request) -> wrappers.Response:
        ctx, experiment = _context(request)
        runs: Dict[str, list] = {}
        for info in self._source.list_tags(ctx, experiment):
            runs.setdefault(info.run, []).append(info.to_json())
        body = {"runs": [{"run": run, "tags": tags} for run, tags in sorted(runs.items())]}
        return _respond_json(request, body)

    @wrappers.Request.application
    def _serve_steps(self, request: wrappers.Request) -> wrappers.Response:
        ctx, experiment = _context(request)
        run, tag = _arg(request, "run"), _arg(request, "tag")
        infos = self._source.list_tags(ctx, experiment, run, tag)
        if not infos:
            raise errors.NotFoundError(f"no tb_modelmem data for run {run!r}, tag {tag!r}")
        steps = [{"step": d.step, "wall_time": d.wall_time} for d in self._source.steps(ctx, experiment, infos[0])]
        return _respond_json(request, {"run": run, "tag": tag, "steps": steps})

    @wrappers.Request.application
    def _serve_breakdown(self, request: wrappers.Request) -> wrappers.Response:
        return self._respond_record(request, metadata.BREAKDOWN, lambda rec, ctx, exp, info: queries.breakdown_view(rec))

    @wrappers.Request.application
    def _serve_ops(self, request: wrappers.Request) -> wrappers.Response:
        def view(trace: OpTrace, ctx: Any, experiment: str, info: TagInfo) -> Dict[str, Any]:
            return queries.ops_view(trace, self._latest_breakdown(ctx, experiment, info.run))

        return self._respond_record(request, metadata.OPS, view)

    @wrappers.Request.application
    def _serve_loadbench(self, request: wrappers.Request) -> wrappers.Response:
        return self._respond_record(request, metadata.LOADBENCH, lambda rec, ctx, exp, info: queries.loadbench_view(rec))

    def _respond_record(self, request: wrappers.Request, kind: str, view: Callable) -> wrappers.Response:
        ctx, experiment = _context(request)
        run, tag, step = _arg(request, "run"), _arg(request, "tag"), _step_arg(request)
        info = self._source.find_tag(ctx, experiment, run, tag, kind)
        datum, record = self._source.read(ctx, experiment, info, step)
        body = {"run": run, "tag": tag, "step": datum.step, "wall_time": datum.wall_time,
                **view(record, ctx, experiment, info)}
        return _respond_json(request, body)

    def _latest_breakdown(self, ctx: Any, experiment: str, run: str) -> Optional[Breakdown]:
        """The run's newest readable breakdown, to join ops with weights and slots."""
        for info in self._source.list_tags(ctx, experiment, run):
            if info.kind == metadata.BREAKDOWN and not info.error:
                try:
                    return self._source.read(ctx, experiment, info, None)[1]
                except errors.PublicError:
                    continue
        return None


def _respond_json(request: wrappers.Request, body: Dict[str, Any]) -> wrappers.Response:
    """JSON via Respond; serialised here because Respond's NaN cleansing walks every value
    (seconds for a 20,000-op table). Bodies holding NaN/Inf take Respond's own path."""
    try:
        content: Any = json.dumps(body, allow_nan=False, separators=(",", ":"))
    except ValueError:
        content = body
    return http_util.Respond(request, content, "application/json")


def _context(request: wrappers.Request) -> Tuple[Any, str]:
    return plugin_util.context(request.environ), plugin_util.experiment_id(request.environ)


def _arg(request: wrappers.Request, name: str) -> str:
    value = request.args.get(name)
    if value is None or value == "":
        raise errors.InvalidArgumentError(f"missing query parameter {name!r}")
    if len(value) > _MAX_QUERY_VALUE:
        raise errors.InvalidArgumentError(f"query parameter {name!r} is too long")
    return value


def _step_arg(request: wrappers.Request) -> Optional[int]:
    value = request.args.get("step")
    if value in (None, "", "latest"):
        return None
    try:
        step = int(value)
    except ValueError:
        raise errors.InvalidArgumentError(f"step must be an integer, got {value[:40]!r}") from None
    if step < 0:
        raise errors.InvalidArgumentError("step must be >= 0")
    return step
