"""Variable breakdown and per-layer derivations against real Keras 3 / TF1 models and optimizers."""

import collections
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.ops import resource_variable_ops

from demo.models import seed001_convnet, seed001_tf1_graph
from tb_modelmem.capture.variables import breakdown_of
from tb_modelmem.rules import layers as layer_capture
from tb_modelmem.schema import names
from tests.support.capture_models import OPTIMIZERS, small_model, stored_bytes, train_one_step

v1 = tf.compat.v1

# docs/USER_PROBLEMS.md #2 (seed 001): the exact figures the tool must reproduce.
SEED001_WEIGHT_BYTES = 13_098_536
SEED001_ADAM_SLOT_BYTES = 26_197_072
SEED001_TF1_TOTAL = 39_295_616


def by_role(found):
    totals = collections.Counter()
    for var in found.variables:
        totals[var.role] += var.bytes
    return totals


def test_seed001_convnet_adam_keras3():
    model = train_one_step(seed001_convnet("convnet"), keras.optimizers.Adam(), (28, 28, 1))
    found = breakdown_of(model)
    totals = by_role(found)
    assert totals[names.WEIGHT] == SEED001_WEIGHT_BYTES
    assert totals[names.OPTIMIZER_SLOT] == SEED001_ADAM_SLOT_BYTES
    assert totals[names.OTHER] == 8 + 4  # Keras 3: int64 iteration + float32 learning_rate
    assert sum(totals.values()) == stored_bytes(model.variables + model.optimizer.variables)
    assert found.source == "keras" and found.model_name == "convnet"
    assert found.optimizer["class_name"] == "Adam" and found.optimizer["config"]["beta_1"] == 0.9
    weights = {v.name: v for v in found.variables if v.role == names.WEIGHT}
    assert len(weights) == 8 and weights["convnet/fc1/kernel"].shape == [3136, 1024]
    slots = [v for v in found.variables if v.role == names.OPTIMIZER_SLOT]
    assert sorted(collections.Counter(v.slot for v in slots).items()) == [("momentum", 8), ("velocity", 8)]
    for slot in slots:
        assert slot.shape == weights[slot.slot_of].shape
        assert slot.layer == weights[slot.slot_of].layer


def test_seed001_layers_and_dtype():
    model = train_one_step(seed001_convnet("convnet"), keras.optimizers.Adam(), (28, 28, 1))
    found = breakdown_of(model)
    assert {v.dtype for v in found.variables if v.role != names.OTHER} == {"float32"}
    kernel = next(v for v in found.variables if v.name == "convnet/conv1/kernel")
    assert (kernel.layer, kernel.bytes, kernel.replicas) == ("convnet/conv1", 5 * 5 * 1 * 32 * 4, 1)
    assert "CPU:0" in kernel.device


@pytest.mark.parametrize("key", sorted(OPTIMIZERS))
def test_every_keras_optimizer_reconciles(key):
    make, slots_per_weight = OPTIMIZERS[key]
    model = train_one_step(small_model(), make(), (6, 6, 2))
    optimizer = model.optimizer
    found = breakdown_of(model)

    assert sum(v.bytes for v in found.variables) == stored_bytes(model.variables + optimizer.variables)
    assert len(found.variables) == len({id(v) for v in model.variables + optimizer.variables})
    totals = by_role(found)
    assert totals[names.WEIGHT] == stored_bytes(model.trainable_variables)
    assert totals[names.NON_TRAINABLE] == stored_bytes(model.non_trainable_variables) == 2 * 4 * 4

    weights = {v.name: v for v in found.variables if v.role == names.WEIGHT}
    slots = [v for v in found.variables if v.role == names.OPTIMIZER_SLOT]
    assert len(slots) == slots_per_weight * len(weights)
    per_weight = collections.Counter(v.slot_of for v in slots)
    assert all(per_weight[name] == slots_per_weight for name in weights) if slots_per_weight else not slots
    for slot in slots:
        assert slot.slot and slot.layer == weights[slot.slot_of].layer
        if key != "adafactor":  # Adafactor's factored slots have their own shapes (checked below)
            assert slot.shape == weights[slot.slot_of].shape
    other = {v.name.rsplit("/", 1)[-1] for v in found.variables if v.role == names.OTHER}
    assert {"iteration", "learning_rate"} <= other
    assert found.optimizer["class_name"] == type(optimizer).__name__


def test_slot_of_matches_keras_own_mapping():
    """The optimizer's per-weight lists, indexed with Keras' own _get_variable_index."""
    model = train_one_step(small_model(), keras.optimizers.Adam(), (6, 6, 2))
    optimizer = model.optimizer
    by_name = {v.name: v for v in breakdown_of(model).variables}
    for weight in model.trainable_variables:
        index = optimizer._get_variable_index(weight)
        for kind, slot_list in (("momentum", optimizer._momentums), ("velocity", optimizer._velocities)):
            record = by_name[slot_list[index].path]
            assert (record.slot, record.slot_of) == (kind, weight.path)


def test_adafactor_factored_slot_shapes():
    model = train_one_step(small_model(), keras.optimizers.Adafactor(), (6, 6, 2))
    slots = {(v.slot_of, v.slot): v for v in breakdown_of(model).variables if v.role == names.OPTIMIZER_SLOT}
    kernel = "small/fc1/kernel"  # [64, 5]
    assert slots[(kernel, "r")].shape == [64] and slots[(kernel, "c")].shape == [5]
    assert slots[(kernel, "velocity")].shape == [64, 5]
    bias = "small/fc1/bias"  # rank 1: Adafactor keeps scalar int32 placeholders for r and c
    assert (slots[(bias, "r")].shape, slots[(bias, "r")].dtype) == ([], "int32")


def test_custom_optimizer_slots_found_by_keras_naming():
    """Slots kept in a dict (no per-weight list to match): add_variable_from_reference names them."""
    class TracingSGD(keras.optimizers.Optimizer):
        def build(self, variables):
            super().build(variables)
            self.traces = {id(v): self.add_variable_from_reference(v, "grad_trace") for v in variables}

        def update_step(self, gradient, variable, learning_rate):
            self.assign_sub(variable, learning_rate * gradient)

    model = train_one_step(small_model(), TracingSGD(learning_rate=0.1), (6, 6, 2))
    slots = [v for v in breakdown_of(model).variables if v.role == names.OPTIMIZER_SLOT]
    assert sorted(v.slot_of for v in slots) == sorted(w.path for w in model.trainable_variables)
    assert {v.slot for v in slots} == {"grad_trace"}


@pytest.fixture
def mixed_float16():
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def test_mixed_float16_loss_scale_state_is_other(mixed_float16):
    model = train_one_step(small_model(), keras.optimizers.Adam(), (6, 6, 2))
    assert isinstance(model.optimizer, keras.mixed_precision.LossScaleOptimizer)  # wrapped by compile
    found = breakdown_of(model)
    roles = {v.name: v.role for v in found.variables}
    assert roles["loss_scale_optimizer/dynamic_scale"] == names.OTHER
    assert roles["loss_scale_optimizer/step_counter"] == names.OTHER
    # float16 compute, float32 variables: bytes are those of the float32 storage
    assert {v.dtype for v in found.variables if v.role in (names.WEIGHT, names.OPTIMIZER_SLOT)} == {"float32"}
    assert by_role(found)[names.OPTIMIZER_SLOT] == 2 * stored_bytes(model.trainable_variables)
    assert found.optimizer["config"]["inner_optimizer"]["class_name"] == "Adam"


def test_capture_reads_no_variable_values(monkeypatch):
    """Every value accessor of TF and Keras variables is watched; only the optimizer's
    get_config reads one scalar (the learning rate), as Keras' own API does."""
    model = train_one_step(small_model(), keras.optimizers.Adam(), (6, 6, 2))
    reads = []

    def watch(cls, attr, name_of):
        original = getattr(cls, attr)
        if isinstance(original, property):
            def getter(self):
                reads.append(name_of(self))
                return original.fget(self)
            monkeypatch.setattr(cls, attr, property(getter))
        else:
            def method(self, *args, **kwargs):
                reads.append(name_of(self))
                return original(self, *args, **kwargs)
            monkeypatch.setattr(cls, attr, method)

    tf_var = resource_variable_ops.BaseResourceVariable
    for attr in ("numpy", "read_value", "value", "_read_variable_op", "__array__", "read_value_no_copy"):
        watch(tf_var, attr, lambda v: v.name)
    for attr in ("numpy", "value", "__array__"):
        watch(keras.Variable, attr, lambda v: v.path)

    found = breakdown_of(model)
    assert len(found.variables) == len(model.variables + model.optimizer.variables) == 28
    learning_rate = model.optimizer._learning_rate.path
    assert set(reads) <= {learning_rate, learning_rate + ":0"}
    reads.clear()
    model.variables[0].numpy()  # the watch does see reads
    assert "small/conv/kernel" in reads


def test_tf_module_and_plain_variable_list():
    class Affine(tf.Module):
        def __init__(self):
            super().__init__(name="affine")
            with self.name_scope:
                self.w = tf.Variable(tf.zeros([3, 4]), name="w")
                self.b = tf.Variable(tf.zeros([4], tf.float64), name="b")
                self.count = tf.Variable(0, dtype=tf.int64, trainable=False, name="count")
                self.ema = tf.Variable(tf.zeros([4]), trainable=False, name="ema")

    module = Affine()
    found = breakdown_of(module)
    roles = {v.name: (v.role, v.layer, v.bytes, v.dtype) for v in found.variables}
    assert roles == {
        "affine/w": (names.WEIGHT, "affine", 48, "float32"),
        "affine/b": (names.WEIGHT, "affine", 32, "float64"),
        "affine/count": (names.OTHER, "affine", 8, "int64"),
        "affine/ema": (names.NON_TRAINABLE, "affine", 16, "float32"),
    }
    assert found.source == "tf.Module" and found.model_name == "affine"
    listed = breakdown_of([module.w, module.b])
    assert listed.source == "variables" and [v.bytes for v in listed.variables] == [48, 32]
    with pytest.raises(ValueError, match="executing eagerly"):
        breakdown_of(None)  # None means a TF1 graph; eagerly there is none to read


def test_checkpoint_walk_finds_model_and_optimizer():
    model = train_one_step(seed001_convnet("ckpt_net"), keras.optimizers.Adam(), (28, 28, 1))
    step = tf.Variable(7, dtype=tf.int64, trainable=False, name="step")
    average = tf.Variable(tf.zeros([10]), trainable=False, name="average")
    found = breakdown_of(tf.train.Checkpoint(model=model, optimizer=model.optimizer, step=step, average=average))
    totals = by_role(found)
    assert totals[names.WEIGHT] == SEED001_WEIGHT_BYTES
    assert totals[names.OPTIMIZER_SLOT] == SEED001_ADAM_SLOT_BYTES
    assert totals[names.OTHER] == 12 + 8  # iteration, learning_rate, and the checkpoint's own step
    assert totals[names.NON_TRAINABLE] == 40  # a tracked float state variable beside the model
    assert found.source == "checkpoint" and found.model_name == "ckpt_net"
    assert found.optimizer["class_name"] == "Adam"
    assert [layer.params for layer in found.layers if layer.params] == [832, 51_264, 3_212_288, 10_250]


@pytest.mark.parametrize("with_optimizer", [True, False], ids=["get_slot", "name_patterns"])
def test_seed001_tf1_graph_adam(with_optimizer):
    with tf.Graph().as_default():
        optimizer = v1.train.AdamOptimizer(1e-4)
        x, y, _, train = seed001_tf1_graph(optimizer)
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            session.run(train, {x: np.zeros((1, 28, 28, 1)), y: np.zeros((1,))})
        found = breakdown_of(None, optimizer if with_optimizer else None)
    totals = by_role(found)
    assert totals == {names.WEIGHT: SEED001_WEIGHT_BYTES, names.OPTIMIZER_SLOT: SEED001_ADAM_SLOT_BYTES,
                      names.OTHER: 8}
    assert sum(totals.values()) == SEED001_TF1_TOTAL  # 37.48 MiB, the .data file of seed 001
    by_name = {v.name: v for v in found.variables}
    assert by_name["beta1_power"].role == by_name["beta2_power"].role == names.OTHER
    assert by_name["beta1_power"].dtype == "float32"
    # One vocabulary: names alone give the slots the names get_slot_names() gives them.
    assert (by_name["conv1/kernel/Adam"].slot, by_name["conv1/kernel/Adam_1"].slot) == ("m", "v")
    assert by_name["fc1/kernel/Adam_1"].slot_of == "fc1/kernel"
    assert by_name["fc1/kernel/Adam_1"].shape == [3136, 1024]
    assert found.source == "tf1"
    assert (found.optimizer is not None) == with_optimizer


@pytest.mark.parametrize("make, slot_names", [
    (lambda: v1.train.MomentumOptimizer(0.1, 0.9), {"momentum"}),
    (lambda: v1.train.RMSPropOptimizer(0.1, momentum=0.9, centered=True), {"rms", "momentum", "mg"}),
    (lambda: v1.train.AdagradOptimizer(0.1), {"accumulator"}),
], ids=["momentum", "rmsprop", "adagrad"])
def test_tf1_optimizers_get_slot(make, slot_names):
    with tf.Graph().as_default():
        w = v1.Variable(tf.zeros([4, 3]), name="dense/kernel")
        step = v1.train.get_or_create_global_step()
        optimizer = make()
        optimizer.minimize(tf.reduce_sum(w * w), global_step=step)
        found = breakdown_of(None, optimizer)
    slots = [v for v in found.variables if v.role == names.OPTIMIZER_SLOT]
    assert {v.slot for v in slots} == slot_names
    assert all(v.slot_of == "dense/kernel" and v.bytes == 48 and v.layer == "dense" for v in slots)
    assert {v.name: v.role for v in found.variables}["global_step"] == names.OTHER


# --- per-layer params and derivations (docs/USER_PROBLEMS.md #3) ---

def test_lenet_param_derivations():
    model = seed001_convnet("lenet")
    found = {r.name: r for r in layer_capture.layer_records(model)}
    assert {name: (r.params, r.derivation) for name, r in found.items() if r.params} == {
        "lenet/conv1": (832, "(5*5*1+1)*32 = 832"),
        "lenet/conv2": (51_264, "(5*5*32+1)*64 = 51,264"),
        "lenet/fc1": (3_212_288, "(3136+1)*1024 = 3,212,288"),
        "lenet/fc2": (10_250, "(1024+1)*10 = 10,250"),
    }
    assert found["lenet/pool1"].params == 0 and found["lenet/flatten"].class_name == "Flatten"
    assert sum(r.params for r in found.values()) == model.count_params()


LAYER_CASES = {
    "conv1d": ((20, 3), keras.layers.Conv1D(8, 5), "(5*3+1)*8"),
    "conv3d_nobias": ((6, 6, 6, 2), keras.layers.Conv3D(4, 3, use_bias=False), "3*3*3*2*4"),
    "depthwise": ((8, 8, 6), keras.layers.DepthwiseConv2D(3, depth_multiplier=2), "(3*3+1)*6*2"),
    "separable": ((8, 8, 6), keras.layers.SeparableConv2D(16, 3), "3*3*6*1 + (6*1+1)*16"),
    "conv2d_transpose": ((8, 8, 6), keras.layers.Conv2DTranspose(16, 3), "(3*3*6+1)*16"),
    "embedding": ((7,), keras.layers.Embedding(1000, 64), "1000*64"),
    "batchnorm": ((10,), keras.layers.BatchNormalization(), "4*10"),
    "layernorm": ((5, 10), keras.layers.LayerNormalization(), "2*10"),
    "lstm": ((5, 32), keras.layers.LSTM(64), "4*(32*64+64*64+64)"),
    "gru": ((5, 32), keras.layers.GRU(64), "3*(32*64+64*64+2*64)"),
    "gru_reset_before": ((5, 32), keras.layers.GRU(64, reset_after=False), "3*(32*64+64*64+64)"),
    "simple_rnn": ((5, 32), keras.layers.SimpleRNN(16), "32*16+16*16+16"),
}


@pytest.mark.parametrize("key", sorted(LAYER_CASES))
def test_layer_derivation_equals_count_params(key):
    shape, layer, expression = LAYER_CASES[key]
    inputs = keras.Input(shape)
    model = keras.Model(inputs, layer(inputs), name="m")
    (record,) = [r for r in layer_capture.layer_records(model) if r.class_name != "InputLayer"]
    assert record.params == layer.count_params() == layer_capture.evaluate(expression)
    assert record.derivation == f"{expression} = {layer.count_params():,}"


def test_multi_head_attention_derivation():
    query = keras.Input((6, 16))
    layer = keras.layers.MultiHeadAttention(num_heads=4, key_dim=8, name="mha")
    model = keras.Model(query, layer(query, query), name="m")
    (record,) = layer_capture.layer_records(model)
    assert record.derivation == ("(16+1)*4*8 + (16+1)*4*8 + (16+1)*4*8 + (4*8+1)*16 = "
                                 f"{layer.count_params():,}")
    assert record.params == layer.count_params() == 3 * (16 + 1) * 4 * 8 + (4 * 8 + 1) * 16


def test_nested_models_flatten_to_paths_and_generic_fallback():
    class Scale(keras.layers.Layer):
        def build(self, input_shape):
            self.alpha = self.add_weight(shape=(input_shape[-1], 2), name="alpha")
            self.beta = self.add_weight(shape=(), name="beta")

        def call(self, x):
            return x

    inner = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, name="d")], name="inner")
    outer = keras.Sequential([keras.Input((4,)), inner, Scale(name="scale"), keras.layers.Dense(2, name="out")],
                             name="outer")
    found = {r.name: r for r in layer_capture.layer_records(outer)}
    assert set(found) == {"outer/inner/d", "outer/scale", "outer/out"}
    assert found["outer/inner/d"].derivation == "(4+1)*3 = 15"
    assert found["outer/scale"].derivation == "3*2 + 1 = 7"
    assert sum(r.params for r in found.values()) == outer.count_params()
    variables = breakdown_of(outer).variables
    assert {v.layer for v in variables} == set(found)  # variables roll up to the same layer paths
    assert [v.layer for v in variables if v.name.endswith("d/kernel")] == ["outer/inner/d"]


def test_variables_with_unknown_static_shape_count_their_current_bytes(monkeypatch):
    """shape=[None, 3] or an unknown rank is legal for a tf.Variable; the bytes it holds
    come from the resource's own shape (VariableShape reads no values)."""
    class Growing(tf.Module):
        def __init__(self):
            super().__init__(name="growing")
            with self.name_scope:
                self.rows = tf.Variable(tf.zeros([2, 3]), shape=tf.TensorShape([None, 3]), name="rows")
                self.any = tf.Variable(tf.zeros([5], tf.float64), shape=tf.TensorShape(None), name="any")
                self.nested = [{"ids": tf.Variable(tf.zeros([4], tf.int32), shape=[None], name="ids")}]

    module = Growing()

    def no_reads(self, *args, **kwargs):
        raise AssertionError(f"read the value of {self.name}")

    for attr in ("numpy", "read_value", "value", "_read_variable_op", "__array__", "read_value_no_copy"):
        monkeypatch.setattr(resource_variable_ops.BaseResourceVariable, attr, no_reads)
    found = {v.name: (v.shape, v.bytes) for v in breakdown_of(module).variables}
    assert found == {"growing/rows": ([2, 3], 24), "growing/any": ([5], 40), "growing/ids": ([4], 16)}


def test_tf1_variable_of_unknown_rank_is_recorded_not_fatal():
    with tf.Graph().as_default():
        v1 = tf.compat.v1
        known = v1.Variable(tf.zeros([3, 4]), name="known")
        v1.Variable(v1.placeholder_with_default(tf.zeros([2]), shape=None), validate_shape=False, name="free")
        found = {v.name: (v.shape, v.bytes) for v in breakdown_of().variables}
    assert known.shape == [3, 4]
    assert found == {"known": ([3, 4], 48), "free": ([-1], 0)}  # unknown until run: no bytes claimed


def test_nested_containers_of_variables_and_clear_errors_for_anything_else():
    w, b = tf.Variable(tf.zeros([3, 4]), name="w"), tf.Variable(tf.zeros([4]), name="b")
    found = breakdown_of({"dense": [w, {"bias": b}]})
    assert [(v.name, v.bytes) for v in found.variables] == [("w", 48), ("b", 16)]
    with pytest.raises(TypeError, match="str"):
        breakdown_of("model.keras")
    with pytest.raises(TypeError, match="EagerTensor"):
        breakdown_of([w, tf.constant(1.0)])


def test_scope_layers_of_a_tf1_graph_with_an_unknown_shape_count_only_known_params():
    with tf.Graph().as_default():
        v1 = tf.compat.v1
        with v1.variable_scope("dense"):
            v1.Variable(tf.zeros([3, 4]), name="kernel")
            v1.Variable(tf.zeros([4]), name="bias")
            v1.Variable(v1.placeholder_with_default(tf.zeros([2, 4]), shape=[None, 4]), validate_shape=False,
                        name="memory")
        found = breakdown_of()
    (layer,) = layer_capture.scope_layer_records(found.variables)
    assert (layer.name, layer.params) == ("dense", 16)  # the [?,4] memory holds an unknown count
    assert layer.derivation == "3*4 + 4 + ?*4 = 16 + ?"


def test_optimizer_whose_get_config_raises_still_gets_its_breakdown():
    """A LearningRateSchedule without get_config is legal for training, but Adam.get_config
    raises NotImplementedError; the slots still count and the config falls back to attributes."""
    class Halving(keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step):
            return 0.01

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, name="fc")], name="scheduled")
    model = train_one_step(model, keras.optimizers.Adam(learning_rate=Halving(), beta_1=0.8), (4,))
    found = breakdown_of(model)
    assert by_role(found)[names.OPTIMIZER_SLOT] == 2 * (4 + 1) * 3 * 4
    assert found.optimizer["class_name"] == "Adam" and found.optimizer["config"]["beta_1"] == 0.8
