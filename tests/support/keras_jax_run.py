"""Keras 3 on the JAX backend, trained with tb_modelmem attached as the README says: the seed LeNet
(docs/USER_PROBLEMS.md #3), Adam, batch 32, ``MemoryCallback(log_dir, profile_steps=(3, 4))``.

    KERAS_BACKEND=jax python -m tests.support.keras_jax_run LOGDIR TRUTH.json

Writes what Keras and JAX say of the run (the ground truth, never tb_modelmem's) to TRUTH.json.
"""

from __future__ import annotations

import json
import os
import sys


def main(logdir: str, truth_path: str) -> None:
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import jax
    import keras
    import numpy as np

    import tb_modelmem
    from demo.models import mnist_like, seed001_convnet
    from tests.support import xla_plan

    assert keras.backend.backend() == "jax", keras.backend.backend()
    model = seed001_convnet()
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = mnist_like(32 * 6)
    model.fit(x, y, batch_size=32, epochs=1, verbose=0,
              callbacks=[tb_modelmem.MemoryCallback(logdir, profile_steps=(3, 4))])

    def nbytes(variables):
        return sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in variables)

    truth = {"backend": keras.backend.backend(), "jax": jax.__version__, "count_params": model.count_params(),
             "weight_bytes": nbytes(model.trainable_weights),
             "non_trainable_bytes": nbytes(model.non_trainable_weights),
             "optimizer_bytes": nbytes(model.optimizer.variables),
             "slot_bytes": nbytes([v for v in model.optimizer.variables if len(v.shape)]),
             "layers": [layer.name for layer in model.layers],
             "planned": xla_plan.memory_analysis(model, x[:32], y[:32])}
    with open(truth_path, "w") as f:
        json.dump(truth, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
