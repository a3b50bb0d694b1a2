"""Save one model in every format, then measure loading each in a fresh process.

Loading in the benchmarking process would mix every format's allocations into one
high-water mark, so each load runs in its own ``sys.executable`` child that reports its
own wall time and peak RSS (VmHWM) as JSON. A child that only imports TensorFlow and
Keras is the baseline: what a format costs is its figure above that row.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Any, Callable, Dict, List, Optional, Tuple

from tb_modelmem.schema.records import LoadBench, LoadResult
from tb_modelmem.text_table import text_table

BASELINE = "baseline"
_CHILD_TIMEOUT_S = 900

# The child that loads one format (tb_modelmem/_loadbench_child.py): argv = [fmt, mode, path];
# prints {"seconds", "peak_rss"} as its last line.
_CHILD = "tb_modelmem._loadbench_child"

# (format, mode) pairs measured for every model, baseline first.
RUNS: List[Tuple[str, str]] = [
    (BASELINE, "import tensorflow, keras"),
    ("keras", "compile=True"), ("keras", "compile=False"),
    ("h5", "compile=True"), ("h5", "compile=False"),
    ("weights", "config+weights"),
    ("savedmodel", "tf.saved_model.load"),
    ("tflite", "Interpreter.allocate_tensors"),
]


def build_model(spec: str) -> Any:
    """A trained-for-one-step Keras model: a keras.applications name (weights=None) or a saved path.

    Compiled with Adam when it has no optimizer, then one step on zeros, so the optimizer's
    slots exist in every file saved from it (as in a ModelCheckpoint of a real run).
    """
    import keras
    import numpy as np

    builder = None if spec.startswith("_") else getattr(keras.applications, spec, None)
    if os.path.exists(spec):
        model = keras.models.load_model(spec)
    elif callable(builder):  # not a submodule such as keras.applications.mobilenet_v2
        model = builder(weights=None)
    else:
        raise ValueError(f"{spec}: neither a saved model path nor a keras.applications model name")
    if getattr(model, "optimizer", None) is None or not getattr(model, "compiled", False):
        # a loss object, not "mse": legacy .h5 cannot deserialize the string alias with compile=True
        model.compile(optimizer=keras.optimizers.Adam(1e-4), loss=keras.losses.MeanSquaredError())
    x = [np.zeros([2, *t.shape[1:]], t.dtype) for t in model.inputs]
    y: List[Any] = [np.zeros([2, *t.shape[1:]], "float32") for t in model.outputs]
    model.train_on_batch(x[0] if len(x) == 1 else x, y[0] if len(y) == 1 else y)
    return model


def save_all(model: Any, workdir: str) -> Dict[str, Tuple[str, str]]:
    """Save ``model`` in each format: format -> (path to load, error). One failing format never stops the rest."""
    import tensorflow as tf

    def weights(path: str) -> None:
        model.save_weights(path)
        with open(path + ".config.json", "w") as f:
            f.write(model.to_json())

    def tflite(path: str) -> None:
        with open(path, "wb") as f:
            f.write(tf.lite.TFLiteConverter.from_keras_model(model).convert())

    savers: Dict[str, Tuple[str, Callable[[str], None]]] = {
        "keras": ("model.keras", model.save),
        "h5": ("model.h5", model.save),
        "weights": ("model.weights.h5", weights),
        "savedmodel": ("savedmodel", lambda p: model.export(p, verbose=False)),
        "tflite": ("model.tflite", tflite),
    }
    out = {}
    for fmt, (name, save) in savers.items():
        path = os.path.join(workdir, name)
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # export() prints its signatures
                save(path)
            out[fmt] = (path, "")
        except Exception as e:  # report why this format cannot be produced, keep going
            out[fmt] = (path, f"save failed: {type(e).__name__}: {_last_line(e)}")
    return out


def _last_line(e: Any) -> str:
    """The last line of an error (Keras and the child's stderr put the cause last), at most 300 characters."""
    return (str(e).strip().splitlines() or [""])[-1][:300]


def size_on_disk(path: str) -> int:
    """Bytes a user would copy to ship this format (a folder: all its files; weights: plus config)."""
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(r, f)) for r, _, files in os.walk(path) for f in files)
    extra = path + ".config.json"
    return os.path.getsize(path) + (os.path.getsize(extra) if os.path.exists(extra) else 0)


def measure_once(fmt: str, mode: str, path: str) -> Dict[str, float]:
    """One fresh-process load; raises RuntimeError with the child's last error line."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=os.environ.get("CUDA_VISIBLE_DEVICES", ""))
    proc = subprocess.run([sys.executable, "-m", _CHILD, fmt, mode, path], capture_output=True, text=True,
                          env=env, timeout=_CHILD_TIMEOUT_S)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        errors = [ln for ln in proc.stderr.strip().splitlines() if "Error" in ln or "error" in ln]
        raise RuntimeError((errors or proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1][:300])
    return json.loads(lines[-1])


def run(spec: str, repeats: int = 3, workdir: Optional[str] = None, progress: bool = True) -> LoadBench:
    """Build or load ``spec``, save every format, and load each ``repeats`` times in fresh processes."""
    from tqdm import tqdm

    model = build_model(spec)
    name = os.path.basename(os.path.normpath(spec)) if os.path.exists(spec) else spec
    with tempfile.TemporaryDirectory(prefix="tb_modelmem_loadbench_") as tmp:
        folder = workdir or tmp
        os.makedirs(folder, exist_ok=True)
        saved = save_all(model, folder)
        results: List[LoadResult] = []
        bar = tqdm(total=len(RUNS) * repeats, desc="loadbench", unit="load", disable=not progress)
        for fmt, mode in RUNS:
            bar.set_postfix_str(f"{fmt} {mode}")
            path, error = saved.get(fmt, ("", ""))
            result = LoadResult(format=fmt, mode=mode, error=error)
            if not error and fmt != BASELINE:
                result.file_bytes = size_on_disk(path)
            samples = []
            for _ in range(repeats if not error else 0):
                try:
                    samples.append(measure_once(fmt, mode, path))
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    result.error = f"load failed: {_last_line(e)}"
                    break
                bar.update(1)
            bar.update(repeats - len(samples))  # skipped after a failure
            if samples and not result.error:
                result.load_seconds = statistics.median(s["seconds"] for s in samples)
                result.peak_rss_bytes = int(statistics.median(s["peak_rss"] for s in samples))
                result.repeats = len(samples)
            results.append(result)
        bar.close()
    return LoadBench(model_name=name, results=results)


def format_table(bench: LoadBench) -> str:
    """Readable table; RSS is also shown above the import-only baseline process."""
    base = next((r.peak_rss_bytes for r in bench.results if r.format == BASELINE and not r.error), None)
    mib = 2 ** 20
    headers = ["format", "mode", "size MiB", "load s", "peak RSS MiB", "above baseline MiB", "note"]
    rows = []
    for r in bench.results:
        if r.error:
            rows.append([r.format, r.mode, "-", "-", "-", "-", r.error])
            continue
        above = "-" if r.format == BASELINE or base is None else f"{(r.peak_rss_bytes - base) / mib:,.1f}"
        rows.append([r.format, r.mode, f"{r.file_bytes / mib:,.2f}" if r.file_bytes else "-",
                     f"{r.load_seconds:.3f}" if r.format != BASELINE else "-",
                     f"{r.peak_rss_bytes / mib:,.1f}", above, f"median of {r.repeats}"])
    return f"load cost of {bench.model_name} (fresh process per load)\n" + text_table(headers, rows, left=2)
