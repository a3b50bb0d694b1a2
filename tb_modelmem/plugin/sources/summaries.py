"""Payloads tb_modelmem wrote: one blob per step of a tag under plugin ``modelmem``."""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Dict, List, Optional, Tuple

from tensorboard.data import provider

from tb_modelmem.gc_paused import paused_gc
from tb_modelmem.plugin.sources import Item, Located, Source, StepReader, name_error, pick_step, read_blob
from tb_modelmem.plugin.store import Job, UnreadableError
from tb_modelmem.schema import metadata, payload

ORIGIN = "modelmem"


class SummarySource(Source):
    origin = ORIGIN

    def __init__(self, data_provider: provider.DataProvider) -> None:
        self._provider = data_provider
        self._steps = StepReader(data_provider)

    def list(self, ctx: Any, experiment: str) -> List[Item]:
        listing = self._provider.list_blob_sequences(ctx, experiment_id=experiment,
                                                     plugin_name=metadata.PLUGIN_NAME)
        items: List[Item] = []
        written: List[Tuple[float, int]] = []  # each item's last write: (wall time, step)
        for run, tags in listing.items():
            for tag, series in tags.items():
                item = Item(run, tag, None, ORIGIN, series.max_step)
                try:
                    _, item.kind = metadata.parse_plugin_metadata(series.plugin_content)
                except metadata.MetadataError as e:
                    item.error = str(e)
                item.error = item.error or name_error(run, tag)
                items.append(item)
                written.append((series.max_wall_time, series.max_step))
        return _newest_first(items, written)

    def steps(self, ctx: Any, experiment: str, item: Item) -> List[Dict[str, Any]]:
        return [{"step": d.step, "wall_time": d.wall_time}
                for d in self._steps.read(ctx, experiment, metadata.PLUGIN_NAME, item.run, item.tag)]

    def locate(self, ctx: Any, experiment: str, item: Item, step: Optional[int], host: Optional[str]) -> Located:
        datum = pick_step(self._steps.read(ctx, experiment, metadata.PLUGIN_NAME, item.run, item.tag),
                          step, item)
        key = (ORIGIN, experiment, datum.values[0].blob_key if datum.values else item.run, item.tag, datum.step,
               datum.wall_time)

        def build(job: Job) -> Any:
            return _decoded(read_blob(self._provider, ctx, datum, item, payload.MAX_PAYLOAD_BYTES), item, datum.step)

        return Located(key, datum.step, datum.wall_time, 0, build)

    def locate_series(self, ctx: Any, experiment: str, item: Item) -> Located:
        """Every step of a tag at once (memory samples: the Growth view fits a trend over all of them)."""
        data = self._steps.read(ctx, experiment, metadata.PLUGIN_NAME, item.run, item.tag)
        key = (ORIGIN, "series", experiment, item.run, item.tag, len(data),
               (data[-1].step, data[-1].wall_time) if data else None)

        def build(job: Job) -> Any:
            samples, unreadable = [], []
            for i, datum in enumerate(data):
                try:
                    blob = read_blob(self._provider, ctx, datum, item, payload.MAX_PAYLOAD_BYTES)
                    samples.append((datum.step, _decoded(blob, item, datum.step)))
                except UnreadableError as e:  # one bad sample is listed, the others still make the series
                    unreadable.append({"step": datum.step, "error": str(e)})
                job.report((i + 1) / len(data), f"{i + 1} of {len(data)} samples")
            if not samples and unreadable:
                raise UnreadableError(unreadable[-1]["error"])
            return Series(samples, unreadable)

        return Located(key, data[-1].step if data else None, data[-1].wall_time if data else None, 0, build)


def _newest_first(items: List[Item], written: List[Tuple[float, int]]) -> List[Item]:
    """``items``, each ranked among its run's tags of its kind by when it was last ``written`` (wall time, step),
    newest first (``Item.rank``): the CLI reads a run's newest ``ops`` summary, and the tab opens on the first."""
    places: Dict[Tuple[str, Optional[str]], int] = collections.Counter()
    for index in sorted(range(len(items)), key=written.__getitem__, reverse=True):
        item = items[index]
        item.rank = places[(item.run, item.kind)]
        places[(item.run, item.kind)] += 1
    return items


@dataclasses.dataclass
class Series:
    """Every readable step of a tag, and the steps that could not be read (with why)."""

    samples: List[Tuple[int, Any]]
    unreadable: List[Dict[str, Any]]


def _decoded(blob: bytes, item: Item, step: int) -> Any:
    """The record in one step's blob, as that item's error when it cannot be read or is not
    the kind its metadata says (a foreign or broken writer)."""
    try:
        with paused_gc():
            record = payload.decode(blob)
    except payload.PayloadError as e:
        raise UnreadableError(f"{item.run}/{item.tag} step {step}: {e}") from None
    if payload.kind_of(record) != item.kind:
        raise UnreadableError(f"{item.run}/{item.tag} step {step}: the summary says it holds "
                              f"{item.kind!r} but its payload is {payload.kind_of(record)!r}")
    return record
