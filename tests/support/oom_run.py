"""A step that fits, traced, then a batch that does not (issue 28: an OOM explained).

    python -m tests.support.oom_run LOGDIR TRUTH.json

A Dense, then a Lambda that tiles its 256 units 1,024 times, then a Dense head: batch 32 fits and
is profiled (MemoryCallback(profile_steps=2)); a second fit at batch 2**18 asks for 2**18 x 262,144
float32 = 256 GiB in the tiling layer. TRUTH gets what Keras says of that allocation (the layer's
output shape at that batch), the step that failed, and whether the error reached this script.
"""

from __future__ import annotations

import json
import math
import sys

import keras
import numpy as np

from tb_modelmem import MemoryCallback

BIG = 2**18


def main() -> None:
    logdir, truth_path = sys.argv[1:3]
    inputs = keras.Input((256,))
    x = keras.layers.Dense(256, activation="relu", name="dense")(inputs)
    x = keras.layers.Lambda(lambda t: keras.ops.tile(t, [1, 1024]), name="expand")(x)
    model = keras.Model(inputs, keras.layers.Dense(8, name="head")(x), name="widening")
    model.compile(keras.optimizers.Adam(), "mse")
    callback = MemoryCallback(logdir, profile_steps=2, memory_every=0)
    model.fit(np.zeros((128, 256), "float32"), np.zeros((128, 8), "float32"), batch_size=32, epochs=1, verbose=0,
              callbacks=[callback])
    shape = model.get_layer("expand").compute_output_shape((BIG, 256))
    truth = {"requested_bytes": math.prod(shape) * 4, "shape": list(shape), "failed_step": 4 + 1, "raised": None}
    try:
        model.fit(np.zeros((BIG, 256), "float32"), np.zeros((BIG, 8), "float32"), batch_size=BIG, epochs=1,
                  verbose=0, callbacks=[callback])
    except Exception as e:  # the error the step raised, unchanged
        truth["raised"] = type(e).__name__
    with open(truth_path, "w") as f:
        json.dump(truth, f)


if __name__ == "__main__":
    main()
