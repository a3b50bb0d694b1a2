"""A training process with a TensorFlow profiler server: python -m tests.support.profile_worker PORT UNITS SECONDS."""

import sys
import time


def main(port: int, units: int, seconds: float) -> None:
    import keras
    import numpy as np
    import tensorflow as tf

    tf.profiler.experimental.server.start(port)
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(units, name="wide"), keras.layers.Dense(10)])
    model.compile("adam", "mse")
    x, y = np.random.rand(256, 64).astype("float32"), np.random.rand(256, 10).astype("float32")
    model.fit(x, y, batch_size=32, epochs=1, verbose=0)
    print("ready", flush=True)
    end = time.time() + seconds
    while time.time() < end:
        model.fit(x, y, batch_size=32, epochs=1, verbose=0)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]))
