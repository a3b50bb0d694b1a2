"""What a memory sample costs (issue 9): ``summary.memory`` with and without its census, and
``MemoryCallback``'s default sampling in a real ``fit``, each against its baseline in one process.

1. One sample, census off (RSS, peak RSS, device allocators) and on (one pass over the objects
   the garbage collector tracks), in a process holding a trained Keras model: median times,
   against one training step of the same model.
2. ``model.fit`` of the seed LeNet over EPOCHS epochs with ``MemoryCallback(memory_every=100)``
   (its default: breakdown, samples every 100 batches and at epoch ends, the census within its
   2% budget) against the same fit with no callback; interleaved rounds, medians.

    python -m benchmarks.bench_memory_sample [--rounds 3] [--epochs 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import tensorflow as tf

import tb_modelmem
from benchmarks.timing import median_seconds
from demo.models import mnist_like, seed001_convnet


def compiled() -> keras.Model:
    model = seed001_convnet()
    model.compile(keras.optimizers.Adam(), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def sample_cost(x, y) -> None:
    model = compiled()
    model.fit(x[:256], y[:256], batch_size=32, epochs=1, verbose=0)
    step = median_seconds(lambda: model.train_on_batch(x[:32], y[:32]), 20)
    with tempfile.TemporaryDirectory() as logdir, tf.summary.create_file_writer(logdir).as_default():
        counter = iter(range(10**6))
        bare = median_seconds(lambda: tb_modelmem.summary.memory("m", step=next(counter), census=False), 20)
        census = median_seconds(lambda: tb_modelmem.summary.memory("m", step=next(counter), census=True), 10)
    print(f"one sample: without census {bare * 1e3:.2f} ms ({bare / step:.3f}x a training step of "
          f"{step * 1e3:.1f} ms); with census {census * 1e3:.0f} ms ({census / step:.2f}x the step)")


def fit_cost(x, y, rounds: int, epochs: int) -> None:
    plain, ours = [], []
    for r in range(rounds):
        for with_callback in (False, True):
            model = compiled()
            with tempfile.TemporaryDirectory() as logdir:
                callbacks = [tb_modelmem.MemoryCallback(logdir)] if with_callback else []
                started = time.perf_counter()
                model.fit(x, y, batch_size=32, epochs=epochs, verbose=0, callbacks=callbacks)
                (ours if with_callback else plain).append(time.perf_counter() - started)
    a, b = statistics.median(plain), statistics.median(ours)
    batches = len(x) // 32 * epochs
    print(f"fit, {batches} batches: plain {a:.2f} s | with MemoryCallback(memory_every=100) {b:.2f} s | "
          f"ratio {b / a:.3f}x (median of {rounds}, interleaved)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    x, y = mnist_like(32 * 300)
    sample_cost(x, y)
    fit_cost(x, y, args.rounds, args.epochs)


if __name__ == "__main__":
    main()
