# tb_modelmem test corpus: modelled on the TensorFlow tutorial "TensorFlow 2 quickstart for
# experts", tensorflow/docs site/en/tutorials/quickstart/advanced.ipynb (Copyright 2019 The
# TensorFlow Authors, Apache License 2.0, see ../SOURCES.md). The notebook's code cells as one
# script: same subclassed model, loss, optimizer, metrics and @tf.function GradientTape loop;
# written for the corpus, not a copy of its text. Lines whose behaviour differs from the source
# end in "# corpus patch: <why>".
import numpy as np  # corpus patch: numpy for the synthetic data
import tensorflow as tf
from tensorflow.keras import Model
from tensorflow.keras.layers import Conv2D, Dense, Flatten

# The notebook downloads MNIST with tf.keras.datasets.mnist.load_data().
rng = np.random.default_rng(0)  # corpus patch: synthetic data, nothing is downloaded
x_train = rng.integers(0, 256, size=(128, 28, 28), dtype=np.uint8)  # corpus patch: synthetic images (4 batches)
y_train = rng.integers(0, 10, size=128, dtype=np.uint8)  # corpus patch: synthetic labels
x_test = rng.integers(0, 256, size=(64, 28, 28), dtype=np.uint8)  # corpus patch: synthetic images
y_test = rng.integers(0, 10, size=64, dtype=np.uint8)  # corpus patch: synthetic labels
x_train, x_test = x_train / 255.0, x_test / 255.0

# A channels dimension.
x_train = x_train[..., tf.newaxis].astype("float32")
x_test = x_test[..., tf.newaxis].astype("float32")

train_ds = tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(10000).batch(32)
test_ds = tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(32)


class MyModel(Model):
    def __init__(self):
        super().__init__()
        self.conv1 = Conv2D(32, 3, activation="relu")
        self.flatten = Flatten()
        self.d1 = Dense(128, activation="relu")
        self.d2 = Dense(10)

    def call(self, x):
        x = self.conv1(x)
        x = self.flatten(x)
        x = self.d1(x)
        return self.d2(x)


model = MyModel()

loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
optimizer = tf.keras.optimizers.Adam()

train_loss = tf.keras.metrics.Mean(name="train_loss")
train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="train_accuracy")
test_loss = tf.keras.metrics.Mean(name="test_loss")
test_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="test_accuracy")


@tf.function
def train_step(images, labels):
    with tf.GradientTape() as tape:
        # training=True matters only for layers that behave differently in training (Dropout, ...).
        predictions = model(images, training=True)
        loss = loss_object(labels, predictions)
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    train_loss(loss)
    train_accuracy(labels, predictions)


@tf.function
def test_step(images, labels):
    predictions = model(images, training=False)
    t_loss = loss_object(labels, predictions)
    test_loss(t_loss)
    test_accuracy(labels, predictions)


EPOCHS = 1  # corpus patch: 1 epoch (the notebook trains 5)

for epoch in range(EPOCHS):
    # Start every epoch's metrics afresh.
    train_loss.reset_state()  # corpus patch: Keras 3 name of the stored revision's reset_states()
    train_accuracy.reset_state()  # corpus patch: likewise
    test_loss.reset_state()  # corpus patch: likewise
    test_accuracy.reset_state()  # corpus patch: likewise

    for images, labels in train_ds:
        train_step(images, labels)

    for test_images, test_labels in test_ds:
        test_step(test_images, test_labels)

    print(
        f"Epoch {epoch + 1}, "
        f"Loss: {train_loss.result()}, "
        f"Accuracy: {train_accuracy.result() * 100}, "
        f"Test Loss: {test_loss.result()}, "
        f"Test Accuracy: {test_accuracy.result() * 100}"
    )
