# tb_modelmem test corpus: modelled on the TensorFlow tutorial "Convolutional Neural Network
# (CNN)", tensorflow/docs site/en/tutorials/images/cnn.ipynb (Copyright 2019 The TensorFlow
# Authors, Apache License 2.0, see ../SOURCES.md). The notebook's code cells as one script: same
# Sequential model, compile and fit calls; written for the corpus, not a copy of its text. Lines
# whose behaviour differs from the source end in "# corpus patch: <why>".
import numpy as np  # corpus patch: numpy for the synthetic data
import tensorflow as tf
from tensorflow.keras import layers, models

# The notebook downloads CIFAR10 with datasets.cifar10.load_data().
rng = np.random.default_rng(0)  # corpus patch: synthetic data, nothing is downloaded
train_images = rng.integers(0, 256, size=(640, 32, 32, 3), dtype=np.uint8)  # corpus patch: 20 batches of 32
train_labels = rng.integers(0, 10, size=(640, 1), dtype=np.uint8)  # corpus patch: synthetic labels
test_images = rng.integers(0, 256, size=(64, 32, 32, 3), dtype=np.uint8)  # corpus patch: synthetic images
test_labels = rng.integers(0, 10, size=(64, 1), dtype=np.uint8)  # corpus patch: synthetic labels

# Pixel values in [0, 1] (float64, as the notebook's division makes them).
train_images, test_images = train_images / 255.0, test_images / 255.0

model = models.Sequential()
model.add(layers.Conv2D(32, (3, 3), activation="relu", input_shape=(32, 32, 3)))
model.add(layers.MaxPooling2D((2, 2)))
model.add(layers.Conv2D(64, (3, 3), activation="relu"))
model.add(layers.MaxPooling2D((2, 2)))
model.add(layers.Conv2D(64, (3, 3), activation="relu"))
model.summary()

model.add(layers.Flatten())
model.add(layers.Dense(64, activation="relu"))
model.add(layers.Dense(10))
model.summary()

model.compile(optimizer="adam",
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])

history = model.fit(train_images, train_labels, epochs=1,  # corpus patch: 1 epoch (the notebook trains 10)
                    validation_data=(test_images, test_labels))

test_loss, test_acc = model.evaluate(test_images, test_labels, verbose=2)
print(test_acc)

predictions = model.predict(test_images)
softmax_predictions = tf.nn.softmax(predictions)
