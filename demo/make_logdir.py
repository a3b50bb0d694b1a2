"""Write a demo log dir that reproduces docs/USER_PROBLEMS.md #1-#4 with real TensorFlow runs.

Runs (each a folder of the log dir):
  convnet_adam/train, convnet_sgd/train  Keras ConvNet of seed 001 with MemoryCallback (#2; compare SGD vs Adam)
  tf1_convnet_adam      TF1 session: breakdown, plain FileWriter.add_run_metadata (an "old log dir"),
                        the per-op table, and the saved checkpoint inspected to the byte (#2, #3)
  lenet_trace           LeNet batch 1 traced with the TF2 profiler: per-op memory and time (#3)
  lenet_peak            LeNet batch 32, steps 3-4, every CPU allocation recorded: the peak by category (#3)
  seed004_kept/builds, seed004_cleared/builds
                        8 model builds in one process, kept in a list / dropped with clear_session():
                        what keeps growing and why (#5, the Growth view)
  torch_loop, gpt2_trainer
                        PyTorch: a plain loop and Hugging Face Trainer, recorded like Keras (demo/torch_runs.py)
  flax_nnx              JAX without Keras: a flax nnx CNN with optax AdamW, recorded like Keras (demo/jax_runs.py)
  loadbench             load cost of each save format in fresh processes (#1, #4; --loadbench)
  model_file            the saved .keras file inspected: weights vs slots, its optimizer (#1)
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The demo's figures are the CPU's (docs/USER_PROBLEMS.md); hiding a GPU also keeps TensorFlow from asking
# the CUDA driver for one.
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "-1")
# TensorFlow turns oneDNN on by default only on some x86 CPUs (off on AMD EPYC); without it its default CPU
# allocator records no allocation, and lenet_trace's peak would read unknown. The tests run with it on too.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from demo.logdir_guard import prepare  # noqa: E402
from demo.models import mnist_like, seed001_convnet, seed001_tf1_graph, traced_step  # noqa: E402

# What TensorFlow's native libraries print to stderr whatever TF_CPP_MIN_LOG_LEVEL says (they log before
# absl's logging starts): a notice that oneDNN is on, that no CUDA driver is found, that cuInit failed on a
# machine without a GPU. None of them is a failure of the demo; the demo drops these lines and only these.
_NATIVE_NOTICE = re.compile(rb"WARNING: All log messages before absl::InitializeLog\(\) is called are written to "
                            rb"STDERR|[IWE]\d{4} [\d:. ]+\d+ (port|cudart_stub|cuda_platform|cuda_executor|"
                            rb"cpu_feature_guard)\.cc:\d+\] ")


def _quiet_native_notices() -> None:
    """From here on, this process's stderr (and its children's: they inherit it) goes through a thread
    that drops the ``_NATIVE_NOTICE`` lines and passes every other line on; restored at exit."""
    import atexit
    import threading

    real = os.dup(2)
    read, write = os.pipe()
    os.dup2(write, 2)
    os.close(write)

    def pass_on() -> None:
        with os.fdopen(read, "rb") as lines:
            for line in lines:
                if not _NATIVE_NOTICE.match(line):
                    os.write(real, line)

    thread = threading.Thread(target=pass_on, daemon=True)
    thread.start()

    def restore() -> None:
        sys.stderr.flush()
        os.dup2(real, 2)  # the pipe's last writer here closes: the thread reads to its end
        thread.join(timeout=5)

    atexit.register(restore)


def keras_runs(logdir: str) -> None:
    """#2: the ConvNet trained with Adam and with SGD; the callback records the breakdown once."""
    import keras

    import tb_modelmem

    x, y = mnist_like(64)
    for name, optimizer in (("convnet_adam", keras.optimizers.Adam(1e-4)),
                            ("convnet_sgd", keras.optimizers.SGD(1e-3, momentum=0.9))):
        model = seed001_convnet()
        model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(x, y, batch_size=32, epochs=1, verbose=0,
                  callbacks=[tb_modelmem.MemoryCallback(os.path.join(logdir, name))])


def tf1_run(logdir: str) -> None:
    """#2 and #3 in TF1: breakdown, FULL_TRACE RunMetadata, and the checkpoint, all in one run."""
    import tensorflow as tf

    from tb_modelmem import summary
    from tb_modelmem.capture.variables import breakdown_of
    from tb_modelmem.readers.checkpoint import read_checkpoint
    from tb_modelmem.readers.run_metadata import reduce_run_metadata

    v1 = tf.compat.v1
    run_dir = os.path.join(logdir, "tf1_convnet_adam")
    with tf.Graph().as_default(), v1.Session() as sess:
        x, y, _, train_op = seed001_tf1_graph("adam")
        sess.run(v1.global_variables_initializer())
        run_metadata = traced_step(sess, x, y, train_op)
        writer = v1.summary.FileWriter(run_dir)
        writer.add_run_metadata(run_metadata, "step_1", global_step=1)  # plain TF1: what old log dirs hold
        writer.add_summary(summary.pb("storage", breakdown_of(None, None)).SerializeToString(), 1)
        writer.add_summary(summary.pb("ops", reduce_run_metadata(run_metadata)).SerializeToString(), 1)
        prefix = v1.train.Saver().save(sess, os.path.join(run_dir, "ckpt", "model.ckpt"), global_step=1)
        writer.add_summary(summary.pb("checkpoint", read_checkpoint(prefix)).SerializeToString(), 1)
        writer.close()


def lenet_trace_run(logdir: str) -> None:
    """#3 in TF2: LeNet at batch 1, a few train steps traced with the profiler."""
    import keras

    import tb_modelmem

    model = seed001_convnet()
    model.compile(optimizer=keras.optimizers.Adam(1e-4),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = mnist_like(8)
    model.fit(x, y, batch_size=1, epochs=1, verbose=0,
              callbacks=[tb_modelmem.MemoryCallback(logdir, subdir="lenet_trace", profile_steps=(3, 4))])


def lenet_peak_run(logdir: str) -> None:
    """#3 at batch 32 with Adam, steps 3-4 profiled with every CPU allocation recorded: the peak by
    category, to the byte, and What if with the two steps' spread. Runs in a fresh process, so the
    allocator holds this model alone (the other runs' models would be resident, unattributed bytes) and
    the BFC CPU allocator is on."""
    import keras

    import tb_modelmem

    tb_modelmem.enable_full_memory_trace()

    model = seed001_convnet()
    model.compile(optimizer=keras.optimizers.Adam(1e-4),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = mnist_like(32 * 4)
    model.fit(x, y, batch_size=32, epochs=1, verbose=0,
              callbacks=[tb_modelmem.MemoryCallback(logdir, subdir="lenet_peak", profile_steps=(3, 4))])


def growth_runs(logdir: str) -> None:
    """#5: seed 004's loop of model builds, each mode in a fresh process (clear_session() must not
    touch the other runs' models): the Growth view names what each build leaves alive."""
    import tempfile

    for mode, run in (("keep", "seed004_kept"), ("clear", "seed004_cleared")):
        with tempfile.TemporaryDirectory() as scratch:
            _fresh_process(["-m", "demo.growth_loops", mode, os.path.join(logdir, run),
                            os.path.join(scratch, "truth.json")])


def _fresh_process(args: list) -> None:
    import subprocess

    subprocess.run([sys.executable, *args], check=True, cwd=ROOT)


def loadbench_run(logdir: str, model: str, repeats: int) -> None:
    """#1 and #4: each save format's size, load time and peak RSS, in fresh processes; then
    what the saved .keras file holds (weights vs Adam slots, the optimizer it was compiled with)."""
    import tempfile

    from absl import logging as absl_logging

    from tb_modelmem import cli

    # Keras warns, through absl, that .h5 is a legacy format: the benchmark saves one on purpose, to compare.
    absl_logging.set_verbosity(absl_logging.ERROR)
    with tempfile.TemporaryDirectory() as workdir:
        cli.main(["loadbench", model, "--logdir", os.path.join(logdir, "loadbench"), "--repeats", str(repeats),
                  "--workdir", workdir])
        cli.main(["inspect", os.path.join(workdir, "model.keras"), "--logdir", os.path.join(logdir, "model_file"),
                  "--run", "."])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--logdir", default="demo_logs")
    parser.add_argument("--loadbench", default="MobileNetV2",
                        help="keras.applications model for the Load view (weights=None); 'none' to skip")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    refused = prepare(args.logdir)
    if refused:
        parser.exit(2, f"demo: {refused}\n")
    _quiet_native_notices()
    steps = [("Keras ConvNet, Adam vs SGD (#2)", lambda: keras_runs(args.logdir)),
             ("TF1 session: breakdown, RunMetadata, checkpoint (#2, #3)", lambda: tf1_run(args.logdir)),
             ("LeNet batch 1 with the TF2 profiler (#3)", lambda: lenet_trace_run(args.logdir)),
             ("LeNet batch 32, the peak by category (#3)", lambda: _fresh_process(
                 ["-c", f"from demo.make_logdir import lenet_peak_run; lenet_peak_run({args.logdir!r})"])),
             ("8 model builds kept / cleared: what grows (#5)", lambda: growth_runs(args.logdir)),
             ("PyTorch: a plain loop and Hugging Face Trainer", lambda: _fresh_process(
                 ["-m", "demo.torch_runs", args.logdir])),
             ("JAX without Keras: a flax nnx CNN with optax", lambda: _fresh_process(
                 ["-m", "demo.jax_runs", args.logdir]))]
    if args.loadbench.lower() != "none":
        steps.append((f"load cost of {args.loadbench} per save format (#1, #4)",
                      lambda: loadbench_run(args.logdir, args.loadbench, args.repeats)))
    for i, (title, step) in enumerate(steps, 1):
        start = time.monotonic()
        print(f"[{i}/{len(steps)}] {title} ...", flush=True)
        step()
        print(f"      done in {time.monotonic() - start:.1f}s", flush=True)
    print(f"log dir written: {os.path.abspath(args.logdir)}")


if __name__ == "__main__":
    main()
