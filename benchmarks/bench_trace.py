"""What ``tb_modelmem.trace()`` costs against a bare profiler capture of the same step (issue 11).

A ResNet50 (keras.applications, weights=None) and the seed LeNet, each trained by a custom
``tf.function`` step with Adam. Interleaved rounds, medians:

  bare    tf.profiler.experimental.start(dir); step; stop()   (the profiler writes its .xplane.pb)
  first   with tb_modelmem.trace("ops", function=step, model=model, optimizer=opt): step
          (the same capture, plus reading the step's graphs, reducing the XSpace, joining it to
          the model, writing the summary), its graph reading and the phase of each op name
          forgotten before each round
  again   the same trace() again: a loop profiled every N steps reuses the graph reading and
          the join's graph analysis of its earlier traces (opgraph.graph_info, GraphAnalysis, Joiner.reused)

Printed: the times, the ratios, and the stored payload against the ``.xplane.pb`` it replaces.

The ratio depends on how busy the machine is, not only on the code: ``trace()`` reads the graphs
in a thread while TensorFlow writes the profile, which takes a second core. ``--busy N`` keeps N
cores busy with spinning processes during the rounds, to measure that case on purpose; the load
average before and after the rounds is printed so a figure can be read with its conditions.

    python -m benchmarks.bench_trace [--rounds 3] [--batch 8] [--models resnet50 lenet] [--busy 1]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Iterator, List, Tuple

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

import tb_modelmem
from tb_modelmem.capture import opgraph
from tb_modelmem.rules.join import GraphAnalysis, Joiner, phase_by_name
from tb_modelmem.schema import payload
from tests.support import trace_fixtures


def resnet50_step(batch: int) -> Tuple[Any, Any, Callable[[], Any]]:
    import keras

    model = keras.applications.ResNet50(weights=None, input_shape=(224, 224, 3), classes=1000)
    optimizer = keras.optimizers.Adam()
    loss_fn = keras.losses.SparseCategoricalCrossentropy()
    x = tf.constant(np.random.default_rng(0).random((batch, 224, 224, 3), np.float32))
    y = tf.constant(np.zeros((batch,), np.int32))

    @tf.function
    def train_step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    return model, optimizer, train_step, (x, y)


def lenet_step(batch: int) -> Tuple[Any, Any, Any, Any]:
    model = trace_fixtures.lenet_keras()
    training = trace_fixtures.lenet_train_step(model, batch_size=batch)
    return model, training.optimizer, training.step, training.batch


def bare(step: Any, args: Any) -> float:
    folder = tempfile.mkdtemp(prefix="bench_bare_")
    started = time.perf_counter()
    tf.profiler.experimental.start(folder)
    step(*args)
    tf.profiler.experimental.stop()
    took = time.perf_counter() - started
    shutil.rmtree(folder)
    return took


def ours(step: Any, args: Any, model: Any, optimizer: Any, writer: Any, round_: int) -> Tuple[float, Any]:
    with writer.as_default():
        started = time.perf_counter()
        with tb_modelmem.trace("ops", step=round_, function=step, model=model, optimizer=optimizer) as window:
            step(*args)
        took = time.perf_counter() - started
    return took, window


def measure(name: str, build: Callable[[int], Any], batch: int, rounds: int, busy: int = 0) -> None:
    model, optimizer, step, args = build(batch)
    step(*args)  # traced and warm
    step(*args)
    with tempfile.TemporaryDirectory() as logdir, busy_cores(busy):
        writer = tf.summary.create_file_writer(logdir)
        bare_times: List[float] = []
        first_times: List[float] = []
        again_times: List[float] = []
        window = None
        for r in range(rounds):
            bare_times.append(bare(step, args))
            opgraph._RECENT.clear()  # what a first trace() of this step reads and analyses
            Joiner._recent.clear()
            GraphAnalysis._recent.clear()
            phase_by_name.cache_clear()
            took, window = ours(step, args, model, optimizer, writer, 2 * r)
            first_times.append(took)
            took, window = ours(step, args, model, optimizer, writer, 2 * r + 1)
            again_times.append(took)
        writer.close()
    assert window is not None and window.record is not None, "the trace was not recorded"
    blob = payload.encode(window.record)
    b, first, again = (statistics.median(t) for t in (bare_times, first_times, again_times))
    print(f"{name} (batch {batch}, {len(window.record.ops):,} ops), medians of {rounds}, interleaved: "
          f"bare capture {b:.2f} s | first trace() {first:.2f} s = {first / b:.2f}x | "
          f"trace() again {again:.2f} s = {again / b:.2f}x")
    print(f"  each round against its own bare capture: first {_spread(first_times, bare_times)}, "
          f"again {_spread(again_times, bare_times)}")
    print(f"  stored payload {len(blob):,} B vs .xplane.pb {window.xplane_bytes:,} B: "
          f"{len(blob) / window.xplane_bytes:.4f} ({100 * len(blob) / window.xplane_bytes:.2f}%)")
    print(f"  load average (1 min) {os.getloadavg()[0]:.2f} after the rounds (the benchmark itself keeps 1 busy)")


def _spread(times: List[float], bare_times: List[float]) -> str:
    """Median (lowest-highest) of each round's ratio to the bare capture run just before it, and of
    the time it adds to it: the bare capture itself varies by 10% between runs, the ratio with it."""
    ratios = sorted(t / b for t, b in zip(times, bare_times))
    added = sorted(1e3 * (t - b) for t, b in zip(times, bare_times))
    return (f"{statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f}), "
            f"+{statistics.median(added):.0f} ms ({added[0]:.0f} to {added[-1]:.0f})")


@contextlib.contextmanager
def busy_cores(count: int) -> Iterator[None]:
    """``count`` processes spinning on a core each while the block runs (another job on the machine)."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--models", nargs="+", default=["resnet50", "lenet"], choices=["resnet50", "lenet"])
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="keep N cores busy with spinning processes during the rounds")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, {args.busy} kept busy by spinning processes; load average (1 min) "
          f"{os.getloadavg()[0]:.2f} before the rounds")
    for name in args.models:
        measure(name, {"resnet50": resnet50_step, "lenet": lenet_step}[name],
                args.batch if name == "resnet50" else 32, args.rounds, args.busy)


if __name__ == "__main__":
    main()
