"""Reads tb_modelmem data through TensorBoard's data provider, one item at a time.

Works with the Python loader and the Rust data server alike: only the
blob-sequence API of ``context.data_provider`` is used, never the multiplexer.
Old log dirs are read too: RunMetadata that TensorBoard files under the graph
plugins (``FileWriter.add_run_metadata``, ``tf.summary.trace_export``).
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from typing import Any, Dict, Hashable, List, Optional, Tuple

from tensorboard import errors
from tensorboard.data import provider

from tb_modelmem import metadata, payload
from tb_modelmem.capture.run_metadata import reduce_run_metadata
from tb_modelmem.messages import first_line

MODELMEM_PLUGIN = metadata.PLUGIN_NAME
MODELMEM = "modelmem"  # origin: written by tb_modelmem
RUN_METADATA = "run_metadata"  # origin: RunMetadata written by plain TensorFlow
# Plugin names under which TensorBoard files RunMetadata from old log dirs.
RUN_METADATA_PLUGINS = ("graph_tagged_run_metadata", "graph_run_metadata", "graph_run_metadata_graph")
MAX_STEPS = 100_000  # ask the provider for every step it kept
DECODED_CACHE_SIZE = 32  # decoded records kept, keyed by blob key and wall time


class UnreadableError(errors.PublicError):
    """This one item cannot be read (corrupt, foreign or too new); the rest works."""

    http_code = 422

    def __init__(self, details: str):
        super().__init__(details)


@dataclasses.dataclass
class TagInfo:
    run: str
    tag: str
    kind: Optional[str]
    origin: str
    plugin_name: str
    max_step: int
    error: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        return {"tag": self.tag, "kind": self.kind, "origin": self.origin,
                "max_step": self.max_step, "error": self.error}


class DataSource:
    """Lists tags and reads one (run, tag, step) payload, decoded into a record."""

    def __init__(self, data_provider: provider.DataProvider):
        self._provider = data_provider
        self._decoded = _LruCache(DECODED_CACHE_SIZE)  # reducing a big trace costs far more than reading it

    def list_tags(self, ctx: Any, experiment_id: str, run: Optional[str] = None,
                  tag: Optional[str] = None) -> List[TagInfo]:
        """Every tag we can show (optionally of one run, or one run and tag), unreadable ones
        with their error."""
        tag_filter = None
        if run is not None:
            tag_filter = provider.RunTagFilter(runs=[run], tags=None if tag is None else [tag])
        tags = []
        for plugin_name in (MODELMEM_PLUGIN,) + RUN_METADATA_PLUGINS:
            listing = self._provider.list_blob_sequences(
                ctx, experiment_id=experiment_id, plugin_name=plugin_name, run_tag_filter=tag_filter)
            for run_name, by_tag in listing.items():
                for tag_name, series in by_tag.items():
                    tags.append(_tag_info(plugin_name, run_name, tag_name, series))
        return sorted(tags, key=lambda t: (t.run, t.tag, t.origin != MODELMEM))

    def find_tag(self, ctx: Any, experiment_id: str, run: str, tag: str, kind: str) -> TagInfo:
        """The readable ``kind`` tag at (run, tag); 404 if absent, 422 if unreadable."""
        for info in self.list_tags(ctx, experiment_id, run, tag):
            if info.error:
                raise UnreadableError(f"{run}/{tag}: {info.error}")
            if info.kind == kind:
                return info
        raise errors.NotFoundError(f"no {kind} data for run {run!r}, tag {tag!r}")

    def steps(self, ctx: Any, experiment_id: str, info: TagInfo) -> List[provider.BlobSequenceDatum]:
        result = self._provider.read_blob_sequences(
            ctx, experiment_id=experiment_id, plugin_name=info.plugin_name, downsample=MAX_STEPS,
            run_tag_filter=provider.RunTagFilter(runs=[info.run], tags=[info.tag]),
        )
        return list(result.get(info.run, {}).get(info.tag, []))

    def read(self, ctx: Any, experiment_id: str, info: TagInfo,
             step: Optional[int]) -> Tuple[provider.BlobSequenceDatum, payload.Payload]:
        """Decode the record at ``step`` (latest if None); reads only that one blob."""
        data = self.steps(ctx, experiment_id, info)
        if not data:
            raise errors.NotFoundError(f"no steps for run {info.run!r}, tag {info.tag!r}")
        if step is None:
            datum = data[-1]
        else:
            matches = [d for d in data if d.step == step]
            if not matches:
                raise errors.NotFoundError(f"no step {step} for run {info.run!r}, tag {info.tag!r}")
            datum = matches[-1]
        if not datum.values:
            raise UnreadableError(f"{info.run}/{info.tag} step {datum.step}: empty summary")
        key = (experiment_id, datum.values[0].blob_key, datum.wall_time)
        record = self._decoded.get(key)
        if record is None:
            blob = self._provider.read_blob(ctx, blob_key=datum.values[0].blob_key)
            record = self._decoded.put(key, self._decode(info, datum.step, blob))
        return datum, record

    @staticmethod
    def _decode(info: TagInfo, step: int, blob: bytes) -> payload.Payload:
        where = f"{info.run}/{info.tag} step {step}"
        if info.origin == RUN_METADATA:
            try:
                return reduce_run_metadata(blob)
            except Exception as e:  # no step stats, or foreign bytes under a graph plugin name
                raise UnreadableError(f"{where}: cannot read this RunMetadata: {first_line(e)}") from None
        try:
            return payload.decode(blob)
        except payload.PayloadError as e:
            raise UnreadableError(f"{where}: {e}") from None



def _tag_info(plugin_name: str, run: str, tag: str, series: provider.BlobSequenceTimeSeries) -> TagInfo:
    if plugin_name != MODELMEM_PLUGIN:
        return TagInfo(run, tag, metadata.OPS, RUN_METADATA, plugin_name, series.max_step)
    info = TagInfo(run, tag, None, MODELMEM, plugin_name, series.max_step)
    try:
        _, info.kind = metadata.parse_plugin_metadata(series.plugin_content)
    except metadata.MetadataError as e:
        info.error = str(e)
    return info


class _LruCache:
    """A small thread-safe LRU map (TensorBoard serves requests from several threads)."""

    def __init__(self, size: int):
        self._size = size
        self._items: "collections.OrderedDict[Hashable, Any]" = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
            return None

    def put(self, key: Hashable, value: Any) -> Any:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return value
