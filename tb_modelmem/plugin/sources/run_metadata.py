"""RunMetadata of old log dirs, read in place: TF1 ``FileWriter.add_run_metadata`` (plugin
``graph_tagged_run_metadata``) and TF2 ``trace_export(profiler=True)`` (``graph_run_metadata``).

Tags of ``graph_run_metadata_graph`` hold graphs only (Keras' profile_batch writes one per
profile): they are not items, they give the profile sessions of their run their graphs.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from tensorboard.data import provider

from tb_modelmem.messages import first_line
from tb_modelmem.plugin.sources import Item, Located, Source, StepReader, name_error, pick_step, read_blob
from tb_modelmem.plugin.sources.model_info import RunModel
from tb_modelmem.plugin.store import Job, UnreadableError
from tb_modelmem.readers.run_metadata import reduce_run_metadata
from tb_modelmem.rules.join import vocabulary_from_variables
from tb_modelmem.schema import metadata

ORIGIN = "run_metadata"
PLUGINS = ("graph_tagged_run_metadata", "graph_run_metadata")
MAX_RUN_METADATA_BYTES = 1024 * 2**20


class RunMetadataSource(Source):
    origin = ORIGIN

    def __init__(self, data_provider: provider.DataProvider, model: RunModel) -> None:
        self._provider = data_provider
        self._steps = StepReader(data_provider)
        self._model = model
        self._plugin_of: Dict[tuple, str] = {}

    def list(self, ctx: Any, experiment: str) -> List[Item]:
        items = []
        for plugin in PLUGINS:
            listing = self._provider.list_blob_sequences(ctx, experiment_id=experiment, plugin_name=plugin)
            for run, tags in listing.items():
                for tag, series in tags.items():
                    self._plugin_of[(run, tag)] = plugin
                    items.append(Item(run, tag, metadata.OPS, ORIGIN, series.max_step, name_error(run, tag),
                                      note="RunMetadata"))
        return items

    def steps(self, ctx: Any, experiment: str, item: Item) -> List[Dict[str, Any]]:
        return [{"step": d.step, "wall_time": d.wall_time} for d in self._data(ctx, experiment, item)]

    def locate(self, ctx: Any, experiment: str, item: Item, step: Optional[int], host: Optional[str]) -> Located:
        datum = pick_step(self._data(ctx, experiment, item), step, item)
        vocabulary, vocabulary_stamp = self._model.vocabulary(ctx, experiment, item.run)
        graphs, graph_stamp = self._model.graphs(ctx, experiment, item.run)
        if not vocabulary.layers:  # a TF1 log dir: the graph's variable scopes are its layers
            vocabulary = vocabulary_from_variables(v for g in graphs.graphs for v in g.variables.values())
        key = (ORIGIN, experiment, datum.values[0].blob_key if datum.values else item.run, item.tag, datum.step,
               datum.wall_time, vocabulary_stamp, graph_stamp)

        def build(job: Job) -> Any:
            blob = read_blob(self._provider, ctx, datum, item, MAX_RUN_METADATA_BYTES)
            job.report(0.1, "reducing step stats")
            try:
                return reduce_run_metadata(blob, graphs.graphs, vocabulary)
            except (ValueError, TypeError) as e:  # no step stats, or foreign bytes under a graph plugin name
                raise UnreadableError(f"{item.run}/{item.tag} step {datum.step}: cannot read this RunMetadata: "
                                      f"{first_line(e)}") from None

        return Located(key, datum.step, datum.wall_time, 0, build)

    def _data(self, ctx: Any, experiment: str, item: Item) -> List[provider.BlobSequenceDatum]:
        plugin = self._plugin_of.get((item.run, item.tag), PLUGINS[0])
        return self._steps.read(ctx, experiment, plugin, item.run, item.tag)
