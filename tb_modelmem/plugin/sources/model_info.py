"""What a run's log dir says about its model, for the items the backend reduces itself:
the layers (the Keras model config ``keras.callbacks.TensorBoard`` writes) and the traced
graphs (a TF1 ``FileWriter(graph=...)`` run graph, a TF2 ``trace_export``'s function graphs)."""

from __future__ import annotations

import json
from typing import Any, Dict, Hashable, Iterator, List, Optional, Tuple

from tensorboard.compat.proto import config_pb2
from tensorboard.data import provider

from tb_modelmem.plugin.sources import MAX_STEPS
from tb_modelmem.readers.graph_info import GraphInfo
from tb_modelmem.readers.graphdef import graph_info_from_graph_defs, parse_graph_def
from tb_modelmem.rules.join import Vocabulary

GRAPHS_PLUGIN, RUN_GRAPH = "graphs", "__run_graph__"
KERAS_MODEL_PLUGIN = "graph_keras_model"
TRACE_GRAPHS_PLUGIN = "graph_run_metadata_graph"  # trace_export(profiler=False): graphs, no step stats
MAX_GRAPH_BYTES = 256 * 2**20


class RunModel:
    """Reads, per run, the model config and graphs; nothing else of the run."""

    def __init__(self, data_provider: provider.DataProvider) -> None:
        self._provider = data_provider

    def vocabulary(self, ctx: Any, experiment: str, run: str) -> Tuple[Vocabulary, Hashable]:
        """Layer paths from the run's Keras model config (empty if it has none) and a stamp
        that changes when the config does."""
        for datum, tag in self._latest(ctx, experiment, KERAS_MODEL_PLUGIN, run):
            blob = self._blob(ctx, datum)
            try:
                config = json.loads(blob.decode("utf-8")) if blob else None
            except (ValueError, UnicodeDecodeError, RecursionError):
                continue
            if isinstance(config, dict):
                return Vocabulary(list(keras_layer_paths(config))), (tag, datum.wall_time)
        return Vocabulary([]), None

    def trace_tags(self, ctx: Any, experiment: str, run: str) -> List[Tuple[str, int, float]]:
        """(tag, step, wall time) of the run's trace_export graphs, e.g. Keras' "batch_2"."""
        listing = self._provider.list_blob_sequences(
            ctx, experiment_id=experiment, plugin_name=TRACE_GRAPHS_PLUGIN,
            run_tag_filter=provider.RunTagFilter(runs=[run]))
        out = []
        for tag in listing.get(run, {}):
            for datum in self._read(ctx, experiment, TRACE_GRAPHS_PLUGIN, run, tag):
                out.append((tag, datum.step, datum.wall_time))
        return out

    def graphs(self, ctx: Any, experiment: str, run: str, trace_tag: Optional[str] = None
               ) -> Tuple[GraphInfo, Hashable]:
        """The graphs a reduction can use: the trace_export tag's function graphs, else the
        run graph; and a stamp of what was read."""
        graph_defs, stamp = [], []
        if trace_tag is not None:
            for datum in self._read(ctx, experiment, TRACE_GRAPHS_PLUGIN, run, trace_tag)[-1:]:
                graph_defs += _function_graphs(self._blob(ctx, datum))
                stamp.append((trace_tag, datum.wall_time))
        if not graph_defs:
            for datum in self._read(ctx, experiment, GRAPHS_PLUGIN, run, RUN_GRAPH)[-1:]:
                graph_def = parse_graph_def(self._blob(ctx, datum))
                if graph_def is not None:
                    graph_defs.append(graph_def)
                    stamp.append((RUN_GRAPH, datum.wall_time))
        return graph_info_from_graph_defs(graph_defs), tuple(stamp)

    def _latest(self, ctx: Any, experiment: str, plugin: str, run: str) -> Iterator[Tuple[Any, str]]:
        listing = self._provider.list_blob_sequences(ctx, experiment_id=experiment, plugin_name=plugin,
                                                     run_tag_filter=provider.RunTagFilter(runs=[run]))
        for tag in sorted(listing.get(run, {})):
            for datum in self._read(ctx, experiment, plugin, run, tag)[-1:]:
                yield datum, tag

    def _read(self, ctx: Any, experiment: str, plugin: str, run: str, tag: str) -> List[Any]:
        try:
            result = self._provider.read_blob_sequences(
                ctx, experiment_id=experiment, plugin_name=plugin, downsample=MAX_STEPS,
                run_tag_filter=provider.RunTagFilter(runs=[run], tags=[tag]))
        except Exception:  # what the log dir says about the model is optional
            return []
        return list(result.get(run, {}).get(tag, []))

    def _blob(self, ctx: Any, datum: Any) -> bytes:
        if not datum.values:
            return b""
        try:
            blob = self._provider.read_blob(ctx, blob_key=datum.values[0].blob_key)
        except Exception:
            return b""
        return blob if len(blob) <= MAX_GRAPH_BYTES else b""


def keras_layer_paths(config: Dict[str, Any], prefix: str = "") -> Iterator[str]:
    """Layer paths of a Keras model config, nested models as path components ("model/block/dense")."""
    inner = config.get("config")
    inner = inner if isinstance(inner, dict) else {}
    name = inner.get("name") or config.get("name")
    if not isinstance(name, str) or config.get("class_name") == "InputLayer":
        return
    path = f"{prefix}/{name}" if prefix else name
    layers = inner.get("layers")
    if isinstance(layers, list) and layers:
        for layer in layers:
            if isinstance(layer, dict):
                yield from keras_layer_paths(layer, path)
    else:
        yield path


def _function_graphs(blob: bytes) -> List[Any]:
    """The GraphDefs a trace_export RunMetadata holds (its function graphs, else its partition graphs)."""
    try:
        run_metadata = config_pb2.RunMetadata.FromString(blob)
    except Exception:
        return []
    graphs = [g.pre_optimization_graph for g in run_metadata.function_graphs if g.HasField("pre_optimization_graph")]
    return graphs or list(run_metadata.partition_graphs)
