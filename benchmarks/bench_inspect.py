"""How much cheaper is ``inspect`` (index + metadata only) than restoring the checkpoint's values?

Saves a ResNet50 (weights=None, Adam, one step: ~300 MB with slots) as a TF2 checkpoint,
then times, in this one process and side by side:
  inspect   tb_modelmem.capture.checkpoint.read_checkpoint (shapes, dtypes, byte offsets)
  read      tf.train.load_checkpoint + get_tensor for every key (all values into memory)
  restore   tf.train.Checkpoint(model, optimizer).restore into the live model
Each is the median of --repeats runs; the OS page cache is warm after the first read,
so the ratio understates the cost of a cold restore.

    python -m benchmarks.bench_inspect [--model ResNet50] [--repeats 3] [--workdir DIR]
"""

import argparse
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks.timing import median_seconds  # noqa: E402
from tb_modelmem.capture.checkpoint import read_checkpoint  # noqa: E402



def read_all_values(prefix):
    reader = tf.train.load_checkpoint(prefix)
    return sum(np.asarray(reader.get_tensor(k)).nbytes for k in reader.get_variable_to_shape_map())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ResNet50", help="keras.applications model, built with weights=None")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()

    model = getattr(keras.applications, args.model)(weights=None)
    model.compile(keras.optimizers.Adam(1e-4), keras.losses.MeanSquaredError())
    x = np.zeros([1, *model.input_shape[1:]], "float32")
    model.train_on_batch(x, np.zeros([1, *model.output_shape[1:]], "float32"))
    ckpt = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
    with tempfile.TemporaryDirectory() as tmp:
        prefix = ckpt.save(os.path.join(args.workdir or tmp, "ckpt"))
        bd = read_checkpoint(prefix)
        inspect_s = median_seconds(lambda: read_checkpoint(prefix), args.repeats)
        read_s = median_seconds(lambda: read_all_values(prefix), args.repeats)
        restore_s = median_seconds(lambda: ckpt.restore(prefix).assert_consumed(), args.repeats)

    roles = {}
    for v in bd.variables:
        roles[v.role] = roles.get(v.role, 0) + v.bytes
    print(f"{args.model} TF2 checkpoint: {bd.file_bytes / 2**20:,.1f} MiB on disk, "
          + ", ".join(f"{r} {b / 2**20:,.1f} MiB" for r, b in roles.items()))
    print(f"{'inspect (metadata only)':<28}{inspect_s * 1000:>10.1f} ms")
    print(f"{'read every value':<28}{read_s * 1000:>10.1f} ms   {read_s / inspect_s:>6.1f}x inspect")
    print(f"{'restore into the model':<28}{restore_s * 1000:>10.1f} ms   {restore_s / inspect_s:>6.1f}x inspect")


if __name__ == "__main__":
    main()
