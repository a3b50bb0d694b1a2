"""A Keras 3 training run on the backend named on the command line (torch or jax) in a process where
TensorFlow cannot be imported, recording with ``MemoryCallback``; prints the run's truth as JSON.

The model is keras-io's MNIST convnet (examples/vision/mnist_convnet.py) with a BatchNormalization
after its first convolution, trained with Adam on synthetic MNIST-shaped data. The truth is read from
Keras and the backend's own tensors (``model.trainable_weights``, ``optimizer.variables``, the
backend's element counts and sizes), never from tb_modelmem.

    python -m tests.support.keras_backend_run torch LOGDIR
"""

from __future__ import annotations

import gc
import json
import math
import os
import sys
from typing import Any

from tests.support import no_tensorflow


def nbytes(variable: Any) -> int:
    """Bytes of a Keras variable's backend tensor, as the backend counts them."""
    value = variable.value
    if hasattr(value, "element_size"):  # torch
        return int(value.numel() * value.element_size())
    return int(value.nbytes)  # jax / numpy


def convnet() -> Any:
    """keras-io's MNIST convnet with a BatchNormalization after its first convolution."""
    import keras

    return keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(32, 3, activation="relu", name="conv1"),
        keras.layers.BatchNormalization(name="bn1"),
        keras.layers.MaxPooling2D(name="pool1"),
        keras.layers.Conv2D(64, 3, activation="relu", name="conv2"),
        keras.layers.MaxPooling2D(name="pool2"),
        keras.layers.Flatten(name="flatten"),
        keras.layers.Dropout(0.5, name="dropout"),
        keras.layers.Dense(10, activation="softmax", name="dense"),
    ], name="mnist_convnet")


def _torch_step_count(model: Any, x: Any, y: Any, logdir: str) -> int:
    """The highest "Total Allocated" of one ``train_on_batch`` under a plain ``torch.profiler`` (its count
    starts at 0 in the window on a CPU), read from the exported trace with json."""
    import torch

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        model.train_on_batch(x, y)
    path = os.path.join(os.path.dirname(logdir), f"raw_{len(x)}_{id(model)}.json")  # beside the log dir, not in it
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    return max(int(e["args"]["Total Allocated"]) for e in events if e.get("name") == "[memory]")


def main(backend: str, logdir: str) -> None:
    no_tensorflow.block()
    os.environ["KERAS_BACKEND"] = backend
    import keras
    import numpy as np

    import tb_modelmem

    rng = np.random.default_rng(0)
    x = rng.random((1024, 28, 28, 1), dtype=np.float32)
    y = rng.integers(0, 10, 1024).astype("int32")
    model = convnet()
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    callback = tb_modelmem.MemoryCallback(logdir, profile_steps=(3, 4), memory_every=4)
    model.fit(x, y, batch_size=64, epochs=1, verbose=0, callbacks=[callback])
    # the tf.summary-style API on the same model, into run "api", with tb_modelmem's own default writer
    with tb_modelmem.summary.create_file_writer(os.path.join(logdir, "api")).as_default():
        tb_modelmem.summary.variables("storage", model, step=0)
        with tb_modelmem.trace("ops", step=1, model=model):
            model.train_on_batch(x[:64], y[:64])
        tb_modelmem.summary.memory("memory", step=1)
    optimizer = model.optimizer
    slots = list(optimizer._momentums) + list(optimizer._velocities)  # Adam's m and v, as Keras lists them
    live = sum(isinstance(o, keras.Variable) for o in gc.get_objects())
    # torch's own count of one more step at the traced batch, at twice it and under mixed_bfloat16 (after the
    # live variables are counted: the bfloat16 model adds its own)
    raw = {str(b): _torch_step_count(model, x[:b], y[:b], logdir) for b in (64, 128)} if backend == "torch" else {}
    if backend == "torch":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
        half = convnet()
        half.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy")
        half.fit(x[:128], y[:128], batch_size=64, epochs=1, verbose=0)
        raw["mixed_bfloat16"] = _torch_step_count(half, x[:64], y[:64], logdir)
        keras.mixed_precision.set_global_policy("float32")
    print(json.dumps({
        "backend": keras.backend.backend(),
        "tensorflow_imported": sorted(m for m in sys.modules if m == "tensorflow" or m.startswith("tensorflow.")),
        "trainable_bytes": sum(map(nbytes, model.trainable_weights)),
        "non_trainable_bytes": sum(map(nbytes, model.non_trainable_variables)),  # BatchNorm stats, Dropout seed
        "optimizer_bytes": sum(map(nbytes, optimizer.variables)),
        "slot_bytes": sum(map(nbytes, slots)),
        "count_params": model.count_params(),
        "trainable_count": sum(math.prod(w.shape) for w in model.trainable_weights),
        "model_variables": len(model.variables),
        "optimizer_variables": len(optimizer.variables),
        "live_keras_variables": live,
        "layers": [f"{model.name}/{layer.name}" for layer in model.layers],
        "torch_step_count_by_batch": raw,
    }))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
