# tb_modelmem test corpus: modelled on keras-io examples/nlp/bidirectional_lstm_imdb.py
# ("Bidirectional LSTM on IMDB", fchollet; keras-io is Apache License 2.0, see ../SOURCES.md).
# Same model, compile and fit calls as the source; written for the corpus, not a copy of its
# text. Lines whose behaviour differs from the source end in "# corpus patch: <why>".
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

max_features = 20000  # the top 20k words
maxlen = 200  # the first 200 words of each review

inputs = keras.Input(shape=(None,), dtype="int32")  # variable-length integer sequences
x = layers.Embedding(max_features, 128)(inputs)
x = layers.Bidirectional(layers.LSTM(64, return_sequences=True))(x)
x = layers.Bidirectional(layers.LSTM(64))(x)
outputs = layers.Dense(1, activation="sigmoid")(x)
model = keras.Model(inputs, outputs)
model.summary()

# The source downloads IMDB with keras.datasets.imdb.load_data(num_words=max_features).
rng = np.random.default_rng(0)  # corpus patch: synthetic data, nothing is downloaded
x_train = [list(rng.integers(1, max_features, size=rng.integers(20, 300))) for _ in range(96)]  # corpus patch: synthetic reviews
y_train = rng.integers(0, 2, size=96)  # corpus patch: synthetic labels
x_val = [list(rng.integers(1, max_features, size=rng.integers(20, 300))) for _ in range(32)]  # corpus patch: synthetic reviews
y_val = rng.integers(0, 2, size=32)  # corpus patch: synthetic labels
print(len(x_train), "training sequences,", len(x_val), "validation sequences")
# Longer reviews are cut to maxlen words, shorter ones zero-padded.
x_train = keras.preprocessing.sequence.pad_sequences(x_train, maxlen=maxlen)
x_val = keras.preprocessing.sequence.pad_sequences(x_val, maxlen=maxlen)

model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
model.fit(x_train, y_train, batch_size=32, epochs=1, validation_data=(x_val, y_val))  # corpus patch: 1 epoch (the source trains 2)
