"""The loops of docs/USER_PROBLEMS.md #5 (seed 004), run in a fresh process each:

    python -m demo.growth_loops MODE LOGDIR TRUTH.json

MODE: ``keep`` (models kept in a list), ``clear`` (``del model; clear_session(); gc.collect()``),
``tf1`` (TF1 graphs built into the default graph without a reset), ``fit`` (one model, a plain
``fit`` over epochs with MemoryCallback). Each build writes ``tb_modelmem.summary.memory``;
TRUTH.json holds what is measured independently of tb_modelmem: gc counts of live
tf.Variables and graph Operations after each build, and the model's own variable bytes.
"""

from __future__ import annotations

import gc
import json
import os
import sys

BUILDS = 8


def small_cnn():
    import keras

    return keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Conv2D(16, 3, activation="relu"),
                             keras.layers.MaxPooling2D(), keras.layers.Conv2D(32, 3, activation="relu"),
                             keras.layers.Flatten(), keras.layers.Dense(10)])


def live(kind) -> int:
    return sum(1 for o in gc.get_objects() if isinstance(o, kind))


def main(mode: str, logdir: str, out: str) -> None:
    import numpy as np
    import tensorflow as tf

    import tb_modelmem

    truth = {"variables": [], "operations": [], "model_bytes": None}
    rng = np.random.default_rng(0)
    x, y = rng.random((64, 28, 28, 1), dtype=np.float32), rng.integers(0, 10, 64)
    if mode == "fit":
        import keras

        model = small_cnn()
        model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(x, y, batch_size=16, epochs=8, verbose=0,
                  callbacks=[tb_modelmem.MemoryCallback(logdir, memory_every=2, census_budget=1.0)])
    elif mode == "tf1":
        from demo.models import seed001_tf1_graph

        tf.compat.v1.disable_eager_execution()
        writer = tf.compat.v1.summary.FileWriter(os.path.join(logdir, "builds"))
        for build in range(BUILDS):
            with tf.compat.v1.variable_scope(f"trial_{build}"):  # into the default graph, never reset
                seed001_tf1_graph("adam")
            tb_modelmem.summary.memory("memory", step=build, writer=writer)
            truth["operations"].append(len(tf.compat.v1.get_default_graph().get_operations()))
        writer.close()
    else:
        import logging

        import keras

        # Each build's new train function is traced anew, so TensorFlow warns of "tf.function retracing" from
        # the fifth build on: that is what this loop shows (the Growth view names the function), not a failure.
        logging.getLogger("tensorflow").setLevel(logging.ERROR)
        kept = []
        writer = tf.summary.create_file_writer(os.path.join(logdir, "builds"))
        for build in range(BUILDS):
            model = small_cnn()
            model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            model.fit(x, y, batch_size=32, epochs=1, verbose=0)
            # Everything the build keeps: the model's variables, Adam's, and the loss tracker's (total, count).
            state = model.variables + model.optimizer.variables + model.metrics_variables
            truth["model_bytes"] = sum(int(np.prod(v.shape)) * tf.as_dtype(v.dtype).size for v in state)
            truth["model_variables"] = len(state)
            del state  # holding them here would keep them alive
            if mode == "keep":
                kept.append(model)
            else:
                del model
                keras.backend.clear_session()
            gc.collect()
            truth["variables"].append(live(tf.Variable))
            truth["operations"].append(live(tf.Operation))
            with writer.as_default():
                tb_modelmem.summary.memory("memory", step=build)
        writer.flush()
        truth["kept_models"] = [m.name for m in kept]
    with open(out, "w") as f:
        json.dump(truth, f)


if __name__ == "__main__":
    main(*sys.argv[1:4])
