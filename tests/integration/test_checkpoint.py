"""Checkpoint breakdowns against the seed-001 ConvNet (docs/USER_PROBLEMS.md #2), with real TF files."""

import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from tb_modelmem.capture.variables import breakdown_of
from tb_modelmem.readers.checkpoint import InspectError, find_prefix, read_checkpoint
from tb_modelmem.schema.names import NON_TRAINABLE, OPTIMIZER_SLOT, OTHER, WEIGHT
from tests.support.checkpoint_models import (
    SEED_DATA_BYTES,
    SLOT_BYTES,
    WEIGHT_BYTES,
    assert_reconciled,
    by_role,
    keras_convnet,
    save_tf1_convnet,
)


@pytest.fixture(scope="session")
def tf1_prefix(tmp_path_factory):
    return save_tf1_convnet(str(tmp_path_factory.mktemp("tf1")))


@pytest.fixture(scope="session")
def convnet():
    return keras_convnet()


@pytest.fixture(scope="session")
def tf2_prefix(tmp_path_factory, convnet):
    folder = tmp_path_factory.mktemp("tf2")
    return tf.train.Checkpoint(model=convnet, optimizer=convnet.optimizer).save(str(folder / "ckpt"))


def test_tf1_checkpoint_matches_seed_figures_to_the_byte(tf1_prefix):
    bd = read_checkpoint(tf1_prefix)
    assert by_role(bd) == {WEIGHT: WEIGHT_BYTES, NON_TRAINABLE: 0, OPTIMIZER_SLOT: SLOT_BYTES, OTHER: 8}
    data_file = tf1_prefix + ".data-00000-of-00001"
    # The Saver writes nothing but the variables into .data: no string tensors, no padding.
    assert os.path.getsize(data_file) == SEED_DATA_BYTES == sum(v.bytes for v in bd.variables)
    assert not any(".data" in o["what"] for o in bd.overhead)
    assert_reconciled(bd)
    assert {o["what"].split()[0] for o in bd.overhead} == {".index", ".meta", "'checkpoint'"}


def test_tf1_slots_point_at_their_weights(tf1_prefix):
    bd = read_checkpoint(tf1_prefix)
    slots = {v.name: (v.slot, v.slot_of) for v in bd.variables if v.role == OPTIMIZER_SLOT}
    assert slots["fc1/kernel/Adam"] == ("m", "fc1/kernel")
    assert slots["fc1/kernel/Adam_1"] == ("v", "fc1/kernel")
    assert {v.name for v in bd.variables if v.role == OTHER} == {"beta1_power", "beta2_power"}
    assert bd.optimizer["class_name"] == "tf.compat.v1.train.AdamOptimizer"
    assert bd.optimizer["config"]["lr"] == pytest.approx(1e-4)


def test_tf1_without_meta_still_classifies_and_names_the_optimizer(tf1_prefix, tmp_path):
    for suffix in (".index", ".data-00000-of-00001"):
        shutil.copy(tf1_prefix + suffix, tmp_path / ("model.ckpt" + suffix))
    bd = read_checkpoint(str(tmp_path / "model.ckpt"))
    assert by_role(bd)[OPTIMIZER_SLOT] == SLOT_BYTES
    assert bd.optimizer["class_name"] == "Adam"
    assert bd.file_bytes == SEED_DATA_BYTES + os.path.getsize(tf1_prefix + ".index")


def test_tf2_checkpoint_gives_the_same_weight_and_slot_figures(tf2_prefix):
    bd = read_checkpoint(tf2_prefix)
    roles = by_role(bd)
    assert (roles[WEIGHT], roles[OPTIMIZER_SLOT]) == (WEIGHT_BYTES, SLOT_BYTES)
    assert roles[OTHER] == 8 + 4 + 8  # iterations (int64), learning_rate (float32), save_counter (int64)
    graph_line = [o for o in bd.overhead if "object graph" in o["what"]]
    assert len(graph_line) == 1 and graph_line[0]["bytes"] > 0
    assert_reconciled(bd)
    kernel_slots = {v.slot for v in bd.variables if v.slot_of and v.slot_of.endswith("kernel")}
    assert kernel_slots == {"momentum", "velocity"}


def test_tf2_batchnorm_moving_stats_are_non_trainable(tmp_path):
    model = keras_convnet(batchnorm=True)
    prefix = tf.train.Checkpoint(model=model, optimizer=model.optimizer).save(str(tmp_path / "ckpt"))
    roles = by_role(read_checkpoint(prefix))
    assert roles[NON_TRAINABLE] == 2 * 32 * 4  # moving_mean, moving_variance
    assert roles[WEIGHT] == WEIGHT_BYTES + 2 * 32 * 4  # gamma, beta
    assert roles[OPTIMIZER_SLOT] == 2 * roles[WEIGHT]


def test_tf2_legacy_optimizer_slot_variables(tmp_path):
    """tf.compat.v1 optimizers in eager mode record slots in the object graph's slot_variables."""
    module = tf.Module()
    module.w = tf.Variable(tf.ones([3, 4]))
    opt = tf.compat.v1.train.MomentumOptimizer(0.1, momentum=0.9)
    opt.minimize(lambda: tf.reduce_sum(module.w * 2.0), var_list=[module.w])
    checkpoint = tf.train.Checkpoint(module=module, optimizer=opt)
    bd = read_checkpoint(checkpoint.save(str(tmp_path / "ckpt")))
    slot = [v for v in bd.variables if v.role == OPTIMIZER_SLOT]
    # A variable is named as it was created (tf.Variable's default "Variable"), as live capture names it.
    assert [(s.slot, s.slot_of, s.bytes) for s in slot] == [("momentum", module.w.name.split(":")[0], 48)]
    assert by_role(bd)[WEIGHT] == 48
    live = breakdown_of(checkpoint)
    assert [(v.name, v.role, v.slot, v.slot_of) for v in live.variables if v.role != OTHER] == \
        [(v.name, v.role, v.slot, v.slot_of) for v in bd.variables if v.role != OTHER]


def test_prefix_from_folder_index_or_data_file(tf1_prefix):
    folder = os.path.dirname(tf1_prefix)
    assert find_prefix(folder) == tf1_prefix
    assert find_prefix(tf1_prefix + ".index") == tf1_prefix
    assert find_prefix(tf1_prefix + ".data-00000-of-00001") == tf1_prefix


def test_truncated_data_shard_is_an_error(tf1_prefix, tmp_path):
    for suffix in (".index", ".data-00000-of-00001"):
        shutil.copy(tf1_prefix + suffix, tmp_path / ("model.ckpt" + suffix))
    os.truncate(tmp_path / "model.ckpt.data-00000-of-00001", 1000)
    with pytest.raises(InspectError, match="truncated"):
        read_checkpoint(str(tmp_path / "model.ckpt"))


def test_corrupt_index_is_an_error(tf1_prefix, tmp_path):
    shutil.copy(tf1_prefix + ".data-00000-of-00001", tmp_path / "model.ckpt.data-00000-of-00001")
    (tmp_path / "model.ckpt.index").write_bytes(b"\0" * 200)
    with pytest.raises(InspectError, match="corrupt checkpoint index"):
        read_checkpoint(str(tmp_path / "model.ckpt"))


def test_folder_without_checkpoint_is_an_error(tmp_path):
    with pytest.raises(InspectError, match="no TensorFlow checkpoint in this folder"):
        read_checkpoint(str(tmp_path))
    # a log dir given to inspect (a new user's first try): says what reads one
    (tmp_path / "run" / "train").mkdir(parents=True)
    (tmp_path / "run" / "train" / "events.out.tfevents.1.host").write_bytes(b"")
    with pytest.raises(InspectError, match="it is a TensorBoard log dir: open it with tensorboard --logdir, or "
                                           "project a run's traced step with tb-modelmem estimate"):
        read_checkpoint(str(tmp_path))
    # a PyTorch user's run folder: the files inspect reads one at a time are named
    for name in ("ckpt.pt", "model.safetensors", "events.out.tfevents.1"):
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(InspectError, match="it holds ckpt.pt, model.safetensors: inspect one of them$"):
        read_checkpoint(str(tmp_path))


def test_tf1_partitioned_frozen_and_centered_rmsprop(tmp_path):
    """Slices of a partitioned variable count as that variable; the .meta graph says what is trainable."""
    v1 = tf.compat.v1
    with tf.Graph().as_default():
        x = v1.placeholder(tf.float32, [None, 8])
        emb = v1.get_variable("emb", [100, 16], partitioner=v1.fixed_size_partitioner(3))
        with v1.variable_scope("fc"):
            h = x @ v1.get_variable("kernel", [8, 16])
        with v1.variable_scope("bn"):
            mean = v1.get_variable("moving_mean", [16], trainable=False, initializer=v1.zeros_initializer())
            frozen = v1.get_variable("frozen_scale", [16], trainable=False)
            h = (h - mean) * frozen + tf.reduce_sum(tf.nn.embedding_lookup(emb, [1, 2]))
        step = v1.train.get_or_create_global_step()
        train = v1.train.RMSPropOptimizer(0.01, momentum=0.9, centered=True).minimize(
            tf.reduce_mean(h ** 2), global_step=step)
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            sess.run(train, {x: np.ones([4, 8])})
            prefix = v1.train.Saver().save(sess, str(tmp_path / "model.ckpt"))
    bd = read_checkpoint(prefix)
    weights = (100 * 16 + 8 * 16) * 4
    assert by_role(bd) == {WEIGHT: weights, NON_TRAINABLE: 2 * 16 * 4, OPTIMIZER_SLOT: 3 * weights, OTHER: 8}
    assert not any(".data" in o["what"] for o in bd.overhead)  # slices are the variable's own bytes
    assert_reconciled(bd)
    assert {v.slot for v in bd.variables if v.slot_of == "emb"} == {"rms", "mg", "momentum"}
    assert bd.optimizer["class_name"] == "tf.compat.v1.train.RMSPropOptimizer"


def test_a_step_counter_is_other_live_and_in_the_file(convnet, tmp_path):
    """tf.Variable(1) is 'trainable' to TensorFlow, but an integer no gradient updates: a counter
    (issue 7 item 8: live capture called it a weight, inspect other)."""
    checkpoint = tf.train.Checkpoint(model=convnet, optimizer=convnet.optimizer, step=tf.Variable(1))
    assert checkpoint.step.trainable
    live = {v.name: v.role for v in breakdown_of(checkpoint).variables}
    stored = {v.name: v.role for v in read_checkpoint(checkpoint.save(str(tmp_path / "ckpt"))).variables}
    assert live[checkpoint.step.name.split(":")[0]] == stored[checkpoint.step.name.split(":")[0]] == OTHER
    assert by_role_of(live) == by_role_of({k: v for k, v in stored.items() if k != "save_counter"})


def by_role_of(roles_by_name):
    return sorted(roles_by_name.values())


def test_dtype_names_and_sizes_are_tensorflows():
    """inspect reads dtypes without TensorFlow; its table must say what TensorFlow says."""
    from tensorboard.compat.proto import types_pb2

    from tb_modelmem.readers.dtypes import dtype_name, dtype_size

    for enum in (v for v in types_pb2.DataType.values() if 0 < v < 100):
        dtype = tf.as_dtype(enum)
        assert dtype_name(enum) == dtype.name, enum
        fixed = dtype not in (tf.string, tf.resource, tf.variant)
        assert dtype_size(enum) == (dtype.size if fixed else 0), dtype.name


def save_guide_checkpoint(folder):
    """The TF "Training checkpoints" guide's pattern: a subclassed Keras model, Adam, a step
    counter, ``tf.train.Checkpoint(step=, optimizer=, net=)`` saved by a ``CheckpointManager``
    from a GradientTape loop (https://www.tensorflow.org/guide/checkpoint)."""
    import keras

    class MyModel(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(64, activation="relu")
            self.dense_1 = keras.layers.Dense(10)

        def call(self, x):
            return self.dense_1(self.dense(x))

    net, opt = MyModel(), keras.optimizers.Adam(0.1)
    ckpt = tf.train.Checkpoint(step=tf.Variable(1), optimizer=opt, net=net)
    manager = tf.train.CheckpointManager(ckpt, str(folder), max_to_keep=3)
    x, y = tf.ones([4, 32]), tf.ones([4, 10])
    for _ in range(2):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((net(x) - y) ** 2)
        opt.apply_gradients(zip(tape.gradient(loss, net.trainable_variables), net.trainable_variables))
        ckpt.step.assign_add(1)
        manager.save()
    return net, opt, manager.latest_checkpoint


def test_the_checkpoint_guides_checkpoint_links_adams_slots(tmp_path):
    """Issue 31 item 1: Adam's m and v of a subclassed model's checkpoint came out non_trainable
    (Keras names them after the weight's path, "my_model_dense_kernel_momentum", while the
    checkpoint names the weight "my_model/kernel"), the optimizer "not recorded"."""
    from tb_modelmem.rules.rollup import layer_rollup

    net, opt, prefix = save_guide_checkpoint(tmp_path)
    nbytes = lambda v: int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize  # noqa: E731
    momentums, velocities = opt._momentums, opt._velocities  # Keras' own lists, in trainable_variables order
    bd = read_checkpoint(str(tmp_path))  # the folder, as a user points at it
    assert prefix.endswith("ckpt-2")
    assert by_role(bd) == {WEIGHT: sum(nbytes(w) for w in net.trainable_variables), NON_TRAINABLE: 0,
                           OPTIMIZER_SLOT: sum(nbytes(s) for s in momentums + velocities),
                           OTHER: 8 + 4 + 4 + 8}  # adam/iteration, adam/learning_rate, step, save_counter
    # What TF lists: every optimizer tensor but the two counters is a slot.
    stored = dict(tf.train.list_variables(prefix))
    slot_keys = [k for k in stored if k.startswith("optimizer/_variables/")]
    assert len(slot_keys) == 2 * len(net.trainable_variables) == 8
    weight_shape = {v.name: v.shape for v in bd.variables if v.role == WEIGHT}
    slots = {v.name: (v.slot, weight_shape[v.slot_of]) for v in bd.variables if v.role == OPTIMIZER_SLOT}
    truth = (("momentum", momentums), ("velocity", velocities))
    assert slots == {s.path: (kind, list(w.shape)) for kind, found in truth
                     for s, w in zip(found, net.trainable_variables)}
    assert {v.layer for v in bd.variables if v.role == OPTIMIZER_SLOT} == {"net/dense", "net/dense_1"}
    assert bd.optimizer["class_name"] == type(opt).__name__ == "Adam"
    assert bd.optimizer["recorded_in"].startswith("inferred")
    layers = {row["name"]: row["params"] for row in layer_rollup(bd) if row["params"]}
    assert sum(layers.values()) == net.count_params() == 32 * 64 + 64 + 64 * 10 + 10
    assert set(layers) == {"net/dense", "net/dense_1"}
    assert_reconciled(bd)
