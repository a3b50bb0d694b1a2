# tb_modelmem test corpus: modelled on keras-io examples/nlp/text_classification_with_transformer.py
# ("Text classification with Transformer", Apoorv Nandan; Keras 3 port by Sitam Meur; keras-io is
# Apache License 2.0, see ../SOURCES.md). Same custom layers, model, compile and fit calls as the
# source; written for the corpus, not a copy of its text. Lines whose behaviour differs from the
# source end in "# corpus patch: <why>".
import keras
import numpy as np
from keras import layers, ops


class TransformerBlock(layers.Layer):
    """Self-attention and a two-layer feed-forward net, each with dropout, residual and LayerNorm."""

    def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1):
        super().__init__()
        self.att = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.ffn = keras.Sequential([layers.Dense(ff_dim, activation="relu"), layers.Dense(embed_dim)])
        self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
        self.dropout1 = layers.Dropout(rate)
        self.dropout2 = layers.Dropout(rate)

    def call(self, inputs):
        attended = self.dropout1(self.att(inputs, inputs))
        out1 = self.layernorm1(inputs + attended)
        fed = self.dropout2(self.ffn(out1))
        return self.layernorm2(out1 + fed)


class TokenAndPositionEmbedding(layers.Layer):
    """A token embedding plus a learned position embedding."""

    def __init__(self, maxlen, vocab_size, embed_dim):
        super().__init__()
        self.token_emb = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
        self.pos_emb = layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

    def call(self, x):
        positions = self.pos_emb(ops.arange(start=0, stop=ops.shape(x)[-1], step=1))
        return self.token_emb(x) + positions


vocab_size = 20000  # the top 20k words
maxlen = 200  # the first 200 words of each review

# The source downloads IMDB with keras.datasets.imdb.load_data(num_words=vocab_size).
rng = np.random.default_rng(0)  # corpus patch: synthetic data, nothing is downloaded
x_train = [list(rng.integers(1, vocab_size, size=rng.integers(20, 300))) for _ in range(96)]  # corpus patch: synthetic reviews
y_train = rng.integers(0, 2, size=96)  # corpus patch: synthetic labels
x_val = [list(rng.integers(1, vocab_size, size=rng.integers(20, 300))) for _ in range(32)]  # corpus patch: synthetic reviews
y_val = rng.integers(0, 2, size=32)  # corpus patch: synthetic labels
print(len(x_train), "training sequences,", len(x_val), "validation sequences")
x_train = keras.utils.pad_sequences(x_train, maxlen=maxlen)
x_val = keras.utils.pad_sequences(x_val, maxlen=maxlen)

embed_dim = 32  # per-token embedding size
num_heads = 2  # attention heads
ff_dim = 32  # feed-forward hidden size in the transformer

inputs = layers.Input(shape=(maxlen,))
x = TokenAndPositionEmbedding(maxlen, vocab_size, embed_dim)(inputs)
x = TransformerBlock(embed_dim, num_heads, ff_dim)(x)
x = layers.GlobalAveragePooling1D()(x)
x = layers.Dropout(0.1)(x)
x = layers.Dense(20, activation="relu")(x)
x = layers.Dropout(0.1)(x)
outputs = layers.Dense(2, activation="softmax")(x)
model = keras.Model(inputs=inputs, outputs=outputs)

model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
history = model.fit(
    x_train, y_train, batch_size=32, epochs=1, validation_data=(x_val, y_val)  # corpus patch: 1 epoch (the source trains 2)
)
