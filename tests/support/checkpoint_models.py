"""The seed-001 ConvNet (docs/USER_PROBLEMS.md #2) as TF1 and Keras 3 checkpoints, its figures to the
byte, and the checks a breakdown of a file must pass: tests/integration's checkpoint, model file, CLI
and TF-free inspect tests share them."""

import os

import numpy as np
import tensorflow as tf

from demo.models import seed001_convnet
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
    """The seed-001 TF1 graph: tf.compat.v1 variables, AdamOptimizer, Saver, one training step."""
    v1 = tf.compat.v1
    with tf.Graph().as_default():
        x = v1.placeholder(tf.float32, [None, 28, 28, 1])
        y = v1.placeholder(tf.int64, [None])
        w1, b1 = tf.Variable(v1.truncated_normal([5, 5, 1, 32], stddev=0.1)), tf.Variable(tf.zeros([32]))
        h = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(x, w1, 1, "SAME") + b1), 2, 2, "SAME")
        w2, b2 = tf.Variable(v1.truncated_normal([5, 5, 32, 64], stddev=0.1)), tf.Variable(tf.zeros([64]))
        h = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(h, w2, 1, "SAME") + b2), 2, 2, "SAME")
        w3, b3 = tf.Variable(v1.truncated_normal([3136, 1024], stddev=0.1)), tf.Variable(tf.zeros([1024]))
        h = tf.nn.relu(tf.reshape(h, [-1, 3136]) @ w3 + b3)
        w4, b4 = tf.Variable(v1.truncated_normal([1024, 10], stddev=0.1)), tf.Variable(tf.zeros([10]))
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h @ w4 + b4))
        train = v1.train.AdamOptimizer(1e-4).minimize(loss)
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
