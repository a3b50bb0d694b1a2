"""Keras 3 on the torch backend, compiled (``model.compile(jit_compile=True)``: Keras runs its train function
under ``torch.compile``), trained with ``MemoryCallback(profile_steps=(3, 4))`` in a process without TensorFlow.

    python -m tests.support.keras_torch_compiled_run LOGDIR

Writes LOGDIR/train (events, MemoryCallback's training run) and LOGDIR/dynamo.json: the graphs dynamo had
compiled when the window opened and when it closed (torch's own counters): equal when profiling made nothing
compile again.
"""

from __future__ import annotations

import json
import os
import sys

from tests.support import no_tensorflow


def main(logdir: str) -> None:
    no_tensorflow.block()
    os.environ["KERAS_BACKEND"] = "torch"
    import keras
    import numpy as np
    from torch._dynamo.utils import counters

    import tb_modelmem

    counted = {}

    class Count(keras.callbacks.Callback):
        """Dynamo's compiled graphs when the window opens (after step 2) and after it closes (step 4)."""

        def on_train_batch_end(self, batch: int, logs: object = None) -> None:
            if batch + 1 in (2, 4):
                counted[f"after_step_{batch + 1}"] = counters["stats"]["unique_graphs"]

    rng = np.random.default_rng(0)
    x = rng.random((64 * 5, 28, 28, 1), dtype=np.float32)
    y = rng.integers(0, 10, 64 * 5).astype("int32")
    model = keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(16, 3, activation="relu", name="conv1"),
        keras.layers.MaxPooling2D(name="pool1"),
        keras.layers.Flatten(name="flatten"),
        keras.layers.Dense(10, activation="softmax", name="dense"),
    ], name="compiled_convnet")
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy", jit_compile=True)
    model.fit(x, y, batch_size=64, epochs=1, verbose=0,
              callbacks=[Count(), tb_modelmem.MemoryCallback(logdir, profile_steps=(3, 4), memory_every=None)])
    counted["backend"] = keras.backend.backend()
    counted["jit_compile"] = bool(model.jit_compile)
    with open(os.path.join(logdir, "dynamo.json"), "w") as f:
        json.dump(counted, f)


if __name__ == "__main__":
    main(sys.argv[1])
