"""The Ops view's layer table and peak on real public training scripts (tests/corpus/), against
Keras' and TensorFlow's own figures (issue 31): a composite row counts each weight once and no RNG
state as a weight (``layer.weights``, the optimizer's slots as Keras made them); a LossScaleOptimizer's
finite checks are on the layer whose gradient they check (``model.trainable_variables``' order), a
custom loop's loss is the loss (the name scope of the Keras loss object); what is unknown is null with
a count, never 0 (TensorFlow's op registry, the profile read with TensorFlow's xplane_pb2, the run's
RunMetadata read with TensorFlow's config_pb2); the batch the input pipeline slices is an input; the
resident state is whole at the peak and over the timeline with TensorFlow's default CPU allocator."""

from __future__ import annotations

import collections
import os
import re
from typing import Any, Dict, Iterable, Set, Tuple

import pytest

from tests.corpus import run
from tests.support.plugin_harness import Served, layer_rows


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    base = tmp_path_factory.mktemp("corpus_layers")

    def made(name: str, mode: str = "modelmem", mixed_precision: bool = False, again: bool = False) -> Dict[str, Any]:
        where = tmp_path_factory.mktemp("corpus_again") if again else base
        return run(name, mode, where, mixed_precision=mixed_precision, again=again)
    return made


def ops_answer(result: Dict[str, Any]) -> Dict[str, Any]:
    """The /ops answer and every op row of the run's one traced step: tag "ops", or its profile session."""
    served = Served(result["logdir"])
    tags = [tag for (run_name, tag) in served.tags(result["run"])
            if tag == "ops" or tag.startswith("profile/")]
    assert len(tags) == 1, tags
    body = served.json("/ops", run=result["run"], tag=tags[0])
    body["all_ops"] = served.all_ops(result["run"], tags[0])
    body["timeline"] = served.json("/timeline", run=result["run"], tag=tags[0])
    return body


def under(path: str, layer: str) -> bool:
    return layer == path or layer.startswith(path + "/")


def xspace(result: Dict[str, Any]) -> Any:
    """The run's profile, read with TensorFlow's own protos."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    (relative,) = result["profiles"]
    with open(os.path.join(result["logdir"], relative), "rb") as f:
        return xplane_pb2.XSpace.FromString(f.read())


def host_events(space: Any) -> Iterable[Any]:
    """(line name, event name, stats by name) of every event on the host plane."""
    for plane in space.planes:
        if not plane.name.startswith("/host:"):
            continue
        stat_names = {k: m.name for k, m in plane.stat_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                meta = plane.event_metadata[event.metadata_id]
                stats = {}
                for stat in list(meta.stats) + list(event.stats):
                    kind = stat.WhichOneof("value")
                    value = getattr(stat, kind) if kind else None
                    stats[stat_names.get(stat.metadata_id, "")] = (stat_names.get(stat.ref_value, "")
                                                                   if kind == "ref_value" else value)
                yield line.name, meta.name, event.duration_ps, stats


# --- item 5, 13: composite rows, the Weights column -----------------------------------------------

@pytest.mark.parametrize("name, mixed_precision", [("bidirectional_lstm_imdb", False),
                                                   ("bidirectional_lstm_imdb", True),
                                                   ("siamese_contrastive", False),
                                                   ("mnist_convnet", False)])
def test_each_row_counts_each_weight_and_slot_once(corpus, name, mixed_precision):
    """Every row of the Ops view's layer tree holds the bytes Keras says its layer's weights hold
    (``layer.weights``: no RNG seed state) and the slots Keras made for them, the model's root
    ``model.weights``: a composite with ops of its own (a Bidirectional wrapper's reverse, the root's
    loss-scale checks) adds its sublayers once, not their sum again."""
    result = corpus(name, mixed_precision=mixed_precision)
    assert result["error"] is None, result["error"]["traceback"]
    (model,) = [m for m in result["models"] if m["key"] == result["fit_calls"][0]["model_key"]]
    slots = collections.Counter()
    for optimizer in result["optimizers"]:
        for slot in optimizer["slots"]:
            slots[slot["weight"]] += slot["bytes"]
    truth = {model["name"]: (model["weights_bytes"], sum(slots.values()))}
    for layer in model["layers"]:
        truth[layer["path"]] = (layer["weights_bytes"], sum(slots[w] for w in layer["weight_paths"]))
    rows = {row["layer"]: row for row in layer_rows(ops_answer(result)) if row["layer"]}
    compared = {path: (rows[path]["weight_bytes"], rows[path]["slot_bytes"]) for path in truth if path in rows}
    assert model["name"] in compared and len(compared) > 3, sorted(rows)
    wrong = {path: (served, truth[path]) for path, served in compared.items() if served != truth[path]}
    assert not wrong, f"(weight, slot) bytes served vs Keras: {wrong}"


# --- item 6: the join ------------------------------------------------------------------------------

def test_loss_scale_checks_are_on_the_layer_of_the_gradient_they_check(corpus):
    """Mixed precision wraps Adam in a LossScaleOptimizer, which checks each gradient (IsFinite_k, All_k,
    in ``model.trainable_variables``' order) before applying them: each check is the optimizer's, on
    the layer owning that variable, and no op is left on the model's root; the join says how much op
    time reached a leaf layer of the tree it serves."""
    result = corpus("bidirectional_lstm_imdb", mixed_precision=True)
    assert result["error"] is None, result["error"]["traceback"]
    (model,) = [m for m in result["models"] if m["key"] == result["fit_calls"][0]["model_key"]]
    assert any(o["class"] == "LossScaleOptimizer" for o in result["optimizers"])
    owners: Dict[str, Set[str]] = collections.defaultdict(set)
    for layer in model["layers"]:
        for path in layer["weight_paths"]:
            owners[path].add(layer["path"])
    body = ops_answer(result)
    ops = body["all_ops"]
    checks = {}
    for op in ops:
        found = re.fullmatch(r"IsFinite(?:_(\d+))?", op["name"].rpartition("/")[2])
        if found and op["op_type"] == "IsFinite":
            checks[int(found.group(1) or 0)] = op
    variables = model["trainable_variable_paths"]
    # Grappler may move one check before a Cast, under a name of its own (ArithmeticOptimizer/...): not numbered
    assert set(checks) <= set(range(len(variables))) and len(checks) >= len(variables) - 1, sorted(checks)
    wrong = {k: (op["name"], op["layer"], op["phase"], variables[k]) for k, op in checks.items()
             if op["layer"] not in owners[variables[k]] or op["phase"] != "optimizer"}
    assert not wrong, wrong
    on_root = [(op["name"], op["time_us"]) for op in ops if op["layer"] == model["name"]]
    assert not on_root, on_root
    rows = layer_rows(body)
    total = sum(op["time_us"] for op in ops)
    on_leaves = sum(row["time_us"] for row in rows if row["layer"] and row["leaf"])
    join = body["join"]
    assert join["leaf_time_us"] == pytest.approx(on_leaves)
    assert join["leaf_fraction"] == pytest.approx(on_leaves / total)
    assert join["fraction"] >= join["leaf_fraction"] >= 0.97, join
    (root,) = [row for row in rows if row["layer"] == model["name"]]
    assert root["own_time_us"] == 0.0, root


@pytest.mark.parametrize("name", ["quickstart_advanced", "dcgan_tutorial"])
def test_a_custom_loops_loss_is_the_loss_not_the_last_layer(corpus, name):
    """A custom loop calls a Keras loss object, which runs inside a name scope of its own name:
    those ops are the loss (on no layer), not the forward pass of the model's last Dense layer."""
    result = corpus(name)
    assert result["error"] is None, result["error"]["traceback"]
    names = {loss["name"] for loss in result["losses"]}
    assert names, result["losses"]
    scope = re.compile(rf"^(?:StatefulPartitionedCall/)?(?:{'|'.join(map(re.escape, names))})(?:_\d+)?/")
    ops = [op for op in ops_answer(result)["all_ops"] if scope.match(op["name"])]
    assert ops, f"no op under the loss scopes {names}"
    wrong = [(op["name"], op["layer"], op["phase"]) for op in ops if op["phase"] != "loss" or op["layer"]]
    assert not wrong, wrong


# --- item 7: unknown is null, with a count ---------------------------------------------------------

def variant_only_types(types: Iterable[str]) -> Set[str]:
    """Op types whose outputs are all variants (a TensorList, an Optional), by TensorFlow's op registry."""
    from tensorflow.core.framework import types_pb2
    from tensorflow.python.framework import op_def_registry

    out = set()
    for op_type in types:
        op_def = op_def_registry.get(op_type)
        if op_def is not None and op_def.output_arg and all(a.type == types_pb2.DT_VARIANT for a in op_def.output_arg):
            out.add(op_type)
    return out


def check_rows_add_their_ops(body: Dict[str, Any]) -> None:
    """Each layer row's output and allocated bytes are the known figures of the ops under it, with the
    unknown ones counted; a row where nothing known adds up is null (unknown), never 0."""
    ops = body["all_ops"]
    for row in layer_rows(body):
        if row["layer"]:
            mine = [op for op in ops if under(row["layer"], op["layer"])]
        else:
            mine = [op for op in ops if not op["layer"] and op["phase"] == row["group"]]
        for field, count in (("new_bytes", "unknown_output_ops"), ("alloc_bytes", "unknown_alloc_ops")):
            known = sum(op[field] or 0 for op in mine)
            missing = sum(op[field] is None for op in mine)
            shown = row["output_bytes" if field == "new_bytes" else field]
            assert row[count] == missing, (row["layer"] or row["group"], count, row[count], missing)
            assert shown == (None if missing and not known else known), (row["layer"] or row["group"], field, shown)


def test_tensorlist_outputs_are_unknown_and_rows_count_what_is_unknown(corpus):
    """A TensorList (an LSTM's loop state) is a variant: its bytes are the tensors it holds, which its
    graph spec does not say; never a derived 0."""
    result = corpus("bidirectional_lstm_imdb")
    body = ops_answer(result)
    ops = body["all_ops"]
    variants = variant_only_types({op["op_type"] for op in ops})
    listed = [op for op in ops if op["op_type"] in variants]
    assert any(op["op_type"].startswith("TensorList") for op in listed), sorted(variants)
    wrong = [(op["name"], op["bytes_source"], op["output_bytes"], op["new_bytes"]) for op in listed
             if op["bytes_source"] == "derived" or op["output_bytes"] is not None or op["new_bytes"] is not None]
    assert not wrong, wrong[:10]
    check_rows_add_their_ops(body)


def test_a_profile_without_allocation_events_has_no_allocation_figure(corpus):
    """siamese_contrastive's step allocates only small buffers, which TensorFlow's default CPU allocator
    does not record: its profile (read with xplane_pb2) has no allocation event, so no op, layer or
    peak figure of allocated bytes is known, and What if says why (that allocator), not another cause."""
    result = corpus("siamese_contrastive", "plain")
    events = [name for _, name, _, _ in host_events(xspace(result)) if name == "MemoryAllocation"]
    assert not events
    body = ops_answer(result)
    assert {op["alloc_bytes"] for op in body["all_ops"]} == {None}
    for row in layer_rows(body):
        assert row["alloc_bytes"] is None, row
        assert row["peak_activations_bytes"] is None and row["peak_gradients_bytes"] is None, row
    check_rows_add_their_ops(body)
    whatif = Served(result["logdir"]).json("/whatif", run=result["run"], tag=body["tag"], batch=64)["whatif"]
    assert whatif["peak_bytes"] is None
    reasons = {whatif["unknown"][c] for c in ("activations", "gradients", "optimizer_temporaries", "inputs",
                                              "temporaries")}
    assert reasons == {body["allocations_note"]} and "TF_CPU_ALLOCATOR_USE_BFC" in body["allocations_note"], reasons


# --- item 8: a plain keras.callbacks.TensorBoard profile -------------------------------------------

def test_a_plain_profile_says_its_graph_is_empty_and_leaves_unplaced_optimizer_time_unknown(corpus):
    """keras.callbacks.TensorBoard(profile_batch=2) writes a 'batch_2' graph_run_metadata_graph, but
    TensorFlow's trace_export finds no function traced while it was on (Keras traced its step first):
    the RunMetadata holds no graph. Output bytes are then only what the allocator measured, the answer
    says why, and the optimizer's time per layer, which no op could be placed for, is unknown (null),
    not 0, with the unplaced time in the join."""
    from tensorboard.backend.event_processing import event_file_loader
    from tensorflow.core.protobuf import config_pb2

    result = corpus("mnist_convnet", "plain")
    blobs = []
    run_dir = os.path.join(result["logdir"], result["run"])
    for name in sorted(os.listdir(run_dir)):
        if "tfevents" in name:
            for event in event_file_loader.LegacyEventFileLoader(os.path.join(run_dir, name)).Load():
                for value in event.summary.value:
                    if value.tag == "batch_2":
                        blobs += list(value.tensor.string_val)
    assert blobs, "no batch_2 summary"
    metadata = config_pb2.RunMetadata.FromString(blobs[-1])
    assert not metadata.function_graphs and not metadata.partition_graphs  # TensorFlow's own reading
    measured = {stats["tf_op"].partition(":")[0] for _, name, _, stats in host_events(xspace(result))
                if name == "MemoryAllocation" and stats.get("region_type") == "output" and stats.get("tf_op")}

    body = ops_answer(result)
    assert body["graph"]["tag"] == "batch_2" and body["graph"]["graphs"] == 0
    assert "batch_2" in body["graph"]["note"] and "allocator" in body["graph"]["note"]
    ops = body["all_ops"]
    assert {op["name"] for op in ops if op["bytes_source"] != "unknown"} == measured
    assert all(op["output_bytes"] is None for op in ops if op["name"] not in measured)
    optimizer = [op for op in ops if op["phase"] == "optimizer"]
    assert optimizer and not any(op["layer"] for op in optimizer)
    assert body["join"]["unplaced_time_us"]["optimizer"] == pytest.approx(sum(op["time_us"] for op in optimizer))
    assert all(row["optimizer_time_us"] is None for row in layer_rows(body) if row["layer"])
    check_rows_add_their_ops(body)


# --- item 10: the input batch ----------------------------------------------------------------------

def _pipeline_slices(result: Dict[str, Any]) -> Tuple[Set[str], Dict[str, int]]:
    """(The ops that ran only on tf.data's threads in the window, the bytes each asked for its output there),
    read from the profile with TensorFlow's own protos."""
    lines: Dict[str, Set[str]] = collections.defaultdict(set)
    sizes = {}
    for line, name, _, stats in host_events(xspace(result)):
        if re.fullmatch(r"[^:]+:\w+", name):  # an op, "node:Type" (not "Iterator::Root", not an allocation)
            lines[name.partition(":")[0]].add(line.partition("/")[0])
        if name == "MemoryAllocation" and stats.get("region_type") == "output" and stats.get("tf_op"):
            sizes[stats["tf_op"].partition(":")[0]] = int(stats["requested_bytes"])
    pipeline = {op for op, where in lines.items() if all(w.startswith("tf_data") for w in where)}
    return pipeline, {op: sizes[op] for op in pipeline if op in sizes}


def test_the_batch_the_input_pipeline_slices_is_an_input(corpus):
    """Keras' fit slices each batch from the arrays with a GatherV2 on tf.data's own threads, which
    the profile (read with xplane_pb2) shows running beside the step: that op is the input, and its
    output buffer, live at the peak, an input, as is the batch the step took before the window."""
    result = corpus("cnn_tutorial", "plain")
    pipeline, sliced = _pipeline_slices(result)
    # the premise, not the tool: on a busy machine tf.data's threads may slice the next batch just after the
    # one-step window closes (a CI run's did); such a run is run again, up to twice
    for _ in range(2):
        if sliced:
            break
        result = corpus("cnn_tutorial", "plain", again=True)
        pipeline, sliced = _pipeline_slices(result)
    assert sliced, f"no op of the input pipeline allocated an output in the window: {sorted(pipeline)}"
    body = ops_answer(result)
    rows = {op["name"]: op for op in body["all_ops"]}
    assert {op: (rows[op]["phase"], rows[op]["layer"]) for op in pipeline} == {op: ("input", "") for op in pipeline}
    buffers = [b for b in body["timeline"]["buffers"] if b["op"] in sliced]
    assert all(b["category"] == "inputs" for b in buffers), buffers
    batch = set(sliced.values())
    before = [b for b in body["timeline"]["buffers"] if not b["op"] and b["bytes"] in batch]
    assert all(b["category"] == "inputs" for b in before), before
    peak = body["peak_by_category"]
    assert peak["inputs"] == sum(b["bytes"] for b in body["timeline"]["buffers"] if b["category"] == "inputs")
    assert peak["inputs"] >= sum(b["bytes"] for b in buffers + before) > 0


# --- item 9: the resident state with TensorFlow's default CPU allocator ------------------------------

@pytest.mark.parametrize("name", ["mnist_convnet", "cnn_tutorial", "bidirectional_lstm_imdb"])
def test_resident_state_is_whole_at_the_peak_and_over_the_timeline(corpus, name):
    """With TensorFlow's default CPU allocator (oneDNN on) the profile counts only large allocations:
    the model's weights and the optimizer's slots, which never change during a step, are there whole
    at the peak and at every point of the timeline (Keras' variables and slots), whatever the
    allocator's own count says."""
    result = corpus(name)
    (model,) = [m for m in result["models"] if m["key"] == result["fit_calls"][0]["model_key"]]
    truth = {"weights": model["trainable_bytes"],
             "optimizer_slots": sum(o["slot_bytes"] for o in result["optimizers"] if o["key"] in model["optimizers"])}
    body = ops_answer(result)
    assert body["allocations"] == "large", body["allocations"]
    peak = body["peak_by_category"]
    assert {c: peak[c] for c in truth} == truth
    stacks = body["timeline"]["stacks"]
    for category, value in truth.items():
        assert set(stacks[category]) == {value}, (category, min(stacks[category]), max(stacks[category]), value)
    parts = sum(v for k, v in peak.items() if k not in ("total", "unknown", "step_peak_bytes") and v is not None)
    assert peak["total"] == parts


# --- item 13: a wrapped optimizer's config --------------------------------------------------------

def test_a_wrapped_optimizers_config_is_summarised(corpus):
    """Mixed precision's LossScaleOptimizer holds its inner optimizer as a serialized object: the
    breakdown's summary names both and the settings Keras' own get_config() gives each."""
    result = corpus("bidirectional_lstm_imdb", mixed_precision=True)
    (wrapper,) = [o for o in result["optimizers"] if o["class"] == "LossScaleOptimizer"]
    config = wrapper["config"]
    inner = config["inner_optimizer"]
    served = Served(result["logdir"]).json("/breakdown", run=result["run"], tag="storage")
    (summary,) = served["optimizer_summary"]["optimizers"]

    def plain(values: Dict[str, Any]) -> Dict[str, Any]:
        return {k: v for k, v in values.items() if k != "name" and isinstance(v, (bool, int, float, str))}

    assert (summary["class_name"], summary["name"]) == ("LossScaleOptimizer", config["name"])
    assert summary["settings"] == pytest.approx(plain(config))
    nested = summary["nested"]["inner_optimizer"]
    assert (nested["class_name"], nested["name"]) == (inner["class_name"], inner["config"]["name"])
    assert nested["settings"] == pytest.approx(plain(inner["config"]))
    text = served["optimizer_summary"]["text"]
    assert text.startswith("LossScaleOptimizer(") and f"inner_optimizer: {inner['class_name']}(learning_rate=0.001," \
        in text, text
