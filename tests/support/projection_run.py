"""One real training run for the What-if checks, in a fresh process (the CPU allocator is chosen at
TensorFlow's start: run it with TF_CPU_ALLOCATOR_USE_BFC=true so every allocation is recorded):

    python -m tests.support.projection_run LOGDIR MODEL BATCH [--optimizer adam] [--policy float32] [--truth OUT.json]

MODEL: "lenet" (docs/USER_PROBLEMS.md #2-#3), "transformer" (keras-io's text classification with a transformer,
tests/corpus), "cnn_tutorial" (TensorFlow's CNN tutorial, tests/corpus: held out), "cnn_dense" (its first two
convolutions into a Dense 128), "mobilenet" (keras.applications.MobileNetV2, weights=None, 96x96x3, 10 classes),
"causal_lm" (a GPT-style decoder: next-token loss over ``--seq`` tokens), "tied_lm" (the same, its logits by the
embedding's own table), "llama" (KerasHub's LlamaCausalLM, 2 layers, width 256, 8 query and 2 key-value heads;
needs ``keras-hub``), "gpt2_hub" (KerasHub's GPT2CausalLM, 2 layers, width 192, 6 heads, MLP 640, vocabulary
6000: held out, no rule was written on it), "gemma_hub" (KerasHub's GemmaCausalLM, 2 layers, width 160, 4 query
heads over 1 key-value head of 40, GeGLU 352, vocabulary 5000: a second held-out LM), "qwen2_hub" (KerasHub's
Qwen2CausalLM, 2 layers, width 176, 4 query heads over 2 key-value heads, MLP 480, vocabulary 7000, a tied head:
a third), "mistral_hub" (KerasHub's MistralCausalLM, 2 layers, width 208, 4 query heads over 2 key-value heads of
52, MLP 560, vocabulary 6500: a fourth), "neox_hub" (KerasHub's GPTNeoXCausalLM, 2 layers, width 224, 4 heads, a
quarter of each rotary, attention and MLP side by side, MLP 608, vocabulary 5500: a fifth), "lstm_lm" or "gru_lm" (an
embedding, Keras' LSTM or GRU 96 wide over every token, a head over an 8000-word vocabulary: a ``while`` loop on
TensorFlow). Fits 4 batches of a dataset of ``--samples`` (4 batches unless given) with ``MemoryCallback(LOGDIR,
profile_steps=(3, 3))`` (``--profile-steps 1,1``: another window), and writes what Keras and TensorFlow say of
the run (model.weights, optimizer.variables, the allocator's peak over the traced step) to OUT.json: the ground
truth. Under KERAS_BACKEND=jax the peak is XLA's plan of the step (``tests/support/xla_plan.py``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Dict, Tuple


def build(name: str, samples: int, seq: int = 128) -> Tuple[Any, Any, Any]:
    """(model, x, y) of ``name``: ``samples`` of synthetic data in the model's shapes (``seq`` tokens a
    causal LM's sample)."""
    import keras
    import numpy as np

    from demo.models import mnist_like, seed001_convnet

    rng = np.random.default_rng(0)
    if name == "lenet":
        x, y = mnist_like(samples)
        return seed001_convnet(), x, y
    if name in ("cnn_tutorial", "cnn_dense"):  # held out: measured as they came
        return cnn(name), rng.random((samples, 32, 32, 3), dtype=np.float32), rng.integers(0, 10, samples)
    if name == "mobilenet":
        model = keras.applications.MobileNetV2(weights=None, input_shape=(96, 96, 3), classes=10)
        return model, rng.random((samples, 96, 96, 3), dtype=np.float32), rng.integers(0, 10, samples)
    if name == "transformer":
        return transformer(), rng.integers(0, 20000, (samples, 200)), rng.integers(0, 2, samples)
    if name in ("causal_lm", "tied_lm"):
        tokens = rng.integers(0, CAUSAL_LM_VOCAB, (samples, seq + 1))
        return causal_lm(tied=name == "tied_lm"), tokens[:, :-1], tokens[:, 1:]
    if name == "llama":  # issue 38's KerasHub client: needs keras-hub, which the suite does not install
        import keras_hub

        backbone = keras_hub.models.LlamaBackbone(vocabulary_size=CAUSAL_LM_VOCAB, num_layers=2, num_query_heads=8,
                                                  num_key_value_heads=2, hidden_dim=256, intermediate_dim=688)
        tokens = rng.integers(0, CAUSAL_LM_VOCAB, (samples, seq + 1))
        x = {"token_ids": tokens[:, :-1], "padding_mask": np.ones((samples, seq), "int32")}
        return keras_hub.models.LlamaCausalLM(backbone=backbone, preprocessor=None), x, tokens[:, 1:]
    if name == "gpt2_hub":  # issue 54's held-out KerasHub LM: sizes no rule was written on
        import keras_hub

        backbone = keras_hub.models.GPT2Backbone(vocabulary_size=HELD_OUT_VOCAB, num_layers=2, num_heads=6,
                                                 hidden_dim=192, intermediate_dim=640, max_sequence_length=640)
        tokens = rng.integers(0, HELD_OUT_VOCAB, (samples, seq + 1))
        x = {"token_ids": tokens[:, :-1], "padding_mask": np.ones((samples, seq), "int32")}
        return keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None), x, tokens[:, 1:]
    if name == "gemma_hub":  # a second held-out KerasHub LM, measured once its rules were fixed: nothing tuned on it
        import keras_hub

        backbone = keras_hub.models.GemmaBackbone(vocabulary_size=SECOND_HELD_OUT_VOCAB, num_layers=2,
                                                  num_query_heads=4, num_key_value_heads=1, hidden_dim=160,
                                                  intermediate_dim=704, head_dim=40)
        tokens = rng.integers(0, SECOND_HELD_OUT_VOCAB, (samples, seq + 1))
        x = {"token_ids": tokens[:, :-1], "padding_mask": np.ones((samples, seq), "int32")}
        return keras_hub.models.GemmaCausalLM(backbone=backbone, preprocessor=None), x, tokens[:, 1:]
    if name == "qwen2_hub":  # a third held-out KerasHub LM, measured as it came: nothing tuned on it
        import keras_hub

        backbone = keras_hub.models.Qwen2Backbone(vocabulary_size=THIRD_HELD_OUT_VOCAB, num_layers=2,
                                                  num_query_heads=4, num_key_value_heads=2, hidden_dim=176,
                                                  intermediate_dim=480, tie_word_embeddings=True)
        tokens = rng.integers(0, THIRD_HELD_OUT_VOCAB, (samples, seq + 1))
        x = {"token_ids": tokens[:, :-1], "padding_mask": np.ones((samples, seq), "int32")}
        return keras_hub.models.Qwen2CausalLM(backbone=backbone, preprocessor=None), x, tokens[:, 1:]
    if name == "mistral_hub":  # a fourth held-out KerasHub LM, measured as it came on ordered runs: nothing tuned on it
        import keras_hub

        backbone = keras_hub.models.MistralBackbone(vocabulary_size=FOURTH_HELD_OUT_VOCAB, num_layers=2,
                                                    num_query_heads=4, num_key_value_heads=2, hidden_dim=208,
                                                    intermediate_dim=560)
        tokens = rng.integers(0, FOURTH_HELD_OUT_VOCAB, (samples, seq + 1))
        x = {"token_ids": tokens[:, :-1], "padding_mask": np.ones((samples, seq), "int32")}
        return keras_hub.models.MistralCausalLM(backbone=backbone, preprocessor=None), x, tokens[:, 1:]
    if name == "neox_hub":  # a fifth held-out KerasHub LM, measured as it came: nothing tuned on it
        import keras_hub

        backbone = keras_hub.models.GPTNeoXBackbone(vocabulary_size=FIFTH_HELD_OUT_VOCAB, num_layers=2, num_heads=4,
                                                    hidden_dim=224, intermediate_dim=608, max_sequence_length=640)
        tokens = rng.integers(0, FIFTH_HELD_OUT_VOCAB, (samples, seq + 1))
        x = {"token_ids": tokens[:, :-1], "padding_mask": np.ones((samples, seq), "int32")}
        return keras_hub.models.GPTNeoXCausalLM(backbone=backbone, preprocessor=None), x, tokens[:, 1:]
    if name in ("lstm_lm", "gru_lm"):  # Keras' LSTM or GRU, 96 wide: a while loop over the tokens on TensorFlow
        import keras

        tokens = rng.integers(0, CAUSAL_LM_VOCAB, (samples, seq + 1))
        recurrent = keras.layers.LSTM if name == "lstm_lm" else keras.layers.GRU
        model = keras.Sequential([keras.Input((seq,), dtype="int32"), keras.layers.Embedding(CAUSAL_LM_VOCAB, 64),
                                  recurrent(96, return_sequences=True), keras.layers.Dense(CAUSAL_LM_VOCAB)])
        return model, tokens[:, :-1], tokens[:, 1:]
    raise SystemExit(f"unknown model {name!r}")


def cnn(name: str) -> Any:
    """"cnn_tutorial": TensorFlow's CNN tutorial's model (tests/corpus/scripts/cnn_tutorial.py, a script, not
    importable), CIFAR10's shapes; "cnn_dense": its first two convolutions, their feature map flattened into a
    Dense 128 (1.38 M of its 1.41 M parameters), a CNN whose state outweighs its activations at batch 32."""
    import keras
    from keras import layers

    stem = [keras.Input((32, 32, 3)), layers.Conv2D(32, 3, activation="relu"), layers.MaxPooling2D(),
            layers.Conv2D(64, 3, activation="relu")]
    head = ([layers.MaxPooling2D(), layers.Conv2D(64, 3, activation="relu"), layers.Flatten(),
             layers.Dense(64, activation="relu")] if name == "cnn_tutorial"
            else [layers.Flatten(), layers.Dense(128, activation="relu")])
    return keras.Sequential(stem + head + [layers.Dense(10)])


# TensorFlow's XLA auto-clustering on the CPU, set before TensorFlow starts (TF_XLA_FLAGS)
AUTO_JIT_FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"


def transformer(maxlen: int = 200, vocab: int = 20000, embed: int = 32, heads: int = 2, ff: int = 32) -> Any:
    """keras-io's text classification with a transformer (tests/corpus/scripts), as a function."""
    import keras
    from keras import layers, ops

    class TransformerBlock(layers.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.att = layers.MultiHeadAttention(num_heads=heads, key_dim=embed)
            self.ffn = keras.Sequential([layers.Dense(ff, activation="relu"), layers.Dense(embed)])
            self.norm1, self.norm2 = layers.LayerNormalization(epsilon=1e-6), layers.LayerNormalization(epsilon=1e-6)
            self.drop1, self.drop2 = layers.Dropout(0.1), layers.Dropout(0.1)

        def call(self, x: Any) -> Any:
            out1 = self.norm1(x + self.drop1(self.att(x, x)))
            return self.norm2(out1 + self.drop2(self.ffn(out1)))

    class TokenAndPositionEmbedding(layers.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.token, self.position = layers.Embedding(vocab, embed), layers.Embedding(maxlen, embed)

        def call(self, x: Any) -> Any:
            return self.token(x) + self.position(ops.arange(0, ops.shape(x)[-1], 1))

    inputs = layers.Input(shape=(maxlen,))
    x = TransformerBlock()(TokenAndPositionEmbedding()(inputs))
    x = layers.Dropout(0.1)(layers.GlobalAveragePooling1D()(x))
    x = layers.Dropout(0.1)(layers.Dense(20, activation="relu")(x))
    return keras.Model(inputs, layers.Dense(2, activation="softmax")(x))


CAUSAL_LM_VOCAB = 8000
HELD_OUT_VOCAB = 6000  # the held-out KerasHub LM's: no rule was tuned on it
SECOND_HELD_OUT_VOCAB = 5000  # Gemma's: its dimensions (5000, 160, 40, 4, 1, 352) are no length nor batch x length
THIRD_HELD_OUT_VOCAB = 7000  # Qwen2's: nor are its (7000, 176, 44, 4, 2, 480)
FOURTH_HELD_OUT_VOCAB = 6500  # Mistral's: nor are its (6500, 208, 52, 4, 2, 560)
FIFTH_HELD_OUT_VOCAB = 5500  # GPT-NeoX's: nor are its (5500, 224, 56, 4, 608)


def causal_lm(vocab: int = CAUSAL_LM_VOCAB, width: int = 192, heads: int = 6, blocks: int = 2, ff: int = 768,
              tied: bool = False) -> Any:
    """A GPT-style decoder of any length: token embedding, sinusoidal positions (no weight sized by the
    length), ``blocks`` pre-norm blocks of causal self-attention and a GELU MLP, logits over ``vocab``
    (``tied``: by the embedding's own table, Keras' ReversibleEmbedding, as KerasHub's LMs do).
    No dimension of its weights (8000, 192, 768, 6, 32) is 64, 128, 256 or 512, so a length of those, nor
    batch 8 times one, is no other axis."""
    import keras
    from keras import layers, ops

    class Positions(layers.Layer):
        def call(self, x: Any) -> Any:
            length = ops.shape(x)[1]
            where = ops.cast(ops.arange(length), "float32")[:, None]
            rate = ops.exp(ops.arange(0, width, 2, dtype="float32") * (-9.210340371976184 / width))[None, :]
            angles = where * rate
            return x + ops.cast(ops.concatenate([ops.sin(angles), ops.cos(angles)], axis=-1)[None], x.dtype)

    inputs = layers.Input(shape=(None,), dtype="int32")
    embedding = layers.ReversibleEmbedding(vocab, width) if tied else layers.Embedding(vocab, width)
    x = Positions()(embedding(inputs))
    for _ in range(blocks):
        h = layers.LayerNormalization(epsilon=1e-5)(x)
        x = x + layers.MultiHeadAttention(num_heads=heads, key_dim=width // heads)(h, h, use_causal_mask=True)
        h = layers.LayerNormalization(epsilon=1e-5)(x)
        x = x + layers.Dense(width)(layers.Dense(ff, activation="gelu")(h))
    x = layers.LayerNormalization(epsilon=1e-5)(x)
    return keras.Model(inputs, embedding(x, reverse=True) if tied else layers.Dense(vocab)(x))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("logdir")
    parser.add_argument("model")
    parser.add_argument("batch", type=int)
    parser.add_argument("--optimizer", default="adam")
    parser.add_argument("--policy", default="float32")
    parser.add_argument("--truth")
    parser.add_argument("--profile-steps", default="3,3", help="first,last step profiled")
    parser.add_argument("--seq", type=int, default=128, help="tokens per sample (causal_lm)")
    parser.add_argument("--samples", type=int, help="the dataset's size (4 batches unless given)")
    args = parser.parse_args()
    import keras
    import numpy as np

    import tb_modelmem

    keras.mixed_precision.set_global_policy(args.policy)
    model, x, y = build(args.model, args.samples or 4 * args.batch, args.seq)
    optimizer = (keras.optimizers.SGD(momentum=0.9) if args.optimizer == "momentum"
                 else keras.optimizers.get(args.optimizer))
    if args.policy == "mixed_float16":
        optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
    logits = args.model not in ("transformer", "mobilenet")  # their heads end in a softmax
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=logits)
    model.compile(optimizer=optimizer, loss=loss)
    before: Dict[str, Any] = {"step_peaks": []}
    first, last = (int(step) for step in args.profile_steps.split(","))

    class AllocatorBefore(keras.callbacks.Callback):
        """What TensorFlow's CPU allocator holds as the first traced step begins, and its own high-water mark
        over each traced step (BFC only: else unknown): the peaks a projection and the trace's own steps are
        checked against, read from TensorFlow rather than from the trace."""

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            if first <= batch + 1 <= last and keras.backend.backend() == "tensorflow":
                import tensorflow as tf

                try:
                    info = tf.config.experimental.get_memory_info("CPU:0")
                    tf.config.experimental.reset_memory_stats("CPU:0")  # the peak below is this step's only
                except (ValueError, RuntimeError):
                    return
                if batch + 1 == first:
                    before.update(info)

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            if first <= batch + 1 <= last and "current" in before:  # the stats were reset as the step began
                import tensorflow as tf

                before["step_peaks"].append(tf.config.experimental.get_memory_info("CPU:0")["peak"])

    traced = tb_modelmem.MemoryCallback(args.logdir, profile_steps=(first, last), memory_every=0)
    model.fit(x, y, batch_size=args.batch, epochs=1, steps_per_epoch=4, verbose=0,
              callbacks=[AllocatorBefore(), traced])

    def nbytes(variables: Any) -> int:
        return sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in variables)

    truth = {"weights": nbytes(model.trainable_weights), "non_trainable": nbytes(model.non_trainable_weights),
             "optimizer_slots": nbytes([v for v in model.optimizer.variables if len(v.shape)]),
             "optimizer_scalars": nbytes([v for v in model.optimizer.variables if not len(v.shape)]),
             "optimizer_class": type(model.optimizer).__name__, "params": model.count_params(),
             "allocator_before_trace": before.get("current"),
             "allocator_step_peak": before["step_peaks"][0] if before["step_peaks"] else None,
             "allocator_step_peaks": before["step_peaks"],
             "optimizer_slot_paths": [v.path for v in model.optimizer.variables if len(v.shape)]}
    if keras.backend.backend() == "jax":  # no allocator is recorded: XLA's own plan of the step is the truth
        from tests.support import xla_plan

        truth["planned"] = xla_plan.memory_analysis(model, x[:args.batch], y[:args.batch])
        truth["planned_peak"] = xla_plan.peak(truth["planned"])
    if args.truth:
        with open(args.truth, "w") as f:
            json.dump(truth, f)


if __name__ == "__main__":
    main()
