"""How much cheaper is ``inspect`` (index + metadata only) than loading the file's values?

Builds a keras.applications model (weights=None: nothing downloaded), compiles it with Adam,
trains one step on synthetic data (~300 MB with slots for ResNet50), then in this one
process and side by side:

TF2 checkpoint (``tf.train.Checkpoint(model, optimizer).save``):
  inspect     tb_modelmem.readers.checkpoint.read_checkpoint (shapes, dtypes, byte offsets)
  read        tf.train.load_checkpoint + get_tensor for every key (all values into memory)
  restore     tf.train.Checkpoint(model, optimizer).restore into the live model
``.keras`` archive (``model.save``):
  inspect     tb_modelmem.readers.model_file.read_path (config.json + HDF5 headers)
  load_model  keras.models.load_model of the same file (the issue-11 target: inspect <= 0.1x)
and the same archive re-zipped with its weights deflated (Keras stores them uncompressed,
so inspect reads them in place; a deflated member costs inspect one inflate pass).

Runs are interleaved (inspect, baseline, inspect, baseline, ...) so both see the same page
cache and machine load; each figure is the median of --repeats. The cache is warm after
the first read, so the ratios understate the cost of a cold load.

    python -m benchmarks.bench_inspect [--model ResNet50] [--repeats 5] [--workdir DIR]
"""

import argparse
import os
import shutil
import statistics
import tempfile
import zipfile
from typing import Callable, Dict

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import tensorflow as tf

from benchmarks.timing import median_seconds
from tb_modelmem.readers.checkpoint import read_checkpoint
from tb_modelmem.readers.model_file import read_path


def read_all_values(prefix):
    reader = tf.train.load_checkpoint(prefix)
    return sum(np.asarray(reader.get_tensor(k)).nbytes for k in reader.get_variable_to_shape_map())


def interleaved_medians(runs: Dict[str, Callable[[], object]], repeats: int) -> Dict[str, float]:
    """Median seconds of each callable, the runs taken in turn (a, b, a, b, ...)."""
    times: Dict[str, list] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, fn in runs.items():
            times[name].append(median_seconds(fn, 1))
    return {name: statistics.median(t) for name, t in times.items()}


def trained_model(name: str) -> keras.Model:
    model = getattr(keras.applications, name)(weights=None)
    model.compile(keras.optimizers.Adam(1e-4), keras.losses.MeanSquaredError())
    x = np.zeros([1, *model.input_shape[1:]], "float32")
    model.train_on_batch(x, np.zeros([1, *model.output_shape[1:]], "float32"))
    return model


def print_rows(timed: Dict[str, float], baseline: str) -> None:
    for name, seconds in timed.items():
        ratio = "" if name == baseline else f"   {seconds / timed[baseline]:>6.2f}x {baseline}"
        print(f"  {name:<26}{seconds * 1000:>10.1f} ms{ratio}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ResNet50", help="keras.applications model, built with weights=None")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()

    model = trained_model(args.model)
    ckpt = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.workdir or tmp
        prefix = ckpt.save(os.path.join(folder, "ckpt"))
        bd = read_checkpoint(prefix)
        roles = {}
        for v in bd.variables:
            roles[v.role] = roles.get(v.role, 0) + v.bytes
        print(f"{args.model} TF2 checkpoint: {bd.file_bytes / 2**20:,.1f} MiB on disk, "
              + ", ".join(f"{r} {b / 2**20:,.1f} MiB" for r, b in roles.items()))
        print_rows(interleaved_medians({
            "inspect (metadata only)": lambda: read_checkpoint(prefix),
            "read every value": lambda: read_all_values(prefix),
            "restore into the model": lambda: ckpt.restore(prefix).assert_consumed(),
        }, args.repeats), baseline="inspect (metadata only)")

        path = os.path.join(folder, "model.keras")
        model.save(path)
        print(f"{args.model} .keras: {os.path.getsize(path) / 2**20:,.1f} MiB on disk")
        timed = interleaved_medians({
            "inspect .keras": lambda: read_path(path),
            "keras.models.load_model": lambda: keras.models.load_model(path),
        }, args.repeats)
        print_rows(timed, baseline="keras.models.load_model")

        deflated = os.path.join(folder, "deflated.keras")
        recompress(path, deflated)
        print(f"the same .keras re-zipped with its weights deflated: {os.path.getsize(deflated) / 2**20:,.1f} MiB")
        print_rows(interleaved_medians({
            "inspect deflated .keras": lambda: read_path(deflated),
            "keras.models.load_model": lambda: keras.models.load_model(deflated),
        }, args.repeats), baseline="keras.models.load_model")


def recompress(src: str, dst: str) -> None:
    """A copy of a zip with every member deflated (Keras stores model.weights.h5 uncompressed)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            with zin.open(item) as r, zout.open(item.filename, "w", force_zip64=True) as w:
                shutil.copyfileobj(r, w, 1 << 22)


if __name__ == "__main__":
    main()
