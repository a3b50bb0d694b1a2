# tb_modelmem test corpus: modelled on keras-io examples/vision/mnist_convnet.py
# ("Simple MNIST convnet", fchollet; keras-io is Apache License 2.0, see ../SOURCES.md).
# Same model, compile and fit calls as the source; written for the corpus, not a copy of
# its text. Lines whose behaviour differs from the source end in "# corpus patch: <why>".
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

num_classes = 10
input_shape = (28, 28, 1)

# The source downloads MNIST with keras.datasets.mnist.load_data().
rng = np.random.default_rng(0)  # corpus patch: synthetic data, nothing is downloaded
x_train = rng.integers(0, 256, size=(300, 28, 28), dtype=np.uint8)  # corpus patch: synthetic data (3 train batches)
y_train = rng.integers(0, num_classes, size=300)  # corpus patch: synthetic data
x_test = rng.integers(0, 256, size=(64, 28, 28), dtype=np.uint8)  # corpus patch: synthetic data
y_test = rng.integers(0, num_classes, size=64)  # corpus patch: synthetic data

x_train = np.expand_dims(x_train.astype("float32") / 255, -1)
x_test = np.expand_dims(x_test.astype("float32") / 255, -1)
print("x_train shape:", x_train.shape, "-", x_train.shape[0], "train /", x_test.shape[0], "test samples")

y_train = keras.utils.to_categorical(y_train, num_classes)
y_test = keras.utils.to_categorical(y_test, num_classes)

model = keras.Sequential(
    [
        keras.Input(shape=input_shape),
        layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Conv2D(64, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Flatten(),
        layers.Dropout(0.5),
        layers.Dense(num_classes, activation="softmax"),
    ]
)
model.summary()

batch_size = 128
epochs = 1  # corpus patch: 1 epoch (the source trains 15)

model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
model.fit(x_train, y_train, batch_size=batch_size, epochs=epochs, validation_split=0.1)

loss, accuracy = model.evaluate(x_test, y_test, verbose=0)
print("Test loss:", loss)
print("Test accuracy:", accuracy)
