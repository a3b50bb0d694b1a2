# tb_modelmem test corpus: modelled on TensorFlow's TF1 example
# tensorflow/examples/tutorials/mnist/mnist_with_summaries.py (Copyright 2015 The TensorFlow
# Authors, Apache License 2.0, see ../SOURCES.md): an MLP built from tf.Variables under name
# scopes, summaries on every tensor, AdamOptimizer.minimize, FileWriter, and a FULL_TRACE
# RunMetadata written with FileWriter.add_run_metadata every 100th step. Same graph and
# training loop as the source, with TF1 names spelled tf.compat.v1.* as tf_upgrade_v2 writes
# them; written for the corpus, not a copy of its text. Lines whose behaviour differs from the
# source end in "# corpus patch: <why>".
"""A simple MNIST classifier that writes summaries for every TensorBoard dashboard."""
from __future__ import absolute_import, division, print_function

import argparse
import sys

import numpy as np  # corpus patch: numpy for the synthetic data
import tensorflow as tf

tf.compat.v1.disable_eager_execution()  # corpus patch: TF1 graph mode under TF2 (placeholders, sessions)

FLAGS = None


class _SyntheticSplit(object):  # corpus patch: stands in for input_data's DataSet (no download)
  def __init__(self, rng, n):  # corpus patch: synthetic data
    self.images = rng.random((n, 784), dtype=np.float32)  # corpus patch: synthetic images
    self.labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, size=n)]  # corpus patch: one-hot labels
    self._next = 0  # corpus patch: synthetic data

  def next_batch(self, batch_size, fake_data=False):  # corpus patch: synthetic data
    idx = np.arange(self._next, self._next + batch_size) % len(self.images)  # corpus patch: synthetic data
    self._next = (self._next + batch_size) % len(self.images)  # corpus patch: synthetic data
    return self.images[idx], self.labels[idx]  # corpus patch: synthetic data


def read_data_sets(data_dir, one_hot=True, fake_data=False):  # corpus patch: replaces input_data.read_data_sets
  rng = np.random.default_rng(0)  # corpus patch: synthetic data
  return argparse.Namespace(train=_SyntheticSplit(rng, 300), test=_SyntheticSplit(rng, 200))  # corpus patch: small synthetic MNIST


def train():
  mnist = read_data_sets(FLAGS.data_dir, one_hot=True, fake_data=FLAGS.fake_data)

  sess = tf.compat.v1.InteractiveSession()

  # Inputs.
  with tf.compat.v1.name_scope('input'):
    x = tf.compat.v1.placeholder(tf.float32, [None, 784], name='x-input')
    y_ = tf.compat.v1.placeholder(tf.float32, [None, 10], name='y-input')

  with tf.compat.v1.name_scope('input_reshape'):
    image_shaped_input = tf.reshape(x, [-1, 28, 28, 1])
    tf.compat.v1.summary.image('input', image_shaped_input, 10)

  # Weights start small and random, biases slightly positive: zeros would leave ReLUs dead.
  def weight_variable(shape):
    return tf.Variable(tf.random.truncated_normal(shape, stddev=0.1))

  def bias_variable(shape):
    return tf.Variable(tf.constant(0.1, shape=shape))

  def variable_summaries(var):
    """Mean, stddev, max, min and a histogram of ``var``."""
    with tf.compat.v1.name_scope('summaries'):
      mean = tf.reduce_mean(input_tensor=var)
      tf.compat.v1.summary.scalar('mean', mean)
      with tf.compat.v1.name_scope('stddev'):
        stddev = tf.sqrt(tf.reduce_mean(input_tensor=tf.square(var - mean)))
      tf.compat.v1.summary.scalar('stddev', stddev)
      tf.compat.v1.summary.scalar('max', tf.reduce_max(input_tensor=var))
      tf.compat.v1.summary.scalar('min', tf.reduce_min(input_tensor=var))
      tf.compat.v1.summary.histogram('histogram', var)

  def nn_layer(input_tensor, input_dim, output_dim, layer_name, act=tf.nn.relu):
    """matmul + bias + activation under one name scope, with summaries of everything."""
    with tf.compat.v1.name_scope(layer_name):
      with tf.compat.v1.name_scope('weights'):
        weights = weight_variable([input_dim, output_dim])
        variable_summaries(weights)
      with tf.compat.v1.name_scope('biases'):
        biases = bias_variable([output_dim])
        variable_summaries(biases)
      with tf.compat.v1.name_scope('Wx_plus_b'):
        preactivate = tf.matmul(input_tensor, weights) + biases
        tf.compat.v1.summary.histogram('pre_activations', preactivate)
      activations = act(preactivate, name='activation')
      tf.compat.v1.summary.histogram('activations', activations)
      return activations

  hidden1 = nn_layer(x, 784, 500, 'layer1')

  with tf.compat.v1.name_scope('dropout'):
    keep_prob = tf.compat.v1.placeholder(tf.float32)
    tf.compat.v1.summary.scalar('dropout_keep_probability', keep_prob)
    dropped = tf.nn.dropout(hidden1, rate=1 - keep_prob)  # corpus patch: rate = 1 - keep_prob, as tf_upgrade_v2 writes it

  # Logits: the softmax is part of the loss below.
  y = nn_layer(dropped, 500, 10, 'layer2', act=tf.identity)

  with tf.compat.v1.name_scope('cross_entropy'):
    # softmax_cross_entropy_with_logits is the numerically stable form of -sum(y_ * log(softmax(y))).
    diff = tf.nn.softmax_cross_entropy_with_logits(labels=tf.stop_gradient(y_), logits=y)  # corpus patch: keyword arguments (positional (logits, labels) before TF 1.0)
    with tf.compat.v1.name_scope('total'):
      cross_entropy = tf.reduce_mean(input_tensor=diff)
  tf.compat.v1.summary.scalar('cross_entropy', cross_entropy)

  with tf.compat.v1.name_scope('train'):
    train_step = tf.compat.v1.train.AdamOptimizer(FLAGS.learning_rate).minimize(cross_entropy)

  with tf.compat.v1.name_scope('accuracy'):
    with tf.compat.v1.name_scope('correct_prediction'):
      correct_prediction = tf.equal(tf.argmax(input=y, axis=1), tf.argmax(input=y_, axis=1))
    with tf.compat.v1.name_scope('accuracy'):
      accuracy = tf.reduce_mean(input_tensor=tf.cast(correct_prediction, tf.float32))
  tf.compat.v1.summary.scalar('accuracy', accuracy)

  # All summaries to summaries_dir/train and summaries_dir/test.
  merged = tf.compat.v1.summary.merge_all()
  train_writer = tf.compat.v1.summary.FileWriter(FLAGS.summaries_dir + '/train', sess.graph)  # corpus patch: FileWriter, TF 1.0's name for tf.train.SummaryWriter
  test_writer = tf.compat.v1.summary.FileWriter(FLAGS.summaries_dir + '/test')  # corpus patch: likewise
  tf.compat.v1.global_variables_initializer().run()  # corpus patch: TF 1.0's name for initialize_all_variables

  def feed_dict(train):
    """Feeds a training batch (with dropout) or the whole test set (without)."""
    if train or FLAGS.fake_data:
      xs, ys = mnist.train.next_batch(100, fake_data=FLAGS.fake_data)
      k = FLAGS.dropout
    else:
      xs, ys = mnist.test.images, mnist.test.labels
      k = 1.0
    return {x: xs, y_: ys, keep_prob: k}

  # Every 10th step: test accuracy and test summaries. Otherwise: a train step with its
  # summaries, and every 100th step a fully traced one whose RunMetadata is written too.
  for i in range(FLAGS.max_steps):
    if i % 10 == 0:
      summary, acc = sess.run([merged, accuracy], feed_dict=feed_dict(False))
      test_writer.add_summary(summary, i)
      print('Accuracy at step %s: %s' % (i, acc))
    else:
      if i % 100 == 99:
        run_options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        run_metadata = tf.compat.v1.RunMetadata()
        summary, _ = sess.run([merged, train_step], feed_dict=feed_dict(True),
                              options=run_options, run_metadata=run_metadata)
        train_writer.add_run_metadata(run_metadata, 'step%03d' % i)
        train_writer.add_summary(summary, i)
        print('Adding run metadata for', i)
      else:
        summary, _ = sess.run([merged, train_step], feed_dict=feed_dict(True))
        train_writer.add_summary(summary, i)
  train_writer.close()
  test_writer.close()


def main(_):
  if tf.io.gfile.exists(FLAGS.summaries_dir):  # corpus patch: tf.io.gfile, tf_upgrade_v2's name for tf.gfile
    tf.io.gfile.rmtree(FLAGS.summaries_dir)  # corpus patch: likewise (DeleteRecursively)
  tf.io.gfile.makedirs(FLAGS.summaries_dir)  # corpus patch: likewise (MakeDirs)
  train()


if __name__ == '__main__':
  parser = argparse.ArgumentParser()
  parser.add_argument('--fake_data', nargs='?', const=True, type=bool, default=False,
                      help='If true, uses fake data for unit testing.')
  parser.add_argument('--max_steps', type=int, default=100,  # corpus patch: 100 steps (source: 1000), one FULL_TRACE step
                      help='Number of steps to run trainer.')
  parser.add_argument('--learning_rate', type=float, default=0.001, help='Initial learning rate')
  parser.add_argument('--dropout', type=float, default=0.9, help='Keep probability for training dropout.')
  parser.add_argument('--data_dir', type=str, default='/tmp/data', help='Directory for storing data')
  parser.add_argument('--summaries_dir', type=str, default='/tmp/mnist_logs', help='Summaries directory')
  FLAGS, unparsed = parser.parse_known_args()  # corpus patch: parse_known_args + app.run(argv=...), the TF 1.x form:
  tf.compat.v1.app.run(main=main, argv=[sys.argv[0]] + unparsed)  # corpus patch: absl's app.run refuses the argparse flags
