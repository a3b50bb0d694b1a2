"""The models of docs/USER_PROBLEMS.md, built on synthetic data (nothing is downloaded)."""

from __future__ import annotations

from typing import Any

import numpy as np


def seed001_convnet(name: str = "lenet", batchnorm: bool = False):
    """docs/USER_PROBLEMS.md #2: conv 5x5x1x32, conv 5x5x32x64, dense 3136x1024, dense 1024x10 (+ biases);
    ``batchnorm``: a BatchNormalization (moving statistics, non-trainable) after conv1."""
    import keras

    layers = [
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(32, 5, padding="same", activation="relu", name="conv1"),
        keras.layers.MaxPooling2D(name="pool1"),
        keras.layers.Conv2D(64, 5, padding="same", activation="relu", name="conv2"),
        keras.layers.MaxPooling2D(name="pool2"),
        keras.layers.Flatten(name="flatten"),
        keras.layers.Dense(1024, activation="relu", name="fc1"),
        keras.layers.Dense(10, name="fc2"),
    ]
    if batchnorm:
        layers.insert(2, keras.layers.BatchNormalization(name="bn"))
    return keras.Sequential(layers, name=name)


def mnist_like(n: int, seed: int = 0):
    """Random 28x28x1 images and labels in MNIST's shapes and dtypes."""
    rng = np.random.default_rng(seed)
    return rng.random((n, 28, 28, 1), dtype=np.float32), rng.integers(0, 10, size=(n,))


def seed001_tf1_graph(optimizer: Any = "adam"):
    """The same ConvNet in TF1 graph mode, in the current default graph (as in seed 001), trained by
    ``optimizer``: "adam", "momentum", "sgd", or a ``tf.compat.v1.train.Optimizer``.

    Returns ``(x, y, loss, train_op)``. Call inside ``tf.Graph().as_default()``.
    """
    import tensorflow as tf

    v1 = tf.compat.v1

    def layer(name, inputs, kernel_shape, apply, activation=tf.identity):
        """Variables and ops of one layer under one scope, so ops join their layer's weights."""
        with v1.variable_scope(name):
            kernel = v1.get_variable("kernel", kernel_shape, initializer=v1.glorot_uniform_initializer())
            bias = v1.get_variable("bias", kernel_shape[-1:], initializer=v1.zeros_initializer())
            return activation(apply(inputs, kernel) + bias)

    def conv(name, inputs, kernel_shape):
        h = layer(name, inputs, kernel_shape, lambda i, k: tf.nn.conv2d(i, k, 1, "SAME"), tf.nn.relu)
        return tf.nn.max_pool2d(h, 2, 2, "SAME", name=name.replace("conv", "pool"))

    x = v1.placeholder(tf.float32, [None, 28, 28, 1], name="x")
    y = v1.placeholder(tf.int64, [None], name="y")
    h = conv("conv1", x, [5, 5, 1, 32])
    h = conv("conv2", h, [5, 5, 32, 64])
    h = tf.reshape(h, [-1, 7 * 7 * 64], name="flatten")
    h = layer("fc1", h, [7 * 7 * 64, 1024], tf.matmul, tf.nn.relu)
    logits = layer("fc2", h, [1024, 10], tf.matmul)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    opt = optimizer if not isinstance(optimizer, str) else {
        "adam": lambda: v1.train.AdamOptimizer(1e-4),
        "momentum": lambda: v1.train.MomentumOptimizer(1e-3, 0.9),
        "sgd": lambda: v1.train.GradientDescentOptimizer(1e-3)}[optimizer]()
    return x, y, loss, opt.minimize(loss)


def traced_step(sess, x, y, train_op, batch: int = 1):
    """Run one training step of ``seed001_tf1_graph`` with FULL_TRACE; its RunMetadata."""
    import tensorflow as tf

    v1 = tf.compat.v1
    x_data, y_data = mnist_like(batch)
    run_metadata = v1.RunMetadata()
    sess.run(train_op, {x: x_data, y: y_data},
             options=v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE), run_metadata=run_metadata)
    return run_metadata
