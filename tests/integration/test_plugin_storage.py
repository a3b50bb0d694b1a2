"""Issue 2 acceptance through the backend: real TF runs -> event files -> plugin JSON."""

from __future__ import annotations

import os

import keras
import pytest
import tensorflow as tf

from demo.models import mnist_like, seed001_convnet, seed001_tf1_graph
from tb_modelmem import summary
from tb_modelmem.capture.variables import breakdown_of
from tests.support.plugin_harness import Served, layer_rows


def _train_one_step(optimizer) -> keras.Model:
    model = seed001_convnet()
    model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = mnist_like(2)
    model.fit(x, y, batch_size=2, epochs=1, verbose=0)
    return model


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Served:
    logdir = str(tmp_path_factory.mktemp("logs"))
    for run, optimizer in (("adam", keras.optimizers.Adam()), ("sgd", keras.optimizers.SGD())):
        model = _train_one_step(optimizer)
        with tf.summary.create_file_writer(os.path.join(logdir, run)).as_default():
            assert summary.variables("storage", model=model, optimizer=model.optimizer, step=1)
    with tf.Graph().as_default():
        seed001_tf1_graph("adam")
        writer = tf.compat.v1.summary.FileWriter(os.path.join(logdir, "tf1"))
        writer.add_summary(summary.pb("storage", breakdown_of(None, None)).SerializeToString(), 1)
        writer.close()
    return Served(logdir)


def test_seed001_adam_weights_and_slots(served):
    body = served.json("/breakdown", run="adam", tag="storage")
    assert body["totals"]["weight"] == 13_098_536
    assert body["totals"]["optimizer_slot"] == 26_197_072
    assert body["total_params"] == 3_274_634
    assert body["optimizer"]["class_name"] == "Adam"


def test_sgd_run_has_no_slots_for_comparison(served):
    body = served.json("/breakdown", run="sgd", tag="storage")
    assert body["totals"]["weight"] == 13_098_536
    assert body["totals"]["optimizer_slot"] == 0


def test_tf1_adam_is_37_48_mib_with_beta_powers(served):
    body = served.json("/breakdown", run="tf1", tag="storage")
    assert body["totals"] == {"weight": 13_098_536, "non_trainable": 0, "optimizer_slot": 26_197_072, "other": 8}
    assert body["total_bytes"] == 39_295_616
    assert round(body["total_bytes"] / 2**20, 2) == 37.48
    # no Keras layers in a TF1 graph: layers and derivations come from variable scopes
    derivations = {row["layer"]: row["derivation"] for row in layer_rows(body)}
    assert derivations["conv1"] == "(5*5*1+1)*32 = 832" and derivations["fc1"] == "(3136+1)*1024 = 3,212,288"
    assert derivations["(no layer)"] == ""  # beta1_power, beta2_power: optimizer state, no params


def test_lenet_layers_params_and_derivations_match_keras(served):
    model = seed001_convnet()
    rows = layer_rows(served.json("/breakdown", run="adam", tag="storage"))
    layers = {row["layer"].split("/")[-1]: row for row in rows}
    for name, params in (("conv1", 832), ("conv2", 51_264), ("fc1", 3_212_288), ("fc2", 10_250)):
        assert layers[name]["params"] == params == model.get_layer(name).count_params()
        assert layers[name]["derivation"].endswith(f"= {params:,}")
    assert layers["conv1"]["derivation"] == "(5*5*1+1)*32 = 832"
    # a layer's slots are charged to it: Adam keeps two slots per weight
    assert layers["fc1"]["bytes"]["optimizer_slot"] == 2 * layers["fc1"]["bytes"]["weight"]
    # the model is the tree's root: its row totals its layers
    (root,) = [row for row in rows if row["depth"] == 0 and row["layer"] == model.name]
    assert root["params"] == model.count_params() and not root["leaf"]
    expected = [f"{model.name}/{layer.name}" for layer in model.layers]
    assert [row["layer"] for row in rows if row["depth"] == 1] == expected


def test_totals_equal_sum_over_model_and_optimizer_variables(served):
    model = _train_one_step(keras.optimizers.Adam())
    expected = sum(int(tf.TensorShape(v.shape).num_elements()) * tf.as_dtype(v.dtype).size
                   for v in model.variables + model.optimizer.variables)
    assert served.json("/breakdown", run="adam", tag="storage")["total_bytes"] == expected


def test_tf1_variables_of_unknown_shape_are_served_with_no_params(tmp_path):
    """capture records a TF1 variable of unknown shape as -1 dims and 0 bytes; the backend
    reads that payload back and counts no parameters for it (never a negative count)."""
    v1 = tf.compat.v1
    with tf.Graph().as_default():
        with v1.variable_scope("dense"):
            v1.Variable(tf.zeros([3, 4]), name="kernel")
            v1.Variable(tf.zeros([4]), name="bias")
            v1.Variable(v1.placeholder_with_default(tf.zeros([2, 4]), shape=[None, 4]), validate_shape=False,
                        name="memory")
        v1.Variable(v1.placeholder_with_default(tf.zeros([2]), shape=None), validate_shape=False, name="free")
        writer = v1.summary.FileWriter(str(tmp_path / "tf1"))
        writer.add_summary(summary.pb("storage", breakdown_of(None, None)).SerializeToString(), 1)
        writer.close()
    body = Served(str(tmp_path)).json("/breakdown", run="tf1", tag="storage")
    variables = {v["name"]: v for v in body["variables"]["rows"]}
    assert (variables["free"]["shape"], variables["free"]["bytes"], variables["free"]["params"]) == ([-1], 0, 0)
    assert (variables["dense/memory"]["shape"], variables["dense/memory"]["params"]) == ([-1, 4], 0)
    assert body["total_params"] == 3 * 4 + 4 and body["totals"]["weight"] == (3 * 4 + 4) * 4
    layers = {row["layer"]: row for row in layer_rows(body)}
    assert layers["dense"]["params"] == 16 and all(row["params"] >= 0 for row in layers.values()), layers


def test_paging_a_table_asks_the_data_provider_for_its_steps_once_per_listing(served, monkeypatch):
    """Sorting, filtering and scrolling the variables re-ask for the tag's steps on every request
    (a gRPC call on --load_fast=true): reused for LISTING_SECONDS, as the item listing is."""
    from tb_modelmem.plugin import sources

    reads = []
    provider = served.plugin._sources[0]._steps._provider
    original = provider.read_blob_sequences
    monkeypatch.setattr(provider, "read_blob_sequences", lambda *a, **k: reads.append(k) or original(*a, **k))
    clock = [sources.time.monotonic() + 10 * sources.LISTING_SECONDS]  # what earlier tests read is stale
    monkeypatch.setattr(sources.time, "monotonic", lambda: clock[0])
    pages = [served.json("/variables", run="sgd", tag="storage", sort=column, offset=offset)
             for column in ("bytes", "name") for offset in (0, 5)]
    assert all(page["rows"] for page in pages)
    assert len(reads) == 1
    clock[0] += sources.LISTING_SECONDS  # a new step would show now
    served.json("/variables", run="sgd", tag="storage")
    assert len(reads) == 2


def test_a_layer_shared_by_two_parents_is_counted_once_above_them(tmp_path):
    """One Dense in two towers of one model: Keras counts it in each tower's count_params() and once in
    the model's. The Storage tree's root counts it once; each tower's row counts what it owns, and what
    it shares with the other tower is ``shared_params``, so the two add up to Keras' count per tower."""
    shared = keras.layers.Dense(8, name="shared")
    inputs = keras.Input((4,))
    tower_a = keras.Sequential([keras.Input((4,)), shared, keras.layers.Dense(2, name="head_a")], name="tower_a")
    tower_b = keras.Sequential([keras.Input((4,)), shared, keras.layers.Dense(3, name="head_b")], name="tower_b")
    model = keras.Model(inputs, [tower_a(inputs), tower_b(inputs)], name="two_towers")
    with tf.summary.create_file_writer(str(tmp_path)).as_default():
        assert summary.variables("storage", model=model, step=0)
    body = Served(str(tmp_path)).json("/breakdown", run=".", tag="storage")
    rows = {row["layer"]: row for row in layer_rows(body)}
    assert body["total_params"] == rows["two_towers"]["params"] == model.count_params()
    assert rows["two_towers"]["bytes"]["weight"] == sum(w.numpy().nbytes for w in model.weights)
    for tower in (tower_a, tower_b):
        row = rows[f"two_towers/{tower.name}"]
        assert row["params"] + row["shared_params"] == tower.count_params(), row
    assert rows["two_towers/tower_a"]["params"] + rows["two_towers/tower_b"]["params"] == model.count_params()
    assert rows["two_towers/tower_b/shared"]["params"] == shared.count_params()  # the layer's own count, shown
