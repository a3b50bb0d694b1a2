"""Serve a log dir through ModelMemPlugin as TensorBoard would, without a server process.

Uses TensorBoard's Python loader (EventMultiplexer + MultiplexerDataProvider)
and TensorBoardWSGI, so errors become 4xx responses exactly as in production.
Writes events with TensorBoard's TF-free EventFileWriter.
"""

from __future__ import annotations

import gc
import json
import os
import time
from typing import Any, Dict, Iterable, List, Optional, Tuple

from tensorboard.backend import application
from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.plugins import base_plugin
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from werkzeug import test as werkzeug_test
from werkzeug import wrappers

from tb_modelmem.plugin import ModelMemPlugin

PREFIX = "/data/plugin/modelmem"


def write_events(logdir: str, summaries: Iterable[Tuple[int, summary_pb2.Summary]]) -> str:
    """Write (step, Summary) pairs to a fresh event file in ``logdir``; returns its path."""
    os.makedirs(logdir, exist_ok=True)
    writer = EventFileWriter(logdir)
    for step, summary in summaries:
        writer.add_event(event_pb2.Event(step=step, wall_time=1.0 + step, summary=summary))
    writer.close()
    return _newest_event_file(logdir)


def _newest_event_file(logdir: str) -> str:
    files = [os.path.join(logdir, f) for f in os.listdir(logdir) if "tfevents" in f]
    return max(files, key=os.path.getmtime)


def layer_rows(body: Dict[str, Any]) -> List[dict]:
    """An answer's layer tree (sent column by column, views.as_columns) as rows, as the tab's api.js reads it."""
    table = body["layers"]
    rows: List[dict] = [{} for _ in range(table["length"])]
    for field, values in table["columns"].items():
        if isinstance(values, dict):
            for i, row in enumerate(rows):
                parts = {key: column[i] for key, column in values.items()}
                row[field] = parts if any(v is not None for v in parts.values()) else None
        else:
            for row, value in zip(rows, values):
                row[field] = value
    return rows


def _without_jax_gc_callback() -> None:
    """Drops JAX's ``_xla_gc_callback`` from this test process's ``gc.callbacks``, where an import of
    TensorFlow (its ``tensorflow.lite`` imports ``jax``) or Keras brought JAX in: a CI worker once died of a
    segfault in one of the plugin's reduce threads while the other was inside that callback (jax-ml/jax#15810,
    open: segfaults in it under threads). It only hastens XLA's freeing of objects it also frees on its own.
    TensorBoard processes (tests/e2e, the demo, users') keep it."""
    gc.callbacks[:] = [c for c in gc.callbacks if getattr(c, "__name__", "") != "_xla_gc_callback"]


class Served:
    """A werkzeug client on a TensorBoard app holding only our plugin."""

    def __init__(self, logdir: str, **plugin_options: Any):
        multiplexer = plugin_event_multiplexer.EventMultiplexer(size_guidance={"tensors": 0})
        multiplexer.AddRunsFromDirectory(logdir)  # TensorBoard's first tf.io.gfile imports TensorFlow, and JAX
        multiplexer.Reload()
        _without_jax_gc_callback()  # after those imports, before the plugin's threads start
        provider = data_provider.MultiplexerDataProvider(multiplexer, logdir)
        context = base_plugin.TBContext(logdir=logdir, data_provider=provider)
        self.plugin = ModelMemPlugin(context, **plugin_options)
        app = application.TensorBoardWSGI([self.plugin])
        self.client = werkzeug_test.Client(app, wrappers.Response)

    def get(self, route: str, **params: Any) -> wrappers.Response:
        return self.client.get(PREFIX + route, query_string={k: v for k, v in params.items() if v is not None})

    def settled(self, route: str, timeout: float = 120.0, **params: Any) -> wrappers.Response:
        """The first answer that is not 202 ("still reducing"), asking again as the tab does: on a
        loaded machine even a small item can take longer than the request's wait."""
        deadline = time.monotonic() + timeout
        while True:
            response = self.get(route, **params)
            if response.status_code != 202 or time.monotonic() > deadline:
                return response
            state = json.loads(response.get_data())
            assert state["state"] == "reducing" and 0 <= state["progress"] <= 1, state
            time.sleep(0.2)

    def json(self, route: str, **params: Any) -> Any:
        response = self.settled(route, **params)
        assert response.status_code == 200, (response.status_code, response.get_data(as_text=True))
        return json.loads(response.get_data())

    def hosts(self, run: str, tag: str, timeout: float = 120.0) -> Any:
        """``/hosts`` once no host is still reducing, asking again as the tab does: it answers at once with the
        hosts done so far and the others ``pending``."""
        deadline = time.monotonic() + timeout
        while True:
            body = self.json("/hosts", run=run, tag=tag)
            if not body["pending"] or time.monotonic() > deadline:
                return body
            time.sleep(0.3)

    def all_ops(self, run: str, tag: str, **params: Any) -> List[dict]:
        """Every row of an op table, page by page as the tab reads it."""
        return self._all("/op_rows", run, tag, **params)

    def all_variables(self, run: str, tag: str, **params: Any) -> List[dict]:
        """Every variable of a breakdown, page by page as the tab reads it."""
        return self._all("/variables", run, tag, **params)

    def _all(self, route: str, run: str, tag: str, **params: Any) -> List[dict]:
        rows: List[dict] = []
        while True:
            page = self.json(route, run=run, tag=tag, offset=len(rows), limit=2000, **params)
            rows += page["rows"]
            if len(rows) >= page["matched"] or not page["rows"]:
                return rows

    def tags(self, run: Optional[str] = None):
        listing = self.json("/runs")["runs"]
        return {(r["run"], t["tag"]): t for r in listing for t in r["tags"] if run in (None, r["run"])}
