# tb_modelmem test corpus: modelled on keras-io examples/vision/siamese_contrastive.py
# ("Image similarity estimation using a Siamese Network with a contrastive loss", Mehdi;
# keras-io is Apache License 2.0, see ../SOURCES.md). Same shared embedding network (one
# keras.Model called on both inputs), loss, compile and fit calls as the source; written for
# the corpus, not a copy of its text. Lines whose behaviour differs from the source end in
# "# corpus patch: <why>".
import random

import numpy as np
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

epochs = 1  # corpus patch: 1 epoch (the source trains 10)
batch_size = 16
margin = 1  # contrastive loss margin

# The source downloads MNIST with keras.datasets.mnist.load_data().
rng = np.random.default_rng(0)  # corpus patch: synthetic data, nothing is downloaded
x_train_val = rng.integers(0, 256, size=(60, 28, 28)).astype("float32")  # corpus patch: synthetic images
y_train_val = np.arange(60) % 10  # corpus patch: synthetic labels, every digit present
x_test = rng.integers(0, 256, size=(20, 28, 28)).astype("float32")  # corpus patch: synthetic images
y_test = np.arange(20) % 10  # corpus patch: synthetic labels

# Half for training, half for validation.
x_train, x_val = x_train_val[:30], x_train_val[30:]  # corpus patch: split 60 synthetic images (source: 30000 of 60000)
y_train, y_val = y_train_val[:30], y_train_val[30:]  # corpus patch: likewise
del x_train_val, y_train_val


def make_pairs(x, y):
    """For every image, one pair with an image of the same digit (label 1) and one with an
    image of another digit (label 0)."""
    num_classes = max(y) + 1
    by_class = [np.where(y == digit)[0] for digit in range(num_classes)]
    pairs, labels = [], []
    for i in range(len(x)):
        same = random.choice(by_class[y[i]])
        pairs.append([x[i], x[same]])
        labels.append(1)
        other_class = random.randint(0, num_classes - 1)
        while other_class == y[i]:
            other_class = random.randint(0, num_classes - 1)
        pairs.append([x[i], x[random.choice(by_class[other_class])]])
        labels.append(0)
    return np.array(pairs), np.array(labels).astype("float32")


pairs_train, labels_train = make_pairs(x_train, y_train)
pairs_val, labels_val = make_pairs(x_val, y_val)
pairs_test, labels_test = make_pairs(x_test, y_test)

x_train_1, x_train_2 = pairs_train[:, 0], pairs_train[:, 1]
x_val_1, x_val_2 = pairs_val[:, 0], pairs_val[:, 1]
x_test_1, x_test_2 = pairs_test[:, 0], pairs_test[:, 1]
# corpus patch: dropped the source's visualize() helper and its plots of sample pairs (matplotlib, display only)


def euclidean_distance(vects):
    """sqrt(sum((a - b)^2)) per row, floored at epsilon."""
    a, b = vects
    sum_square = tf.math.reduce_sum(tf.math.square(a - b), axis=1, keepdims=True)
    return tf.math.sqrt(tf.math.maximum(sum_square, tf.keras.backend.epsilon()))


input = layers.Input((28, 28, 1))
x = tf.keras.layers.BatchNormalization()(input)
x = layers.Conv2D(4, (5, 5), activation="tanh")(x)
x = layers.AveragePooling2D(pool_size=(2, 2))(x)
x = layers.Conv2D(16, (5, 5), activation="tanh")(x)
x = layers.AveragePooling2D(pool_size=(2, 2))(x)
x = layers.Flatten()(x)
x = tf.keras.layers.BatchNormalization()(x)
x = layers.Dense(10, activation="tanh")(x)
embedding_network = keras.Model(input, x)

input_1 = layers.Input((28, 28, 1))
input_2 = layers.Input((28, 28, 1))
# One embedding network for both towers: its weights are shared.
tower_1 = embedding_network(input_1)
tower_2 = embedding_network(input_2)

merge_layer = layers.Lambda(euclidean_distance)([tower_1, tower_2])
normal_layer = tf.keras.layers.BatchNormalization()(merge_layer)
output_layer = layers.Dense(1, activation="sigmoid")(normal_layer)
siamese = keras.Model(inputs=[input_1, input_2], outputs=output_layer)


def loss(margin=1):
    """The contrastive loss with ``margin`` bound in."""

    def contrastive_loss(y_true, y_pred):
        # mean((1 - y) * d^2 + y * max(margin - d, 0)^2)
        square_pred = tf.math.square(y_pred)
        margin_square = tf.math.square(tf.math.maximum(margin - y_pred, 0))
        return tf.math.reduce_mean((1 - y_true) * square_pred + y_true * margin_square)

    return contrastive_loss


siamese.compile(loss=loss(margin=margin), optimizer="RMSprop", metrics=["accuracy"])
siamese.summary()

history = siamese.fit(
    [x_train_1, x_train_2],
    labels_train,
    validation_data=([x_val_1, x_val_2], labels_val),
    batch_size=batch_size,
    epochs=epochs,
)
# corpus patch: dropped the source's plt_metric() plots of accuracy and loss (matplotlib, display only)

results = siamese.evaluate([x_test_1, x_test_2], labels_test)
print("test loss, test acc:", results)
predictions = siamese.predict([x_test_1, x_test_2])
# corpus patch: dropped the source's plot of test pairs with their predictions (matplotlib, display only)
