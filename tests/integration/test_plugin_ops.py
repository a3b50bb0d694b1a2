"""Issue 3 acceptance through the backend: real traces -> event files -> plugin JSON."""

from __future__ import annotations

import os

import keras
import pytest
import tensorflow as tf

import tb_modelmem
from demo.models import mnist_like, seed001_convnet, seed001_tf1_graph, traced_step
from tb_modelmem import summary
from tb_modelmem.readers.run_metadata import reduce_run_metadata
from tb_modelmem.schema.names import DERIVED, MEASURED
from tests.support.plugin_harness import Served, layer_rows, write_events
from tests.support.trace_fixtures import synthetic_run_metadata

LENET_OUTPUTS = {"conv1": 100_352, "conv2": 50_176, "fc1": 4_096}  # batch 1, float32


def _tf1_old_logdir(run_dir: str) -> None:
    """A log dir written by plain TF1 (no tb_modelmem call): FileWriter.add_run_metadata."""
    v1 = tf.compat.v1
    with tf.Graph().as_default(), v1.Session() as sess:
        x, y, _, train_op = seed001_tf1_graph("adam")
        sess.run(v1.global_variables_initializer())
        run_metadata = traced_step(sess, x, y, train_op)
        writer = v1.summary.FileWriter(run_dir, sess.graph)
        writer.add_run_metadata(run_metadata, "step_1", global_step=1)
        writer.close()


def _forward_output(ops, layer: str) -> dict:
    """The op whose output is the layer's activation (the largest new forward output joined to it)."""
    forward = [op for op in ops if op["layer"].split("/")[-1] == layer and op["phase"] == "forward"]
    return max(forward, key=lambda op: op["new_bytes"] or 0)


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Served:
    logdir = str(tmp_path_factory.mktemp("logs"))
    _tf1_old_logdir(os.path.join(logdir, "tf1_plain"))
    model = seed001_convnet()
    model.compile(optimizer=keras.optimizers.Adam(), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = mnist_like(4)
    model.fit(x, y, batch_size=1, epochs=1, verbose=0,
              callbacks=[tb_modelmem.MemoryCallback(logdir, subdir="keras", profile_steps=(2, 3))])
    big = reduce_run_metadata(synthetic_run_metadata(20_000))
    write_events(os.path.join(logdir, "big"), [(step, summary.pb("ops", big)) for step in range(3)])
    with tf.Graph().as_default():  # trace_export without profiler: RunMetadata with no step stats
        writer = tf.compat.v1.summary.FileWriter(os.path.join(logdir, "no_stats"))
        writer.add_run_metadata(tf.compat.v1.RunMetadata(), "empty")
        writer.close()
    return Served(logdir)


def test_plain_tf1_log_dir_shows_its_ops_without_conversion(served):
    tag = served.tags()[("tf1_plain", "step_1")]
    assert tag["origin"] == "run_metadata" and tag["kind"] == "ops"
    ops = served.all_ops("tf1_plain", "step_1")
    for layer, expected in LENET_OUTPUTS.items():
        op = _forward_output(ops, layer)
        assert op["output_bytes"] == expected and op["bytes_source"] == MEASURED, op
        assert op["layer"] == layer and op["phase"] == "forward"  # the run graph's variable scopes are its layers
    conv1 = _forward_output(ops, "conv1")
    assert conv1["output_shape"] == "[1,28,28,32]" and conv1["output_dtype"] == "float32"
    timed = [op for op in ops if op["op_type"] not in ("_Arg", "_Retval", "NoOp")]
    assert timed and all(op["time_us"] > 0 for op in timed)
    # the TF1 Adam update of fc1's kernel is charged to fc1, not to the first layer a name component matches
    updates = [op for op in ops if op["op_type"].endswith("ApplyAdam")]
    assert {op["name"].split("/update_")[1].split("/")[0]: op["layer"] for op in updates} == \
        {"conv1": "conv1", "conv2": "conv2", "fc1": "fc1", "fc2": "fc2"}
    assert {op["phase"] for op in updates} == {"optimizer"}


def test_fused_onednn_kernel_names_the_ops_it_stands_for(served):
    ops = served.all_ops("tf1_plain", "step_1")
    fused = [op for op in ops if op["fused"]]
    if not fused:
        pytest.skip("this TensorFlow build does not fuse Conv2D+BiasAdd+Relu")
    conv = _forward_output(ops, "conv1")
    assert conv["fused"] == ["Conv2D", "BiasAdd", "Relu"], conv


def test_profiled_keras_steps_have_lenet_outputs_and_a_reconciled_peak(served):
    body = served.json("/ops", run="keras", tag="ops")
    assert body["step"] == 3 and body["source"] == "xspace"
    ops = served.all_ops("keras", "ops")
    for layer, expected in LENET_OUTPUTS.items():
        op = _forward_output(ops, layer)
        assert op["output_bytes"] == expected and op["bytes_source"] in (MEASURED, DERIVED), op
    peak = body["peak_by_category"]
    assert peak["weights"] == 13_098_536  # joined from the run's breakdown
    # TF's default CPU allocator neither records nor counts small buffers (biases, conv1's kernel and their
    # slots): the part of Adam's state it counted, and a note saying so (BFC: tests/integration/test_peak_categories.py)
    assert 0.95 * 26_197_072 <= peak["optimizer_slots"] <= 26_197_072
    assert body["allocations"] == "large" and "TF_CPU_ALLOCATOR_USE_BFC" in body["allocations_note"]
    parts = sum(peak[c] for c in ("weights", "non_trainable", "optimizer_slots", "other_state", "gradients",
                                  "activations", "optimizer_temporaries", "inputs", "temporaries", "unattributed"))
    assert parts == peak["total"] == body["peak_bytes"] > 0
    layers = {row["layer"].split("/")[-1]: row for row in layer_rows(body) if row["layer"]}
    assert layers["fc1"]["weight_bytes"] == 12_849_152 and layers["fc1"]["time_us"] > 0
    assert body["breakdown"] == {"tag": "storage", "step": body["breakdown"]["step"]}
    assert body["breakdowns"] == ["storage"]


def test_a_20000_op_trace_reads_one_blob_per_request(served, monkeypatch):
    provider = served.plugin._sources[0]._provider
    reads = []
    real_read_blob = provider.read_blob
    monkeypatch.setattr(provider, "read_blob", lambda ctx=None, *, blob_key: reads.append(blob_key)
                        or real_read_blob(ctx, blob_key=blob_key))
    body = served.json("/ops", run="big", tag="ops", step=1)
    assert body["ops"]["total"] == 20_000 and len(body["ops"]["rows"]) == 100 and body["step"] == 1
    assert len(reads) == 1  # not the other steps, not the other runs
    page = served.json("/op_rows", run="big", tag="ops", step=1, offset=19_950, limit=100, sort="name", order="asc")
    assert (page["matched"], len(page["rows"])) == (20_000, 50)
    assert len(reads) == 1  # the next pages come from the decoded record


def test_run_metadata_without_step_stats_is_a_clear_422(served):
    response = served.settled("/ops", run="no_stats", tag="empty")
    assert response.status_code == 422
    assert "step stats" in response.get_data(as_text=True)
