"""Small Keras models and every built-in optimizer, trained one step, and what their variables occupy
read straight from Keras/TF: tests/integration's capture and consistency tests share them."""

import keras
import numpy as np
import tensorflow as tf


def stored_bytes(variables):
    """What the variables occupy, straight from Keras/TF: size x dtype size."""
    return sum(int(np.prod(v.shape, dtype=np.int64)) * tf.as_dtype(v.dtype).size for v in variables)


def train_one_step(model, optimizer, x_shape):
    model.compile(optimizer, keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.train_on_batch(np.zeros((2,) + x_shape, "float32"), np.zeros((2,), "int64"))
    return model


def small_model():
    """A conv, a BatchNormalization (moving stats are non-trainable) and two dense layers."""
    return keras.Sequential([
        keras.Input((6, 6, 2)),
        keras.layers.Conv2D(4, 3, name="conv"),
        keras.layers.BatchNormalization(name="bn"),
        keras.layers.Flatten(name="flatten"),
        keras.layers.Dense(5, name="fc1"),
        keras.layers.Dense(3, name="fc2"),
    ], name="small")


# optimizer factory, slots per weight
OPTIMIZERS = {
    "sgd": (lambda: keras.optimizers.SGD(), 0),
    "sgd_momentum": (lambda: keras.optimizers.SGD(momentum=0.9), 1),
    "adam": (lambda: keras.optimizers.Adam(), 2),
    "adam_amsgrad": (lambda: keras.optimizers.Adam(amsgrad=True), 3),
    "adamw": (lambda: keras.optimizers.AdamW(), 2),
    "adamax": (lambda: keras.optimizers.Adamax(), 2),
    "nadam": (lambda: keras.optimizers.Nadam(), 2),
    "rmsprop": (lambda: keras.optimizers.RMSprop(), 1),
    "rmsprop_momentum": (lambda: keras.optimizers.RMSprop(momentum=0.9), 2),
    "rmsprop_momentum_centered": (lambda: keras.optimizers.RMSprop(momentum=0.9, centered=True), 3),
    "adagrad": (lambda: keras.optimizers.Adagrad(), 1),
    "adadelta": (lambda: keras.optimizers.Adadelta(), 2),
    "ftrl": (lambda: keras.optimizers.Ftrl(), 2),
    "lion": (lambda: keras.optimizers.Lion(), 1),
    "adafactor": (lambda: keras.optimizers.Adafactor(), 3),
    "loss_scale_adam": (lambda: keras.mixed_precision.LossScaleOptimizer(keras.optimizers.Adam()), 2),
}
