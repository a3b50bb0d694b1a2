"""The seed-001 ConvNet (docs/USER_PROBLEMS.md #2) as TF1 and Keras 3 checkpoints, its figures to the
byte, and the checks a breakdown of a file must pass: tests/integration's checkpoint, model file, CLI
and TF-free inspect tests share them."""

import os

import numpy as np
import tensorflow as tf

from demo.models import seed001_convnet, seed001_tf1_graph
from tb_modelmem.schema.names import NON_TRAINABLE, OPTIMIZER_SLOT, OTHER, WEIGHT

# conv 5x5x1x32, conv 5x5x32x64, dense [3136, 1024], dense [1024, 10] + biases, float32
WEIGHT_BYTES = 3_274_634 * 4  # 13,098,536
SLOT_BYTES = 2 * WEIGHT_BYTES  # Adam m and v: 26,197,072
SEED_DATA_BYTES = 39_295_616


def by_role(bd):
    out = {role: 0 for role in (WEIGHT, NON_TRAINABLE, OPTIMIZER_SLOT, OTHER)}
    for v in bd.variables:
        out[v.role] += v.bytes
    return out


def assert_reconciled(bd):
    assert sum(v.bytes for v in bd.variables) + sum(o["bytes"] for o in bd.overhead) == bd.file_bytes


def save_tf1_convnet(folder):
    """The seed-001 TF1 graph (demo.models.seed001_tf1_graph: AdamOptimizer) after one training step, saved."""
    v1 = tf.compat.v1
    with tf.Graph().as_default():
        x, y, _, train = seed001_tf1_graph("adam")
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            sess.run(train, {x: np.zeros([2, 28, 28, 1]), y: [0, 1]})
            return v1.train.Saver().save(sess, os.path.join(folder, "model.ckpt"))


def keras_convnet(batchnorm=False):
    """The same ConvNet in Keras 3 (demo.models.seed001_convnet), compiled with Adam and trained one step."""
    import keras

    model = seed001_convnet("convnet", batchnorm=batchnorm)
    model.compile(keras.optimizers.Adam(1e-4), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.train_on_batch(np.zeros([2, 28, 28, 1], "float32"), np.array([0, 1]))
    return model
