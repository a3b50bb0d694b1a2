"""Every source says the same of the same variables: live capture, TF2 checkpoint, .keras, .h5, .weights.h5.

One model per built-in Keras 3 optimizer (the 16 cases of test_capture_variables), trained one
step, captured live and saved in every format Keras can write it in. Names differ by source
(a .keras file stores ``vars/0``, a checkpoint the Keras path), so variables are matched by
what they are, not what they are called: a weight or counter by (role, shape, dtype), a slot
by (slot name, shape, dtype) plus its owning weight's key. Every source must give the same
multiset of those keys, the same partition of them into layers (a slot in its weight's
layer), and the same bytes by role; ground truth for the bytes is Keras' own variable lists.
A TF2 checkpoint's own ``save_counter`` and what a file stores twice (its overhead lines)
are not the model's variables.
"""

import collections
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest
import tensorflow as tf

from tb_modelmem.capture.variables import breakdown_of
from tb_modelmem.readers.checkpoint import read_checkpoint
from tb_modelmem.readers.model_file import read_path
from tb_modelmem.schema import names, records
from tests.support.capture_models import OPTIMIZERS, small_model, stored_bytes, train_one_step


def canonical(bd):
    """(keys, layer groups, bytes by role) of a breakdown, free of names."""
    variables = [v for v in bd.variables if v.name.rsplit("/", 1)[-1] != "save_counter"]
    by_name = {v.name: v for v in variables}

    def key(v):
        base = (v.role, tuple(v.shape), v.dtype)
        if v.role != names.OPTIMIZER_SLOT:
            return base
        owner = by_name.get(v.slot_of)
        return base + (v.slot, None if owner is None else key(owner))

    for v in variables:
        if v.role == names.OPTIMIZER_SLOT:
            assert v.slot_of in by_name, f"{bd.source}: slot {v.name} has no owning weight"
            assert v.layer == by_name[v.slot_of].layer, f"{bd.source}: slot {v.name} not in its weight's layer"
    groups = collections.defaultdict(list)
    for v in variables:
        groups[v.layer].append(key(v))
    layers = sorted(tuple(sorted(g, key=repr)) for g in groups.values())
    return collections.Counter(key(v) for v in variables), layers, records.bytes_by_role(variables)


def saved_sources(model, folder):
    """Breakdown of the model from each format; a format Keras cannot write for it is left out."""
    found = {"live": breakdown_of(model)}
    prefix = tf.train.Checkpoint(model=model, optimizer=model.optimizer).save(os.path.join(folder, "ckpt"))
    found["tf2 checkpoint"] = read_checkpoint(prefix)
    for fmt, save in ((".keras", model.save), (".weights.h5", model.save_weights), (".h5", model.save)):
        path = os.path.join(folder, "model" + fmt)
        try:
            save(path)
        except ValueError:  # legacy .h5 of an optimizer whose variables share a name (Adafactor): Keras refuses
            assert fmt == ".h5"
            continue
        found[fmt] = read_path(path)
    return found


@pytest.mark.parametrize("key", sorted(OPTIMIZERS))
def test_every_source_agrees_on_every_variable(key, tmp_path):
    make, slots_per_weight = OPTIMIZERS[key]
    model = train_one_step(small_model(), make(), (6, 6, 2))
    sources = saved_sources(model, str(tmp_path))
    live_keys, live_layers, live_roles = canonical(sources.pop("live"))
    assert sum(live_roles.values()) == stored_bytes(model.variables + model.optimizer.variables)
    for source, bd in sources.items():
        keys, layers, by_role = canonical(bd)
        assert by_role == live_roles, source
        assert keys == live_keys, (source, keys - live_keys, live_keys - keys)
        assert layers == live_layers, source
        assert bd.file_bytes == sum(v.bytes for v in bd.variables) + sum(o["bytes"] for o in bd.overhead), source
    if key == "adafactor":
        assert ".h5" not in sources  # Keras cannot write it: its r/c slots share their weight's name


# --- the TensorFlow DCGAN tutorial: two models, two optimizers, one tf.train.Checkpoint -----------

def dcgan():
    """make_generator_model / make_discriminator_model of tensorflow.org/tutorials/generative/dcgan,
    trained one step with its train_step (batch 2, noise 100) on synthetic images."""
    layers = tf.keras.layers
    generator = tf.keras.Sequential([
        layers.Dense(7 * 7 * 256, use_bias=False, input_shape=(100,)), layers.BatchNormalization(),
        layers.LeakyReLU(), layers.Reshape((7, 7, 256)),
        layers.Conv2DTranspose(128, (5, 5), strides=(1, 1), padding="same", use_bias=False),
        layers.BatchNormalization(), layers.LeakyReLU(),
        layers.Conv2DTranspose(64, (5, 5), strides=(2, 2), padding="same", use_bias=False),
        layers.BatchNormalization(), layers.LeakyReLU(),
        layers.Conv2DTranspose(1, (5, 5), strides=(2, 2), padding="same", use_bias=False, activation="tanh")])
    discriminator = tf.keras.Sequential([
        layers.Conv2D(64, (5, 5), strides=(2, 2), padding="same", input_shape=[28, 28, 1]), layers.LeakyReLU(),
        layers.Dropout(0.3), layers.Conv2D(128, (5, 5), strides=(2, 2), padding="same"), layers.LeakyReLU(),
        layers.Dropout(0.3), layers.Flatten(), layers.Dense(1)])
    cross_entropy = tf.keras.losses.BinaryCrossentropy(from_logits=True)
    generator_optimizer, discriminator_optimizer = tf.keras.optimizers.Adam(1e-4), tf.keras.optimizers.Adam(1e-4)
    images = np.random.default_rng(0).normal(size=(2, 28, 28, 1)).astype("float32")
    noise = tf.random.normal([2, 100])
    with tf.GradientTape() as gen_tape, tf.GradientTape() as disc_tape:
        generated = generator(noise, training=True)
        real_output = discriminator(images, training=True)
        fake_output = discriminator(generated, training=True)
        gen_loss = cross_entropy(tf.ones_like(fake_output), fake_output)
        disc_loss = (cross_entropy(tf.ones_like(real_output), real_output)
                     + cross_entropy(tf.zeros_like(fake_output), fake_output))
    generator_optimizer.apply_gradients(zip(gen_tape.gradient(gen_loss, generator.trainable_variables),
                                            generator.trainable_variables))
    discriminator_optimizer.apply_gradients(zip(disc_tape.gradient(disc_loss, discriminator.trainable_variables),
                                                discriminator.trainable_variables))
    checkpoint = tf.train.Checkpoint(generator_optimizer=generator_optimizer,
                                     discriminator_optimizer=discriminator_optimizer,
                                     generator=generator, discriminator=discriminator)
    return checkpoint, (generator, generator_optimizer), (discriminator, discriminator_optimizer)


@pytest.fixture(scope="module")
def gan(tmp_path_factory):
    checkpoint, *pairs = dcgan()
    prefix = checkpoint.save(str(tmp_path_factory.mktemp("dcgan") / "ckpt"))
    return checkpoint, prefix, pairs


@pytest.mark.parametrize("source", ["live", "checkpoint file"])
def test_dcgan_two_optimizers_each_slot_is_its_weights(gan, source):
    checkpoint, prefix, pairs = gan
    bd = breakdown_of(checkpoint) if source == "live" else read_checkpoint(prefix)
    models = [m for m, _ in pairs]
    optimizers = [o for _, o in pairs]
    totals = records.bytes_by_role(bd.variables)
    expected_weights = stored_bytes([v for m in models for v in m.trainable_variables])
    expected_slots = stored_bytes([v for o in optimizers for v in o.variables if len(v.shape)])
    assert expected_weights == 10_073_348 and expected_slots == 20_146_696  # the figures, derived above
    assert totals[names.WEIGHT] == expected_weights
    assert totals[names.OPTIMIZER_SLOT] == expected_slots
    # Live, the model's untrained state includes its Dropout RNG seeds; a tf.train.Checkpoint does
    # not save a Keras 3 SeedGenerator (tf.train.list_variables lists no seed), so the file has none.
    untrained = [v for m in models
                 for v in (m.non_trainable_variables if source == "live" else m.non_trainable_weights)]
    assert totals[names.NON_TRAINABLE] == stored_bytes(untrained)
    by_name = {v.name: v for v in bd.variables}
    for model, optimizer in pairs:
        for weight in model.trainable_variables:
            index = optimizer._get_variable_index(weight)
            for slot, listed in (("momentum", optimizer._momentums), ("velocity", optimizer._velocities)):
                record = next(v for v in bd.variables if v.slot_of == weight.path and v.slot == slot)
                assert (record.role, record.shape) == (names.OPTIMIZER_SLOT, list(listed[index].shape))
                assert record.layer == by_name[weight.path].layer
    counters = [v for v in bd.variables if v.role == names.OTHER and v.name.rsplit("/", 1)[-1] != "save_counter"]
    assert stored_bytes([v for o in optimizers for v in o.variables if not len(v.shape)]) == \
        sum(v.bytes for v in counters if "seed" not in v.name)
    assert "adam" not in {v.layer for v in bd.variables if v.role != names.OTHER}
    assert bd.optimizer["class_name"] == "Adam + Adam"
